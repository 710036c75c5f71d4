//! `estimate_agg(model, db, parallel, batch, isl, osl [, prefix [, ctx_tokens
//! [, moe_tp, moe_ep]]] [, options])`: one aggregated (in-flight batching) deployment as
//! aiconfigurator prices it, every value of the spec's result dict as a
//! STRUCT field, so a grid of deployments is one join.

use std::fmt::Write;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_serving::{AggEstimate, AggQuery, Server};
use aicsql_tables::DataTree;

use crate::config::{AicOptions, OnMiss};
use crate::errors::serving_error;
use crate::options::{self, OPTIONS_DOC, Options};
use crate::serving_args::{Arguments, Calls, Slot};
use crate::step_models::ModelPool;
use crate::struct_out::{Kind, Schema, StructOut, Value, struct_type};
use crate::{DOC_SECTION_AICSQL, SharedTree};

pub(crate) const NAME: &str = "estimate_agg";

/// The arguments `estimate_agg` and `estimate_memory` share.
pub(crate) const AGG_ARGUMENTS: Arguments = Arguments {
    names: &["model", "db", "parallel", "batch", "isl", "osl", "prefix", "ctx_tokens", "moe_tp", "moe_ep"],
    slots: &[
        Slot::Text,
        Slot::Text,
        Slot::Parallel,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
    ],
    counts: &[6, 7, 8, 10],
};

/// The deployment of row `row` (`None`: a required argument is NULL).
pub(crate) fn agg_query<'a>(calls: &Calls<'a>, row: usize) -> Result<Option<(&'a str, &'a str, AggQuery)>> {
    let (Some(model), Some(db)) = (calls.text(0, row), calls.text(1, row)) else { return Ok(None) };
    let Some(parallel) = calls.parallel(2, [8, 9], row)? else { return Ok(None) };
    let (Some(batch), Some(isl), Some(osl)) = (calls.int(3, row)?, calls.int(4, row)?, calls.int(5, row)?) else {
        return Ok(None);
    };
    let prefix = calls.int(6, row)?.unwrap_or(0);
    let ctx_tokens = calls.int(7, row)?;
    Ok(Some((model, db, AggQuery { parallel, batch, isl, osl, prefix, ctx_tokens, kv_sizing: Default::default() })))
}

const FIELDS: &Schema = &[
    ("ttft_ms", Kind::F64),
    ("tpot_ms", Kind::F64),
    ("request_latency_ms", Kind::F64),
    ("tokens_per_s", Kind::F64),
    ("tokens_per_s_per_gpu", Kind::F64),
    ("tokens_per_s_per_user", Kind::F64),
    ("seq_per_s", Kind::F64),
    ("seq_per_s_per_gpu", Kind::F64),
    ("request_rate", Kind::F64),
    ("concurrency", Kind::I64),
    ("bs", Kind::I64),
    ("global_bs", Kind::I64),
    ("num_total_gpus", Kind::I64),
    ("isl", Kind::I64),
    ("osl", Kind::I64),
    ("prefix", Kind::I64),
    ("ctx_tokens", Kind::I64),
    ("num_ctx_reqs", Kind::F64),
    ("num_gen_reqs", Kind::F64),
    ("num_tokens", Kind::F64),
    ("gen_tokens", Kind::F64),
    ("balance_score", Kind::F64),
    ("num_mix_steps", Kind::F64),
    ("num_genonly_steps", Kind::F64),
    ("mix_step_ms", Kind::F64),
    ("genonly_step_ms", Kind::F64),
    ("memory_gib", Kind::F64),
    ("parallel", Kind::Text),
    ("tp", Kind::I64),
    ("pp", Kind::I64),
    ("dp", Kind::I64),
    ("moe_tp", Kind::I64),
    ("moe_ep", Kind::I64),
    ("cp", Kind::I64),
    ("gemm", Kind::Text),
    ("kvcache", Kind::Text),
    ("fmha", Kind::Text),
    ("moe", Kind::Text),
    ("comm", Kind::Text),
    ("encoder_latency_ms", Kind::F64),
    ("encoder_memory_gib", Kind::F64),
    ("system", Kind::Text),
    ("backend", Kind::Text),
    ("version", Kind::Text),
    ("warning", Kind::Text),
    ("reason", Kind::Text),
];

/// `label` written into `buf` (reused across rows: no allocation per row).
pub(crate) fn write_label(buf: &mut String, label: aicsql_serving::Label) -> &str {
    buf.clear();
    let _ = write!(buf, "{label}");
    buf
}

fn push(out: &mut StructOut, e: &AggEstimate, server: &Server, buf: &mut String) -> Result<()> {
    let p = &e.parallel;
    let parallel = write_label(buf, e.label());
    out.push(&[
        e.ttft_ms.into(),
        e.tpot_ms.into(),
        e.request_latency_ms.into(),
        e.tokens_per_s.into(),
        e.tokens_per_s_per_gpu.into(),
        e.tokens_per_s_per_user.into(),
        e.seq_per_s.into(),
        e.seq_per_s_per_gpu.into(),
        e.request_rate.into(),
        e.concurrency.into(),
        e.bs.into(),
        e.global_bs.into(),
        e.num_total_gpus.into(),
        e.isl.into(),
        e.osl.into(),
        e.prefix.into(),
        e.ctx_tokens.into(),
        e.num_ctx_reqs.into(),
        e.num_gen_reqs.into(),
        e.num_tokens.into(),
        e.num_gen_reqs.into(),
        e.balance_score.into(),
        e.num_mix_steps.into(),
        e.num_genonly_steps.into(),
        e.mix_step_ms.into(),
        e.genonly_step_ms.into(),
        e.memory.total.into(),
        parallel.into(),
        p.tp.into(),
        p.pp.into(),
        p.dp.into(),
        e.moe_tp.into(),
        e.moe_ep.into(),
        p.cp.into(),
        e.quants.gemm.name().into(),
        e.quants.kv.name().into(),
        e.quants.fmha.name().into(),
        e.quants.moe.name().into(),
        server.comm_quant().name().into(),
        e.encoder_ms.into(),
        e.encoder_memory_gib.into(),
        server.system().into(),
        server.backend().name().into(),
        server.version().into(),
        e.warning.as_deref().into(),
        Value::Null,
    ])
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct EstimateAgg {
    tree: SharedTree,
    signature: Signature,
    pool: ModelPool<Server<'static>>,
}

impl EstimateAgg {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: AGG_ARGUMENTS.signature(), pool: ModelPool::new(NAME) }
    }
}

impl ScalarUDFImpl for EstimateAgg {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        options::coerce(arg_types, |plain| AGG_ARGUMENTS.coerce(NAME, plain))
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(struct_type(FIELDS))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = AicOptions::from_config(&args.config_options)?;
        let (plain, given) = options::split(&args.args);
        let mut calls = Calls::new(NAME, &AGG_ARGUMENTS, plain, args.number_rows)?;
        if options::per_row(given) {
            (calls.scalar, calls.rows) = (false, args.number_rows);
        }
        let row_options = Options::new(NAME, given, &options)?;
        let mut servers = self.pool.take(&self.tree.0, &options);
        let mut out = StructOut::new(NAME, FIELDS, calls.rows);
        let mut buf = String::new();
        // The set goes back to the pool even when a row fails.
        let priced = (|| -> Result<()> {
            for row in 0..calls.rows {
                let Some((model, db, mut q)) = agg_query(&calls, row)? else {
                    out.push_null();
                    continue;
                };
                let row_options = row_options.get(row)?;
                q.kv_sizing = row_options.kv_sizing;
                let (server, db_name) = servers.get_with(model, db, row_options.model)?;
                match server.estimate_agg(&q) {
                    Ok(e) => push(&mut out, &e, server, &mut buf)?,
                    Err(e) if e.is_no_estimate() && options.on_miss == OnMiss::Null => {
                        out.push_reason(&e.to_string())?
                    }
                    Err(e) => return Err(serving_error(NAME, model, db_name, e)),
                }
            }
            Ok(())
        })();
        self.pool.give(servers);
        priced?;
        calls.finish(out.finish()?)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "One aggregated (in-flight batching) deployment as aiconfigurator v0.11.0's cli_estimate(mode='agg') \
                 prices it on the Python engine step: batch concurrent requests of isl input and osl output tokens \
                 on one worker, prefill admitted ctx_tokens at a time into steps that also decode. Returns a STRUCT \
                 with every value of the spec's result dict (units in the names: _ms, _gib, per_s): TTFT, TPOT, \
                 request latency, tokens/s (total, per GPU, per user), requests/s, the memory per GPU, the schedule \
                 (mixed and decode-only steps), the parallel label, the quant modes the step ran with and the spec's \
                 KV-cache warning (TRT-LLM), bit-identical to the spec. A perf-data miss in any step, or a deployment \
                 that does not fit in GPU memory (the spec's OOM) or that the spec refuses (fp8_block experts whose \
                 per-GPU width is not a multiple of the weight block), gives a struct whose fields are NULL but `reason`; \
                 under SET aic.on_miss = 'error' it is an error. estimate_memory breaks the memory down.",
                "estimate_agg(model, db, parallel, batch, isl, osl [, prefix [, ctx_tokens [, moe_tp, moe_ep]]] [, options])",
            )
            .with_sql_example(
                r#"```sql
> SELECT e['ttft_ms'] AS ttft, e['tpot_ms'] AS tpot, e['tokens_per_s_per_gpu'] AS tps_gpu, e['memory_gib'] AS mem
  FROM (SELECT estimate_agg('meta-llama/Meta-Llama-3.1-8B', 'gb200/sglang/0.5.14', 8, 4, 1024, 128) AS e);
+--------------------+--------------------+--------------------+-------------+
| ttft               | tpot               | tps_gpu            | mem         |
+--------------------+--------------------+--------------------+-------------+
| 12.858923445384333 | 1.8261901835605354 | 256.98960146632794 | 6.623828125 |
+--------------------+--------------------+--------------------+-------------+
```"#,
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models, e.g. 'Qwen/Qwen3-32B-FP8'.")
            .with_argument(
                "db",
                "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version).",
            )
            .with_argument(
                "parallel",
                "An integer tp (pp = dp = 1; moe_tp / moe_ep apply), or the spec's label as search results print it, \
                 e.g. 'tp8pp1dp1etp1ep8' ('etpNoneepNone' for dense models), which carries its own MoE widths \
                 (moe_tp / moe_ep may only repeat them). dp > 1 (attention data parallelism) is priced for every \
                 MoE family; pp > 1 on every family; a trailing cpN (context parallelism, sglang, \
                 tp = dp = 1, every family but QWEN35 and the Nemotrons) splits the prefill over N ranks.",
            )
            .with_argument("batch", "Concurrent requests per worker, >= 1.")
            .with_argument("isl", "Input sequence length, >= 1.")
            .with_argument("osl", "Output sequence length, >= 1.")
            .with_argument("prefix", "Cached prefix tokens of each request, part of isl (NULL or absent: 0).")
            .with_argument("ctx_tokens", "Prefill tokens admitted per step (NULL or absent: isl, the spec's default).")
            .with_argument(
                "moe_tp",
                "MoE models: expert tensor parallelism (NULL: inferred from tp = moe_tp * moe_ep).",
            )
            .with_argument("moe_ep", "MoE models: expert parallelism (NULL: inferred). Dense models ignore both.")
            .with_argument("options", OPTIONS_DOC)
            .build()
        }))
    }
}
