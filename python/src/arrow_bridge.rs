//! Arrays and record batches across the Python boundary through the Arrow C
//! data interface, with pyarrow's own `_export_to_c` / `_import_from_c`.
//!
//! arrow's `pyarrow` feature would do the same, but it pulls pyo3 into the
//! arrow crate itself; that changes arrow's features for this crate only,
//! so the extension could not share one build of DataFusion with the rest
//! of the workspace (the test command builds both in one cargo run).

use arrow::array::{Array, ArrayData, RecordBatch, StructArray};
use arrow::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi, to_ffi};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn arrow_error(e: arrow::error::ArrowError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A Rust array as a `pyarrow.Array` (pyarrow takes the buffers over).
pub fn to_pyarrow<'py>(py: Python<'py>, data: &ArrayData) -> PyResult<Bound<'py, PyAny>> {
    let (array, schema) = to_ffi(data).map_err(arrow_error)?;
    let (mut array, mut schema) = (Box::new(array), Box::new(schema));
    let pyarrow = py.import("pyarrow")?;
    let imported = pyarrow.getattr("Array")?.call_method1(
        "_import_from_c",
        (std::ptr::addr_of_mut!(*array) as usize, std::ptr::addr_of_mut!(*schema) as usize),
    )?;
    // pyarrow moved the contents out (their release callbacks are now null),
    // so dropping the boxes releases nothing twice.
    Ok(imported)
}

/// The exported C structs of a pyarrow object (an Array, or a
/// RecordBatch as a struct array).
fn exported(obj: &Bound<'_, PyAny>) -> PyResult<ArrayData> {
    let mut array = Box::new(FFI_ArrowArray::empty());
    let mut schema = Box::new(FFI_ArrowSchema::empty());
    obj.call_method1(
        "_export_to_c",
        (std::ptr::addr_of_mut!(*array) as usize, std::ptr::addr_of_mut!(*schema) as usize),
    )?;
    // SAFETY: pyarrow has just filled both structs by the C data interface;
    // `from_ffi` takes ownership of the array and reads the schema.
    unsafe { from_ffi(*array, &schema) }.map_err(arrow_error)
}

/// A `pyarrow.Array` (or anything with `_export_to_c`) as Rust array data.
pub fn array_from_pyarrow(obj: &Bound<'_, PyAny>) -> PyResult<ArrayData> {
    exported(obj)
}

/// A `pyarrow.RecordBatch` as a Rust record batch.
pub fn batch_from_pyarrow(obj: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
    let data = exported(obj)?;
    let columns = StructArray::from(data);
    if columns.null_count() > 0 {
        return Err(PyValueError::new_err("a record batch cannot have null rows"));
    }
    Ok(RecordBatch::from(columns))
}
