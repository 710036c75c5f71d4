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

/// The second-wave families priced so far (docs/spec/families_qwen35_gemma4.md,
/// families_nemotron.md): every wave-2 row of Qwen3.5 (dense and MoE,
/// gated-delta-net layers), Gemma 4 (sliding-window / global layers) and
/// Nemotron-H (Mamba-2 hybrid), Nemotron-NAS (Super-49B: 158 ops a phase
/// under 13 names, summed per name) and DeepSeek-V3.2 / GLM-5.2 (DSA
/// module layers, families_dsa.md) and DeepSeek-V4-Flash (mHC and
/// compressed-attention modules, families_dsv4.md), compared as above.
const WAVE_TWO_PRICED: [&str; 8] = [
    "Qwen/Qwen3.5-27B",
    "Qwen/Qwen3.5-35B-A3B",
    "google/gemma-4-26B-A4B",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1",
    "deepseek-ai/DeepSeek-V3.2",
    "nvidia/GLM-5.2-NVFP4",
    "deepseek-ai/DeepSeek-V4-Flash",
];

#[test]
fn every_wave_two_golden_row_of_the_priced_families() {
    let all: Vec<Golden> = goldens("family_step_goldens.parquet").into_iter().filter(|g| g.wave == 2).collect();
    let unpriced: Vec<&str> = all.iter().map(|g| g.model.as_str()).filter(|m| !WAVE_TWO_PRICED.contains(m)).collect();
    assert!(unpriced.is_empty(), "wave-2 goldens of models this test does not run: {unpriced:?}");
    let mut by_model: BTreeMap<String, Vec<Golden>> = BTreeMap::new();
    for g in &all {
        by_model.entry(g.model.clone()).or_default().push(g.clone());
    }
    assert_eq!(by_model.len(), WAVE_TWO_PRICED.len(), "expected goldens of {WAVE_TWO_PRICED:?}");
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
        assert!(groups >= 4, "{model}: {groups} config-phases");
        if c.mismatched > 0 || c.within_1e12 > 0 || c.errors_matched != errors {
            failed.push(model.clone());
        }
    }
    assert!(failed.is_empty(), "not bit-identical: {failed:?}");
}

/// Every wave-2 family of the goldens is priced; a family the crate does
/// not build yet (MiniMax-M3) fails naming its family, never with a number,
/// on a database of the goldens.
#[test]
fn a_family_not_built_yet_is_refused_by_name() {
    use aicsql_tables::{Phase, step_latency};
    let rows: Vec<Golden> = goldens("family_step_goldens.parquet")
        .into_iter()
        .filter(|g| g.wave == 2 && g.row_kind == "step_total")
        .collect();
    assert!(rows.iter().all(|g| WAVE_TWO_PRICED.contains(&g.model.as_str())), "an unpriced wave-2 family");
    let g = rows.first().expect("wave-2 goldens");
    for phase in [Phase::Context, Phase::Generation] {
        let mut q = common::step_goldens::query(g, phase);
        q.model = "MiniMaxAI/MiniMax-M3".into();
        let err = step_latency(common::tree(), &q).expect_err("MiniMax-M3 is not built yet");
        assert!(err.to_string().contains("the spec's MINIMAXM3 family is not implemented yet"), "MiniMax-M3: {err}");
    }
}
