//! Table-function rows from one column description: each column names
//! itself, its type and how a row gives its value, so the schema and the
//! builders come from the same list and no value lands in a column by
//! position.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, RecordBatch, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::Result;

/// How a row gives a column's value; the variant is the column's type.
pub enum Value<R> {
    Text(fn(&R) -> Option<&str>),
    Int(fn(&R) -> Option<i64>),
    Float(fn(&R) -> Option<f64>),
    Bool(fn(&R) -> Option<bool>),
}

/// One output column over rows of type `R`.
pub struct Column<R> {
    pub name: &'static str,
    pub nullable: bool,
    pub value: Value<R>,
}

impl<R> Column<R> {
    pub fn data_type(&self) -> DataType {
        match self.value {
            Value::Text(_) => DataType::Utf8,
            Value::Int(_) => DataType::Int64,
            Value::Float(_) => DataType::Float64,
            Value::Bool(_) => DataType::Boolean,
        }
    }
}

/// A nullable column.
pub fn col<R>(name: &'static str, value: Value<R>) -> Column<R> {
    Column { name, nullable: true, value }
}

/// A column that is never NULL.
pub fn required<R>(name: &'static str, value: Value<R>) -> Column<R> {
    Column { name, nullable: false, value }
}

/// The schema of `columns`.
pub fn schema<R>(columns: &[Column<R>]) -> SchemaRef {
    Arc::new(Schema::new(columns.iter().map(|c| Field::new(c.name, c.data_type(), c.nullable)).collect::<Vec<_>>()))
}

enum Builder {
    Text(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
}

/// Rows appended one by one, finished into one batch of `columns`' schema.
pub struct Rows<'c, R> {
    columns: &'c [Column<R>],
    builders: Vec<Builder>,
}

impl<'c, R> Rows<'c, R> {
    pub fn new(columns: &'c [Column<R>]) -> Self {
        let builders = columns
            .iter()
            .map(|c| match c.value {
                Value::Text(_) => Builder::Text(StringBuilder::new()),
                Value::Int(_) => Builder::Int(Int64Builder::new()),
                Value::Float(_) => Builder::Float(Float64Builder::new()),
                Value::Bool(_) => Builder::Bool(BooleanBuilder::new()),
            })
            .collect();
        Self { columns, builders }
    }

    pub fn push(&mut self, row: &R) {
        for (column, builder) in self.columns.iter().zip(&mut self.builders) {
            match (builder, &column.value) {
                (Builder::Text(b), Value::Text(f)) => b.append_option(f(row)),
                (Builder::Int(b), Value::Int(f)) => b.append_option(f(row)),
                (Builder::Float(b), Value::Float(f)) => b.append_option(f(row)),
                (Builder::Bool(b), Value::Bool(f)) => b.append_option(f(row)),
                // `new` made each builder from its column's variant.
                _ => unreachable!("builder and column types are made from the same variant"),
            }
        }
    }

    /// One batch with the rows pushed; errors if a non-nullable column got a NULL.
    pub fn finish(self) -> Result<RecordBatch> {
        let arrays: Vec<ArrayRef> = self
            .builders
            .into_iter()
            .map(|b| match b {
                Builder::Text(mut b) => Arc::new(b.finish()) as ArrayRef,
                Builder::Int(mut b) => Arc::new(b.finish()),
                Builder::Float(mut b) => Arc::new(b.finish()),
                Builder::Bool(mut b) => Arc::new(b.finish()),
            })
            .collect();
        Ok(RecordBatch::try_new(schema(self.columns), arrays)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::Int64Type;

    struct Point {
        name: &'static str,
        x: Option<i64>,
    }

    fn columns() -> Vec<Column<Point>> {
        vec![required("name", Value::Text(|p| Some(p.name))), col("x", Value::Int(|p| p.x))]
    }

    #[test]
    fn schema_and_values_come_from_the_same_list() {
        let columns = columns();
        let mut rows = Rows::new(&columns);
        rows.push(&Point { name: "a", x: Some(1) });
        rows.push(&Point { name: "b", x: None });
        let batch = rows.finish().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(batch.schema(), schema(&columns));
        assert_eq!(batch.column(0).as_string::<i32>().value(1), "b");
        assert_eq!(batch.column(1).as_primitive::<Int64Type>(), &Int64Array::from(vec![Some(1), None]));
    }

    #[test]
    fn a_null_in_a_required_column_is_an_error() {
        let columns: Vec<Column<Point>> = vec![required("x", Value::Int(|p| p.x))];
        let mut rows = Rows::new(&columns);
        rows.push(&Point { name: "a", x: None });
        assert!(rows.finish().is_err());
    }
}
