//! Reading one quant slice of a GEMM table from its source files.

use std::collections::BTreeSet;

use foldhash::HashSet;

use arrow::array::Int64Array;

use crate::columns::{Cells, Col, Rows, scan};
use crate::discovery::DataTree;
use crate::error::Result;
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

const GEMM_DTYPE: Col = Col::text("gemm_dtype");
const M: Col = Col::int("m");
const N: Col = Col::int("n");
const K: Col = Col::int("k");
const COLUMNS: [Col; 5] = [GEMM_DTYPE, M, N, K, Col::LATENCY_FLOORED];

/// Appends the rows of `slice` from every source in priority order; a key
/// `(m, n, k)` seen before keeps its first value. Records on each source how
/// many keys it added.
pub(crate) fn read_slice(tree: &DataTree, sources: &mut [GemmSource], slice: &str) -> Result<Slice> {
    let mut rows = Vec::new();
    let mut seen: HashSet<(i64, i64, i64)> = HashSet::default();
    let mut dtypes = BTreeSet::new();
    let mut slice_present = false;
    for source in sources.iter_mut() {
        let before = rows.len();
        scan(tree, source, &COLUMNS, |batch| {
            let dtype_cells = batch.text(GEMM_DTYPE)?;
            let (m, n, k, latency) = (batch.int(M)?, batch.int(N)?, batch.int(K)?, batch.float(Col::LATENCY_FLOORED)?);
            for i in 0..batch.len() {
                let dtype = dtype_cells.req(i)?;
                if dtype != slice {
                    if !dtypes.contains(dtype) {
                        dtypes.insert(dtype.to_string());
                    }
                    continue;
                }
                slice_present = true;
                let row = GemmRow {
                    m: dim(batch, &m, M, i)?,
                    n: dim(batch, &n, N, i)?,
                    k: dim(batch, &k, K, i)?,
                    latency: latency.req(i)?,
                };
                if seen.insert((row.m, row.n, row.k)) {
                    rows.push(row);
                }
            }
            Ok(())
        })?;
        source.new_keys = rows.len() - before;
    }
    if slice_present {
        dtypes.insert(slice.to_string());
    }
    Ok(Slice { rows, dtypes })
}

/// A GEMM dimension of row `i`, inside the range every SOL formula handles exactly.
fn dim(batch: &Rows, cells: &Cells<Int64Array>, col: Col, i: usize) -> Result<i64> {
    let v = cells.req(i)?;
    if !(0..=MAX_GEMM_DIM).contains(&v) {
        return Err(batch.error(i, col.name, format!("{v} is outside 0..={MAX_GEMM_DIM}")));
    }
    Ok(v)
}
