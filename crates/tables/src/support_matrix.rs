//! `systems/support_matrix/<system>.csv`: which (model, system, backend,
//! version, mode) combinations upstream validated.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::sync::Arc;

use arrow::csv::ReaderBuilder;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;

use crate::discovery::DocFile;
use crate::error::{Result, TablesError};

/// Reads one support-matrix CSV; every column is text (the header names them).
pub fn read_support_matrix(doc: &DocFile) -> Result<Vec<RecordBatch>> {
    let file = File::open(&doc.path).map_err(|e| TablesError::io(&doc.path, e))?;
    let mut reader = BufReader::new(file);
    let mut header = String::new();
    reader.read_line(&mut header).map_err(|e| TablesError::io(&doc.path, e))?;
    let names: Vec<&str> = header.trim_end_matches(['\r', '\n']).split(',').collect();
    if names.iter().any(|n| n.is_empty()) {
        return Err(TablesError::document(&doc.path, "CSV header has an empty column name"));
    }
    let schema = Arc::new(Schema::new(names.iter().map(|n| Field::new(*n, DataType::Utf8, true)).collect::<Vec<_>>()));
    reader.rewind().map_err(|e| TablesError::io(&doc.path, e))?;
    let csv = ReaderBuilder::new(schema)
        .with_header(true)
        .with_batch_size(8192)
        .build(reader)
        .map_err(|e| TablesError::document(&doc.path, e))?;
    csv.collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| TablesError::document(&doc.path, format!("invalid CSV: {e}")))
}
