//! `estimate_memory(...)`, the arguments of `estimate_agg`: the memory one
//! GPU of that aggregated deployment needs, broken down as the spec's
//! memory model counts it, and whether it fits. A deployment that does not
//! fit is an answer here (`fits = false`), not a miss.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_serving::Server;
use aicsql_tables::DataTree;

use crate::config::{AicOptions, OnMiss};
use crate::errors::serving_error;
use crate::estimate_agg::{AGG_ARGUMENTS, agg_query};
use crate::options::{self, OPTIONS_DOC, Options};
use crate::serving_args::Calls;
use crate::step_models::ModelPool;
use crate::struct_out::{Kind, Schema, StructOut, Value, struct_type};
use crate::{DOC_SECTION_AICSQL, SharedTree};

const NAME: &str = "estimate_memory";

const FIELDS: &Schema = &[
    ("weights_gib", Kind::F64),
    ("activations_gib", Kind::F64),
    ("kvcache_gib", Kind::F64),
    ("nccl_gib", Kind::F64),
    ("others_gib", Kind::F64),
    ("total_gib", Kind::F64),
    ("capacity_gib", Kind::F64),
    ("fits", Kind::Bool),
    ("reason", Kind::Text),
];

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct EstimateMemory {
    tree: SharedTree,
    signature: Signature,
    pool: ModelPool<Server<'static>>,
}

impl EstimateMemory {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: AGG_ARGUMENTS.signature(), pool: ModelPool::new(NAME) }
    }
}

impl ScalarUDFImpl for EstimateMemory {
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
                match server.agg_memory(&q) {
                    Ok((m, capacity_gib)) => out.push(&[
                        m.weights.into(),
                        m.activations.into(),
                        m.kvcache.into(),
                        m.nccl.into(),
                        m.others.into(),
                        m.total.into(),
                        capacity_gib.into(),
                        (m.total < capacity_gib).into(),
                        Value::Null,
                    ])?,
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
                "The memory one GPU of an aggregated deployment needs, as aiconfigurator v0.11.0's memory model \
                 counts it (the arguments of estimate_agg): weights (the context op list's, over pp), activations \
                 (the backend's per-family coefficients and floor), KV cache (batch x (isl + osl) tokens), NCCL \
                 buffers and other runtime memory, in GiB; total_gib = estimate_agg(...)['memory_gib']. fits is \
                 the spec's OOM rule (total < the GPU's capacity). Every step of the estimate is priced first, as \
                 the spec does, so a perf-data miss, or a layout the spec refuses (fp8_block experts split off \
                 the weight block), gives NULL fields and a reason (an error under aic.on_miss = 'error').",
                "estimate_memory(model, db, parallel, batch, isl, osl [, prefix [, ctx_tokens [, moe_tp, moe_ep]]] [, options])",
            )
            .with_sql_example(
                r#"```sql
> SELECT m['total_gib'] AS total, m['fits'] AS fits
  FROM (SELECT estimate_memory('Qwen/Qwen3-32B', 'gb200/sglang/0.5.14', 1, 64, 8192, 512) AS m);
+--------------------+-------+
| total              | fits  |
+--------------------+-------+
| 203.25092620849608 | false |
+--------------------+-------+
```"#,
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models.")
            .with_argument(
                "db",
                "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version).",
            )
            .with_argument("parallel", "An integer tp, or the spec's parallel label (see estimate_agg).")
            .with_argument("batch", "Concurrent requests per worker, >= 1.")
            .with_argument("isl", "Input sequence length, >= 1.")
            .with_argument("osl", "Output sequence length, >= 1.")
            .with_argument("prefix", "Cached prefix tokens of each request (NULL or absent: 0).")
            .with_argument("ctx_tokens", "Prefill tokens admitted per step (NULL or absent: isl).")
            .with_argument("moe_tp", "MoE models: expert tensor parallelism (NULL: inferred).")
            .with_argument("moe_ep", "MoE models: expert parallelism (NULL: inferred).")
            .with_argument("options", OPTIONS_DOC)
            .build()
        }))
    }
}
