//! The Mamba-2 table against numbers the spec's own `query_mamba2` gives
//! (docs/spec/families_nemotron.md 3.2): the conv kernel from the table on
//! trtllm (exact, interpolated, held, another shape of the same d_model),
//! the memory roofline for the scan kernels, every decode kernel (the
//! spec's loader keeps no decode row) and every database without the file.

mod common;

use aicsql_tables::grid::GridPath;
use aicsql_tables::kernels::{DatabaseTable, Mamba2Kernel, Mamba2Shape, Mamba2Table, RooflineAnswer};

use common::tree;

/// Nemotron-3-Nano's unsharded Mamba-2 dimensions.
const NANO: Mamba2Shape =
    Mamba2Shape { d_model: 2688, d_state: 128, d_conv: 4, heads: 64, head_dim: 64, groups: 8, chunk: 128 };

fn table(db: &str) -> std::sync::Arc<Mamba2Table> {
    let parts: Vec<&str> = db.split('/').collect();
    Mamba2Table::cached(tree(), parts[0], parts[1], parts[2], true).unwrap_or_else(|e| panic!("{db}: {e}"))
}

#[test]
fn the_conv_kernel_reads_the_trtllm_table() {
    let t = table("h200_sxm/trtllm/1.3.0rc20");
    let conv = |b, s, shape: &Mamba2Shape| t.query(Mamba2Kernel::ConvFn, b, s, shape);
    assert_eq!(conv(1, 1024, &NANO), RooflineAnswer::Table(0.014207999408245086, GridPath::ExactHit));
    assert_eq!(conv(8, 4096, &NANO), RooflineAnswer::Table(0.2630944013595581, GridPath::ExactHit));
    assert_eq!(conv(3, 1500, &NANO), RooflineAnswer::Table(0.04616535005334299, GridPath::Interpolation));
    assert_eq!(conv(1, 50_000, &NANO), RooflineAnswer::Table(0.43905274651478976, GridPath::UtilHold));
    // A shape the table lacks borrows the first stored one of its d_model.
    let wide = Mamba2Shape { d_model: 8192, heads: 128, ..NANO };
    assert!(
        matches!(conv(1, 1024, &wide), RooflineAnswer::Table(v, _) if v == 0.01440960019826889),
        "{:?}",
        conv(1, 1024, &wide)
    );
}

#[test]
fn everything_else_is_the_memory_roofline() {
    let t = table("h200_sxm/trtllm/1.3.0rc20");
    assert_eq!(t.query(Mamba2Kernel::ChunkScan, 1, 1024, &NANO), RooflineAnswer::Roofline(0.0043963733333333335));
    assert_eq!(t.query(Mamba2Kernel::ConvUpdate, 1, 0, &NANO), RooflineAnswer::Roofline(1.536e-05));
    assert_eq!(t.query(Mamba2Kernel::ConvUpdate, 8, 0, &NANO), RooflineAnswer::Roofline(0.00012288));
    assert_eq!(t.query(Mamba2Kernel::StateUpdate, 1, 0, &NANO), RooflineAnswer::Roofline(4.2933333333333334e-06));
    // vllm ships no Mamba-2 file: the conv kernel is the roofline too, at any tp.
    let vllm = table("h200_sxm/vllm/0.24.0");
    assert_eq!(vllm.query(Mamba2Kernel::ConvFn, 1, 1024, &NANO), RooflineAnswer::Roofline(0.01572864));
}
