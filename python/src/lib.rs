//! `aicsql._internal`: the Rust functions and the `aic` catalog handed to
//! datafusion-python through DataFusion's FFI (PyCapsules), plus the bridge
//! that lets the pure-Python spec path (`aicsql.spec`) run as SQL functions
//! that see the session's `aic.*` settings.
//!
//! Nothing here computes a number: the estimators live in `aicsql-udfs` and
//! `aicsql-tables`, the Python path in `aicsql/spec`.

mod arrow_bridge;
mod capsules;
mod python_scalar;
mod python_table;
mod runtime;
mod settings;

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use aicsql_catalog::AicCatalog;
use aicsql_tables::DataTree;
use datafusion::logical_expr::ScalarUDF;

use crate::capsules::{Catalog, ScalarFunction, TableFunction};
use crate::python_scalar::PythonScalar;
use crate::python_table::{Arguments, PythonTable};
use crate::settings::Settings;

/// One mounted data tree and the functions and catalog built over it.
#[pyclass(frozen, module = "aicsql._internal")]
struct Library {
    tree: Arc<DataTree>,
}

#[pymethods]
impl Library {
    #[new]
    fn new(data_dirs: Vec<PathBuf>) -> PyResult<Self> {
        let tree = DataTree::open(&data_dirs).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self { tree: Arc::new(tree) })
    }

    /// Whether the mounted directories are unchanged since the tree was
    /// opened (see `DataTree::is_current`).
    fn is_current(&self) -> bool {
        self.tree.is_current()
    }

    /// How many tables, systems and model configs of each kind the tree has loaded.
    fn loaded(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let s = self.tree.cache().stats();
        [
            ("gemm", s.gemm),
            ("context_attention", s.context_attention),
            ("generation_attention", s.generation_attention),
            ("custom_allreduce", s.custom_allreduce),
            ("nccl", s.nccl),
            ("moe", s.moe),
            ("systems", s.systems),
            ("model_configs", s.model_configs),
        ]
        .into_iter()
        .collect()
    }

    /// The mounted data roots, as directories.
    fn roots(&self) -> Vec<PathBuf> {
        self.tree.roots().iter().map(|r| r.dir.clone()).collect()
    }

    fn scalar_functions(&self) -> Vec<ScalarFunction> {
        aicsql_udfs::scalar_functions(&self.tree).into_iter().map(|udf| ScalarFunction::new(Arc::new(udf))).collect()
    }

    fn table_functions(&self) -> Vec<(String, TableFunction)> {
        aicsql_udfs::table_functions(&self.tree)
            .into_iter()
            .map(|(name, function)| (name.to_string(), TableFunction::new(function)))
            .collect()
    }

    fn catalog(&self) -> Catalog {
        Catalog::new(Arc::new(AicCatalog::new(Arc::clone(&self.tree))))
    }

    /// A scalar function `name` computed by the Python callable `func`, with
    /// the signature and return type of the Rust function `like`:
    /// `func(settings: dict[str, str], *arrays: pyarrow.Array) -> pyarrow.Array`.
    fn python_scalar(&self, name: &str, like: &str, func: Py<PyAny>) -> PyResult<ScalarFunction> {
        let like = aicsql_udfs::scalar_functions(&self.tree)
            .into_iter()
            .find(|udf| udf.name() == like)
            .ok_or_else(|| PyValueError::new_err(format!("no Rust scalar function named '{like}'")))?;
        let udf = ScalarUDF::new_from_impl(PythonScalar::new(name, like, func));
        Ok(ScalarFunction::new(Arc::new(udf)))
    }

    /// A table function `name` computed by the Python callable `func`, with
    /// the output columns of the Rust table function `like`:
    /// `func(settings: dict[str, str], *args) -> pyarrow.RecordBatch`.
    fn python_table_function(&self, name: &str, like: &str, func: Py<PyAny>) -> PyResult<TableFunction> {
        let (schema, arguments) = match like {
            aicsql_udfs::gemm_trace::NAME => (
                aicsql_udfs::GemmTrace::schema(),
                Arguments { names: &aicsql_udfs::gemm_trace::ARGS, texts: 2, arities: &[5], floats: usize::MAX },
            ),
            aicsql_udfs::engine_step::NAME => (
                aicsql_udfs::EngineStep::schema(),
                Arguments {
                    names: &aicsql_udfs::step_args::ARGS,
                    texts: 3,
                    arities: &aicsql_udfs::step_args::ARITIES,
                    floats: usize::MAX,
                },
            ),
            aicsql_udfs::search_agg::NAME => (aicsql_udfs::SearchAgg::schema(), SEARCH),
            aicsql_udfs::search_disagg::NAME => (aicsql_udfs::SearchDisagg::schema(), SEARCH),
            aicsql_udfs::search_default::NAME => (aicsql_udfs::SearchDefault::schema(), SEARCH),
            aicsql_udfs::search_recommend::NAME => (
                aicsql_udfs::SearchRecommend::schema(),
                // model, db, isl, osl, prefix, the two limits, one or two load targets
                Arguments { names: &aicsql_udfs::search_recommend::ARGS, texts: 2, arities: &[8, 9], floats: 5 },
            ),
            other => return Err(PyValueError::new_err(format!("no Rust table function named '{other}'"))),
        };
        Ok(TableFunction::new(Arc::new(PythonTable::new(name, schema, arguments, func))))
    }
}

/// The search functions' arguments: model, db, four counts, the two limits.
const SEARCH: Arguments = Arguments { names: &aicsql_udfs::search_args::ARGS, texts: 2, arities: &[8], floats: 6 };

/// The local directories for `roots` (paths, `file://`, `s3://`, `gs://`,
/// `http(s)://`): remote trees mirrored into `cache` first (only changed
/// files), with `options` (`aws.region`, ...) for their stores. Each
/// mirror's one-line summary, and the warning when a complete mirror is
/// used offline, go to `log(line)` when given. Runs without the GIL.
#[pyfunction]
#[pyo3(signature = (roots, options, cache, log=None))]
fn mount_roots(
    py: Python<'_>,
    roots: Vec<String>,
    options: Vec<(String, String)>,
    cache: PathBuf,
    log: Option<Py<PyAny>>,
) -> PyResult<Vec<PathBuf>> {
    let lines = py.detach(|| {
        let mut lines = Vec::new();
        let mut keep = |line: &str| lines.push(line.to_string());
        runtime::handle()
            .block_on(aicsql_remote::mount_roots(&roots, &options, &cache, &mut keep))
            .map(|dirs| (dirs, lines))
    });
    let (dirs, lines) = lines.map_err(remote_error)?;
    if let Some(log) = log {
        for line in lines {
            log.call1(py, (line,))?;
        }
    }
    Ok(dirs)
}

/// Remote failures as Python exceptions a caller can tell apart: the
/// credential and permission ones as `PermissionError`, a missing bucket,
/// prefix or file as `FileNotFoundError`, an unreachable store as
/// `ConnectionError`, a bad URL or option as `ValueError`, the rest
/// (a corrupt file, the cache) as `OSError`. The message names the URL
/// and what to do.
fn remote_error(e: aicsql_remote::RemoteError) -> PyErr {
    use aicsql_remote::RemoteError as E;
    use pyo3::exceptions::{PyConnectionError, PyFileNotFoundError, PyOSError, PyPermissionError};
    let text = e.to_string();
    match e {
        E::BadUrl { .. } | E::UnknownScheme { .. } | E::BadOption { .. } => PyValueError::new_err(text),
        E::Unauthenticated { .. } | E::AccessDenied { .. } => PyPermissionError::new_err(text),
        E::NotFound { .. } => PyFileNotFoundError::new_err(text),
        E::Unreachable { .. } => PyConnectionError::new_err(text),
        _ => PyOSError::new_err(text),
    }
}

#[pymodule]
fn _internal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The DataFusion major this module was built against; the package
    // refuses to import next to a datafusion wheel of another major.
    m.add("DATAFUSION_MAJOR", datafusion_ffi::version())?;
    m.add_class::<Library>()?;
    m.add_function(wrap_pyfunction!(mount_roots, m)?)?;
    m.add_class::<Settings>()?;
    m.add_class::<ScalarFunction>()?;
    m.add_class::<TableFunction>()?;
    m.add_class::<Catalog>()?;
    Ok(())
}
