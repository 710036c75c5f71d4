//! What `step_latency` and `engine_step` share: the 7- and 9-argument
//! signature, reading one config from argument values, and turning a step
//! error into the function's error.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::logical_expr::{Signature, TypeSignature, Volatility};

use aicsql_tables::step::{Phase, StepShape};

use crate::args::coerce;

/// Argument names in order; the last two are optional.
pub const ARGS: [&str; 9] = ["model", "db", "phase", "tp", "batch", "isl", "osl", "moe_tp", "moe_ep"];
const TEXTS: usize = 3;

pub fn step_signature() -> Signature {
    let exact = |ints: usize| {
        let mut types = vec![DataType::Utf8; TEXTS];
        types.extend(std::iter::repeat_n(DataType::Int64, ints));
        TypeSignature::Exact(types)
    };
    Signature::one_of(vec![exact(4), exact(6), TypeSignature::UserDefined], Volatility::Stable)
}

pub fn coerce_step(function: &str, arg_types: &[DataType]) -> Result<Vec<DataType>> {
    match arg_types.len() {
        7 => coerce(function, arg_types, TEXTS, 4),
        9 => coerce(function, arg_types, TEXTS, 6),
        n => plan_err!("{function}({}) takes 7 or 9 arguments, got {n}", ARGS.join(", ")),
    }
}

pub fn phase(function: &str, value: &str) -> Result<Phase> {
    match value.to_ascii_lowercase().as_str() {
        "context" => Ok(Phase::Context),
        "generation" => Ok(Phase::Generation),
        _ => Err(DataFusionError::Execution(format!(
            "{function}: phase '{value}' is not one of 'context', 'generation'"
        ))),
    }
}

/// The shape of one step from BIGINT arguments (`moe_tp` / `moe_ep` may be
/// NULL: inferred from tp, or ignored by a dense model).
pub fn shape(function: &str, ints: [i64; 4], moe: [Option<i64>; 2]) -> Result<StepShape> {
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
    Ok(StepShape {
        tp: narrow(3, tp)?,
        batch: narrow(4, batch)?,
        isl: narrow(5, isl)?,
        osl: narrow(6, osl)?,
        moe_tp: moe[0].map(|v| narrow(7, v)).transpose()?,
        moe_ep: moe[1].map(|v| narrow(8, v)).transpose()?,
    })
}
