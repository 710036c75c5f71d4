//! `search_agg(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms)`:
//! the aggregated experiment of aiconfigurator's `cli default`, one row per
//! candidate in the spec's order, with its frontier and best-config flags.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::Documentation;

use aicsql_serving::{AggCandidate, Mode, Outcome, Server};
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

pub const NAME: &str = "search_agg";

/// Table function `search_agg`.
#[derive(Debug)]
pub struct SearchAgg {
    tree: Arc<DataTree>,
}

impl SearchAgg {
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
                "The aggregated (in-flight batching) experiment of aiconfigurator v0.11.0's `cli default` for a \
                 model on a database and a GPU budget: every parallel layout of the spec's search space, batch \
                 sizes and context-token budgets priced by estimate_agg, the points within the TTFT limit kept \
                 over the spec's TPOT sweep (top 10 by seq/s per layout and TPOT), one row per candidate in the \
                 spec's order (tokens/s/gpu descending), with tokens_per_s_per_gpu_cluster, `pareto` (on the \
                 frontier of tokens/s/gpu_cluster against tokens/s/user) and `best_rank` (1..aic.top_n: the best \
                 layouts under tpot_ms, else NULL). Bit-identical to the spec's frames. No candidate: no rows \
                 (an error naming why under SET aic.on_miss = 'error').",
                signature(NAME),
            )
            .with_sql_example(
                r#"```sql
> SELECT parallel, bs, round(tokens_per_s_per_gpu_cluster, 1) AS tps_gpu, tpot_ms
  FROM search_agg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50)
  WHERE best_rank IS NOT NULL ORDER BY best_rank;
+------------------+-----+---------+---------+
| parallel         | bs  | tps_gpu | tpot_ms |
+------------------+-----+---------+---------+
| tp1pp1dp1etp1ep1 | 512 | 20046.4 | 25.143  |
| tp2pp1dp1etp1ep1 | 512 | 16569.6 | 14.987  |
| tp4pp1dp1etp1ep1 | 512 | 11934.2 | 10.363  |
+------------------+-----+---------+---------+
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
            .with_argument("total_gpus", "The GPU budget: layouts and deployments up to this many GPUs.")
            .with_argument("isl", "Input sequence length.")
            .with_argument("osl", "Output sequence length.")
            .with_argument("prefix", "Cached prefix tokens of each request (part of isl).")
            .with_argument("ttft_ms", "TTFT limit in ms: points above it are not candidates.")
            .with_argument(
                "tpot_ms",
                "TPOT limit in ms for the best configs (the sweep itself runs the spec's TPOT list 1..295 ms).",
            )
            .build()
        })
    }
}

/// One candidate with what the row reports beside it.
struct Line<'a> {
    c: &'a AggCandidate,
    model: &'a str,
    db: &'a str,
    server: &'a Server<'static>,
    label: String,
    cluster: f64,
    pareto: bool,
    best_rank: Option<i64>,
}

fn columns<'a>() -> Vec<Column<Line<'a>>> {
    use Value::{Bool, Float, Int, Text};
    vec![
        required("model", Text(|r| Some(r.model))),
        required("db", Text(|r| Some(r.db))),
        required("isl", Int(|r| Some(i64::from(r.c.estimate.isl)))),
        required("osl", Int(|r| Some(i64::from(r.c.estimate.osl)))),
        required("prefix", Int(|r| Some(i64::from(r.c.estimate.prefix)))),
        required("concurrency", Int(|r| i64::try_from(r.c.estimate.concurrency).ok())),
        required("request_rate", Float(|r| Some(r.c.estimate.request_rate))),
        required("bs", Int(|r| Some(i64::from(r.c.estimate.bs)))),
        required("global_bs", Int(|r| i64::try_from(r.c.estimate.global_bs).ok())),
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
        required("tp", Int(|r| Some(i64::from(r.c.estimate.parallel.tp)))),
        required("pp", Int(|r| Some(i64::from(r.c.estimate.parallel.pp)))),
        required("dp", Int(|r| Some(i64::from(r.c.estimate.parallel.dp)))),
        col("moe_tp", Int(|r| r.c.estimate.moe_tp)),
        col("moe_ep", Int(|r| r.c.estimate.moe_ep)),
        required("cp", Int(|r| Some(i64::from(r.c.estimate.parallel.cp)))),
        required("parallel", Text(|r| Some(r.label.as_str()))),
        required("gemm", Text(|r| Some(r.c.estimate.quants.gemm.name()))),
        required("kvcache", Text(|r| Some(r.c.estimate.quants.kv.name()))),
        required("fmha", Text(|r| Some(r.c.estimate.quants.fmha.name()))),
        required("moe", Text(|r| Some(r.c.estimate.quants.moe.name()))),
        required("comm", Text(|_| Some("half"))),
        required("memory_gib", Float(|r| Some(r.c.estimate.memory.total))),
        required("balance_score", Float(|r| Some(r.c.estimate.balance_score))),
        required("num_ctx_reqs", Float(|r| Some(r.c.estimate.num_ctx_reqs))),
        required("num_gen_reqs", Float(|r| Some(r.c.estimate.num_gen_reqs))),
        required("num_tokens", Float(|r| Some(r.c.estimate.num_tokens))),
        required("ctx_tokens", Int(|r| Some(i64::from(r.c.estimate.ctx_tokens)))),
        required("gen_tokens", Float(|r| Some(r.c.estimate.num_gen_reqs))),
        required("system", Text(|r| Some(r.server.system()))),
        required("backend", Text(|r| Some(r.server.backend().name()))),
        required("version", Text(|r| Some(r.server.version()))),
        required("pareto", Bool(|r| Some(r.pareto))),
        col("best_rank", Int(|r| r.best_rank)),
    ]
}

impl RowsFunction for SearchAgg {
    fn name(&self) -> &'static str {
        NAME
    }

    fn schema(&self) -> SchemaRef {
        SearchAgg::schema()
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
            return Ok(RecordBatch::new_empty(SearchAgg::schema()));
        };
        let options = AicOptions::from_config(config)?;
        let search = call.server.search_agg(&call.query).map_err(|e| serving_error(NAME, &call.model, &call.db, e))?;
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
                label: c.estimate.label().to_string(),
                cluster: search.cluster[i],
                pareto: pareto[i],
                best_rank: rank[i],
            });
        }
        rows.finish()
    }
}

/// `backend = 'auto'`: every backend's agg candidates, experiment after
/// experiment, flagged by the spec's merged picks (above two experiments).
fn every_backend(tree: &Arc<DataTree>, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
    let Some((call, result)) = every_backend_of(NAME, tree, args, config, Mode::Agg)? else {
        return Ok(RecordBatch::new_empty(SearchAgg::schema()));
    };
    let columns = columns();
    let mut rows = Rows::new(&columns);
    for (e, experiment) in result.experiments.iter().enumerate() {
        let Outcome::Agg(search) = &experiment.outcome else { continue };
        let Some(b) = call.backends.iter().find(|b| b.backend == experiment.backend) else { continue };
        let Ok((server, _)) = &b.servers else { continue };
        let (pareto, rank) = experiment_flags(&result, e, flags(search));
        for (i, c) in search.candidates.iter().enumerate() {
            rows.push(&Line {
                c,
                model: &call.model,
                db: &b.db,
                server,
                label: c.estimate.label().to_string(),
                cluster: search.cluster[i],
                pareto: pareto[i],
                best_rank: rank[i],
            });
        }
    }
    rows.finish()
}
