//! Building a STRUCT result row by row: the serving estimates return one
//! struct per call, its fields declared once as a schema and written in
//! that order.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, StructArray,
};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{Result, internal_err};

/// The type of one struct field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    F64,
    I64,
    Text,
    Bool,
}

impl Kind {
    fn data_type(self) -> DataType {
        match self {
            Kind::F64 => DataType::Float64,
            Kind::I64 => DataType::Int64,
            Kind::Text => DataType::Utf8,
            Kind::Bool => DataType::Boolean,
        }
    }
}

/// `(name, kind)` of every field, in order.
pub(crate) type Schema = [(&'static str, Kind)];

/// The struct type of `schema` (every field nullable).
pub(crate) fn struct_type(schema: &Schema) -> DataType {
    DataType::Struct(fields(schema))
}

fn fields(schema: &Schema) -> Fields {
    schema.iter().map(|(name, kind)| Field::new(*name, kind.data_type(), true)).collect()
}

enum Column {
    F64(Float64Builder),
    I64(Int64Builder),
    Text(StringBuilder),
    Bool(BooleanBuilder),
}

/// One value of a row.
#[derive(Clone, Copy)]
pub(crate) enum Value<'a> {
    F64(f64),
    I64(i64),
    Text(&'a str),
    Bool(bool),
    Null,
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}

impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Value::I64(i64::from(v))
    }
}

impl From<u64> for Value<'_> {
    fn from(v: u64) -> Self {
        i64::try_from(v).map_or(Value::Null, Value::I64)
    }
}

impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// The struct column of one batch.
pub(crate) struct StructOut {
    function: &'static str,
    schema: &'static Schema,
    columns: Vec<Column>,
    valid: Vec<bool>,
}

impl StructOut {
    pub(crate) fn new(function: &'static str, schema: &'static Schema, capacity: usize) -> Self {
        let columns = schema
            .iter()
            .map(|(_, kind)| match kind {
                Kind::F64 => Column::F64(Float64Builder::with_capacity(capacity)),
                Kind::I64 => Column::I64(Int64Builder::with_capacity(capacity)),
                Kind::Text => Column::Text(StringBuilder::with_capacity(capacity, capacity * 16)),
                Kind::Bool => Column::Bool(BooleanBuilder::with_capacity(capacity)),
            })
            .collect();
        Self { function, schema, columns, valid: Vec::with_capacity(capacity) }
    }

    /// Appends a row: one value per field, in schema order.
    pub(crate) fn push(&mut self, values: &[Value]) -> Result<()> {
        if values.len() != self.columns.len() {
            return internal_err!(
                "{}: row of {} values for {} fields",
                self.function,
                values.len(),
                self.columns.len()
            );
        }
        for (i, (column, value)) in self.columns.iter_mut().zip(values).enumerate() {
            match (column, value) {
                (Column::F64(b), Value::F64(v)) => b.append_value(*v),
                (Column::I64(b), Value::I64(v)) => b.append_value(*v),
                (Column::Text(b), Value::Text(v)) => b.append_value(v),
                (Column::Bool(b), Value::Bool(v)) => b.append_value(*v),
                (Column::F64(b), Value::Null) => b.append_null(),
                (Column::I64(b), Value::Null) => b.append_null(),
                (Column::Text(b), Value::Null) => b.append_null(),
                (Column::Bool(b), Value::Null) => b.append_null(),
                _ => return internal_err!("{}: field {} written with the wrong type", self.function, self.schema[i].0),
            }
        }
        self.valid.push(true);
        Ok(())
    }

    /// A row whose fields are all NULL but `reason` (the spec's answer was
    /// "no estimate": a miss or an OOM).
    pub(crate) fn push_reason(&mut self, reason: &str) -> Result<()> {
        let values: Vec<Value> = self
            .schema
            .iter()
            .map(|(name, _)| if *name == "reason" { Value::Text(reason) } else { Value::Null })
            .collect();
        self.push(&values)
    }

    /// A NULL struct (a required argument was NULL).
    pub(crate) fn push_null(&mut self) {
        for column in &mut self.columns {
            match column {
                Column::F64(b) => b.append_null(),
                Column::I64(b) => b.append_null(),
                Column::Text(b) => b.append_null(),
                Column::Bool(b) => b.append_null(),
            }
        }
        self.valid.push(false);
    }

    pub(crate) fn finish(mut self) -> Result<ArrayRef> {
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|c| match c {
                Column::F64(b) => ArrayBuilder::finish(b),
                Column::I64(b) => ArrayBuilder::finish(b),
                Column::Text(b) => ArrayBuilder::finish(b),
                Column::Bool(b) => ArrayBuilder::finish(b),
            })
            .collect();
        let nulls = self.valid.iter().any(|v| !v).then(|| NullBuffer::from(self.valid.clone()));
        Ok(Arc::new(StructArray::try_new(fields(self.schema), arrays, nulls)?))
    }
}
