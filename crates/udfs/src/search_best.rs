//! `search_best(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms [, mode])`:
//! a whole `cli default` search per row, as a STRUCT of its best
//! configuration, so a table of searches (a support matrix) is one query.

use std::sync::OnceLock;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_serving::{AggCandidate, DisaggCandidate, Mode, Search, SearchQuery, Server, ServingError};
use aicsql_tables::StepError;

use crate::config::{AicOptions, OnMiss};
use crate::errors::serving_error;
use crate::serving_args::{Arguments, Calls, Slot};
use crate::step_models::ModelPool;
use crate::struct_out::{Kind, Schema, StructOut, struct_type};
use crate::{DOC_SECTION_AICSQL, SharedTree};

pub const NAME: &str = "search_best";

const ARGUMENTS: Arguments = Arguments {
    names: &["model", "db", "total_gpus", "isl", "osl", "prefix", "ttft_ms", "tpot_ms", "mode"],
    slots: &[Slot::Text, Slot::Text, Slot::Int, Slot::Int, Slot::Int, Slot::Int, Slot::Float, Slot::Float, Slot::Text],
    counts: &[8, 9],
};

const FIELDS: &Schema = &[
    ("mode", Kind::Text),
    ("best_tokens_per_s_per_gpu_cluster", Kind::F64),
    ("agg_best_tokens_per_s_per_gpu_cluster", Kind::F64),
    ("disagg_best_tokens_per_s_per_gpu_cluster", Kind::F64),
    ("candidates", Kind::I64),
    ("parallel", Kind::Text),
    ("bs", Kind::I64),
    ("prefill_parallel", Kind::Text),
    ("prefill_workers", Kind::I64),
    ("decode_parallel", Kind::Text),
    ("decode_bs", Kind::I64),
    ("decode_workers", Kind::I64),
    ("ttft_ms", Kind::F64),
    ("tpot_ms", Kind::F64),
    ("tokens_per_s_per_user", Kind::F64),
    ("num_total_gpus", Kind::I64),
    ("reason", Kind::Text),
];

/// Which experiments a row runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Agg,
    Disagg,
    Default,
}

/// The best config of one mode's search, as the struct reports it.
struct Best {
    mode: Mode,
    candidates: usize,
    throughput: Option<f64>,
    agg: Option<(String, u32)>,
    disagg: Option<(String, u32, String, u32, u32)>,
    latency: Option<(f64, f64, f64, u64)>,
    reason: Option<String>,
}

fn best_agg(s: &Search<AggCandidate>) -> Best {
    let top = s.best.first().map(|&i| &s.candidates[i].estimate);
    Best {
        mode: Mode::Agg,
        candidates: s.candidates.len(),
        throughput: top.map(|_| s.best_throughput),
        agg: top.map(|e| (e.label().to_string(), e.bs)),
        disagg: None,
        latency: top.map(|e| (e.ttft_ms, e.tpot_ms, e.tokens_per_s_per_user, e.num_total_gpus)),
        reason: s.reason.clone(),
    }
}

fn best_disagg(s: &Search<DisaggCandidate>) -> Best {
    let top = s.best.first().map(|&i| &s.candidates[i].estimate);
    Best {
        mode: Mode::Disagg,
        candidates: s.candidates.len(),
        throughput: top.map(|_| s.best_throughput),
        agg: None,
        disagg: top.map(|e| {
            (
                e.prefill.label().to_string(),
                e.prefill.workers,
                e.decode.label().to_string(),
                e.decode.bs,
                e.decode.workers,
            )
        }),
        latency: top.map(|e| (e.ttft_ms, e.tpot_ms, e.tokens_per_s_per_user, e.num_total_gpus)),
        reason: s.reason.clone(),
    }
}

fn push(out: &mut StructOut, best: &Best, agg: Option<f64>, disagg: Option<f64>) -> Result<()> {
    let (parallel, bs) = best.agg.as_ref().map_or((None, None), |(p, b)| (Some(p.as_str()), Some(*b)));
    let (pp, pw, dp, dbs, dw) = best.disagg.as_ref().map_or((None, None, None, None, None), |(pp, pw, dp, dbs, dw)| {
        (Some(pp.as_str()), Some(*pw), Some(dp.as_str()), Some(*dbs), Some(*dw))
    });
    let lat = best.latency;
    out.push(&[
        best.mode.name().into(),
        best.throughput.into(),
        agg.into(),
        disagg.into(),
        (best.candidates as u64).into(),
        parallel.into(),
        bs.into(),
        pp.into(),
        pw.into(),
        dp.into(),
        dbs.into(),
        dw.into(),
        lat.map(|l| l.0).into(),
        lat.map(|l| l.1).into(),
        lat.map(|l| l.2).into(),
        lat.map(|l| l.3).into(),
        best.reason.as_deref().into(),
    ])
}

/// A search that finds nothing the spec would price (its input refused, a
/// lookup missing) is a reason under `aic.on_miss = 'null'`; broken data
/// is an error.
fn reason_or_error(e: ServingError, options: &AicOptions, model: &str, db: &str) -> Result<String> {
    let data = matches!(e, ServingError::Step(StepError::Data(_)));
    if data || options.on_miss == OnMiss::Error {
        return Err(serving_error(NAME, model, db, e));
    }
    Ok(e.to_string())
}

fn run(
    server: &mut Server,
    decode: Option<&mut Server>,
    which: Which,
    q: &SearchQuery,
) -> std::result::Result<(Best, Option<f64>, Option<f64>), ServingError> {
    Ok(match which {
        Which::Agg => {
            let b = best_agg(&server.search_agg(q)?);
            let t = b.throughput;
            (b, t, None)
        }
        Which::Disagg => {
            let b = best_disagg(&server.search_disagg_with(decode, q)?);
            let t = b.throughput;
            (b, None, t)
        }
        Which::Default => {
            let d = server.search_default_with(decode, q)?;
            let agg = d.agg.as_ref().map(best_agg);
            let disagg = d.disagg.as_ref().map(best_disagg);
            let (a, t) = (agg.as_ref().and_then(|b| b.throughput), disagg.as_ref().and_then(|b| b.throughput));
            let best = match (d.chosen, agg, disagg) {
                (Some(Mode::Disagg), _, Some(b)) => b,
                (_, Some(b), _) => b,
                (_, None, Some(b)) => b,
                (_, None, None) => Best {
                    mode: Mode::Agg,
                    candidates: 0,
                    throughput: None,
                    agg: None,
                    disagg: None,
                    latency: None,
                    reason: Some("no experiment".into()),
                },
            };
            (best, a, t)
        }
    })
}

/// The rows of a batch grouped by (model, db) in first-appearance order,
/// the groups by their largest GPU budget, descending (a stable sort: equal
/// budgets keep their order). A search's cost grows with the layouts its
/// budget admits, so this is the longest-first schedule the threads need to
/// finish together; the answer does not depend on it.
fn dispatch_order(calls: &Calls) -> Vec<Vec<usize>> {
    let mut groups: Vec<(u32, Vec<usize>)> = Vec::new();
    let mut index: std::collections::HashMap<(Option<&str>, Option<&str>), usize> = Default::default();
    for row in 0..calls.rows {
        let key = (calls.text(0, row), calls.text(1, row));
        let budget = calls.int(2, row).ok().flatten().unwrap_or(0);
        let g = *index.entry(key).or_insert_with(|| {
            groups.push((0, Vec::new()));
            groups.len() - 1
        });
        groups[g].0 = groups[g].0.max(budget);
        groups[g].1.push(row);
    }
    groups.sort_by_key(|(budget, _)| std::cmp::Reverse(*budget));
    groups.into_iter().map(|(_, rows)| rows).collect()
}

/// What one row's search gave.
enum Outcome {
    Null,
    Reason(String),
    Found(Best, Option<f64>, Option<f64>),
}

/// The search of row `row`.
fn search_row(
    calls: &Calls,
    row: usize,
    options: &AicOptions,
    servers: &mut crate::step_models::Models<Server<'static>>,
) -> Result<Outcome> {
    let (Some(model), Some(db)) = (calls.text(0, row), calls.text(1, row)) else { return Ok(Outcome::Null) };
    let ints = [2, 3, 4, 5].map(|i| calls.int(i, row));
    let [gpus, isl, osl, prefix] = ints;
    let (Some(total_gpus), Some(isl), Some(osl), Some(prefix)) = (gpus?, isl?, osl?, prefix?) else {
        return Ok(Outcome::Null);
    };
    let (Some(ttft_ms), Some(tpot_ms)) = (calls.float(6, row), calls.float(7, row)) else {
        return Ok(Outcome::Null);
    };
    let which = match calls.text(8, row) {
        None => Which::Default,
        Some(m) if m.eq_ignore_ascii_case("default") => Which::Default,
        Some(m) if m.eq_ignore_ascii_case("agg") => Which::Agg,
        Some(m) if m.eq_ignore_ascii_case("disagg") => Which::Disagg,
        Some(other) => {
            return Err(datafusion::common::DataFusionError::Execution(format!(
                "{NAME}: mode '{other}' is not one of 'agg', 'disagg', 'default'"
            )));
        }
    };
    // Rows run side by side: one thread per search.
    let q = crate::search_args::search_query(options, [total_gpus, isl, osl, prefix], [ttft_ms, tpot_ms], 1);
    let model_options = servers.session_options();
    let (server, db_name, decode) = match servers.get_roles(model, db, &options.decode_system, model_options) {
        Ok(found) => found,
        Err(crate::step_models::NoModel::Refused { reason, .. }) if options.on_miss == OnMiss::Null => {
            return Ok(Outcome::Reason(reason));
        }
        Err(e) => return Err(e.into()),
    };
    match run(server, decode, which, &q) {
        Ok((best, agg, disagg)) => Ok(Outcome::Found(best, agg, disagg)),
        Err(e) => Ok(Outcome::Reason(reason_or_error(e, options, model, db_name)?)),
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SearchBest {
    tree: SharedTree,
    signature: Signature,
    pool: ModelPool<Server<'static>>,
}

impl SearchBest {
    pub fn new(tree: std::sync::Arc<aicsql_tables::DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: ARGUMENTS.signature(), pool: ModelPool::new(NAME) }
    }
}

impl ScalarUDFImpl for SearchBest {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        ARGUMENTS.coerce(NAME, arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(struct_type(FIELDS))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = AicOptions::from_config(&args.config_options)?;
        crate::search_args::refuse_quant_settings(NAME, &options)?;
        let calls = Calls::new(NAME, &ARGUMENTS, &args.args, args.number_rows)?;
        // A search is tens of milliseconds to seconds: the rows of a batch
        // run on the session's partitions' worth of threads (within the
        // process's cap, `cap_search_threads`), each with its
        // own servers. Rows of one (model, db) go to one thread together
        // (the agg and disagg searches of an entry share its server's
        // priced passes), and the groups start largest GPU budget first so
        // the long searches do not end the batch alone on one core.
        let order = dispatch_order(&calls);
        let threads = crate::search_threads::search_threads(&args.config_options).min(order.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let progress = crate::progress::Progress::new("search_best: searches", calls.rows);
        let work = || -> Result<Vec<(usize, Outcome)>> {
            let mut servers = self.pool.take(&self.tree.0, &options);
            let mut done = Vec::new();
            let result = (|| -> Result<()> {
                loop {
                    let group = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(rows) = order.get(group) else { return Ok(()) };
                    for &row in rows {
                        done.push((row, search_row(&calls, row, &options, &mut servers)?));
                        progress.tick();
                    }
                }
            })();
            self.pool.give(servers);
            result.map(|()| done)
        };
        let mut outcomes: Vec<(usize, Outcome)> = if threads == 1 {
            work()?
        } else {
            std::thread::scope(|scope| -> Result<Vec<(usize, Outcome)>> {
                let handles: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
                let mut all = work()?;
                for h in handles {
                    match h.join() {
                        Ok(part) => all.extend(part?),
                        Err(panic) => std::panic::resume_unwind(panic),
                    }
                }
                Ok(all)
            })?
        };
        progress.finish();
        outcomes.sort_by_key(|(row, _)| *row);
        let mut out = StructOut::new(NAME, FIELDS, calls.rows);
        for (_, outcome) in &outcomes {
            match outcome {
                Outcome::Null => out.push_null(),
                Outcome::Reason(reason) => out.push_reason(reason)?,
                Outcome::Found(best, agg, disagg) => push(&mut out, best, *agg, *disagg)?,
            }
        }
        calls.finish(out.finish()?)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "A whole aiconfigurator v0.11.0 `cli default` search per row (the experiments of search_agg, \
                 search_disagg and search_default), as a STRUCT of the best configuration: `mode` (the chosen one \
                 for mode 'default', agg on a tie), its tokens/s/gpu_cluster, each mode's best, the number of \
                 candidates, the layout (`parallel` and `bs` for agg; prefill / decode layouts, decode batch and \
                 worker counts for disagg), TTFT, TPOT, tokens/s/user and GPUs of that config, and `reason` when \
                 there is none. Vectorised, so a table of searches (every entry of a support matrix) is one query; \
                 a model or database the data lacks, or a search the spec cannot run, gives NULL fields and a \
                 reason (an error under SET aic.on_miss = 'error').",
                "search_best(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms [, mode])",
            )
            .with_sql_example(
                r#"```sql
> SELECT s['mode'] AS mode, round(s['best_tokens_per_s_per_gpu_cluster'], 1) AS tps_gpu_cluster, s['parallel'] AS parallel
  FROM (SELECT search_best('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50) AS s);
+------+-----------------+------------------+
| mode | tps_gpu_cluster | parallel         |
+------+-----------------+------------------+
| agg  | 20046.4         | tp1pp1dp1etp1ep1 |
+------+-----------------+------------------+
```"#,
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models.")
            .with_argument("db", "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version).")
            .with_argument("total_gpus", "The GPU budget.")
            .with_argument("isl", "Input sequence length.")
            .with_argument("osl", "Output sequence length.")
            .with_argument("prefix", "Cached prefix tokens of each request (part of isl).")
            .with_argument("ttft_ms", "TTFT limit in ms.")
            .with_argument("tpot_ms", "TPOT limit in ms for the best configs.")
            .with_argument("mode", "'default' (NULL or absent: both experiments, the chosen one reported), 'agg' or 'disagg'.")
            .build()
        }))
    }
}
