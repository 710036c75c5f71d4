//! The gated-delta-net table off the golden points, against numbers the
//! spec's own `query_gdn` gives (docs/spec/families_qwen35_gemma4.md 2.4 and
//! 6.2): interpolation, holds beyond the collected corner, and the memory
//! roofline wherever the table has nothing to say (never a miss).

mod common;

use aicsql_tables::grid::GridPath;
use aicsql_tables::kernels::{DatabaseTable, GdnKernel, GdnShape, GdnTable, RooflineAnswer};

use common::tree;

/// Qwen3.5-27B's unsharded linear-attention shape.
const QWEN35_27B: GdnShape =
    GdnShape { d_model: 5120, k_heads: 16, k_head_dim: 128, v_heads: 48, v_head_dim: 128, d_conv: 4 };

fn table(db: &str) -> std::sync::Arc<GdnTable> {
    let parts: Vec<&str> = db.split('/').collect();
    GdnTable::cached(tree(), parts[0], parts[1], parts[2], true).unwrap_or_else(|e| panic!("{db}: {e}"))
}

fn table_value(answer: RooflineAnswer) -> (f64, GridPath) {
    match answer {
        RooflineAnswer::Table(v, path) => (v, path),
        RooflineAnswer::Roofline(v) => panic!("roofline {v}, expected a table value"),
    }
}

#[test]
fn off_grid_queries_interpolate_and_hold_as_the_spec_does() {
    let t = table("b200_sxm/sglang/0.5.14");
    assert_eq!(
        table_value(t.query(GdnKernel::ChunkScan, 3, 1500, &QWEN35_27B)),
        (0.3898073989152908, GridPath::Interpolation)
    );
    // Batch 8 was collected up to seq 16384 only: held at that corner.
    assert_eq!(
        table_value(t.query(GdnKernel::ChunkScan, 8, 50_000, &QWEN35_27B)),
        (32.7953085610669, GridPath::UtilHold)
    );
    assert_eq!(table_value(t.query(GdnKernel::Recurrence, 2048, 0, &QWEN35_27B)).0, 2.019859161376953);
    // Exact hits, and a decode value that ignores the sequence length.
    assert_eq!(table_value(t.query(GdnKernel::ChunkScan, 1, 1024, &QWEN35_27B)).0, 0.11755264282226563);
    assert_eq!(t.query(GdnKernel::ConvUpdate, 1, 7, &QWEN35_27B), t.query(GdnKernel::ConvUpdate, 1, 4096, &QWEN35_27B));
}

#[test]
fn without_an_anchor_the_answer_is_the_memory_roofline() {
    let t = table("b200_sxm/sglang/0.5.14");
    // No stored shape has d_model 6000; the scan's bytes do not involve
    // d_model, so its roofline is the 27B shape's.
    let unknown = GdnShape { d_model: 6000, ..QWEN35_27B };
    assert_eq!(t.query(GdnKernel::ChunkScan, 1, 1024, &unknown), RooflineAnswer::Roofline(0.010758117402597403));
    // vllm before 0.24.0 never collected the scan: the roofline, not a miss.
    let old = table("b200_sxm/vllm/0.19.0");
    assert_eq!(old.query(GdnKernel::ChunkScan, 1, 1024, &QWEN35_27B), RooflineAnswer::Roofline(0.010758117402597403));
    assert_eq!(old.query(GdnKernel::ConvFn, 1, 1024, &QWEN35_27B), RooflineAnswer::Roofline(0.013073155324675324));
    assert_eq!(old.query(GdnKernel::Recurrence, 1, 0, &QWEN35_27B), RooflineAnswer::Roofline(0.0004122597402597402));
    // A database with no GDN file at all loads as an empty table.
    let none = table("a100_sxm/sglang/0.5.9");
    assert!(matches!(none.query(GdnKernel::ConvFn, 1, 1024, &QWEN35_27B), RooflineAnswer::Roofline(_)));
}
