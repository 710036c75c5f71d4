//! Engine-step parity with the spec: every row of
//! `engine_step_goldens.parquet`. Per-op `latency_ms` / `total_ms` /
//! `weighted_total_ms`, each `__gen_step_total__`, each step total with its
//! TTFT / TPOT; the op metadata (name, kind, count, quant, first lookup and
//! its arguments, interpolation path) must match exactly. Error goldens must
//! fail at the same lookup. The bar is no mismatch, the aim all bit-identical.

mod common;

use common::step_goldens::{goldens, run};

#[test]
fn every_engine_step_golden_row() {
    let all = goldens("engine_step_goldens.parquet");
    assert!(all.len() > 4_000, "expected the full golden set, found {} rows", all.len());
    let (c, groups, error_goldens) = run(&all, true);
    println!("engine-step goldens: {} rows, {groups} config-phases ({error_goldens} error goldens)", all.len());
    println!(
        "numbers: {} bit-identical, {} within 1e-12 (not bit-identical), {} mismatched; error goldens matched: {}",
        c.bit_identical, c.within_1e12, c.mismatched, c.errors_matched
    );
    for f in c.failures.iter().take(60) {
        println!("FAIL {f}");
    }
    assert_eq!(c.mismatched, 0, "{} mismatches (first listed above)", c.mismatched);
    assert_eq!(c.errors_matched, error_goldens);
}
