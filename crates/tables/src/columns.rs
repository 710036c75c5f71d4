//! Row access to a perf parquet file by column name, with the file and row
//! named in every error. Columns are normalised per batch (Utf8 / Int64 /
//! Float64), so files written with narrower, dictionary or view types read
//! the same.

use std::path::Path;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};

use crate::discovery::DataTree;
use crate::error::{Result, TablesError};

const BATCH_ROWS: usize = 64 * 1024;

/// The type a column is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Int,
    Float,
}

/// A column the loader wants. Optional columns may be absent from a file or
/// hold nulls (both read as `None`); required ones may not.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Col {
    pub name: &'static str,
    pub kind: Kind,
    pub optional: bool,
}

impl Col {
    pub const fn text(name: &'static str) -> Col {
        Col { name, kind: Kind::Text, optional: false }
    }
    pub const fn int(name: &'static str) -> Col {
        Col { name, kind: Kind::Int, optional: false }
    }
    pub const fn float(name: &'static str) -> Col {
        Col { name, kind: Kind::Float, optional: false }
    }
    pub const fn optional(self) -> Col {
        Col { optional: true, ..self }
    }
}

enum Arr {
    Text(StringArray),
    Int(Int64Array),
    Float(Float64Array),
    Absent,
}

/// One batch of rows; `c` indexes the column list given to [`scan`].
pub(crate) struct Rows<'a> {
    path: &'a Path,
    cols: &'a [Col],
    arrays: Vec<Arr>,
    base: usize,
    len: usize,
}

impl Rows<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    fn null(&self, c: usize, i: usize) -> TablesError {
        TablesError::document(self.path, format!("row {}: `{}` is null", self.base + i, self.cols[c].name))
    }

    /// Text cell; `None` for an absent optional column or a null optional cell.
    pub fn text(&self, c: usize, i: usize) -> Result<Option<&str>> {
        match &self.arrays[c] {
            Arr::Text(a) if a.is_null(i) => self.absent_or_null(c, i),
            Arr::Text(a) => Ok(Some(a.value(i))),
            Arr::Absent => Ok(None),
            _ => Err(self.wrong_kind(c)),
        }
    }

    pub fn int(&self, c: usize, i: usize) -> Result<Option<i64>> {
        match &self.arrays[c] {
            Arr::Int(a) if a.is_null(i) => self.absent_or_null(c, i),
            Arr::Int(a) => Ok(Some(a.value(i))),
            Arr::Absent => Ok(None),
            _ => Err(self.wrong_kind(c)),
        }
    }

    pub fn float(&self, c: usize, i: usize) -> Result<Option<f64>> {
        match &self.arrays[c] {
            Arr::Float(a) if a.is_null(i) => self.absent_or_null(c, i),
            Arr::Float(a) => Ok(Some(a.value(i))),
            Arr::Absent => Ok(None),
            _ => Err(self.wrong_kind(c)),
        }
    }

    /// A required text cell.
    pub fn req_text(&self, c: usize, i: usize) -> Result<&str> {
        self.text(c, i)?.ok_or_else(|| self.null(c, i))
    }

    pub fn req_int(&self, c: usize, i: usize) -> Result<i64> {
        self.int(c, i)?.ok_or_else(|| self.null(c, i))
    }

    pub fn req_float(&self, c: usize, i: usize) -> Result<f64> {
        self.float(c, i)?.ok_or_else(|| self.null(c, i))
    }

    /// A row-level error about this file.
    pub fn error(&self, i: usize, message: impl std::fmt::Display) -> TablesError {
        TablesError::document(self.path, format!("row {}: {message}", self.base + i))
    }

    fn absent_or_null<T>(&self, c: usize, i: usize) -> Result<Option<T>> {
        if self.cols[c].optional { Ok(None) } else { Err(self.null(c, i)) }
    }

    fn wrong_kind(&self, c: usize) -> TablesError {
        TablesError::document(self.path, format!("column `{}` read with the wrong type", self.cols[c].name))
    }
}

/// Calls `f` on each batch of the file's rows, in file order.
pub(crate) fn scan(tree: &DataTree, path: &Path, cols: &[Col], mut f: impl FnMut(&Rows) -> Result<()>) -> Result<()> {
    let schema = tree.parquet_schema(path)?;
    let mut present: Vec<Option<usize>> = Vec::with_capacity(cols.len());
    for col in cols {
        match schema.index_of(col.name) {
            Ok(i) => present.push(Some(i)),
            Err(_) if col.optional => present.push(None),
            Err(_) => return Err(TablesError::document(path, format!("table has no `{}` column", col.name))),
        }
    }
    let mut projection: Vec<usize> = present.iter().flatten().copied().collect();
    projection.sort_unstable();
    projection.dedup();
    let mut base = 0usize;
    for batch in tree.parquet_reader(path, Some(&projection), BATCH_ROWS)? {
        let batch = batch.map_err(|e| TablesError::parquet(path, e))?;
        let mut arrays = Vec::with_capacity(cols.len());
        for (col, index) in cols.iter().zip(&present) {
            if index.is_none() {
                arrays.push(Arr::Absent);
                continue;
            }
            let column = batch
                .column_by_name(col.name)
                .ok_or_else(|| TablesError::document(path, format!("table has no `{}` column", col.name)))?;
            arrays.push(convert(column, col, path)?);
        }
        let rows = Rows { path, cols, arrays, base, len: batch.num_rows() };
        f(&rows)?;
        base += batch.num_rows();
    }
    Ok(())
}

fn convert(column: &ArrayRef, col: &Col, path: &Path) -> Result<Arr> {
    let from = column.data_type();
    let (to, ok) = match col.kind {
        Kind::Text => (
            DataType::Utf8,
            matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
                || matches!(from, DataType::Dictionary(_, v) if v.is_string()),
        ),
        Kind::Int => (DataType::Int64, from.is_integer()),
        Kind::Float => (DataType::Float64, from.is_numeric()),
    };
    // A column of nulls only (written without a type) reads as absent values.
    if !ok && from != &DataType::Null {
        return Err(TablesError::document(path, format!("column `{}` has type {from}, expected {to}", col.name)));
    }
    let cast_err = |e| TablesError::parquet(path, format!("column `{}`: {e}", col.name));
    let wrong = || TablesError::parquet(path, format!("column `{}` did not convert", col.name));
    let array = cast(column, &to).map_err(cast_err)?;
    Ok(match col.kind {
        Kind::Text => Arr::Text(array.as_string_opt::<i32>().cloned().ok_or_else(wrong)?),
        Kind::Int => Arr::Int(array.as_primitive_opt::<Int64Type>().cloned().ok_or_else(wrong)?),
        Kind::Float => Arr::Float(array.as_primitive_opt::<Float64Type>().cloned().ok_or_else(wrong)?),
    })
}
