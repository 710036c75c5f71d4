//! The superset schema of a table kind over all its files.

use datafusion::arrow::datatypes::DataType;

/// Normalises a file column type to the type the table exposes: all string
/// flavours are `Utf8` (files disagree between `string` and `large_string`).
pub(crate) fn table_type(t: &DataType) -> DataType {
    match t {
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        other => other.clone(),
    }
}

/// The common type of a column seen with two types in two files, if any.
pub(crate) fn widen(a: &DataType, b: &DataType) -> Option<DataType> {
    let (a, b) = (table_type(a), table_type(b));
    if a == b {
        return Some(a);
    }
    if a.is_integer() && b.is_integer() {
        return Some(DataType::Int64);
    }
    if a.is_numeric() && b.is_numeric() {
        return Some(DataType::Float64);
    }
    None
}
