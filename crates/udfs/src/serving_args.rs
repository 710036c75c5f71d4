//! Arguments of the serving estimates: text model and database, parallel
//! layouts given as an integer tp or the spec's label (`tp8pp1dp1etp1ep8`),
//! and BIGINT sizes, read row by row without per-row allocation.

use datafusion::arrow::array::{Array, ArrayRef, Float64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{ColumnarValue, Signature, Volatility};

use aicsql_serving::Parallel;

use crate::args::{Int, Text};

/// What each argument position holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Text,
    Parallel,
    Int,
    /// A number (integer or float), read as DOUBLE.
    Float,
}

/// A serving function's arguments: names and slots in order, and the
/// argument counts it accepts.
pub(crate) struct Arguments {
    pub names: &'static [&'static str],
    pub slots: &'static [Slot],
    pub counts: &'static [usize],
}

impl Arguments {
    pub(crate) fn signature(&self) -> Signature {
        Signature::user_defined(Volatility::Stable)
    }

    fn usage(&self, function: &str) -> String {
        format!("{function}({})", self.names.join(", "))
    }

    /// Text stays text, integers become BIGINT, a parallel argument may be either.
    pub(crate) fn coerce(&self, function: &str, types: &[DataType]) -> Result<Vec<DataType>> {
        if !self.counts.contains(&types.len()) {
            let counts: Vec<String> = self.counts.iter().map(ToString::to_string).collect();
            return plan_err!("{} takes {} arguments, got {}", self.usage(function), counts.join(", "), types.len());
        }
        let is_text = |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        types
            .iter()
            .zip(self.slots)
            .zip(self.names)
            .map(|((t, slot), name)| match slot {
                Slot::Text if is_text(t) => Ok(t.clone()),
                Slot::Text if t == &DataType::Null => Ok(DataType::Utf8),
                Slot::Text => plan_err!("{function}: argument {name} must be text, got {t}"),
                Slot::Parallel if is_text(t) => Ok(t.clone()),
                Slot::Parallel if t.is_integer() || t == &DataType::Null => Ok(DataType::Int64),
                Slot::Parallel => plan_err!(
                    "{function}: argument {name} must be an integer tp or a parallel label like 'tp8pp1dp1etp1ep8', got {t}"
                ),
                Slot::Int if t.is_integer() || t == &DataType::Null => Ok(DataType::Int64),
                Slot::Int => plan_err!("{function}: argument {name} must be an integer, got {t}"),
                Slot::Float if t.is_numeric() || t == &DataType::Null => Ok(DataType::Float64),
                Slot::Float => plan_err!("{function}: argument {name} must be a number, got {t}"),
            })
            .collect()
    }
}

/// A parallel argument's column.
enum ParallelArg<'a> {
    Tp(Int<'a>),
    Label(Text<'a>),
}

enum Column<'a> {
    Text(Text<'a>),
    Parallel(ParallelArg<'a>),
    Int(Int<'a>),
    Float(Float<'a>),
}

/// A DOUBLE argument: one value for the batch, or one per row.
enum Float<'a> {
    Scalar(Option<f64>),
    Array(&'a Float64Array),
}

impl<'a> Float<'a> {
    fn new(function: &str, position: usize, value: &'a ColumnarValue) -> Result<Float<'a>> {
        match value {
            ColumnarValue::Scalar(ScalarValue::Float64(v)) => Ok(Float::Scalar(*v)),
            ColumnarValue::Scalar(ScalarValue::Null) => Ok(Float::Scalar(None)),
            ColumnarValue::Array(a) => match a.as_any().downcast_ref::<Float64Array>() {
                Some(a) => Ok(Float::Array(a)),
                None => exec_err!("{function}: argument {position} must be DOUBLE, got {}", a.data_type()),
            },
            ColumnarValue::Scalar(other) => {
                exec_err!("{function}: argument {position} must be DOUBLE, got {}", other.data_type())
            }
        }
    }

    fn get(&self, row: usize) -> Option<f64> {
        match self {
            Float::Scalar(v) => *v,
            Float::Array(a) => (!a.is_null(row)).then(|| a.value(row)),
        }
    }
}

/// One batch of calls.
pub(crate) struct Calls<'a> {
    function: &'static str,
    names: &'static [&'static str],
    columns: Vec<Column<'a>>,
    /// Every argument is a scalar: one call, one scalar result.
    pub scalar: bool,
    pub rows: usize,
}

impl<'a> Calls<'a> {
    pub(crate) fn new(
        function: &'static str,
        arguments: &Arguments,
        values: &'a [ColumnarValue],
        number_rows: usize,
    ) -> Result<Self> {
        if !arguments.counts.contains(&values.len()) {
            return exec_err!("{} got {} arguments", arguments.usage(function), values.len());
        }
        let columns = values
            .iter()
            .zip(arguments.slots)
            .enumerate()
            .map(|(i, (v, slot))| {
                Ok(match slot {
                    Slot::Text => Column::Text(Text::new(function, i + 1, v)?),
                    Slot::Int => Column::Int(Int::new(function, i + 1, v)?),
                    Slot::Float => Column::Float(Float::new(function, i + 1, v)?),
                    Slot::Parallel => Column::Parallel(match v.data_type() {
                        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                            ParallelArg::Label(Text::new(function, i + 1, v)?)
                        }
                        _ => ParallelArg::Tp(Int::new(function, i + 1, v)?),
                    }),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let scalar = values.iter().all(|v| matches!(v, ColumnarValue::Scalar(_)));
        Ok(Self { function, names: arguments.names, columns, scalar, rows: if scalar { 1 } else { number_rows } })
    }

    /// Text argument `position` at `row` (`None`: NULL).
    pub(crate) fn text(&self, position: usize, row: usize) -> Option<&'a str> {
        match self.columns.get(position) {
            Some(Column::Text(t)) => t.get(row),
            _ => None,
        }
    }

    /// Integer argument `position` at `row` as a u32 (`Ok(None)`: NULL or absent).
    pub(crate) fn int(&self, position: usize, row: usize) -> Result<Option<u32>> {
        let value = match self.columns.get(position) {
            Some(Column::Int(i)) => i.get(row),
            _ => None,
        };
        value.map(|v| self.narrow(position, v)).transpose()
    }

    /// Number argument `position` at `row` (`None`: NULL or absent).
    pub(crate) fn float(&self, position: usize, row: usize) -> Option<f64> {
        match self.columns.get(position) {
            Some(Column::Float(f)) => f.get(row),
            _ => None,
        }
    }

    fn narrow(&self, position: usize, value: i64) -> Result<u32> {
        u32::try_from(value).map_err(|_| {
            DataFusionError::Execution(format!(
                "{}: {} = {value} is out of range (0 ..= {})",
                self.function,
                self.names[position],
                u32::MAX
            ))
        })
    }

    /// The parallel layout at `position` with the MoE widths of positions
    /// `moe` (an integer tp takes them; a label carries its own, and a
    /// width given beside it must repeat the label's). `Ok(None)`: NULL.
    pub(crate) fn parallel(&self, position: usize, moe: [usize; 2], row: usize) -> Result<Option<Parallel>> {
        let (moe_tp, moe_ep) = (self.int(moe[0], row)?, self.int(moe[1], row)?);
        match self.columns.get(position) {
            Some(Column::Parallel(ParallelArg::Tp(i))) => {
                let Some(tp) = i.get(row) else { return Ok(None) };
                Ok(Some(Parallel::tensor(self.narrow(position, tp)?, moe_tp, moe_ep)))
            }
            Some(Column::Parallel(ParallelArg::Label(t))) => {
                let Some(label) = t.get(row) else { return Ok(None) };
                let p = Parallel::parse(label).map_err(|e| {
                    DataFusionError::Execution(format!("{}: {}: {e}", self.function, self.names[position]))
                })?;
                // A label carries the MoE widths (`None`: unset, inferred
                // by the spec); an argument beside it may only repeat them.
                for (given, width, name) in [(moe_tp, p.moe_tp, moe[0]), (moe_ep, p.moe_ep, moe[1])] {
                    if let Some(g) = given
                        && width != Some(g)
                    {
                        return exec_err!(
                            "{}: {} = {g} contradicts {} '{label}' (a label carries its own MoE widths)",
                            self.function,
                            self.names[name],
                            self.names[position]
                        );
                    }
                }
                Ok(Some(p))
            }
            _ => exec_err!("{}: argument {} is not a parallel layout", self.function, self.names[position]),
        }
    }

    /// The result column: a scalar for a batch of scalars.
    pub(crate) fn finish(&self, array: ArrayRef) -> Result<ColumnarValue> {
        Ok(if self.scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}
