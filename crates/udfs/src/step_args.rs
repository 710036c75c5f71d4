//! What the step functions share: the 7- to 12-argument signature, reading
//! one config from argument values, and (scalar ones) reading a batch's
//! calls row by row.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::DocumentationBuilder;
use datafusion::logical_expr::{ColumnarValue, Signature, TypeSignature, Volatility};

use aicsql_tables::step::{Phase, StepShape};

use crate::args::{Int, Text, coerce};

/// Argument names in order; the last five are optional (the MoE widths
/// together, then `dp`, `pp` and `cp`, each only after the one before).
pub const ARGS: [&str; 12] =
    ["model", "db", "phase", "tp", "batch", "isl", "osl", "moe_tp", "moe_ep", "dp", "pp", "cp"];

/// The argument counts the step functions take.
pub const ARITIES: [usize; 5] = [7, 9, 10, 11, 12];

/// `ARITIES` as an error message says them.
pub const ARITIES_TEXT: &str = "7, 9, 10, 11 or 12";
const TEXTS: usize = 3;

/// The step functions' twelve arguments, documented once for
/// `step_latency`, `step_status` and `engine_step` (they take the same
/// call, so a user reads the same words in each).
pub fn with_step_arguments(builder: DocumentationBuilder) -> DocumentationBuilder {
    with_step_arguments_only(builder).with_argument("options", crate::options::OPTIONS_DOC)
}

/// [`with_step_arguments`] without the options (the table function takes
/// the session's `aic.*_quant` settings only).
pub fn with_step_arguments_only(builder: DocumentationBuilder) -> DocumentationBuilder {
    builder
        .with_argument("model", "Hugging Face id of a model in aic.meta.models, e.g. 'Qwen/Qwen3-32B-FP8'.")
        .with_argument("db", "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version).")
        .with_argument("phase", "'context' (TTFT) or 'generation' (TPOT).")
        .with_argument("tp", "Tensor-parallel degree; must divide the attention heads.")
        .with_argument("batch", "Requests in the batch, >= 1.")
        .with_argument("isl", "Input sequence length, >= 1.")
        .with_argument("osl", "Output sequence length (generation steps + 1).")
        .with_argument("moe_tp", "MoE models: expert tensor parallelism (NULL: inferred from tp = moe_tp * moe_ep).")
        .with_argument("moe_ep", "MoE models: expert parallelism (NULL: inferred). Dense models ignore both.")
        .with_argument(
            "dp",
            "Attention data parallelism (NULL or absent: 1): dp ranks of tp GPUs, each with batch requests of its \
             own, sharing the experts (tp * dp * cp = moe_tp * moe_ep); MoE models only.",
        )
        .with_argument(
            "pp",
            "Pipeline stages (NULL or absent: 1): ops still count every layer; the step adds pp - 1 hand-offs \
             between stages (the p2p op).",
        )
        .with_argument(
            "cp",
            "Context parallelism (NULL or absent: 1): SGLang's all-gather CP at tp = dp = 1, for every family but \
             QWEN35, NEMOTRONH and NEMOTRONNAS (refused, as in the spec); a context step's tokens are split over \
             cp ranks (zigzag attention plus a KV all-gather; DEEPSEEKV32 and DEEPSEEKV4 price the busiest rank's \
             attention module with its indexer sub-kernels swapped and their own all-gathers), a generation step \
             is not split.",
        )
}

pub fn step_signature() -> Signature {
    let exact = |ints: usize| {
        let mut types = vec![DataType::Utf8; TEXTS];
        types.extend(std::iter::repeat_n(DataType::Int64, ints));
        TypeSignature::Exact(types)
    };
    let mut signatures: Vec<TypeSignature> = ARITIES.iter().map(|n| exact(n - TEXTS)).collect();
    signatures.push(TypeSignature::UserDefined);
    Signature::one_of(signatures, Volatility::Stable)
}

pub fn coerce_step(function: &str, arg_types: &[DataType]) -> Result<Vec<DataType>> {
    match arg_types.len() {
        n if ARITIES.contains(&n) => coerce(function, arg_types, TEXTS, n - TEXTS),
        n => plan_err!("{function}({}) takes {ARITIES_TEXT} arguments, got {n}", ARGS.join(", ")),
    }
}

/// `'context'` or `'generation'`, any case (read per row: no allocation).
pub fn phase(function: &str, value: &str) -> Result<Phase> {
    if value.eq_ignore_ascii_case("context") {
        Ok(Phase::Context)
    } else if value.eq_ignore_ascii_case("generation") {
        Ok(Phase::Generation)
    } else {
        Err(DataFusionError::Execution(format!("{function}: phase '{value}' is not one of 'context', 'generation'")))
    }
}

/// The shape of one step from BIGINT arguments (`moe_tp` / `moe_ep` may be
/// NULL: inferred from tp * dp * cp, or ignored by a dense model; a NULL or
/// absent `dp`, `pp` or `cp` is 1).
pub fn shape(function: &str, ints: [i64; 4], moe: [Option<i64>; 2], dp_pp_cp: [Option<i64>; 3]) -> Result<StepShape> {
    let narrow = |position: usize, value: i64| {
        u32::try_from(value).map_err(|_| {
            DataFusionError::Execution(format!(
                "{function}: {} = {value} is out of range (0 ..= {})",
                ARGS[position],
                u32::MAX
            ))
        })
    };
    let [tp, batch, isl, osl] = ints;
    let [dp, pp, cp] = dp_pp_cp;
    let degree = |position: usize, v: Option<i64>| v.map(|v| narrow(position, v)).transpose().map(|v| v.unwrap_or(1));
    Ok(StepShape {
        tp: narrow(3, tp)?,
        pp: degree(10, pp)?,
        dp: degree(9, dp)?,
        cp: degree(11, cp)?,
        batch: narrow(4, batch)?,
        isl: narrow(5, isl)?,
        osl: narrow(6, osl)?,
        moe_tp: moe[0].map(|v| narrow(7, v)).transpose()?,
        moe_ep: moe[1].map(|v| narrow(8, v)).transpose()?,
    })
}

/// The argument columns of one batch of a scalar step function, read row
/// by row (a batch of scalars is one row).
pub struct StepCalls<'a> {
    function: &'static str,
    texts: [Text<'a>; TEXTS],
    ints: Vec<Int<'a>>,
    /// Every argument is a scalar: one call, one scalar result.
    pub scalar: bool,
    /// Calls in the batch.
    pub rows: usize,
}

/// One call of a batch.
pub struct StepCall<'a> {
    pub model: &'a str,
    pub db: &'a str,
    pub phase: Phase,
    pub shape: StepShape,
}

impl<'a> StepCalls<'a> {
    pub fn new(function: &'static str, values: &'a [ColumnarValue], number_rows: usize) -> Result<Self> {
        if !ARITIES.contains(&values.len()) {
            return exec_err!("{function} takes {ARITIES_TEXT} arguments, got {}", values.len());
        }
        let texts = [
            Text::new(function, 1, &values[0])?,
            Text::new(function, 2, &values[1])?,
            Text::new(function, 3, &values[2])?,
        ];
        let ints: Vec<Int> = values[TEXTS..]
            .iter()
            .enumerate()
            .map(|(i, v)| Int::new(function, i + TEXTS + 1, v))
            .collect::<Result<_>>()?;
        let scalar = values.iter().all(|v| matches!(v, ColumnarValue::Scalar(_)));
        Ok(Self { function, texts, ints, scalar, rows: if scalar { 1 } else { number_rows } })
    }

    /// Call `row`, or `None` when a required argument is NULL (NULL out).
    /// A bad phase or shape is an error naming the function and the value.
    pub fn get(&self, row: usize) -> Result<Option<StepCall<'a>>> {
        let (Some(model), Some(db), Some(phase_name)) =
            (self.texts[0].get(row), self.texts[1].get(row), self.texts[2].get(row))
        else {
            return Ok(None);
        };
        let ints = &self.ints;
        let (Some(tp), Some(batch), Some(isl), Some(osl)) =
            (ints[0].get(row), ints[1].get(row), ints[2].get(row), ints[3].get(row))
        else {
            return Ok(None);
        };
        let moe = [ints.get(4).and_then(|i| i.get(row)), ints.get(5).and_then(|i| i.get(row))];
        let degrees = [6, 7, 8].map(|i| ints.get(i).and_then(|i| i.get(row)));
        let phase = phase(self.function, phase_name)?;
        let shape = shape(self.function, [tp, batch, isl, osl], moe, degrees)?;
        Ok(Some(StepCall { model, db, phase, shape }))
    }

    /// The result column as the function returns it: a scalar for a batch of scalars.
    pub fn finish(&self, array: ArrayRef) -> Result<ColumnarValue> {
        Ok(if self.scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}
