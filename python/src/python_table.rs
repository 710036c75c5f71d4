//! A table function computed by a Python callable, with the columns of a
//! Rust table function (see `python_scalar` for why a bridge: settings).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::pyarrow::FromPyArrow;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, ScalarValue, exec_datafusion_err, exec_err};
use datafusion::datasource::MemTable;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use aicsql_udfs::AicOptions;
use aicsql_udfs::args::constant;

use crate::python_scalar::settings_dict;

#[derive(Debug)]
pub struct PythonTable {
    name: String,
    schema: SchemaRef,
    func: Py<PyAny>,
}

impl PythonTable {
    pub fn new(name: &str, schema: SchemaRef, func: Py<PyAny>) -> Self {
        Self { name: name.to_string(), schema, func }
    }
}

/// A constant argument as the Python value the callable receives.
fn to_python<'py>(
    py: Python<'py>,
    function: &str,
    position: usize,
    value: &ScalarValue,
) -> PyResult<Bound<'py, PyAny>> {
    if value.is_null() {
        return Ok(py.None().into_bound(py));
    }
    match value {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => {
            s.into_bound_py_any(py)
        }
        ScalarValue::Boolean(Some(b)) => b.into_bound_py_any(py),
        ScalarValue::Float32(Some(_)) | ScalarValue::Float64(Some(_)) => {
            match value.cast_to(&arrow::datatypes::DataType::Float64) {
                Ok(ScalarValue::Float64(Some(f))) => f.into_bound_py_any(py),
                _ => unreachable_value(function, position, value),
            }
        }
        v if v.data_type().is_integer() => match v.cast_to(&arrow::datatypes::DataType::Int64) {
            Ok(ScalarValue::Int64(Some(i))) => i.into_bound_py_any(py),
            _ => unreachable_value(function, position, value),
        },
        other => unreachable_value(function, position, other),
    }
}

fn unreachable_value<T>(function: &str, position: usize, value: &ScalarValue) -> PyResult<T> {
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "{function}: argument {position} has type {}, expected text or a number",
        value.data_type()
    )))
}

impl TableFunctionImpl for PythonTable {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let name = &self.name;
        let session = args.session();
        let values: Vec<ScalarValue> =
            args.exprs().iter().enumerate().map(|(i, e)| constant(name, session, e, i + 1)).collect::<Result<_>>()?;
        let options = AicOptions::from_config(session.config().options())?;
        let batch = Python::attach(|py| -> PyResult<RecordBatch> {
            let mut call_args = vec![settings_dict(py, &options)?.into_any()];
            for (i, value) in values.iter().enumerate() {
                call_args.push(to_python(py, name, i + 1, value)?);
            }
            let out = self.func.bind(py).call1(PyTuple::new(py, call_args)?)?;
            RecordBatch::from_pyarrow_bound(&out)
        })
        .map_err(|e| exec_datafusion_err!("{name}: {e}"))?;
        let describe = |schema: &SchemaRef| -> Vec<String> {
            schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect()
        };
        let same_columns = batch.schema().fields().len() == self.schema.fields().len()
            && batch
                .schema()
                .fields()
                .iter()
                .zip(self.schema.fields())
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !same_columns {
            return exec_err!(
                "{name}: the Python function returned columns {:?}, expected {:?}",
                describe(&batch.schema()),
                describe(&self.schema)
            );
        }
        // Re-labelled with the declared schema, which also checks NOT NULL columns.
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), batch.columns().to_vec())?;
        Ok(Arc::new(MemTable::try_new(Arc::clone(&self.schema), vec![vec![batch]])?))
    }
}
