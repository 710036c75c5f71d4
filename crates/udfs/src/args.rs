//! Reading function arguments without per-row allocation: strings of any of
//! Arrow's three string types, and BIGINT columns or scalars.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{ColumnarValue, Expr};

/// A text argument: one value for the batch, or one per row.
pub enum Text<'a> {
    Scalar(Option<&'a str>),
    Utf8(&'a datafusion::arrow::array::StringArray),
    LargeUtf8(&'a datafusion::arrow::array::LargeStringArray),
    Utf8View(&'a datafusion::arrow::array::StringViewArray),
}

impl<'a> Text<'a> {
    pub fn new(function: &str, position: usize, value: &'a ColumnarValue) -> Result<Text<'a>> {
        Ok(match value {
            ColumnarValue::Scalar(s) => match s {
                ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v) => {
                    Text::Scalar(v.as_deref())
                }
                ScalarValue::Null => Text::Scalar(None),
                other => return exec_err!("{function}: argument {position} must be text, got {}", other.data_type()),
            },
            ColumnarValue::Array(a) => text_array(function, position, a)?,
        })
    }

    /// The batch-wide value, when the argument is a scalar.
    pub fn scalar(&self) -> Option<Option<&'a str>> {
        match self {
            Text::Scalar(v) => Some(*v),
            _ => None,
        }
    }

    #[inline]
    pub fn get(&self, row: usize) -> Option<&'a str> {
        match self {
            Text::Scalar(v) => *v,
            Text::Utf8(a) => a.is_valid(row).then(|| a.value(row)),
            Text::LargeUtf8(a) => a.is_valid(row).then(|| a.value(row)),
            Text::Utf8View(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }
}

fn text_array<'a>(function: &str, position: usize, a: &'a ArrayRef) -> Result<Text<'a>> {
    Ok(match a.data_type() {
        DataType::Utf8 => Text::Utf8(a.as_string::<i32>()),
        DataType::LargeUtf8 => Text::LargeUtf8(a.as_string::<i64>()),
        DataType::Utf8View => Text::Utf8View(a.as_string_view()),
        DataType::Null => Text::Scalar(None),
        other => return exec_err!("{function}: argument {position} must be text, got {other}"),
    })
}

/// A BIGINT argument (the signature coerces integers to Int64).
pub enum Int<'a> {
    Scalar(Option<i64>),
    Array(&'a Int64Array),
}

impl<'a> Int<'a> {
    pub fn new(function: &str, position: usize, value: &'a ColumnarValue) -> Result<Int<'a>> {
        Ok(match value {
            ColumnarValue::Scalar(ScalarValue::Int64(v)) => Int::Scalar(*v),
            ColumnarValue::Scalar(ScalarValue::Null) => Int::Scalar(None),
            ColumnarValue::Array(a) if a.data_type() == &DataType::Int64 => Int::Array(a.as_primitive()),
            ColumnarValue::Array(a) if a.data_type() == &DataType::Null => Int::Scalar(None),
            other => {
                return exec_err!("{function}: argument {position} must be BIGINT, got {}", other.data_type());
            }
        })
    }

    #[inline]
    pub fn get(&self, row: usize) -> Option<i64> {
        match self {
            Int::Scalar(v) => *v,
            Int::Array(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }

    /// The values when every row is present (the no-NULL fast path).
    pub fn dense(&self) -> Option<DenseInt<'a>> {
        match self {
            Int::Scalar(Some(v)) => Some(DenseInt::Scalar(*v)),
            Int::Array(a) if a.null_count() == 0 => Some(DenseInt::Values(a.values())),
            _ => None,
        }
    }
}

/// A BIGINT argument without NULLs.
#[derive(Clone, Copy)]
pub enum DenseInt<'a> {
    Scalar(i64),
    Values(&'a [i64]),
}

impl DenseInt<'_> {
    #[inline(always)]
    pub fn at(self, row: usize) -> i64 {
        match self {
            DenseInt::Scalar(v) => v,
            DenseInt::Values(v) => v[row],
        }
    }
}

/// Accepted types: text for the first `texts` arguments, integers after.
pub fn coerce(function: &str, arg_types: &[DataType], texts: usize, ints: usize) -> Result<Vec<DataType>> {
    if arg_types.len() != texts + ints {
        return datafusion::common::plan_err!("{function} takes {} arguments, got {}", texts + ints, arg_types.len());
    }
    arg_types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let ok_text = matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null);
            match (i < texts, t) {
                (true, _) if ok_text => Ok(if t == &DataType::Null { DataType::Utf8 } else { t.clone() }),
                (true, other) => {
                    datafusion::common::plan_err!("{function}: argument {} must be text, got {other}", i + 1)
                }
                (false, t) if t.is_integer() || t == &DataType::Null => Ok(DataType::Int64),
                (false, other) => {
                    datafusion::common::plan_err!("{function}: argument {} must be an integer, got {other}", i + 1)
                }
            }
        })
        .collect()
}

/// Evaluates a constant argument of a table function (literals, casts,
/// arithmetic on literals): table functions receive expressions, not values.
pub fn constant(function: &str, session: &dyn Session, expr: &Expr, position: usize) -> Result<ScalarValue> {
    let context = |e: DataFusionError| e.context(format!("{function}: argument {position} ({expr})"));
    let physical = session.create_physical_expr(expr.clone(), &DFSchema::empty()).map_err(context)?;
    let one_row = RecordBatchOptions::new().with_row_count(Some(1));
    let batch = RecordBatch::try_new_with_options(Arc::new(Schema::empty()), vec![], &one_row)?;
    match physical.evaluate(&batch).map_err(context)? {
        ColumnarValue::Scalar(s) => Ok(s),
        ColumnarValue::Array(a) if a.len() == 1 => ScalarValue::try_from_array(&a, 0),
        _ => plan_err!("{function}: argument {position} must be a constant"),
    }
}

/// A constant text argument (`NULL` → `None`).
pub fn constant_text(function: &str, position: usize, value: &ScalarValue) -> Result<Option<String>> {
    match value {
        ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v) => Ok(v.clone()),
        ScalarValue::Null => Ok(None),
        other => plan_err!("{function}: argument {position} must be text, got {}", other.data_type()),
    }
}

/// A constant integer argument (`NULL` → `None`).
pub fn constant_int(function: &str, position: usize, value: &ScalarValue) -> Result<Option<i64>> {
    if value.is_null() {
        return Ok(None);
    }
    if !value.data_type().is_integer() {
        return plan_err!("{function}: argument {position} must be an integer, got {}", value.data_type());
    }
    match value.cast_to(&DataType::Int64) {
        Ok(ScalarValue::Int64(v)) => Ok(v),
        _ => plan_err!("{function}: argument {position} is {value}, which does not fit a 64-bit signed integer"),
    }
}

/// A constant number argument, integer or float (`NULL` → `None`); `name`
/// is the argument's, for the error.
pub fn constant_number(function: &str, position: usize, name: &str, value: &ScalarValue) -> Result<Option<f64>> {
    if value.is_null() {
        return Ok(None);
    }
    let ty = value.data_type();
    if !(ty.is_integer() || ty.is_floating() || matches!(ty, DataType::Decimal128(..))) {
        return plan_err!("{function}: argument {position} ({name}) must be a number, got {ty}");
    }
    match value.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(v)) => Ok(v),
        _ => plan_err!("{function}: argument {position} ({name}) is {value}, not a number"),
    }
}
