//! What the search table functions share: their eight constant arguments
//! and the server they search on.

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::config::ConfigOptions;

use aicsql_serving::{Backend, Search, SearchQuery, Server, ServingError};
use aicsql_tables::DataTree;

use crate::args::{constant_int, constant_number, constant_text};
use crate::config::{AicOptions, OnMiss};
use crate::database::{Database, decode_database_arg, on_decode_system, resolve};
use crate::errors::serving_error;

/// Argument names in order, shared by `search_agg`, `search_disagg` and
/// `search_default`.
pub const ARGS: [&str; 8] = ["model", "db", "total_gpus", "isl", "osl", "prefix", "ttft_ms", "tpot_ms"];

/// The signature as the documentation and errors show it.
pub fn signature(function: &str) -> String {
    format!("{function}({})", ARGS.join(", "))
}

/// One search call: the server and the query (`None`: a NULL argument, an
/// empty result).
pub(crate) struct SearchCall {
    pub server: Server<'static>,
    /// The disagg experiment's decode workers' server under
    /// `aic.decode_system` (`None`: `server`'s system).
    pub decode: Option<Server<'static>>,
    pub model: String,
    pub db: String,
    pub query: SearchQuery,
}

/// A constant count argument: a non-negative integer that fits `u32`.
pub(crate) fn constant_count(function: &str, position: usize, value: &ScalarValue) -> Result<Option<u32>> {
    match constant_int(function, position, value)? {
        None => Ok(None),
        Some(v) => u32::try_from(v)
            .map(Some)
            .or_else(|_| plan_err!("{function}: {} = {v} is out of range (0 ..= {})", ARGS[position - 1], u32::MAX)),
    }
}

/// The spec's deployment search (`cli default`) takes no quant overrides
/// and resolves the checkpoint's modes by rules of its own
/// (docs/spec/options.md 1.6): a session quant setting would price a search
/// no spec path runs, so it is refused rather than ignored. Its KV-cache
/// knobs (`aic.max_seq_len`, `aic.free_gpu_memory_fraction`), chunked
/// prefill, MTP and images it takes (options.md 2.5, 3.2, 3.3, 4.9).
pub(crate) fn refuse_quant_settings(function: &str, options: &AicOptions) -> Result<()> {
    if options.quant.is_empty() {
        return Ok(());
    }
    plan_err!(
        "{function}: the spec's search takes no quant overrides; unset aic.gemm_quant, aic.moe_quant, \
         aic.kvcache_quant, aic.fmha_quant and aic.comm_quant (SET aic.kvcache_quant = '') first"
    )
}

/// A search's evaluated arguments and settings (`None` from [`parse`]: a
/// NULL argument, an empty result).
struct Parsed {
    model: String,
    db: String,
    query: SearchQuery,
    options: AicOptions,
}

fn parse(function: &str, values: &[ScalarValue], config: &ConfigOptions) -> Result<Option<Parsed>> {
    if values.len() != ARGS.len() {
        return plan_err!("{} takes {} arguments, got {}", signature(function), ARGS.len(), values.len());
    }
    let options = AicOptions::from_config(config)?;
    refuse_quant_settings(function, &options)?;
    // Every argument's type is checked before a NULL short-circuits the call.
    let (model, db) = (constant_text(function, 1, &values[0])?, constant_text(function, 2, &values[1])?);
    let counts = [2, 3, 4, 5].map(|i| constant_count(function, i + 1, &values[i]));
    let [total_gpus, isl, osl, prefix] = counts;
    let (total_gpus, isl, osl, prefix) = (total_gpus?, isl?, osl?, prefix?);
    let number = |i: usize| constant_number(function, i + 1, ARGS[i], &values[i]);
    let (ttft, tpot) = (number(6)?, number(7)?);
    let (Some(model), Some(db), Some(total_gpus), Some(isl), Some(osl), Some(prefix), Some(ttft_ms), Some(tpot_ms)) =
        (model, db, total_gpus, isl, osl, prefix, ttft, tpot)
    else {
        return Ok(None);
    };
    // The session's parallelism (datafusion.execution.target_partitions),
    // within the process's cap (an executor's share of cores per task).
    let threads = crate::search_threads::search_threads(config);
    let query = search_query(&options, [total_gpus, isl, osl, prefix], [ttft_ms, tpot_ms], threads);
    Ok(Some(Parsed { model, db, query, options }))
}

/// A search's query: its budget and lengths (`[total_gpus, isl, osl,
/// prefix]`), its limits (`[ttft_ms, tpot_ms]`) and the session's search
/// settings (top_n, strict_sla, the KV knobs, chunked prefill, a
/// request-latency target).
pub(crate) fn search_query(options: &AicOptions, counts: [u32; 4], limits: [f64; 2], threads: usize) -> SearchQuery {
    let [total_gpus, isl, osl, prefix] = counts;
    let [ttft_ms, tpot_ms] = limits;
    SearchQuery {
        total_gpus,
        isl,
        osl,
        prefix,
        ttft_ms,
        tpot_ms,
        top_n: options.top_n,
        strict_sla: options.strict_sla,
        threads,
        kv_sizing: options.kv_sizing,
        chunked_prefill: options.enable_chunked_prefill,
        request_latency_ms: options.request_latency_ms,
        load: None,
    }
}

/// The backend a database argument names, or `aic.backend` completes.
fn named_backend<'a>(db: &'a str, options: &'a AicOptions) -> &'a str {
    db.split('/').nth(1).unwrap_or(options.backend.as_str())
}

/// Whether a search call's database argument asks for every backend
/// (`'h200_sxm/auto'`, or `'h200_sxm'` under `SET aic.backend = 'auto'`).
pub(crate) fn asks_for_every_backend(values: &[ScalarValue], config: &ConfigOptions) -> Result<bool> {
    let Some(ScalarValue::Utf8(Some(db)) | ScalarValue::Utf8View(Some(db)) | ScalarValue::LargeUtf8(Some(db))) =
        values.get(1)
    else {
        return Ok(false);
    };
    let options = AicOptions::from_config(config)?;
    Ok(named_backend(db, &options) == "auto")
}

/// A server built for a search role: MTP reaches every role, as the spec's
/// Task puts it in every role's model (docs/spec/options.md 2.5); images
/// every agg point and prefill worker, and the decode workers' sequence
/// lengths (options.md 4.9).
pub(crate) fn search_server(
    tree: &Arc<DataTree>,
    model: &str,
    d: &Database,
    options: &AicOptions,
) -> std::result::Result<Server<'static>, ServingError> {
    Server::shared(Arc::clone(tree), model, &d.system, &d.backend, &d.version, options.shared_layer)
        .and_then(|server| server.with_mtp(options.nextn, options.nextn_accepted))
        .and_then(|server| server.with_images(options.images))
}

/// The call's server and query from its evaluated arguments (`None`: a
/// NULL argument, an empty result).
pub(crate) fn search_call(
    function: &str,
    tree: &Arc<DataTree>,
    values: &[ScalarValue],
    config: &ConfigOptions,
) -> Result<Option<SearchCall>> {
    let Some(Parsed { model, db, query, options }) = parse(function, values, config)? else { return Ok(None) };
    if named_backend(&db, &options) == "auto" {
        return plan_err!(
            "{function}: backend 'auto' (every backend of the system) is taken by search_default, which runs and \
             names each backend's experiments; name one backend here, e.g. '{}/vllm'",
            db.split('/').next().unwrap_or_default()
        );
    }
    let database = resolve(function, tree, &db, &options)?;
    // The agg experiment runs on the database's system alone (experiments.md 1.1).
    let disagg = function != crate::search_agg::NAME;
    let decode_database = decode_database_arg(&db, &database, &options.decode_system, &options)
        .filter(|_| disagg)
        .map(|arg| resolve(function, tree, &arg, &options).map_err(|e| on_decode_system(e, &options.decode_system)))
        .transpose()?;
    let db = database.name();
    let build = |d: &Database| {
        search_server(tree, &model, d, &options).map_err(|e| serving_error(function, &model, &d.name(), e))
    };
    let server = build(&database)?;
    let decode = decode_database.as_ref().map(build).transpose()?;
    Ok(Some(SearchCall { server, decode, model, db, query }))
}

/// One backend of a `backend = 'auto'` search: its database name and its
/// servers (agg / prefill, and decode on another system), or why the model
/// cannot be priced there (its experiments fail, as the spec's do).
pub(crate) struct AutoBackend {
    pub backend: Backend,
    pub db: String,
    pub servers: std::result::Result<(Server<'static>, Option<Server<'static>>), String>,
}

/// The serving crate's view of an `auto` call's backends: each one's
/// servers, or why its experiments fail.
pub(crate) fn roles(backends: &mut [AutoBackend]) -> Vec<(Backend, aicsql_serving::BackendServers<'_, 'static>)> {
    backends
        .iter_mut()
        .map(|b| {
            let servers = match &mut b.servers {
                Ok((server, decode)) => aicsql_serving::BackendServers::Ready { server, decode: decode.as_mut() },
                Err(reason) => aicsql_serving::BackendServers::Refused(reason.clone()),
            };
            (b.backend, servers)
        })
        .collect()
}

/// A `backend = 'auto'` search (docs/spec/experiments.md 2).
pub(crate) struct AutoCall {
    pub model: String,
    pub query: SearchQuery,
    pub backends: Vec<AutoBackend>,
}

/// The backends of the system a `backend = 'auto'` search runs
/// (experiments.md 2.1-2.2): TRT-LLM, SGLang, vLLM in that order, each that
/// the system (and a decode system) has, at the version the argument names
/// if both have it, else at each system's latest; none: an error listing
/// what the system has.
pub(crate) fn auto_call(
    function: &str,
    tree: &Arc<DataTree>,
    values: &[ScalarValue],
    config: &ConfigOptions,
) -> Result<Option<AutoCall>> {
    let Some(Parsed { model, db, query, options }) = parse(function, values, config)? else { return Ok(None) };
    let backends = auto_backends(function, tree, &model, &db, &options)?;
    Ok(Some(AutoCall { model, query, backends }))
}

/// The backends of `db`'s system an `auto` search keeps, with their servers
/// (see [`auto_call`]).
pub(crate) fn auto_backends(
    function: &str,
    tree: &Arc<DataTree>,
    model: &str,
    db: &str,
    options: &AicOptions,
) -> Result<Vec<AutoBackend>> {
    let (model, options) = (model.to_string(), options);
    let mut parts = db.split('/');
    let system = parts.next().unwrap_or_default().to_string();
    let named = parts.nth(1).map_or(options.version.as_str(), |v| v);
    let decode_system = options.decode_system.trim();
    let decode_system = (!decode_system.is_empty() && decode_system != system).then_some(decode_system);
    let set = tree.databases();
    let has = |sys: &str, backend: &str| {
        set.entries()
            .iter()
            .any(|e| e.system == sys && e.backend == backend && (named == "latest" || e.version == named))
    };
    if !set.entries().iter().any(|e| e.system == system) {
        // The plain resolution's error names the systems there are.
        resolve(function, tree, &format!("{system}/vllm/latest"), options)?;
    }
    let mut backends = Vec::new();
    for backend in [Backend::Trtllm, Backend::Sglang, Backend::Vllm] {
        let b = backend.name();
        if !has(&system, b) || decode_system.is_some_and(|d| !has(d, b)) {
            continue;
        }
        let arg = format!("{system}/{b}/{named}");
        let database = resolve(function, tree, &arg, options)?;
        let decode = match decode_system {
            Some(d) => Some(
                resolve(function, tree, &format!("{d}/{b}/{named}"), options).map_err(|e| on_decode_system(e, d))?,
            ),
            None => None,
        };
        let built = |d: &Database| search_server(tree, &model, d, options);
        let servers = match (built(&database), decode.as_ref().map(built).transpose()) {
            (Ok(server), Ok(decode)) => Ok((server, decode)),
            // Corrupt data is an error wherever it shows; a refusal fails the backend's experiments.
            (Err(e), _) | (_, Err(e)) if matches!(e, ServingError::Step(aicsql_tables::StepError::Data(_))) => {
                return Err(serving_error(function, &model, &database.name(), e));
            }
            (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
        };
        backends.push(AutoBackend { backend, db: database.name(), servers });
    }
    if backends.is_empty() {
        let mut have: Vec<&str> =
            set.entries().iter().filter(|e| e.system == system).map(|e| e.backend.as_str()).collect();
        have.sort_unstable();
        have.dedup();
        return plan_err!(
            "{function}: no backends available for system {system}{}{}; supported backends: {}",
            decode_system.map(|d| format!(" and decode system {d}")).unwrap_or_default(),
            if named == "latest" { String::new() } else { format!(" at version {named}") },
            have.join(", ")
        );
    }
    Ok(backends)
}

/// Per candidate: whether it is on the frontier, and its best-config rank.
pub(crate) fn flags<C>(search: &Search<C>) -> (Vec<bool>, Vec<Option<i64>>) {
    let mut pareto = vec![false; search.candidates.len()];
    for &i in &search.pareto {
        pareto[i] = true;
    }
    let mut rank = vec![None; search.candidates.len()];
    for (k, &i) in search.best.iter().enumerate() {
        rank[i] = Some(k as i64 + 1);
    }
    (pareto, rank)
}

/// No candidate: NULL-like (no rows) or, under `aic.on_miss = 'error'`, an error with the spec's reason.
pub(crate) fn empty_or_error(function: &str, call: &SearchCall, reason: &str, options: &AicOptions) -> Result<()> {
    if options.on_miss == OnMiss::Error {
        return Err(DataFusionError::Execution(format!(
            "{function}: no candidate for {} on {}: {reason}",
            call.model, call.db
        )));
    }
    Ok(())
}

/// A `backend = 'auto'` search of one serving mode (`search_agg`,
/// `search_disagg`): every backend's experiment of `mode`, picked as the
/// spec picks when it builds every mode's (merged above two experiments).
pub(crate) fn every_backend_of(
    function: &str,
    tree: &Arc<DataTree>,
    values: &[ScalarValue],
    config: &ConfigOptions,
    mode: aicsql_serving::Mode,
) -> Result<Option<(AutoCall, aicsql_serving::Experiments)>> {
    let Some(mut call) = auto_call(function, tree, values, config)? else { return Ok(None) };
    let mut roles = roles(&mut call.backends);
    let result = aicsql_serving::search_experiments(&mut roles, &call.query, Some(mode))
        .map_err(|e| serving_error(function, &call.model, "auto", e))?;
    Ok(Some((call, result)))
}

/// The `pareto` and `best_rank` of experiment `e`'s candidates in an auto
/// search: the merged picks' when the spec merges, else its own.
pub(crate) fn experiment_flags(
    result: &aicsql_serving::Experiments,
    e: usize,
    own: (Vec<bool>, Vec<Option<i64>>),
) -> (Vec<bool>, Vec<Option<i64>>) {
    let Some(merged) = &result.merged else { return own };
    let picks = match result.experiments[e].mode {
        aicsql_serving::Mode::Agg => &merged[0],
        aicsql_serving::Mode::Disagg => &merged[1],
    };
    let n = own.0.len();
    let mut pareto = vec![false; n];
    let mut rank = vec![None; n];
    for &(x, i) in &picks.pareto {
        if x == e && i < n {
            pareto[i] = true;
        }
    }
    for (k, &(x, i)) in picks.best.iter().enumerate() {
        if x == e && i < n {
            rank[i] = Some(k as i64 + 1);
        }
    }
    (pareto, rank)
}
