//! Python objects that hand a Rust function or catalog to datafusion-python
//! as an FFI capsule (`__datafusion_scalar_udf__`,
//! `__datafusion_table_function__`, `__datafusion_catalog_provider__`).

use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, TableFunctionImpl};
use datafusion::logical_expr::ScalarUDF;
use datafusion_ffi::catalog_provider::FFI_CatalogProvider;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::udf::FFI_ScalarUDF;
use datafusion_ffi::udtf::FFI_TableFunction;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

use crate::runtime;

#[pyclass(frozen, module = "aicsql._internal")]
pub struct ScalarFunction {
    udf: Arc<ScalarUDF>,
}

impl ScalarFunction {
    pub fn new(udf: Arc<ScalarUDF>) -> Self {
        Self { udf }
    }
}

#[pymethods]
impl ScalarFunction {
    #[getter]
    fn name(&self) -> &str {
        self.udf.name()
    }

    fn __datafusion_scalar_udf__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        PyCapsule::new_with_value(py, FFI_ScalarUDF::from(Arc::clone(&self.udf)), c"datafusion_scalar_udf")
    }

    fn __repr__(&self) -> String {
        format!("ScalarFunction({})", self.udf.name())
    }
}

#[pyclass(frozen, module = "aicsql._internal")]
pub struct TableFunction {
    function: Arc<dyn TableFunctionImpl>,
}

impl TableFunction {
    pub fn new(function: Arc<dyn TableFunctionImpl>) -> Self {
        Self { function }
    }
}

#[pymethods]
impl TableFunction {
    fn __datafusion_table_function__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = logical_codec(&session)?;
        let ffi = FFI_TableFunction::new_with_ffi_codec(Arc::clone(&self.function), Some(runtime::handle()), codec);
        PyCapsule::new_with_value(py, ffi, c"datafusion_table_function")
    }
}

#[pyclass(frozen, module = "aicsql._internal")]
pub struct Catalog {
    provider: Arc<dyn CatalogProvider>,
}

impl Catalog {
    pub fn new(provider: Arc<dyn CatalogProvider>) -> Self {
        Self { provider }
    }
}

#[pymethods]
impl Catalog {
    fn __datafusion_catalog_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = logical_codec(&session)?;
        let ffi = FFI_CatalogProvider::new_with_ffi_codec(Arc::clone(&self.provider), Some(runtime::handle()), codec);
        PyCapsule::new_with_value(py, ffi, c"datafusion_catalog_provider")
    }
}

/// The host session's logical extension codec: providers and table
/// functions serialise expressions with it when they cross the boundary.
fn logical_codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    const NAME: &std::ffi::CStr = c"datafusion_logical_extension_codec";
    let capsule = if session.hasattr("__datafusion_logical_extension_codec__")? {
        session.call_method0("__datafusion_logical_extension_codec__")?
    } else {
        session.clone()
    };
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err("expected a datafusion session or its logical extension codec capsule"))?;
    let pointer = capsule.pointer_checked(Some(NAME))?;
    // SAFETY: the capsule's name says it holds an FFI_LogicalExtensionCodec,
    // and the host keeps it alive while we clone it.
    let codec = unsafe { pointer.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}
