//! `step_status(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep [, dp [, pp [, cp]]]])`:
//! whether `step_latency` prices a step and, when it does not, why, as a
//! value. A coverage scan over thousands of (model, database) pairs cannot
//! stop at the first refusal, and a NULL from a miss says nothing about
//! which lookup missed.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::StringBuilder;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_tables::DataTree;
use aicsql_tables::step::{StepError, StepModel};

use crate::config::AicOptions;
use crate::errors::step_error;
use crate::options::{self, Options};
use crate::step_args::{StepCalls, coerce_step, step_signature, with_step_arguments};
use crate::step_models::{ModelPool, NoModel};
use crate::{DOC_SECTION_AICSQL, SharedTree};

const NAME: &str = "step_status";

/// What a priced step reports.
pub const PRICED: &str = "priced";

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct StepStatus {
    tree: SharedTree,
    signature: Signature,
    pool: ModelPool<StepModel<'static>>,
}

impl StepStatus {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: step_signature(), pool: ModelPool::new(NAME) }
    }
}

impl ScalarUDFImpl for StepStatus {
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
        Ok(DataType::Utf8)
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
        let mut out = StringBuilder::new();
        // The set goes back to the pool even when a row fails.
        let priced = (|| -> Result<()> {
            for row in 0..calls.rows {
                // A bad phase or shape is the query's mistake, not a status: it fails as in step_latency.
                let Some(call) = calls.get(row)? else {
                    out.append_null();
                    continue;
                };
                let (step, db_name) = match models.get_with(call.model, call.db, row_options.model(row)?) {
                    Ok(found) => found,
                    Err(NoModel::Refused { reason, .. }) => {
                        out.append_value(format!("refused: {reason}"));
                        continue;
                    }
                    Err(NoModel::Broken(e)) => return Err(e),
                };
                match step.latency(call.phase, &call.shape) {
                    Ok(_) => out.append_value(PRICED),
                    Err(e @ StepError::Miss { .. }) => out.append_value(format!("miss: {e}")),
                    Err(e @ (StepError::Input(_) | StepError::Refused(_))) => out.append_value(format!("refused: {e}")),
                    Err(e @ StepError::Data(_)) => return Err(step_error(NAME, call.model, db_name, e)),
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
                    "Whether step_latency prices this step, and why not when it does not: 'priced'; \
                     'miss: ...' naming the op and the lookup that found no data (what step_latency \
                     returns as NULL); or 'refused: ...' with the reason (an unknown model or database, \
                     an architecture or quantization the spec does not price, parallel degrees that do \
                     not fit the model). Unreadable or corrupt data is an error here too, never a status. \
                     Same arguments as step_latency; aic.on_miss does not apply.",
                    "step_status(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep [, dp [, pp [, cp]]]] [, options])",
                )
                .with_sql_example(
                    r#"```sql
> SELECT step_status('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128) AS status;
+--------+
| status |
+--------+
| priced |
+--------+
```"#,
                ),
            )
            .build()
        }))
    }
}
