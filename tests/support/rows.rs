//! Query results as text, shared by the test crates that include this file
//! (`#[path = ".../tests/support/rows.rs"] mod rows;`).

use datafusion::arrow::array::RecordBatch;
use datafusion::common::ScalarValue;

/// Rows as text, every value in full (f64 prints its shortest round-trip
/// form, so equal text is equal bits); the column types may differ between
/// the sessions (Ballista reads strings as Utf8, DataFusion as Utf8View).
pub fn rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            out.push(
                batch
                    .columns()
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, row).map(|v| v.to_string()).expect("a value"))
                    .collect(),
            );
        }
    }
    out
}
