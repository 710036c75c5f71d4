//! `search_disagg(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms)`:
//! the disaggregated experiment of aiconfigurator's `cli default`, one row
//! per candidate deployment in the spec's order.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::Documentation;

use aicsql_serving::{DisaggCandidate, Mode, Outcome, Server, WorkerEstimate};
use aicsql_tables::DataTree;

use crate::DOC_SECTION_AICSQL;
use crate::config::AicOptions;
use crate::errors::serving_error;
use crate::rows::{self, Column, Rows, Value, col, required};
use crate::search_args::{
    asks_for_every_backend, auto_call, empty_or_error, every_backend_of, experiment_flags, flags, search_call,
    signature,
};
use crate::table_call::RowsFunction;

pub const NAME: &str = "search_disagg";

/// Table function `search_disagg`.
#[derive(Debug)]
pub struct SearchDisagg {
    tree: Arc<DataTree>,
}

impl SearchDisagg {
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
                "The disaggregated experiment of aiconfigurator v0.11.0's `cli default`: static prefill workers \
                 (batch 1, within the TTFT limit after the spec's 1.8 autoscaling correction) and decode workers \
                 (96 batch sizes) of every layout, their worker counts matched over the spec's deployment sizes \
                 (1, 2, 4, 8, 16, 24, ... GPUs up to total_gpus), the best deployment per decode layout for each \
                 TPOT of the spec's sweep; one row per candidate in the spec's order, with \
                 tokens_per_s_per_gpu_cluster, `pareto` and `best_rank` as search_agg has them. As in the spec, \
                 num_total_gpus counts pp * tp * dp per worker (a context-parallel prefill worker's cp ranks are \
                 not counted there).",
                signature(NAME),
            )
            .with_sql_example(
                r#"```sql
> SELECT prefill_parallel, prefill_workers, decode_parallel, decode_bs, decode_workers,
         round(tokens_per_s_per_gpu_cluster, 1) AS tps_gpu
  FROM search_disagg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50)
  WHERE best_rank IS NOT NULL ORDER BY best_rank;
+------------------+-----------------+------------------+-----------+----------------+---------+
| prefill_parallel | prefill_workers | decode_parallel  | decode_bs | decode_workers | tps_gpu |
+------------------+-----------------+------------------+-----------+----------------+---------+
| tp1pp1dp1etp1ep1 | 1               | tp1pp1dp1etp1ep1 | 504       | 1              | 10956.6 |
| tp1pp1dp1etp1ep1 | 2               | tp2pp1dp1etp1ep1 | 512       | 1              | 9321.4  |
+------------------+-----------------+------------------+-----------+----------------+---------+
```"#,
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models.")
            .with_argument(
                "db",
                "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version); \
                 'system/auto[/version]': every backend of the system (the spec's --backend auto), each \
                 backend's candidates in turn, `pareto` and `best_rank` the spec's picks merged across backends \
                 when it builds more than two experiments.",
            )
            .with_argument("total_gpus", "The GPU budget of a deployment.")
            .with_argument("isl", "Input sequence length.")
            .with_argument("osl", "Output sequence length.")
            .with_argument("prefix", "Cached prefix tokens of each request (part of isl).")
            .with_argument("ttft_ms", "TTFT limit in ms for the prefill workers (after the 1.8 correction).")
            .with_argument("tpot_ms", "TPOT limit in ms for the best configs.")
            .build()
        })
    }
}

struct Line<'a> {
    c: &'a DisaggCandidate,
    model: &'a str,
    db: &'a str,
    server: &'a Server<'static>,
    /// The decode workers' server (`server` unless on another system).
    decode: &'a Server<'static>,
    labels: [String; 2],
    cluster: f64,
    pareto: bool,
    best_rank: Option<i64>,
}

fn prefill<'r>(r: &'r Line) -> &'r WorkerEstimate {
    &r.c.estimate.prefill
}

fn decode<'r>(r: &'r Line) -> &'r WorkerEstimate {
    &r.c.estimate.decode
}

/// `prefill_*` or `decode_*` columns of one side.
macro_rules! side {
    ($out:ident, $w:ident, $i:expr, $p:literal) => {{
        use Value::{Float, Int, Text};
        $out.extend([
            required(concat!($p, "parallel"), Text(|r: &Line| Some(r.labels[$i].as_str()))),
            required(concat!($p, "tp"), Int(|r| Some(i64::from($w(r).parallel.tp)))),
            required(concat!($p, "pp"), Int(|r| Some(i64::from($w(r).parallel.pp)))),
            required(concat!($p, "dp"), Int(|r| Some(i64::from($w(r).parallel.dp)))),
            required(concat!($p, "cp"), Int(|r| Some(i64::from($w(r).parallel.cp)))),
            col(concat!($p, "moe_tp"), Int(|r| $w(r).moe_tp)),
            col(concat!($p, "moe_ep"), Int(|r| $w(r).moe_ep)),
            required(concat!($p, "bs"), Int(|r| Some(i64::from($w(r).bs)))),
            required(concat!($p, "global_bs"), Int(|r| i64::try_from($w(r).global_bs).ok())),
            required(concat!($p, "workers"), Int(|r| Some(i64::from($w(r).workers)))),
            required(concat!($p, "seq_per_s_per_worker"), Float(|r| Some($w(r).seq_per_s_per_worker))),
            required(concat!($p, "memory_gib"), Float(|r| Some($w(r).memory_gib))),
            required(concat!($p, "gemm"), Text(|r| Some($w(r).quants.gemm.name()))),
            required(concat!($p, "kvcache"), Text(|r| Some($w(r).quants.kv.name()))),
            required(concat!($p, "fmha"), Text(|r| Some($w(r).quants.fmha.name()))),
            required(concat!($p, "moe"), Text(|r| Some($w(r).quants.moe.name()))),
        ]);
    }};
}

fn columns<'a>() -> Vec<Column<Line<'a>>> {
    use Value::{Bool, Float, Int, Text};
    let mut out = vec![
        required("model", Text(|r: &Line| Some(r.model))),
        required("db", Text(|r| Some(r.db))),
        required("isl", Int(|r| Some(i64::from(r.c.estimate.isl)))),
        required("osl", Int(|r| Some(i64::from(r.c.estimate.osl)))),
        required("prefix", Int(|r| Some(i64::from(r.c.estimate.prefix)))),
        required("concurrency", Int(|r| i64::try_from(r.c.estimate.concurrency).ok())),
        required("request_rate", Float(|r| Some(r.c.estimate.request_rate))),
        required("ttft_ms", Float(|r| Some(r.c.estimate.ttft_ms))),
        required("tpot_ms", Float(|r| Some(r.c.estimate.tpot_ms))),
        required("request_latency_ms", Float(|r| Some(r.c.estimate.request_latency_ms))),
        // The vision encoder's phase and memory (images; 0 without): agg
        // points and prefill workers run it (docs/spec/options.md 4.9).
        required("encoder_latency_ms", Float(|r| Some(r.c.estimate.encoder_ms))),
        required("encoder_memory_gib", Float(|r| Some(r.c.estimate.encoder_memory_gib))),
        required("seq_per_s", Float(|r| Some(r.c.estimate.seq_per_s))),
        required("seq_per_s_per_gpu", Float(|r| Some(r.c.estimate.seq_per_s_per_gpu))),
        required("tokens_per_s", Float(|r| Some(r.c.estimate.tokens_per_s))),
        required("tokens_per_s_per_gpu", Float(|r| Some(r.c.estimate.tokens_per_s_per_gpu))),
        required("tokens_per_s_per_user", Float(|r| Some(r.c.estimate.tokens_per_s_per_user))),
        required("tokens_per_s_per_gpu_cluster", Float(|r| Some(r.cluster))),
        required("num_total_gpus", Int(|r| i64::try_from(r.c.estimate.num_total_gpus).ok())),
    ];
    side!(out, prefill, 0, "prefill_");
    side!(out, decode, 1, "decode_");
    out.extend([
        required("comm", Text(|_: &Line| Some("half"))),
        required("system", Text(|r| Some(r.server.system()))),
        required("backend", Text(|r| Some(r.server.backend().name()))),
        required("version", Text(|r| Some(r.server.version()))),
        // The decode workers' database (the prefill's unless aic.decode_system
        // names another system, docs/spec/experiments.md 1).
        required("decode_system", Text(|r| Some(r.decode.system()))),
        required("decode_version", Text(|r| Some(r.decode.version()))),
        required("pareto", Bool(|r| Some(r.pareto))),
        col("best_rank", Int(|r| r.best_rank)),
    ]);
    out
}

impl RowsFunction for SearchDisagg {
    fn name(&self) -> &'static str {
        NAME
    }

    fn schema(&self) -> SchemaRef {
        SearchDisagg::schema()
    }

    fn check(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<()> {
        if asks_for_every_backend(args, config)? {
            return auto_call(NAME, &self.tree, args, config).map(|_| ());
        }
        search_call(NAME, &self.tree, args, config).map(|_| ())
    }

    fn rows(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
        if asks_for_every_backend(args, config)? {
            return every_backend(&self.tree, args, config);
        }
        let Some(mut call) = search_call(NAME, &self.tree, args, config)? else {
            return Ok(RecordBatch::new_empty(SearchDisagg::schema()));
        };
        let options = AicOptions::from_config(config)?;
        let search = call
            .server
            .search_disagg_with(call.decode.as_mut(), &call.query)
            .map_err(|e| serving_error(NAME, &call.model, &call.db, e))?;
        if let Some(reason) = &search.reason {
            empty_or_error(NAME, &call, reason, &options)?;
        }
        let (pareto, rank) = flags(&search);
        let columns = columns();
        let mut rows = Rows::new(&columns);
        for (i, c) in search.candidates.iter().enumerate() {
            rows.push(&Line {
                c,
                model: &call.model,
                db: &call.db,
                server: &call.server,
                decode: call.decode.as_ref().unwrap_or(&call.server),
                labels: [c.estimate.prefill.label().to_string(), c.estimate.decode.label().to_string()],
                cluster: search.cluster[i],
                pareto: pareto[i],
                best_rank: rank[i],
            });
        }
        rows.finish()
    }
}

/// `backend = 'auto'`: every backend's disagg candidates, experiment after
/// experiment, flagged by the spec's merged picks (above two experiments).
fn every_backend(tree: &Arc<DataTree>, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
    let Some((call, result)) = every_backend_of(NAME, tree, args, config, Mode::Disagg)? else {
        return Ok(RecordBatch::new_empty(SearchDisagg::schema()));
    };
    let columns = columns();
    let mut rows = Rows::new(&columns);
    for (e, experiment) in result.experiments.iter().enumerate() {
        let Outcome::Disagg(search) = &experiment.outcome else { continue };
        let Some(b) = call.backends.iter().find(|b| b.backend == experiment.backend) else { continue };
        let Ok((server, decode)) = &b.servers else { continue };
        let (pareto, rank) = experiment_flags(&result, e, flags(search));
        for (i, c) in search.candidates.iter().enumerate() {
            rows.push(&Line {
                c,
                model: &call.model,
                db: &b.db,
                server,
                decode: decode.as_ref().unwrap_or(server),
                labels: [c.estimate.prefill.label().to_string(), c.estimate.decode.label().to_string()],
                cluster: search.cluster[i],
                pareto: pareto[i],
                best_rank: rank[i],
            });
        }
    }
    rows.finish()
}
