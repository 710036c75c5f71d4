//! Shared set-up: the published data and the spec's goldens.

#![allow(dead_code)]

use std::fs::File;
use std::path::PathBuf;
use std::sync::OnceLock;

use aicsql_tables::DataTree;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub mod gemm_check;
pub mod step_goldens;

/// The data cache the fetch step fills: `$AICSQL_DATA`, else
/// `$XDG_CACHE_HOME/aicsql`, else `~/.cache/aicsql`.
pub fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"))
}

/// One mounted tree per test binary.
pub fn tree() -> &'static DataTree {
    static TREE: OnceLock<DataTree> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = data_dir();
        DataTree::open(&[&dir]).unwrap_or_else(|e| {
            panic!("perf data not found in {} ({e}); run `cargo run -- data fetch` first", dir.display())
        })
    })
}

/// `$AICSQL_GOLDENS`, else the repository's own copy, `tests/goldens`.
pub fn goldens_dir() -> PathBuf {
    std::env::var_os("AICSQL_GOLDENS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/goldens"))
}

/// Typed readers over the columns of one goldens batch. Each reader casts
/// its column once; `text` keeps empty strings (callers that read them as
/// absent filter them).
pub struct Columns<'a> {
    batch: &'a RecordBatch,
}

impl Columns<'_> {
    pub fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    pub fn has(&self, name: &str) -> bool {
        self.batch.column_by_name(name).is_some()
    }

    fn column(&self, name: &str, to: &DataType) -> ArrayRef {
        let c = self.batch.column_by_name(name).unwrap_or_else(|| panic!("goldens lack column {name}"));
        cast(c, to).unwrap_or_else(|e| panic!("goldens column {name}: {e}"))
    }

    pub fn text(&self, name: &str) -> impl Fn(usize) -> Option<String> + use<> {
        let a = self.column(name, &DataType::Utf8).as_string::<i32>().clone();
        move |i| (!a.is_null(i)).then(|| a.value(i).to_string())
    }

    pub fn int(&self, name: &str) -> impl Fn(usize) -> i64 + use<> {
        let a = self.column(name, &DataType::Int64).as_primitive::<Int64Type>().clone();
        move |i| a.value(i)
    }

    pub fn float(&self, name: &str) -> impl Fn(usize) -> Option<f64> + use<> {
        let a = self.column(name, &DataType::Float64).as_primitive::<Float64Type>().clone();
        move |i| (!a.is_null(i)).then(|| a.value(i))
    }
}

/// Calls `each` with the column readers of every batch of the goldens file
/// `name` (in `goldens_dir()`); panics naming the file if it cannot be read.
pub fn for_each_golden_batch(name: &str, mut each: impl FnMut(&Columns<'_>)) {
    let path = goldens_dir().join(name);
    let file = File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.with_batch_size(8192).build())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for batch in reader {
        let batch = batch.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        each(&Columns { batch: &batch });
    }
}

/// One row of `gemm_goldens.parquet`.
#[derive(Debug, Clone)]
pub struct GemmGolden {
    pub row_id: String,
    pub system: String,
    pub backend: String,
    pub version: String,
    pub quant: String,
    pub gemm_dtype: Option<String>,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub class: String,
    pub latency_ms: Option<f64>,
    pub miss_reason: Option<String>,
    pub miss_detail: Option<String>,
    pub latency_ms_shared: Option<f64>,
    pub miss_reason_shared: Option<String>,
    pub shared_sources: Option<String>,
}

pub fn gemm_goldens() -> Vec<GemmGolden> {
    let mut rows = Vec::new();
    for_each_golden_batch("gemm_goldens.parquet", |c| {
        // An empty string in these files means "absent".
        let text = |name: &str| {
            let f = c.text(name);
            move |i: usize| f(i).filter(|s| !s.is_empty())
        };
        let (int, float) = (|name: &str| c.int(name), |name: &str| c.float(name));
        let (row_id, system, backend, version, quant, dtype) =
            (text("row_id"), text("system"), text("backend"), text("version"), text("quant"), text("gemm_dtype"));
        let (m, n, k, class) = (int("m"), int("n"), int("k"), text("class"));
        let (lat, reason, detail) = (float("latency_ms"), text("miss_reason"), text("miss_detail"));
        let (lat_shared, reason_shared, sources) =
            (float("latency_ms_shared"), text("miss_reason_shared"), text("shared_sources"));
        let s = |v: Option<String>| v.unwrap_or_default();
        for i in 0..c.rows() {
            rows.push(GemmGolden {
                row_id: s(row_id(i)),
                system: s(system(i)),
                backend: s(backend(i)),
                version: s(version(i)),
                quant: s(quant(i)),
                gemm_dtype: dtype(i),
                m: m(i),
                n: n(i),
                k: k(i),
                class: s(class(i)),
                latency_ms: lat(i),
                miss_reason: reason(i),
                miss_detail: detail(i),
                latency_ms_shared: lat_shared(i),
                miss_reason_shared: reason_shared(i),
                shared_sources: sources(i),
            });
        }
    });
    rows
}
