//! A table function computed by a Python callable, with the columns of a
//! Rust table function (see `python_scalar` for why a bridge: settings).

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, ScalarValue, exec_datafusion_err, exec_err, plan_err};
use datafusion::datasource::MemTable;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use aicsql_udfs::AicOptions;
use aicsql_udfs::args::{constant, constant_int, constant_number, constant_text};

use crate::python_scalar::settings_dict;

/// The argument kinds of the Rust twin: leading text arguments, then
/// integers, then (from position `floats`, 0-based) numbers, in one of a
/// few arities. The bridge checks them as the twin does, so both paths
/// refuse the same calls with the same errors.
#[derive(Debug, Clone, Copy)]
pub struct Arguments {
    pub names: &'static [&'static str],
    pub texts: usize,
    pub arities: &'static [usize],
    /// The first number argument (`usize::MAX`: none).
    pub floats: usize,
}

#[derive(Debug)]
pub struct PythonTable {
    name: String,
    schema: SchemaRef,
    arguments: Arguments,
    func: Py<PyAny>,
}

impl PythonTable {
    pub fn new(name: &str, schema: SchemaRef, arguments: Arguments, func: Py<PyAny>) -> Self {
        Self { name: name.to_string(), schema, arguments, func }
    }

    /// The constant arguments as the Python values the callable receives:
    /// `str`/`int`, `None` for NULL.
    fn values(&self, values: &[ScalarValue]) -> Result<Vec<Value>> {
        let name = &self.name;
        let Arguments { names, texts, arities, floats } = self.arguments;
        if !arities.contains(&values.len()) {
            // "5", "7 or 9", "7, 9 or 10"
            let counts: Vec<String> = arities.iter().map(|a| a.to_string()).collect();
            let counts = match counts.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => counts.join(""),
            };
            return plan_err!("{name}({}) takes {counts} arguments, got {}", names.join(", "), values.len());
        }
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                Ok(if i < texts {
                    Value::Text(constant_text(name, i + 1, v)?)
                } else if i >= floats {
                    Value::Float(constant_number(name, i + 1, names.get(i).copied().unwrap_or(""), v)?)
                } else {
                    Value::Int(constant_int(name, i + 1, v)?)
                })
            })
            .collect()
    }
}

enum Value {
    Text(Option<String>),
    Int(Option<i64>),
    Float(Option<f64>),
}

impl Value {
    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Value::Text(Some(s)) => s.into_bound_py_any(py),
            Value::Int(Some(i)) => i.into_bound_py_any(py),
            Value::Float(Some(f)) => f.into_bound_py_any(py),
            Value::Text(None) | Value::Int(None) | Value::Float(None) => Ok(py.None().into_bound(py)),
        }
    }
}

impl TableFunctionImpl for PythonTable {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let name = &self.name;
        let session = args.session();
        let values: Vec<ScalarValue> =
            args.exprs().iter().enumerate().map(|(i, e)| constant(name, session, e, i + 1)).collect::<Result<_>>()?;
        let values = self.values(&values)?;
        let options = AicOptions::from_config(session.config().options())?;
        let batch = Python::attach(|py| -> PyResult<RecordBatch> {
            let mut call_args = vec![settings_dict(py, &options)?.into_any()];
            for value in &values {
                call_args.push(value.to_python(py)?);
            }
            let out = self.func.bind(py).call1(PyTuple::new(py, call_args)?)?;
            crate::arrow_bridge::batch_from_pyarrow(&out)
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
