//! `step_latency(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep [, dp [, pp [, cp]]]])`:
//! the total of one engine step (context: TTFT; generation: TPOT) in ms, a
//! vectorised scalar so a grid of configs is priced with a join.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::Float64Builder;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_tables::DataTree;
use aicsql_tables::step::{StepError, StepModel};

use crate::config::{AicOptions, OnMiss};
use crate::errors::step_error;
use crate::options::{self, Options};
use crate::step_args::{StepCalls, coerce_step, step_signature, with_step_arguments};
use crate::step_models::ModelPool;
use crate::{DOC_SECTION_AICSQL, SharedTree};

const NAME: &str = "step_latency";

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct StepLatency {
    tree: SharedTree,
    signature: Signature,
    pool: ModelPool<StepModel<'static>>,
}

impl StepLatency {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: step_signature(), pool: ModelPool::new(NAME) }
    }
}

impl ScalarUDFImpl for StepLatency {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        options::coerce(arg_types, |plain| coerce_step(NAME, plain))
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = AicOptions::from_config(&args.config_options)?;
        let (plain, given) = options::split(&args.args);
        let mut calls = StepCalls::new(NAME, plain, args.number_rows)?;
        if options::per_row(given) {
            (calls.scalar, calls.rows) = (false, args.number_rows);
        }
        let row_options = Options::new(NAME, given, &options)?;
        let mut models = self.pool.take(&self.tree.0, &options);
        let mut out = Float64Builder::with_capacity(calls.rows);
        // The set goes back to the pool even when a row fails.
        let priced = (|| -> Result<()> {
            for row in 0..calls.rows {
                let Some(call) = calls.get(row)? else {
                    out.append_null();
                    continue;
                };
                let (step, db_name) = models.get_with(call.model, call.db, row_options.model(row)?)?;
                match step.latency(call.phase, &call.shape) {
                    Ok(ms) => out.append_value(ms),
                    Err(StepError::Miss { .. } | StepError::Refused(_)) if options.on_miss == OnMiss::Null => {
                        out.append_null()
                    }
                    Err(e) => return Err(step_error(NAME, call.model, db_name, e)),
                }
            }
            Ok(())
        })();
        self.pool.give(models);
        priced?;
        calls.finish(Arc::new(out.finish()))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            with_step_arguments(
                Documentation::builder(
                    DOC_SECTION_AICSQL,
                    "Latency in milliseconds of one engine step of a model on a database, as aiconfigurator \
                     v0.11.0's static engine step computes it: 'context' gives TTFT (the prefill of batch x isl \
                     tokens), 'generation' gives TPOT (the decode steps after it, sampled every 32 steps, \
                     averaged over osl - 1). A data miss in any op makes the step a miss, and a layout the spec \
                     refuses (fp8_block experts split off the weight block) has no step: NULL, or an error \
                     naming the op and lookup under SET aic.on_miss = 'error'. engine_step shows every op.",
                    "step_latency(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep [, dp [, pp [, cp]]]] [, options])",
                )
                .with_sql_example(
                    r#"```sql
> SELECT step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128) AS ttft_ms;
+-------------------+
| ttft_ms           |
+-------------------+
| 24.74004986586315 |
+-------------------+
```"#,
                ),
            )
            .build()
        }))
    }
}
