//! The families beyond LLAMA/MOE (docs/spec/families_*.md): every wave-1
//! row of `family_step_goldens.parquet` (DeepSeek/Kimi MLA, Llama-4 and
//! MiMo-V2 hybrid MoE, GPT-OSS, fp8-static and Qwen3-VL checkpoints) on the
//! Rust path, compared as the LLAMA/MOE goldens are: per-op `total_ms`,
//! `latency_ms`, weighted totals, every `__gen_step_total__`, TTFT / TPOT,
//! op names, kinds, counts and quant labels. The family goldens record
//! lookups as JSON, so the first-lookup columns are not compared here.

mod common;

use std::collections::BTreeMap;

use common::step_goldens::{Golden, goldens, run};

#[test]
fn every_wave_one_family_golden_row() {
    let all: Vec<Golden> = goldens("family_step_goldens.parquet").into_iter().filter(|g| g.wave == 1).collect();
    assert!(all.len() > 1_900, "expected the wave-1 goldens, found {} rows", all.len());
    let mut by_model: BTreeMap<String, Vec<Golden>> = BTreeMap::new();
    for g in &all {
        by_model.entry(g.model.clone()).or_default().push(g.clone());
    }
    let mut failed = Vec::new();
    for (model, rows) in &by_model {
        let (c, groups, errors) = run(rows, false);
        println!(
            "{model}: {} rows, {groups} config-phases ({errors} error goldens): {} bit-identical, {} within 1e-12, {} mismatched",
            rows.len(),
            c.bit_identical,
            c.within_1e12,
            c.mismatched
        );
        for f in c.failures.iter().take(12) {
            println!("  FAIL {f}");
        }
        if c.mismatched > 0 || c.within_1e12 > 0 || c.errors_matched != errors {
            failed.push(model.clone());
        }
    }
    assert!(failed.is_empty(), "not bit-identical: {failed:?}");
}
