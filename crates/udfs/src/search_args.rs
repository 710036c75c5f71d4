//! What the search table functions share: their eight constant arguments
//! and the server they search on.

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::config::ConfigOptions;

use aicsql_serving::{Search, SearchQuery, Server};
use aicsql_tables::DataTree;

use crate::args::{constant_int, constant_number, constant_text};
use crate::config::{AicOptions, OnMiss};
use crate::database::{decode_database_arg, on_decode_system, resolve};
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
fn constant_count(function: &str, position: usize, value: &ScalarValue) -> Result<Option<u32>> {
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

/// The call's server and query from its evaluated arguments (`None`: a
/// NULL argument, an empty result).
pub(crate) fn search_call(
    function: &str,
    tree: &Arc<DataTree>,
    values: &[ScalarValue],
    config: &ConfigOptions,
) -> Result<Option<SearchCall>> {
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
    let database = resolve(function, tree, &db, &options)?;
    // The agg experiment runs on the database's system alone (experiments.md 1.1).
    let disagg = function != crate::search_agg::NAME;
    let decode_database = decode_database_arg(&db, &database, &options.decode_system, &options)
        .filter(|_| disagg)
        .map(|arg| resolve(function, tree, &arg, &options).map_err(|e| on_decode_system(e, &options.decode_system)))
        .transpose()?;
    let db = database.name();
    // MTP reaches every role of the search, as the spec's Task puts it in
    // every role's model (docs/spec/options.md 2.5); images every agg point
    // and prefill worker, and the decode workers' sequence lengths
    // (options.md 4.9).
    let build = |d: &crate::database::Database| {
        Server::shared(Arc::clone(tree), &model, &d.system, &d.backend, &d.version, options.shared_layer)
            .and_then(|server| server.with_mtp(options.nextn, options.nextn_accepted))
            .and_then(|server| server.with_images(options.images))
            .map_err(|e| serving_error(function, &model, &d.name(), e))
    };
    let server = build(&database)?;
    let decode = decode_database.as_ref().map(build).transpose()?;
    let query = SearchQuery {
        total_gpus,
        isl,
        osl,
        prefix,
        ttft_ms,
        tpot_ms,
        top_n: options.top_n,
        strict_sla: options.strict_sla,
        kv_sizing: options.kv_sizing,
        chunked_prefill: options.enable_chunked_prefill,
        request_latency_ms: options.request_latency_ms,
        // The session's parallelism (datafusion.execution.target_partitions),
        // within the process's cap (an executor's share of cores per task).
        threads: crate::search_threads::search_threads(config),
    };
    Ok(Some(SearchCall { server, decode, model, db, query }))
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
