//! Reading parquet files with the file named in every error.

use std::fs::File;
use std::path::Path;

use arrow::datatypes::SchemaRef;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use crate::discovery::DataTree;
use crate::error::{Result, TablesError};

impl DataTree {
    fn parquet_builder(&self, path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>> {
        self.note_parquet_open();
        let file = File::open(path).map_err(|e| TablesError::io(path, e))?;
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| TablesError::parquet(path, e))
    }

    /// The Arrow schema stored in a parquet file's footer.
    pub fn parquet_schema(&self, path: &Path) -> Result<SchemaRef> {
        Ok(self.parquet_builder(path)?.schema().clone())
    }

    /// A reader over the file's rows in file order, restricted to the given
    /// top-level columns (indices into the file schema; `None` = all).
    pub fn parquet_reader(
        &self,
        path: &Path,
        columns: Option<&[usize]>,
        batch_size: usize,
    ) -> Result<ParquetRecordBatchReader> {
        let mut builder = self.parquet_builder(path)?.with_batch_size(batch_size.max(1));
        if let Some(columns) = columns {
            let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied());
            builder = builder.with_projection(mask);
        }
        builder.build().map_err(|e| TablesError::parquet(path, e))
    }
}
