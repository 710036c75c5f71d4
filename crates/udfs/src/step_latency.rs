//! `step_latency(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep])`:
//! the total of one engine step (context: TTFT; generation: TPOT) in ms, a
//! vectorised scalar so a grid of configs is priced with a join.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::Float64Builder;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_tables::DataTree;
use aicsql_tables::step::{StepError, StepModel};

use crate::args::{Int, Text};
use crate::config::{AicOptions, OnMiss};
use crate::database::resolve;
use crate::errors::step_error;
use crate::step_args::{coerce_step, phase, shape, step_signature};
use crate::{DOC_SECTION_AICSQL, SharedTree};
use aicsql_tables::sources::GEMM_FILE;

const NAME: &str = "step_latency";

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct StepLatency {
    tree: SharedTree,
    signature: Signature,
}

impl StepLatency {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: step_signature() }
    }
}

/// The models of one batch, resolved once per distinct (model, db) pair.
struct Models<'a> {
    tree: &'a DataTree,
    options: &'a AicOptions,
    entries: Vec<(String, String, String, StepModel<'a>)>,
    last: usize,
}

impl<'a> Models<'a> {
    /// The model for `(model, db)`, and the resolved database name.
    fn get(&mut self, model: &str, db: &str) -> Result<(&mut StepModel<'a>, &str)> {
        let hit = |e: &(String, String, String, StepModel)| e.0 == model && e.1 == db;
        let index = match self.entries.get(self.last).filter(|e| hit(e)) {
            Some(_) => self.last,
            None => match self.entries.iter().position(hit) {
                Some(i) => i,
                None => {
                    let database = resolve(NAME, self.tree, &GEMM_FILE, db, self.options)?;
                    let name = database.name();
                    let step = StepModel::new(
                        self.tree,
                        model,
                        &database.system,
                        &database.backend,
                        &database.version,
                        self.options.shared_layer,
                    )
                    .map_err(|e| step_error(NAME, model, &name, e))?;
                    self.entries.push((model.to_string(), db.to_string(), name, step));
                    self.entries.len() - 1
                }
            },
        };
        self.last = index;
        let entry = &mut self.entries[index];
        Ok((&mut entry.3, entry.2.as_str()))
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
        coerce_step(NAME, arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = AicOptions::from_config(&args.config_options)?;
        let values = &args.args;
        if values.len() != 7 && values.len() != 9 {
            return exec_err!("{NAME} takes 7 or 9 arguments, got {}", values.len());
        }
        let texts = [Text::new(NAME, 1, &values[0])?, Text::new(NAME, 2, &values[1])?, Text::new(NAME, 3, &values[2])?];
        let ints: Vec<Int> =
            values[3..].iter().enumerate().map(|(i, v)| Int::new(NAME, i + 4, v)).collect::<Result<_>>()?;
        let mut models = Models { tree: &self.tree, options: &options, entries: Vec::new(), last: 0 };
        let rows = args.number_rows;
        let scalar = values.iter().all(|v| matches!(v, ColumnarValue::Scalar(_)));
        let mut out = Float64Builder::with_capacity(if scalar { 1 } else { rows });
        for row in 0..if scalar { 1 } else { rows } {
            let (Some(model), Some(db), Some(phase_name)) = (texts[0].get(row), texts[1].get(row), texts[2].get(row))
            else {
                out.append_null();
                continue;
            };
            let (Some(tp), Some(batch), Some(isl), Some(osl)) =
                (ints[0].get(row), ints[1].get(row), ints[2].get(row), ints[3].get(row))
            else {
                out.append_null();
                continue;
            };
            let moe = [ints.get(4).and_then(|i| i.get(row)), ints.get(5).and_then(|i| i.get(row))];
            let phase = phase(NAME, phase_name)?;
            let shape = shape(NAME, [tp, batch, isl, osl], moe)?;
            let (step, db_name) = models.get(model, db)?;
            match step.latency(phase, &shape) {
                Ok(ms) => out.append_value(ms),
                Err(StepError::Miss { .. }) if options.on_miss == OnMiss::Null => out.append_null(),
                Err(e) => return Err(step_error(NAME, model, db_name, e)),
            }
        }
        let array = out.finish();
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(Arc::new(array))
        })
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "Latency in milliseconds of one engine step of a model on a database, as aiconfigurator \
                 v0.11.0's static engine step computes it: 'context' gives TTFT (the prefill of batch x isl \
                 tokens), 'generation' gives TPOT (the decode steps after it, sampled every 32 steps, \
                 averaged over osl - 1). A data miss in any op makes the step a miss: NULL, or an error \
                 naming the op and lookup under SET aic.on_miss = 'error'. engine_step shows every op.",
                "step_latency(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep])",
            )
            .with_sql_example(
                "```sql\n> SELECT step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128);\n\
                 24.74004986586315\n```",
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models, e.g. 'Qwen/Qwen3-32B-FP8'.")
            .with_argument("db", "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version).")
            .with_argument("phase", "'context' (TTFT) or 'generation' (TPOT).")
            .with_argument("tp", "Tensor-parallel degree; must divide the attention heads.")
            .with_argument("batch", "Requests in the batch, >= 1.")
            .with_argument("isl", "Input sequence length, >= 1.")
            .with_argument("osl", "Output sequence length (generation steps + 1).")
            .with_argument("moe_tp", "MoE models: expert tensor parallelism (NULL: inferred from tp = moe_tp * moe_ep).")
            .with_argument("moe_ep", "MoE models: expert parallelism (NULL: inferred). Dense models ignore both.")
            .build()
        }))
    }
}
