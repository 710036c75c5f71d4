//! `aic.*` settings for a datafusion-python session.
//!
//! datafusion-python cannot add a configuration namespace to a session that
//! already exists, so the settings are installed when its `SessionConfig` is
//! built (`SessionConfig().with_extension(Settings())`, what
//! `aicsql.session_config()` does). They cross the FFI boundary as one
//! string map keyed `aic.<name>`; `AicOptions::from_config` reads them back on
//! the Rust side and checks them.

use datafusion::common::config::ExtensionOptions;
use datafusion_ffi::config::extension_options::FFI_ExtensionOptions;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use aicsql_udfs::AicOptions;

#[pyclass(skip_from_py_object, module = "aicsql._internal")]
#[derive(Clone, Default)]
pub struct Settings {
    options: AicOptions,
}

#[pymethods]
impl Settings {
    /// Starts from the defaults; `values` overrides them (`{"shared_layer": "false"}`).
    #[new]
    #[pyo3(signature = (values = None))]
    fn new(values: Option<std::collections::HashMap<String, String>>) -> PyResult<Self> {
        let mut options = AicOptions::default();
        for (key, value) in values.unwrap_or_default() {
            let key = key.strip_prefix("aic.").unwrap_or(&key);
            options.set(key, &value).map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        Ok(Self { options })
    }

    /// The settings as `{"aic.backend": ..., ...}`.
    fn entries(&self) -> Vec<(String, String)> {
        self.options.entries().into_iter().filter_map(|e| Some((e.key, e.value?))).collect()
    }

    fn __datafusion_extension_options__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let mut ffi = FFI_ExtensionOptions::default();
        // Keys go in whole (`aic.shared_layer`): that is how a `SET` on the
        // host stores them, and how `AicOptions::from_config` looks for them.
        for (key, value) in self.entries() {
            ExtensionOptions::set(&mut ffi, &key, &value).map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        PyCapsule::new_with_value(py, ffi, c"datafusion_extension_options")
    }
}
