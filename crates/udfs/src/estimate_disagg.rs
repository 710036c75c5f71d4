//! `estimate_disagg(model, db, prefill_parallel, prefill_batch,
//! prefill_workers, decode_parallel, decode_batch, decode_workers, isl, osl
//! [, prefix [, prefill_moe_tp, prefill_moe_ep, decode_moe_tp, decode_moe_ep]] [, options])`:
//! one disaggregated deployment (prefill workers and decode workers) as
//! aiconfigurator prices it, at the spec's three decimals.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_serving::{DisaggEstimate, DisaggQuery, Server, WorkerEstimate};
use aicsql_tables::DataTree;

use crate::config::{AicOptions, OnMiss};
use crate::errors::serving_error;
use crate::estimate_agg::write_label;
use crate::options::{self, OPTIONS_DOC, Options};
use crate::serving_args::{Arguments, Calls, Slot};
use crate::step_models::ModelPool;
use crate::struct_out::{Kind, Schema, StructOut, Value, struct_type};
use crate::{DOC_SECTION_AICSQL, SharedTree};

const NAME: &str = "estimate_disagg";

const ARGUMENTS: Arguments = Arguments {
    names: &[
        "model",
        "db",
        "prefill_parallel",
        "prefill_batch",
        "prefill_workers",
        "decode_parallel",
        "decode_batch",
        "decode_workers",
        "isl",
        "osl",
        "prefix",
        "prefill_moe_tp",
        "prefill_moe_ep",
        "decode_moe_tp",
        "decode_moe_ep",
    ],
    slots: &[
        Slot::Text,
        Slot::Text,
        Slot::Parallel,
        Slot::Int,
        Slot::Int,
        Slot::Parallel,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
        Slot::Int,
    ],
    counts: &[10, 11, 15],
};

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
    ("num_total_gpus", Kind::I64),
    ("isl", Kind::I64),
    ("osl", Kind::I64),
    ("prefix", Kind::I64),
    ("prefill_parallel", Kind::Text),
    ("prefill_tp", Kind::I64),
    ("prefill_pp", Kind::I64),
    ("prefill_dp", Kind::I64),
    ("prefill_cp", Kind::I64),
    ("prefill_moe_tp", Kind::I64),
    ("prefill_moe_ep", Kind::I64),
    ("prefill_bs", Kind::I64),
    ("prefill_global_bs", Kind::I64),
    ("prefill_workers", Kind::I64),
    ("prefill_seq_per_s_per_worker", Kind::F64),
    ("prefill_memory_gib", Kind::F64),
    ("prefill_gemm", Kind::Text),
    ("prefill_kvcache", Kind::Text),
    ("prefill_fmha", Kind::Text),
    ("prefill_moe", Kind::Text),
    ("decode_parallel", Kind::Text),
    ("decode_tp", Kind::I64),
    ("decode_pp", Kind::I64),
    ("decode_dp", Kind::I64),
    ("decode_cp", Kind::I64),
    ("decode_moe_tp", Kind::I64),
    ("decode_moe_ep", Kind::I64),
    ("decode_bs", Kind::I64),
    ("decode_global_bs", Kind::I64),
    ("decode_workers", Kind::I64),
    ("decode_seq_per_s_per_worker", Kind::F64),
    ("decode_memory_gib", Kind::F64),
    ("decode_gemm", Kind::Text),
    ("decode_kvcache", Kind::Text),
    ("decode_fmha", Kind::Text),
    ("decode_moe", Kind::Text),
    ("comm", Kind::Text),
    ("encoder_latency_ms", Kind::F64),
    ("encoder_memory_gib", Kind::F64),
    ("system", Kind::Text),
    ("backend", Kind::Text),
    ("version", Kind::Text),
    ("decode_system", Kind::Text),
    ("decode_version", Kind::Text),
    ("reason", Kind::Text),
];

fn query<'a>(calls: &Calls<'a>, row: usize) -> Result<Option<(&'a str, &'a str, DisaggQuery)>> {
    let (Some(model), Some(db)) = (calls.text(0, row), calls.text(1, row)) else { return Ok(None) };
    let (Some(prefill), Some(decode)) = (calls.parallel(2, [11, 12], row)?, calls.parallel(5, [13, 14], row)?) else {
        return Ok(None);
    };
    let ints = [3, 4, 6, 7, 8, 9].map(|i| calls.int(i, row));
    let [pb, pw, db_, dw, isl, osl] = ints;
    let (Some(pb), Some(pw), Some(db_), Some(dw), Some(isl), Some(osl)) = (pb?, pw?, db_?, dw?, isl?, osl?) else {
        return Ok(None);
    };
    let prefix = calls.int(10, row)?.unwrap_or(0);
    Ok(Some((
        model,
        db,
        DisaggQuery {
            prefill,
            prefill_batch: pb,
            prefill_workers: pw,
            decode,
            decode_batch: db_,
            decode_workers: dw,
            isl,
            osl,
            prefix,
        },
    )))
}

fn side<'v>(w: &'v WorkerEstimate, label: &'v str) -> [Value<'v>; 16] {
    [
        label.into(),
        w.parallel.tp.into(),
        w.parallel.pp.into(),
        w.parallel.dp.into(),
        w.parallel.cp.into(),
        w.moe_tp.into(),
        w.moe_ep.into(),
        w.bs.into(),
        w.global_bs.into(),
        w.workers.into(),
        w.seq_per_s_per_worker.into(),
        w.memory_gib.into(),
        w.quants.gemm.name().into(),
        w.quants.kv.name().into(),
        w.quants.fmha.name().into(),
        w.quants.moe.name().into(),
    ]
}

fn push(
    out: &mut StructOut,
    e: &DisaggEstimate,
    server: &Server,
    decode: &Server,
    bufs: &mut [String; 2],
) -> Result<()> {
    let [pbuf, dbuf] = bufs;
    let plabel = write_label(pbuf, e.prefill.label());
    let dlabel = write_label(dbuf, e.decode.label());
    let head: [Value; 14] = [
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
        e.num_total_gpus.into(),
        e.isl.into(),
        e.osl.into(),
        e.prefix.into(),
    ];
    let tail: [Value; 9] = [
        server.comm_quant().name().into(),
        e.encoder_ms.into(),
        e.encoder_memory_gib.into(),
        server.system().into(),
        server.backend().name().into(),
        server.version().into(),
        decode.system().into(),
        decode.version().into(),
        Value::Null,
    ];
    let mut row = [Value::Null; 55];
    row[..14].copy_from_slice(&head);
    row[14..30].copy_from_slice(&side(&e.prefill, plabel));
    row[30..46].copy_from_slice(&side(&e.decode, dlabel));
    row[46..].copy_from_slice(&tail);
    out.push(&row)
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct EstimateDisagg {
    tree: SharedTree,
    signature: Signature,
    pool: ModelPool<Server<'static>>,
}

impl EstimateDisagg {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: ARGUMENTS.signature(), pool: ModelPool::new(NAME) }
    }
}

impl ScalarUDFImpl for EstimateDisagg {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        options::coerce(arg_types, |plain| ARGUMENTS.coerce(NAME, plain))
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(struct_type(FIELDS))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = AicOptions::from_config(&args.config_options)?;
        let (plain, given) = options::split(&args.args);
        let mut calls = Calls::new(NAME, &ARGUMENTS, plain, args.number_rows)?;
        if options::per_row(given) {
            (calls.scalar, calls.rows) = (false, args.number_rows);
        }
        let row_options = Options::new(NAME, given, &options)?;
        let mut servers = self.pool.take(&self.tree.0, &options);
        let mut out = StructOut::new(NAME, FIELDS, calls.rows);
        let mut bufs = [String::new(), String::new()];
        // The set goes back to the pool even when a row fails.
        let priced = (|| -> Result<()> {
            for row in 0..calls.rows {
                let Some((model, db, q)) = query(&calls, row)? else {
                    out.push_null();
                    continue;
                };
                let decode_system = row_options.decode_system(row);
                let (server, db_name, mut decode) =
                    servers.get_roles(model, db, decode_system, row_options.model(row)?)?;
                match server.estimate_disagg_with(decode.as_deref_mut(), &q) {
                    Ok(e) => push(&mut out, &e, server, decode.as_deref().unwrap_or(server), &mut bufs)?,
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
                "One disaggregated deployment as aiconfigurator v0.11.0's cli_estimate(mode='disagg') prices it: \
                 prefill workers run static context passes (latency x 1.1), decode workers static generation passes \
                 (x 1.08); the deployment's rate is the smaller of the prefill rate (x 0.9) and the decode rate \
                 (x 0.92), TTFT the prefill's x 1.8. Every value at the spec's three decimals (numpy's rounding, as \
                 pandas' DataFrame.round(3) does it), bit-identical. Returns a STRUCT: the deployment's TTFT, TPOT, \
                 request latency, tokens/s (total, per GPU, per user), requests/s, GPUs, and per side (prefill_*, \
                 decode_*) the parallel label, batch, workers, requests/s per worker, memory per GPU and quant modes. \
                 A miss in either side, either side out of GPU memory, or a side the spec refuses (fp8_block \
                 experts split off the weight block) gives NULL fields and a reason (an error under \
                 aic.on_miss = 'error'). With a decode_system (option or SET aic.decode_system) the decode workers \
                 run on that system, as cli_estimate's decode_system_name: their data, memory and capacity are \
                 that system's; system / version name the prefill's database, decode_system / decode_version the \
                 decode's.",
                "estimate_disagg(model, db, prefill_parallel, prefill_batch, prefill_workers, decode_parallel, \
                 decode_batch, decode_workers, isl, osl [, prefix [, prefill_moe_tp, prefill_moe_ep, decode_moe_tp, decode_moe_ep]] \
                 [, options])",
            )
            .with_sql_example(
                r#"```sql
> SELECT d['ttft_ms'] AS ttft, d['tpot_ms'] AS tpot, d['tokens_per_s_per_gpu'] AS tps_gpu, d['num_total_gpus'] AS gpus
  FROM (SELECT estimate_disagg('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 4, 4, 3, 2, 8, 2, 4000, 1000) AS d);
+---------+--------+---------+------+
| ttft    | tpot   | tps_gpu | gpus |
+---------+--------+---------+------+
| 860.454 | 14.168 | 64.975  | 16   |
+---------+--------+---------+------+
```"#,
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models.")
            .with_argument(
                "db",
                "Database 'system/backend/version' of both sides (of the prefill side with a decode_system).",
            )
            .with_argument("prefill_parallel", "Prefill workers' integer tp or parallel label (see estimate_agg).")
            .with_argument("prefill_batch", "Requests of one static prefill pass, >= 1.")
            .with_argument("prefill_workers", "Prefill workers, >= 1.")
            .with_argument("decode_parallel", "Decode workers' integer tp or parallel label.")
            .with_argument("decode_batch", "Concurrent requests of one decode worker, >= 1.")
            .with_argument("decode_workers", "Decode workers, >= 1.")
            .with_argument("isl", "Input sequence length, >= 1.")
            .with_argument("osl", "Output sequence length, >= 1.")
            .with_argument("prefix", "Cached prefix tokens of each request (NULL or absent: 0).")
            .with_argument("prefill_moe_tp", "MoE models: the prefill side's expert tensor parallelism (NULL: inferred).")
            .with_argument("prefill_moe_ep", "MoE models: the prefill side's expert parallelism (NULL: inferred).")
            .with_argument("decode_moe_tp", "MoE models: the decode side's expert tensor parallelism (NULL: inferred).")
            .with_argument("decode_moe_ep", "MoE models: the decode side's expert parallelism (NULL: inferred).")
            .with_argument("options", OPTIONS_DOC)
            .build()
        }))
    }
}
