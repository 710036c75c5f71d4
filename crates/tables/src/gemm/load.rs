//! Reading one quant slice of a GEMM table from its source files.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use arrow::array::{Array, AsArray, Float64Array, Int64Array, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatch;

use crate::discovery::DataTree;
use crate::error::{Result, TablesError};
use crate::gemm::sources::GemmSource;
use crate::sol::MAX_GEMM_DIM;

/// One measured point, after first-wins.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GemmRow {
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub latency: f64,
}

/// The slice's rows in first-appearance order and every `gemm_dtype` the
/// sources hold (what the spec lists as "supported gemm modes").
pub(crate) struct Slice {
    pub rows: Vec<GemmRow>,
    pub dtypes: BTreeSet<String>,
}

const COLUMNS: [&str; 5] = ["gemm_dtype", "m", "n", "k", "latency"];
const BATCH_ROWS: usize = 64 * 1024;

/// Appends the rows of `slice` from every source in priority order; a key
/// `(m, n, k)` seen before keeps its first value. Records on each source how
/// many keys it added.
pub(crate) fn read_slice(tree: &DataTree, sources: &mut [GemmSource], slice: &str) -> Result<Slice> {
    let mut rows = Vec::new();
    let mut seen: HashSet<(i64, i64, i64)> = HashSet::new();
    let mut dtypes = BTreeSet::new();
    let mut slice_present = false;
    for source in sources.iter_mut() {
        let path = source.path.as_path();
        let schema = tree.parquet_schema(path)?;
        let mut indices = [0usize; 5];
        for (slot, name) in indices.iter_mut().zip(COLUMNS) {
            *slot = schema
                .index_of(name)
                .map_err(|_| TablesError::document(path, format!("GEMM table has no `{name}` column")))?;
        }
        let before = rows.len();
        let mut row_base = 0usize;
        for batch in tree.parquet_reader(path, Some(&indices), BATCH_ROWS)? {
            let batch = batch.map_err(|e| TablesError::parquet(path, e))?;
            let columns = Columns::of(&batch, path)?;
            for i in 0..batch.num_rows() {
                let at = || row_base + i;
                let dtype = columns.dtype(i, path, at())?;
                if dtype != slice {
                    if !dtypes.contains(dtype) {
                        dtypes.insert(dtype.to_string());
                    }
                    continue;
                }
                slice_present = true;
                let row = columns.row(i, path, at())?;
                if seen.insert((row.m, row.n, row.k)) {
                    rows.push(row);
                }
            }
            row_base += batch.num_rows();
        }
        source.new_keys = rows.len() - before;
    }
    if slice_present {
        dtypes.insert(slice.to_string());
    }
    Ok(Slice { rows, dtypes })
}

/// The five columns of a batch, normalised to Utf8 / Int64 / Float64 so
/// files written with narrower, dictionary or view types read the same.
struct Columns {
    dtype: StringArray,
    m: Int64Array,
    n: Int64Array,
    k: Int64Array,
    latency: Float64Array,
}

impl Columns {
    fn of(batch: &RecordBatch, path: &Path) -> Result<Columns> {
        let get = |name: &str, to: &DataType| {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| TablesError::document(path, format!("GEMM table has no `{name}` column")))?;
            let from = column.data_type();
            let castable = match to {
                DataType::Utf8 => {
                    matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
                        || matches!(from, DataType::Dictionary(_, v) if v.is_string())
                }
                DataType::Int64 => from.is_integer(),
                _ => from.is_numeric(),
            };
            if !castable {
                return Err(TablesError::document(path, format!("column `{name}` has type {from}, expected {to}")));
            }
            cast(column, to).map_err(|e| TablesError::parquet(path, format!("column `{name}`: {e}")))
        };
        let wrong = |name: &str| TablesError::parquet(path, format!("column `{name}` did not convert"));
        let int = |name: &str| -> Result<Int64Array> {
            get(name, &DataType::Int64)?.as_primitive_opt::<Int64Type>().cloned().ok_or_else(|| wrong(name))
        };
        Ok(Columns {
            dtype: get("gemm_dtype", &DataType::Utf8)?
                .as_string_opt::<i32>()
                .cloned()
                .ok_or_else(|| wrong("gemm_dtype"))?,
            m: int("m")?,
            n: int("n")?,
            k: int("k")?,
            latency: get("latency", &DataType::Float64)?
                .as_primitive_opt::<Float64Type>()
                .cloned()
                .ok_or_else(|| wrong("latency"))?,
        })
    }

    fn dtype(&self, i: usize, path: &Path, row: usize) -> Result<&str> {
        if self.dtype.is_null(i) {
            return Err(null_cell(path, "gemm_dtype", row));
        }
        Ok(self.dtype.value(i))
    }

    fn row(&self, i: usize, path: &Path, row: usize) -> Result<GemmRow> {
        let dim = |values: &Int64Array, name: &str| -> Result<i64> {
            if values.is_null(i) {
                return Err(null_cell(path, name, row));
            }
            let v = values.value(i);
            if !(0..=MAX_GEMM_DIM).contains(&v) {
                return Err(TablesError::document(
                    path,
                    format!("row {row}: `{name}` = {v} is outside 0..={MAX_GEMM_DIM}"),
                ));
            }
            Ok(v)
        };
        if self.latency.is_null(i) {
            return Err(null_cell(path, "latency", row));
        }
        Ok(GemmRow {
            m: dim(&self.m, "m")?,
            n: dim(&self.n, "n")?,
            k: dim(&self.k, "k")?,
            latency: self.latency.value(i),
        })
    }
}

fn null_cell(path: &Path, column: &str, row: usize) -> TablesError {
    TablesError::document(path, format!("row {row}: `{column}` is null"))
}
