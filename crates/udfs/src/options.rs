//! The estimators' options: an optional trailing STRUCT argument whose
//! fields are the spec's user-facing options (docs/spec/options.md), e.g.
//! `estimate_agg('Qwen/Qwen3-32B', 'h200_sxm/vllm/0.19.0', 8, 64, 1024, 256,
//! named_struct('kvcache_quant', 'fp8'))`.
//!
//! Why a STRUCT and not named arguments: DataFusion 55 resolves named
//! arguments of scalar functions only up to the last one given (every
//! earlier optional parameter must be written out, so `kvcache_quant =>
//! 'fp8'` alone would need `prefix`, `ctx_tokens`, `moe_tp`, `moe_ep`
//! first) and not at all for table functions. A STRUCT takes any subset of
//! options in any order, is one expression whose fields can be columns (a
//! grid over options is one join), and reads the same in every function.
//! A field that is NULL, or absent, takes the session's setting
//! (`SET aic.kvcache_quant = 'fp8'`), else the spec's default.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringArray, StructArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Fields};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::ColumnarValue;

use aicsql_tables::TablesError;
use aicsql_tables::step::QuantOverrides;

/// The options a function takes, with what each sets.
pub(crate) const QUANT_OPTIONS: [(&str, &str); 5] = [
    ("gemm_quant", "GEMM quant mode in place of the checkpoint's (the spec's --gemm-quant-mode)"),
    ("moe_quant", "MoE quant mode (--moe-quant-mode)"),
    ("kvcache_quant", "KV-cache quant mode (--kvcache-quant-mode)"),
    ("fmha_quant", "context-attention quant mode (--fmha-quant-mode)"),
    ("comm_quant", "communication quant mode, a label on these estimates (--comm-quant-mode)"),
];

/// What the reference says of the `options` argument.
pub(crate) const OPTIONS_DOC: &str = "Optional, last: a STRUCT of the spec's options, any subset in any order, \
     e.g. named_struct('kvcache_quant', 'fp8', 'gemm_quant', 'fp8_block'). Fields: gemm_quant, moe_quant, \
     kvcache_quant, fmha_quant (the spec's mode names: bfloat16, fp8, fp8_block, nvfp4, ...) and comm_quant \
     (half, int8, fp8). A NULL or absent field takes the session's SET aic.<field> (default: the checkpoint's \
     mode). An unknown field or mode name is an error; a mode the database has no data for is a miss.";

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null)
}

/// Checks an options STRUCT's fields when the call is planned.
fn check_fields(function: &str, fields: &Fields) -> Result<()> {
    for field in fields {
        let name = field.name();
        if !QUANT_OPTIONS.iter().any(|(known, _)| known == name) {
            let known: Vec<&str> = QUANT_OPTIONS.iter().map(|(k, _)| *k).collect();
            return plan_err!("{function}: unknown option '{name}'; options are {}", known.join(", "));
        }
        if !is_text(field.data_type()) {
            return plan_err!("{function}: option {name} must be text (a mode name), got {}", field.data_type());
        }
    }
    Ok(())
}

/// Whether `types` ends with an options STRUCT (checked); the caller coerces
/// the arguments before it and keeps its type.
pub(crate) fn trailing_options(function: &str, types: &[DataType]) -> Result<bool> {
    match types.last() {
        Some(DataType::Struct(fields)) => check_fields(function, fields).map(|()| true),
        _ => Ok(false),
    }
}

/// The arguments before the options, and the options column if given.
pub(crate) fn split(values: &[ColumnarValue]) -> (&[ColumnarValue], Option<&ColumnarValue>) {
    match values.split_last() {
        Some((last, rest)) if matches!(last.data_type(), DataType::Struct(_)) => (rest, Some(last)),
        _ => (values, None),
    }
}

/// One field of the options, as text.
struct TextField {
    name: &'static str,
    values: StringArray,
}

/// A batch's options, read row by row over the session's defaults.
pub(crate) struct Options {
    function: &'static str,
    defaults: QuantOverrides,
    /// Absent: every row takes the defaults.
    column: Option<(Arc<StructArray>, Vec<TextField>, bool)>,
}

impl Options {
    /// `value` (the trailing STRUCT, if any) over `defaults`.
    pub(crate) fn new(
        function: &'static str,
        value: Option<&ColumnarValue>,
        defaults: QuantOverrides,
    ) -> Result<Options> {
        let Some(value) = value else { return Ok(Options { function, defaults, column: None }) };
        let (array, scalar): (ArrayRef, bool) = match value {
            ColumnarValue::Array(a) => (Arc::clone(a), false),
            ColumnarValue::Scalar(ScalarValue::Struct(s)) => (Arc::clone(s) as ArrayRef, true),
            ColumnarValue::Scalar(other) => {
                return exec_err!("{function}: options must be a STRUCT, got {}", other.data_type());
            }
        };
        let Some(structs) = array.as_any().downcast_ref::<StructArray>() else {
            return exec_err!("{function}: options must be a STRUCT, got {}", array.data_type());
        };
        let DataType::Struct(fields) = structs.data_type() else { unreachable!("a StructArray's type is Struct") };
        check_fields(function, fields).map_err(|e| DataFusionError::Execution(e.strip_backtrace()))?;
        let mut text = Vec::with_capacity(fields.len());
        for (field, column) in fields.iter().zip(structs.columns()) {
            let Some(&(name, _)) = QUANT_OPTIONS.iter().find(|(known, _)| known == field.name()) else {
                unreachable!("checked above")
            };
            let utf8 = cast(column, &DataType::Utf8)?;
            let Some(values) = utf8.as_any().downcast_ref::<StringArray>() else {
                return exec_err!("{function}: option {name} did not cast to text");
            };
            text.push(TextField { name, values: values.clone() });
        }
        Ok(Options { function, defaults, column: Some((Arc::new(structs.clone()), text, scalar)) })
    }

    /// The quant modes of `row`: the row's fields over the defaults.
    pub(crate) fn quant(&self, row: usize) -> Result<QuantOverrides> {
        let Some((structs, fields, scalar)) = &self.column else { return Ok(self.defaults) };
        let row = if *scalar { 0 } else { row };
        let mut quant = self.defaults;
        if structs.is_null(row) {
            return Ok(quant);
        }
        for field in fields {
            if field.values.is_null(row) {
                continue;
            }
            let value = field.values.value(row);
            let bad = |e: TablesError| {
                DataFusionError::Execution(format!("{}: option {} = '{value}': {e}", self.function, field.name))
            };
            match field.name {
                "gemm_quant" => quant.gemm = Some(value.parse().map_err(bad)?),
                "moe_quant" => quant.moe = Some(value.parse().map_err(bad)?),
                "kvcache_quant" => quant.kv = Some(value.parse().map_err(bad)?),
                "fmha_quant" => quant.fmha = Some(value.parse().map_err(bad)?),
                _ => quant.comm = Some(value.parse().map_err(bad)?),
            }
        }
        Ok(quant)
    }
}

/// Coerces `types` with `plain` for the arguments before a trailing options
/// STRUCT, which keeps its type.
pub(crate) fn coerce(
    function: &str,
    types: &[DataType],
    plain: impl FnOnce(&[DataType]) -> Result<Vec<DataType>>,
) -> Result<Vec<DataType>> {
    if !trailing_options(function, types)? {
        return plain(types);
    }
    let (last, rest) = types.split_last().unwrap_or_else(|| unreachable!("trailing_options saw a last type"));
    let mut out = plain(rest)?;
    out.push(last.clone());
    Ok(out)
}

/// Whether the options vary by row (an array, not one STRUCT for the batch).
pub(crate) fn per_row(value: Option<&ColumnarValue>) -> bool {
    matches!(value, Some(ColumnarValue::Array(_)))
}
