//! Row access to a perf parquet file by column name, with the file, column
//! and row named in every error. Columns are normalised per batch (Utf8 /
//! Int64 / Float64), so files written with narrower, dictionary or view
//! types read the same.
//!
//! A loader names its columns once as constants ([`Col`]), hands them to
//! [`scan`], and per batch asks for each column by that constant
//! ([`Rows::int`], ...): a view looked up by name once per batch, then read
//! per row by index, so no loader depends on the position of a column in a
//! list and no row pays for a name lookup.

use std::path::Path;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::compute::{cast, filter_record_batch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};

use crate::discovery::DataTree;
use crate::error::{Result, TablesError};
use crate::sources::TableSource;

const BATCH_ROWS: usize = 64 * 1024;

/// The column a cross-backend source is filtered on.
const KERNEL_SOURCE: &str = "kernel_source";

/// The type a column is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Int,
    Float,
}

/// What a measured column must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measured {
    /// Anything: not a measurement.
    No,
    /// Finite numbers: the loader raises values below the speed of light
    /// to it, as the spec does, so zero and negative values are data.
    Finite,
    /// Finite numbers above zero: nothing raises them, and a zero or
    /// negative latency would price an op at nothing or less.
    Positive,
}

/// A column the loader wants. Optional columns may be absent from a file or
/// hold nulls (both read as `None`); required ones may not. A measured
/// column rejects values no measurement gives (NaN, infinities, and where
/// nothing raises them, zero and negative latencies) as corrupt data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Col {
    pub name: &'static str,
    pub kind: Kind,
    pub optional: bool,
    pub measured: Measured,
}

impl Col {
    pub const fn text(name: &'static str) -> Col {
        Col { name, kind: Kind::Text, optional: false, measured: Measured::No }
    }
    pub const fn int(name: &'static str) -> Col {
        Col { name, kind: Kind::Int, optional: false, measured: Measured::No }
    }
    /// The `latency` column of a table whose loader does not raise it to the speed of light.
    pub const LATENCY: Col = Col { name: "latency", kind: Kind::Float, optional: false, measured: Measured::Positive };
    /// The `latency` column of a table whose loader raises it to the speed of light.
    pub const LATENCY_FLOORED: Col =
        Col { name: "latency", kind: Kind::Float, optional: false, measured: Measured::Finite };

    /// A latency difference (`computescale_perf`): zero and negative values are data.
    pub const DELTA: Col = Col { name: "latency", kind: Kind::Float, optional: false, measured: Measured::Finite };

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

/// One batch of rows of the columns given to [`scan`].
pub(crate) struct Rows<'a> {
    path: &'a Path,
    cols: &'a [Col],
    arrays: Vec<Arr>,
    /// File row of the batch's first row.
    base: usize,
    /// Filtered batches: the batch row of each kept row (errors name file rows).
    kept: Option<&'a [usize]>,
    len: usize,
}

/// File row of a batch's row `i`.
fn file_row(base: usize, kept: Option<&[usize]>, i: usize) -> usize {
    base + kept.and_then(|k| k.get(i).copied()).unwrap_or(i)
}

/// One column of a batch, found by name: read it per row with
/// [`get`](Cells::get) (optional columns) or [`req`](Cells::req).
pub(crate) struct Cells<'a, A> {
    path: &'a Path,
    col: Col,
    base: usize,
    kept: Option<&'a [usize]>,
    array: Option<&'a A>,
}

impl<A> Cells<'_, A> {
    fn null(&self, i: usize) -> TablesError {
        let row = file_row(self.base, self.kept, i);
        TablesError::corrupt(self.path, Some(self.col.name), Some(row), "null in a required column")
    }
}

macro_rules! cells {
    ($array:ty, $value:ty, |$a:ident, $i:ident| $read:expr) => {
        impl<'a> Cells<'a, $array> {
            /// The cell; `None` for an absent optional column or a null optional cell.
            pub fn get(&self, $i: usize) -> Result<Option<$value>> {
                match self.array {
                    Some($a) if $a.is_null($i) => {
                        if self.col.optional {
                            Ok(None)
                        } else {
                            Err(self.null($i))
                        }
                    }
                    Some($a) => Ok(Some($read)),
                    None => Ok(None),
                }
            }

            /// A required cell.
            pub fn req(&self, i: usize) -> Result<$value> {
                self.get(i)?.ok_or_else(|| self.null(i))
            }
        }
    };
}

cells!(StringArray, &'a str, |a, i| a.value(i));
cells!(Int64Array, i64, |a, i| a.value(i));
cells!(Float64Array, f64, |a, i| a.value(i));

impl Rows<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// The batch's array of `col`, which must be one of the columns given to [`scan`].
    fn array(&self, col: Col, kind: Kind) -> Result<(&Arr, Col)> {
        let index = self.cols.iter().position(|c| c.name == col.name && c.kind == kind).ok_or_else(|| {
            TablesError::Internal(format!("column `{}` was read without being declared to the scan", col.name))
        })?;
        Ok((&self.arrays[index], self.cols[index]))
    }

    fn cells<'s, A>(&'s self, col: Col, array: Option<&'s A>) -> Cells<'s, A> {
        Cells { path: self.path, col, base: self.base, kept: self.kept, array }
    }

    pub fn text(&self, col: Col) -> Result<Cells<'_, StringArray>> {
        match self.array(col, Kind::Text)? {
            (Arr::Text(a), col) => Ok(self.cells(col, Some(a))),
            (_, col) => Ok(self.cells(col, None)),
        }
    }

    pub fn int(&self, col: Col) -> Result<Cells<'_, Int64Array>> {
        match self.array(col, Kind::Int)? {
            (Arr::Int(a), col) => Ok(self.cells(col, Some(a))),
            (_, col) => Ok(self.cells(col, None)),
        }
    }

    pub fn float(&self, col: Col) -> Result<Cells<'_, Float64Array>> {
        match self.array(col, Kind::Float)? {
            (Arr::Float(a), col) => Ok(self.cells(col, Some(a))),
            (_, col) => Ok(self.cells(col, None)),
        }
    }

    /// A row-level error about this file.
    pub fn error(&self, i: usize, column: &str, message: impl std::fmt::Display) -> TablesError {
        TablesError::corrupt(self.path, Some(column), Some(file_row(self.base, self.kept, i)), message)
    }
}

/// Calls `f` on each batch of a table source's rows, in file order. A
/// cross-backend source keeps only the rows whose `kernel_source` its
/// filter lists (a file without that column gives none).
pub(crate) fn scan(
    tree: &DataTree,
    source: &TableSource,
    cols: &[Col],
    f: impl FnMut(&Rows) -> Result<()>,
) -> Result<()> {
    scan_file(tree, &source.path, source.kernel_sources.as_deref(), cols, f)
}

fn scan_file(
    tree: &DataTree,
    path: &Path,
    kernel_filter: Option<&[String]>,
    cols: &[Col],
    mut f: impl FnMut(&Rows) -> Result<()>,
) -> Result<()> {
    let schema = tree.parquet_schema(path)?;
    let mut present: Vec<Option<usize>> = Vec::with_capacity(cols.len());
    for col in cols {
        match schema.index_of(col.name) {
            Ok(i) => present.push(Some(i)),
            Err(_) if col.optional => present.push(None),
            Err(_) => return Err(TablesError::corrupt(path, Some(col.name), None, "the table has no such column")),
        }
    }
    let mut projection: Vec<usize> = present.iter().flatten().copied().collect();
    if kernel_filter.is_some() {
        match schema.index_of(KERNEL_SOURCE) {
            Ok(i) => projection.push(i),
            Err(_) => return Ok(()),
        }
    }
    projection.sort_unstable();
    projection.dedup();
    let mut base = 0usize;
    let mut kept: Vec<usize> = Vec::new();
    for batch in tree.parquet_reader(path, Some(&projection), BATCH_ROWS)? {
        let batch = batch.map_err(|e| TablesError::parquet(path, e))?;
        let rows_in_batch = batch.num_rows();
        let batch = match kernel_filter {
            None => batch,
            Some(filter) => {
                let column = batch.column_by_name(KERNEL_SOURCE).ok_or_else(|| {
                    TablesError::corrupt(path, Some(KERNEL_SOURCE), None, "the table has no such column")
                })?;
                let names = convert(column, &Col::text(KERNEL_SOURCE), path)?;
                let Arr::Text(names) = names else {
                    return Err(TablesError::Internal("kernel_source did not read as text".into()));
                };
                let mask: BooleanArray = (0..names.len())
                    .map(|i| Some(names.is_valid(i) && filter.iter().any(|k| k == names.value(i))))
                    .collect();
                kept.clear();
                kept.extend((0..mask.len()).filter(|&i| mask.value(i)));
                filter_record_batch(&batch, &mask)
                    .map_err(|e| TablesError::corrupt(path, Some(KERNEL_SOURCE), None, e))?
            }
        };
        let mut arrays = Vec::with_capacity(cols.len());
        for (col, index) in cols.iter().zip(&present) {
            if index.is_none() {
                arrays.push(Arr::Absent);
                continue;
            }
            let column = batch
                .column_by_name(col.name)
                .ok_or_else(|| TablesError::corrupt(path, Some(col.name), None, "the table has no such column"))?;
            let array = convert(column, col, path)?;
            let kept_rows = kernel_filter.map(|_| kept.as_slice());
            check_measured(&array, col, path, base, kept_rows)?;
            arrays.push(array);
        }
        let rows =
            Rows { path, cols, arrays, base, kept: kernel_filter.map(|_| kept.as_slice()), len: batch.num_rows() };
        f(&rows)?;
        base += rows_in_batch;
    }
    Ok(())
}

/// A measured value must be one a measurement gives: a NaN or infinity (or
/// an unraised zero or negative latency) would turn every estimate that
/// touches it into garbage instead of an error.
fn check_measured(array: &Arr, col: &Col, path: &Path, base: usize, kept: Option<&[usize]>) -> Result<()> {
    let valid = match col.measured {
        Measured::No => return Ok(()),
        Measured::Finite => |v: f64| v.is_finite(),
        Measured::Positive => |v: f64| v.is_finite() && v > 0.0,
    };
    if let Arr::Float(values) = array
        && let Some(i) = (0..values.len()).find(|&i| !values.is_null(i) && !valid(values.value(i)))
    {
        let what = if col.measured == Measured::Positive { "a finite number above 0" } else { "a finite number" };
        return Err(TablesError::corrupt(
            path,
            Some(col.name),
            Some(file_row(base, kept, i)),
            format!("{} is not {what}", values.value(i)),
        ));
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
        return Err(TablesError::corrupt(path, Some(col.name), None, format!("has type {from}, expected {to}")));
    }
    let cast_err = |e| TablesError::corrupt(path, Some(col.name), None, e);
    let wrong = || TablesError::corrupt(path, Some(col.name), None, format!("did not convert to {to}"));
    let array = cast(column, &to).map_err(cast_err)?;
    Ok(match col.kind {
        Kind::Text => Arr::Text(array.as_string_opt::<i32>().cloned().ok_or_else(wrong)?),
        Kind::Int => Arr::Int(array.as_primitive_opt::<Int64Type>().cloned().ok_or_else(wrong)?),
        Kind::Float => Arr::Float(array.as_primitive_opt::<Float64Type>().cloned().ok_or_else(wrong)?),
    })
}
