//! A scalar function computed by a Python callable, with the signature of a
//! Rust function. This is how the Python path (`aicsql.spec`) runs as SQL:
//! datafusion-python's own Python UDFs never see the session's settings, so
//! `SET aic.shared_layer = false` could not reach them; this bridge reads the
//! settings from the call and passes them to the callable as a dict.

use std::hash::{Hash, Hasher};

use arrow::array::{ArrayData, ArrayRef, make_array};
use arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, exec_datafusion_err, exec_err};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use aicsql_udfs::AicOptions;

#[derive(Debug)]
pub struct PythonScalar {
    name: String,
    /// The Rust function whose signature, coercion and return type this one
    /// shares, so both paths accept exactly the same calls.
    like: ScalarUDF,
    func: Py<PyAny>,
}

impl PythonScalar {
    pub fn new(name: &str, like: ScalarUDF, func: Py<PyAny>) -> Self {
        Self { name: name.to_string(), like, func }
    }
}

impl PartialEq for PythonScalar {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.func.as_ptr() == other.func.as_ptr()
    }
}

impl Eq for PythonScalar {}

impl Hash for PythonScalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        std::ptr::hash(self.func.as_ptr(), state);
    }
}

/// The settings as the dict the Python path takes: `{"shared_layer": "false", ...}`.
pub fn settings_dict<'py>(py: Python<'py>, options: &AicOptions) -> PyResult<Bound<'py, PyDict>> {
    use datafusion::common::config::ExtensionOptions;
    let dict = PyDict::new(py);
    for entry in options.entries() {
        let key = entry.key.strip_prefix("aic.").unwrap_or(&entry.key).to_string();
        dict.set_item(key, entry.value)?;
    }
    Ok(dict)
}

impl ScalarUDFImpl for PythonScalar {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        self.like.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.like.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.like.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = AicOptions::from_config(&args.config_options)?;
        let rows = args.number_rows;
        let return_type = args.return_field.data_type().clone();
        let arrays: Vec<ArrayRef> = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<_>>()?;
        let name = &self.name;
        let result = Python::attach(|py| -> PyResult<ArrayData> {
            let mut call_args = vec![settings_dict(py, &options)?.into_any()];
            for array in &arrays {
                call_args.push(crate::arrow_bridge::to_pyarrow(py, &array.to_data())?);
            }
            let out = self.func.bind(py).call1(PyTuple::new(py, call_args)?)?;
            crate::arrow_bridge::array_from_pyarrow(&out)
        })
        .map_err(|e| exec_datafusion_err!("{name}: {e}"))?;
        let array = make_array(result);
        if array.len() != rows {
            return exec_err!("{name}: the Python function returned {} values for {rows} rows", array.len());
        }
        let array = if array.data_type() == &return_type { array } else { cast(&array, &return_type)? };
        Ok(ColumnarValue::Array(array))
    }
}
