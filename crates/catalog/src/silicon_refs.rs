//! `aic.meta.silicon_refs`: the spec's end-to-end measurements on real
//! hardware, the points its own accuracy report predicts
//! (`tools/accuracy_tracking/silicon_refs.csv` of ai-dynamo/aiconfigurator at
//! tag v0.11.0, Apache-2.0; see `data/README.md`). The published wheels do
//! not ship it, so the file is part of this crate, typed here once: lengths
//! and parallel widths are integers, the measurements doubles, and an empty
//! cell (no measured version, no quant override, a side the mode has not)
//! is NULL.

use std::io::Cursor;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::csv::ReaderBuilder;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{DataFusionError, Result};

/// The measurements, as upstream ships them.
const CSV: &str = include_str!("../data/silicon_refs.csv");

/// The columns, in the file's order (its `model_path` is `model` here, as
/// in every other table of aicsql).
const COLUMNS: [(&str, DataType); 34] = [
    ("id", DataType::Utf8),
    ("silicon_data_source", DataType::Utf8),
    ("backend", DataType::Utf8),
    ("backend_version", DataType::Utf8),
    ("model", DataType::Utf8),
    ("system", DataType::Utf8),
    ("precision", DataType::Utf8),
    ("mode", DataType::Utf8),
    ("isl", DataType::Int64),
    ("osl", DataType::Int64),
    ("gemm_quant_mode", DataType::Utf8),
    ("moe_quant_mode", DataType::Utf8),
    ("batch_size", DataType::Int64),
    ("tp_size", DataType::Int64),
    ("pp_size", DataType::Int64),
    ("attention_dp_size", DataType::Int64),
    ("moe_tp_size", DataType::Int64),
    ("moe_ep_size", DataType::Int64),
    ("prefill_batch_size", DataType::Int64),
    ("prefill_num_workers", DataType::Int64),
    ("prefill_tp_size", DataType::Int64),
    ("prefill_pp_size", DataType::Int64),
    ("prefill_attention_dp_size", DataType::Int64),
    ("prefill_moe_tp_size", DataType::Int64),
    ("prefill_moe_ep_size", DataType::Int64),
    ("decode_batch_size", DataType::Int64),
    ("decode_num_workers", DataType::Int64),
    ("decode_tp_size", DataType::Int64),
    ("decode_pp_size", DataType::Int64),
    ("decode_attention_dp_size", DataType::Int64),
    ("decode_moe_tp_size", DataType::Int64),
    ("decode_moe_ep_size", DataType::Int64),
    ("silicon_ttft_ms", DataType::Float64),
    ("silicon_tpot_ms", DataType::Float64),
];

/// The columns the file must have, in order (checked against its header,
/// so a changed upstream file fails loudly instead of shifting columns).
const FILE_HEADER: &str = "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,\
gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,\
prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,\
prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,decode_pp_size,\
decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms";

pub(crate) fn schema() -> SchemaRef {
    static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
        let fields: Vec<Field> = COLUMNS
            .iter()
            .map(|(name, t)| {
                let required = matches!(*name, "id" | "backend" | "model" | "system" | "mode" | "isl" | "osl");
                Field::new(*name, t.clone(), !required)
            })
            .collect();
        Arc::new(Schema::new(fields))
    });
    Arc::clone(&SCHEMA)
}

/// The measurements as one batch.
pub(crate) fn batch() -> Result<RecordBatch> {
    let bad = |why: String| DataFusionError::Internal(format!("aic.meta.silicon_refs: the bundled CSV {why}"));
    let header = CSV.lines().next().unwrap_or_default().trim_end_matches('\r');
    if header != FILE_HEADER {
        return Err(bad(format!("has the header '{header}', expected '{FILE_HEADER}'")));
    }
    let reader = ReaderBuilder::new(schema())
        .with_header(true)
        .with_batch_size(1024)
        .build(Cursor::new(CSV))
        .map_err(|e| bad(e.to_string()))?;
    let batches = reader.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| bad(e.to_string()))?;
    Ok(datafusion::arrow::compute::concat_batches(&schema(), &batches)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{Float64Type, Int64Type};

    #[test]
    fn the_bundled_measurements_read_typed() {
        let b = batch().expect("the bundled CSV reads");
        assert_eq!(b.num_rows(), 35);
        let mode = b.column_by_name("mode").expect("mode").as_string::<i32>();
        let agg = (0..b.num_rows()).filter(|&i| mode.value(i) == "agg").count();
        assert_eq!((agg, b.num_rows() - agg), (23, 12));
        // An empty cell is NULL: the DeepSeek-V3 h200 trtllm row names no version.
        let id = b.column_by_name("id").expect("id").as_string::<i32>();
        let version = b.column_by_name("backend_version").expect("version").as_string::<i32>();
        let row = (0..b.num_rows()).find(|&i| id.value(i) == "dsr1_h200_trtllm_fp8_agg_1024x1024_c16_cfg83");
        assert!(row.is_some_and(|i| version.is_null(i)));
        let ttft = b.column_by_name("silicon_ttft_ms").expect("ttft").as_primitive::<Float64Type>();
        assert!((0..b.num_rows()).all(|i| ttft.is_valid(i) && ttft.value(i) > 0.0));
        let isl = b.column_by_name("isl").expect("isl").as_primitive::<Int64Type>();
        assert_eq!(isl.value(0), 1024);
    }
}
