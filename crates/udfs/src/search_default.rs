//! `search_default(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms)`:
//! aiconfigurator's `cli default` in one row per mode: the best
//! configuration's tokens/s/gpu_cluster and layout, and which mode the spec
//! chooses.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::Documentation;

use aicsql_serving::{AggCandidate, DisaggCandidate, Mode, Outcome, Search, search_experiments};
use aicsql_tables::DataTree;

use crate::DOC_SECTION_AICSQL;
use crate::errors::serving_error;
use crate::rows::{self, Column, Rows, Value, col, required};
use crate::search_args::{asks_for_every_backend, auto_call, roles, search_call, signature};
use crate::table_call::RowsFunction;

pub const NAME: &str = "search_default";

/// Table function `search_default`.
#[derive(Debug)]
pub struct SearchDefault {
    tree: Arc<DataTree>,
}

impl SearchDefault {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree }
    }

    pub fn schema() -> SchemaRef {
        rows::schema(&columns())
    }

    pub fn documentation() -> &'static Documentation {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "aiconfigurator v0.11.0's `cli default`: the agg and (for 2 GPUs or more) disagg experiments of \
                 search_agg / search_disagg, one row per mode with its best configuration under tpot_ms (rank 1 \
                 of best_rank), its tokens_per_s_per_gpu_cluster, the number of candidates, and `chosen`: the \
                 mode with the higher best tokens/s/gpu_cluster, agg on a tie, as the spec picks. A mode without \
                 candidates reports why in `reason`. With the backend 'auto' ('h200_sxm/auto', or SET aic.backend \
                 = 'auto'), the spec's `--backend auto`: every backend the system has (trtllm, sglang, vllm, each \
                 at its latest version unless the argument names one) runs its own experiments, one row each, \
                 named as the spec names them in `experiment` (agg_trtllm, disagg_vllm, ...); with more than two \
                 experiments the spec merges the best configs per mode across backends, and `chosen` marks the \
                 experiment the merged winner comes from. An experiment the spec drops (the model not priced on \
                 that backend, no candidate) has its reason.",
                signature(NAME),
            )
            .with_sql_example(
                r#"```sql
> SELECT mode, chosen, round(best_tokens_per_s_per_gpu_cluster, 1) AS tps_gpu, parallel,
         prefill_parallel, decode_parallel
  FROM search_default('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50);
+--------+--------+---------+------------------+------------------+------------------+
| mode   | chosen | tps_gpu | parallel         | prefill_parallel | decode_parallel  |
+--------+--------+---------+------------------+------------------+------------------+
| agg    | true   | 20046.4 | tp1pp1dp1etp1ep1 |                  |                  |
| disagg | false  | 10956.6 |                  | tp1pp1dp1etp1ep1 | tp1pp1dp1etp1ep1 |
+--------+--------+---------+------------------+------------------+------------------+
```"#,
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models.")
            .with_argument(
                "db",
                "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version); \
                 'system/auto[/version]' for every backend of the system.",
            )
            .with_argument("total_gpus", "The GPU budget.")
            .with_argument("isl", "Input sequence length.")
            .with_argument("osl", "Output sequence length.")
            .with_argument("prefix", "Cached prefix tokens of each request (part of isl).")
            .with_argument("ttft_ms", "TTFT limit in ms.")
            .with_argument("tpot_ms", "TPOT limit in ms for the best configs.")
            .build()
        })
    }
}

/// One mode's summary.
#[derive(Default)]
struct Line {
    model: String,
    db: String,
    mode: &'static str,
    experiment: String,
    chosen: bool,
    candidates: i64,
    best: Option<f64>,
    parallel: Option<String>,
    bs: Option<i64>,
    prefill_parallel: Option<String>,
    prefill_workers: Option<i64>,
    decode_parallel: Option<String>,
    decode_bs: Option<i64>,
    decode_workers: Option<i64>,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    tokens_per_s_per_user: Option<f64>,
    num_total_gpus: Option<i64>,
    memory_gib: Option<f64>,
    reason: Option<String>,
}

fn columns() -> Vec<Column<Line>> {
    use Value::{Bool, Float, Int, Text};
    vec![
        required("model", Text(|r: &Line| Some(r.model.as_str()))),
        required("db", Text(|r| Some(r.db.as_str()))),
        required("mode", Text(|r| Some(r.mode))),
        // The spec's experiment name: the mode, with the backend under backend 'auto' (agg_vllm).
        required("experiment", Text(|r| Some(r.experiment.as_str()))),
        required("chosen", Bool(|r| Some(r.chosen))),
        required("candidates", Int(|r| Some(r.candidates))),
        col("best_tokens_per_s_per_gpu_cluster", Float(|r| r.best)),
        col("parallel", Text(|r| r.parallel.as_deref())),
        col("bs", Int(|r| r.bs)),
        col("prefill_parallel", Text(|r| r.prefill_parallel.as_deref())),
        col("prefill_workers", Int(|r| r.prefill_workers)),
        col("decode_parallel", Text(|r| r.decode_parallel.as_deref())),
        col("decode_bs", Int(|r| r.decode_bs)),
        col("decode_workers", Int(|r| r.decode_workers)),
        col("ttft_ms", Float(|r| r.ttft_ms)),
        col("tpot_ms", Float(|r| r.tpot_ms)),
        col("tokens_per_s_per_user", Float(|r| r.tokens_per_s_per_user)),
        col("num_total_gpus", Int(|r| r.num_total_gpus)),
        col("memory_gib", Float(|r| r.memory_gib)),
        col("reason", Text(|r| r.reason.as_deref())),
    ]
}

/// One experiment's line: its counts and its own rank 1 (`chosen` is the
/// caller's).
fn summary<C>(model: &str, db: &str, mode: Mode, experiment: &str, search: &Search<C>) -> (Line, Option<usize>) {
    let line = Line {
        model: model.to_string(),
        db: db.to_string(),
        mode: mode.name(),
        experiment: experiment.to_string(),
        candidates: search.candidates.len() as i64,
        best: search.best.first().map(|_| search.best_throughput),
        reason: search.reason.clone(),
        ..Line::default()
    };
    (line, search.best.first().copied())
}

fn agg_line(model: &str, db: &str, experiment: &str, agg: &Search<AggCandidate>) -> Line {
    let (mut line, best) = summary(model, db, Mode::Agg, experiment, agg);
    if let Some(i) = best {
        let e = &agg.candidates[i].estimate;
        line.parallel = Some(e.label().to_string());
        line.bs = Some(i64::from(e.bs));
        (line.ttft_ms, line.tpot_ms, line.tokens_per_s_per_user) =
            (Some(e.ttft_ms), Some(e.tpot_ms), Some(e.tokens_per_s_per_user));
        line.num_total_gpus = i64::try_from(e.num_total_gpus).ok();
        line.memory_gib = Some(e.memory.total);
    }
    line
}

fn disagg_line(model: &str, db: &str, experiment: &str, disagg: &Search<DisaggCandidate>) -> Line {
    let (mut line, best) = summary(model, db, Mode::Disagg, experiment, disagg);
    if let Some(i) = best {
        let e = &disagg.candidates[i].estimate;
        line.prefill_parallel = Some(e.prefill.label().to_string());
        line.prefill_workers = Some(i64::from(e.prefill.workers));
        line.decode_parallel = Some(e.decode.label().to_string());
        line.decode_bs = Some(i64::from(e.decode.bs));
        line.decode_workers = Some(i64::from(e.decode.workers));
        (line.ttft_ms, line.tpot_ms, line.tokens_per_s_per_user) =
            (Some(e.ttft_ms), Some(e.tpot_ms), Some(e.tokens_per_s_per_user));
        line.num_total_gpus = i64::try_from(e.num_total_gpus).ok();
        line.memory_gib = Some(e.decode.memory_gib);
    }
    line
}

impl SearchDefault {
    /// `backend = 'auto'`: one line per experiment the spec builds, in its
    /// order, `chosen` on the experiment its merged picks choose.
    fn every_backend(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
        let Some(mut call) = auto_call(NAME, &self.tree, args, config)? else {
            return Ok(RecordBatch::new_empty(SearchDefault::schema()));
        };
        let system = call.backends.first().map(|b| b.db.split('/').next().unwrap_or_default().to_string());
        let dbs: Vec<(aicsql_serving::Backend, String)> =
            call.backends.iter().map(|b| (b.backend, b.db.clone())).collect();
        let mut roles = roles(&mut call.backends);
        let result = search_experiments(&mut roles, &call.query, None)
            .map_err(|e| serving_error(NAME, &call.model, system.as_deref().unwrap_or_default(), e))?;
        let columns = columns();
        let mut rows = Rows::new(&columns);
        for (k, e) in result.experiments.iter().enumerate() {
            let db = dbs.iter().find(|(b, _)| *b == e.backend).map_or("", |(_, db)| db.as_str());
            let mut line = match &e.outcome {
                Outcome::Agg(s) => agg_line(&call.model, db, &e.name, s),
                Outcome::Disagg(s) => disagg_line(&call.model, db, &e.name, s),
                Outcome::Failed(reason) => Line {
                    model: call.model.clone(),
                    db: db.to_string(),
                    mode: e.mode.name(),
                    experiment: e.name.clone(),
                    reason: Some(reason.clone()),
                    ..Line::default()
                },
            };
            line.chosen = result.chosen == Some(k);
            rows.push(&line);
        }
        rows.finish()
    }
}

impl RowsFunction for SearchDefault {
    fn name(&self) -> &'static str {
        NAME
    }

    fn schema(&self) -> SchemaRef {
        SearchDefault::schema()
    }

    fn check(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<()> {
        if asks_for_every_backend(args, config)? {
            return auto_call(NAME, &self.tree, args, config).map(|_| ());
        }
        search_call(NAME, &self.tree, args, config).map(|_| ())
    }

    fn rows(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
        if asks_for_every_backend(args, config)? {
            return self.every_backend(args, config);
        }
        let Some(mut call) = search_call(NAME, &self.tree, args, config)? else {
            return Ok(RecordBatch::new_empty(SearchDefault::schema()));
        };
        let result = call
            .server
            .search_default_with(call.decode.as_mut(), &call.query)
            .map_err(|e| serving_error(NAME, &call.model, &call.db, e))?;
        let columns = columns();
        let mut rows = Rows::new(&columns);
        if let Some(agg) = &result.agg {
            let mut line = agg_line(&call.model, &call.db, "agg", agg);
            line.chosen = result.chosen == Some(Mode::Agg);
            rows.push(&line);
        }
        if let Some(disagg) = &result.disagg {
            let mut line = disagg_line(&call.model, &call.db, "disagg", disagg);
            line.chosen = result.chosen == Some(Mode::Disagg);
            rows.push(&line);
        }
        rows.finish()
    }
}
