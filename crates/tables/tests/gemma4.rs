//! GEMMA4MIX (Gemma 4) off the goldens: context parallelism on sglang
//! (docs/spec/families_qwen35_gemma4.md 3.7; restated from code, no golden).
//! At tp 1 the shipped gemma-4-26B-A4B's logits GEMM (n = 262144, k = 2816)
//! is off every GEMM grid, so no cp point prices on it; these points run a
//! variant whose vocabulary is 131072, written into a data root of its own
//! and mounted before the published data. Expected values: the spec itself,
//! in-process, on the same config (aiconfigurator v0.11.0, Python engine
//! step; runner outside the repository, /work/diag/gemma4_cp/spec_cp.py).

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use aicsql_tables::{DataTree, Phase, StepModel, StepShape};

const VARIANT: &str = "google/gemma-4-v128k-synth";

/// The published data with a root holding the variant's config first.
fn tree() -> &'static DataTree {
    static TREE: OnceLock<DataTree> = OnceLock::new();
    TREE.get_or_init(|| {
        let data = common::data_dir();
        let shipped = data
            .join("aiconfigurator-core-0.12.0/aiconfigurator_core/model_configs/google--gemma-4-26B-A4B_config.json");
        let text = std::fs::read_to_string(&shipped).unwrap_or_else(|e| panic!("{}: {e}", shipped.display()));
        let mut config: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        config["text_config"]["vocab_size"] = serde_json::json!(131072);
        // Cargo's scratch directory for integration tests: rewritten by every run, never left in /tmp.
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gemma4-v128k-root");
        std::fs::create_dir_all(root.join("systems/data")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join("model_configs")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("model_configs/google--gemma-4-v128k-synth_config.json"), config.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        DataTree::open(&[&root, &data]).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// (db, moe_tp, moe_ep, batch, isl, osl, prefix, cp, the spec's TTFT, its TPOT); tp 1.
type Case = (&'static str, u32, u32, u32, u32, u32, u32, u32, f64, f64);

#[rustfmt::skip]
const CASES: [Case; 7] = [
    ("h200_sxm/sglang/0.5.14", 1, 2, 2, 4096, 20, 0, 2, 180.75291296657429, 4.240314420721083),
    ("h200_sxm/sglang/0.5.14", 1, 4, 2, 4096, 20, 0, 4, 147.98883385846753, 4.08837395313993),
    ("b200_sxm/sglang/0.5.14", 1, 2, 2, 4096, 20, 0, 2, 81.436559824734, 3.3365315636842086),
    ("b200_sxm/sglang/0.5.14", 2, 2, 1, 8192, 40, 0, 4, 51.77830103242176, 2.9047448755817427),
    ("b200_sxm/sglang/0.5.14", 1, 4, 3, 3000, 20, 1000, 4, 54.772905901670136, 3.4058596271665604),
    ("gb200/sglang/0.5.14", 1, 8, 4, 2048, 20, 0, 8, 60.928724281470394, 3.381539892739925),
    ("h200_sxm/sglang/0.5.14", 1, 1, 2, 4096, 20, 0, 1, 218.43650928645874, 4.734636375716477),
];

#[test]
fn context_parallelism_on_sglang() {
    let mut failed = Vec::new();
    for &(db, moe_tp, moe_ep, batch, isl, osl, prefix, cp, ttft, tpot) in &CASES {
        let p: Vec<&str> = db.split('/').collect();
        let mut m = StepModel::new(tree(), VARIANT, p[0], p[1], p[2], true).unwrap_or_else(|e| panic!("{db}: {e}"));
        let s = StepShape { tp: 1, pp: 1, dp: 1, cp, batch, isl, osl, moe_tp: Some(moe_tp), moe_ep: Some(moe_ep) };
        let got_ttft = m.context_sums(&s, prefix).map(|sums| sums.total());
        let got_tpot = m.latency(Phase::Generation, &s);
        if got_ttft.as_ref().ok().map(|v| v.to_bits()) != Some(ttft.to_bits())
            || got_tpot.as_ref().ok().map(|v| v.to_bits()) != Some(tpot.to_bits())
        {
            failed.push(format!("{db} cp {cp} B {batch} isl {isl} prefix {prefix}: {got_ttft:?} {got_tpot:?}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
