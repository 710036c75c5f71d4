//! DeepSeek-V3.2 / GLM-5 off the goldens (docs/spec/families_dsa.md): the
//! skip-indexer amortisation of GLM-5.2 on sglang (9.4, the spec's numbers
//! run in-process) and the skip table's miss where a database has DSA files
//! but no skip rows (6.6).

mod common;

use aicsql_tables::{Phase, StepModel, StepShape};

fn shape() -> StepShape {
    StepShape { tp: 8, pp: 1, dp: 1, cp: 1, batch: 1, isl: 1024, osl: 128, moe_tp: Some(1), moe_ep: Some(8) }
}

/// w = 21/78 of the layers run the indexer: `w * full + (1 - w) * skip`
/// per layer, full 0.4492 and skip 0.7502 in context.
#[test]
fn glm_52_amortises_its_skip_indexer_layers_on_sglang() {
    let mut step = StepModel::new(common::tree(), "zai-org/GLM-5.2", "h200_sxm", "sglang", "0.5.14", true)
        .unwrap_or_else(|e| panic!("{e}"));
    let ttft = step.latency(Phase::Context, &shape()).unwrap_or_else(|e| panic!("{e}"));
    let tpot = step.latency(Phase::Generation, &shape()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ttft, tpot), (168.7131506338576, 10.809875060769338));
    let report = step.report(Phase::Context, &shape()).unwrap_or_else(|e| panic!("{e}"));
    let attention = report.rows.iter().find(|r| r.op_name == "context_attention").map(|r| r.total_ms);
    assert_eq!(attention, Some(0.6691615384615385 * 78.0));
}

#[test]
fn a_database_without_skip_rows_misses_the_skip_lookup() {
    let mut step = StepModel::new(common::tree(), "zai-org/GLM-5.2", "h100_sxm", "sglang", "0.5.10", true)
        .unwrap_or_else(|e| panic!("{e}"));
    let err = step.latency(Phase::Context, &shape()).map(|v| v.to_string()).unwrap_or_else(|e| e.to_string());
    assert!(
        err.contains(
            "Context DSA module skip_indexer perf data not loaded for system='h100_sxm', backend='sglang', version='0.5.10'."
        ),
        "{err}"
    );
}

/// Context parallelism on sglang 0.5.14 (families_dsa.md 7): the per-card
/// DSA module with the mqa / top-k swaps and two all-gathers (the GLM
/// sub-kernel tables), the floor-split add-norms and the CP dispatches, the
/// spec's numbers: (model, db, cp, batch, isl, prefix, attention, add-norm,
/// pre-dispatch, TTFT).
type CpCase = (&'static str, &'static str, u32, u32, u32, u32, f64, f64, f64, f64);

#[rustfmt::skip]
const CP_CASES: [CpCase; 4] = [
    ("zai-org/GLM-5", "h200_sxm", 2, 1, 4096, 0, 94.62958049999999, 2.2787232, 9.60921, 697.2407037272624),
    ("zai-org/GLM-5", "h200_sxm", 2, 1, 2048, 1000, 44.24585716992188, 0.7571616000000001, 3.549569765625, 380.70618017174723),
    ("zai-org/GLM-5.2", "b200_sxm", 4, 2, 3000, 0, 44.330488681640624, 1.1675688311688313, 9.037034296875, 208.6429457318364),
    ("nvidia/GLM-5.2-NVFP4", "gb200", 8, 3, 5000, 100, 96.50625671691893, 1.3344364800000001, 23.00878169433594, 255.6444516468048),
];

fn cp_shape(cp: u32, batch: u32, isl: u32, osl: u32) -> StepShape {
    StepShape { tp: 1, pp: 1, dp: 1, cp, batch, isl, osl, moe_tp: Some(1), moe_ep: Some(cp) }
}

#[test]
fn context_parallelism_on_sglang() {
    let mut failed = Vec::new();
    for &(name, system, cp, batch, isl, prefix, attention, norm, dispatch, ttft) in &CP_CASES {
        let mut step = StepModel::new(common::tree(), name, system, "sglang", "0.5.14", true)
            .unwrap_or_else(|e| panic!("{name} on {system}: {e}"));
        let s = cp_shape(cp, batch, isl, 2);
        let sums = step.context_sums(&s, prefix).unwrap_or_else(|e| panic!("{name} on {system}: {e}"));
        let got = (sums.get("attention"), sums.get("add_norm_1"), sums.get("moe_pre_dispatch"));
        let sum = sums.total();
        if got != (Some(attention), Some(norm), Some(dispatch)) || sum.to_bits() != ttft.to_bits() {
            failed.push(format!("{name} on {system} cp {cp}: {got:?}, TTFT {sum}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
    // Decode is not split: the DSA op as without cp, the dispatches' CP
    // decode branch (nothing before the experts, an all-reduce after).
    let decode = |name: &str, system: &str, s: StepShape| {
        let mut step =
            StepModel::new(common::tree(), name, system, "sglang", "0.5.14", true).unwrap_or_else(|e| panic!("{e}"));
        step.latency(Phase::Generation, &s).unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(decode("zai-org/GLM-5", "h200_sxm", cp_shape(2, 2, 4096, 70)), 26.40474340014058);
    assert_eq!(decode("zai-org/GLM-5.2", "b200_sxm", cp_shape(4, 8, 3000, 40)), 27.647498401014335);
}

/// The two context-parallel misses: an isl beyond the sub-kernel grid, and
/// DeepSeek-V3.2, whose `dsv32_*` tables are not published.
#[test]
fn context_parallelism_misses_naming_the_sub_kernel_tables() {
    let err = |name: &str, isl: u32| {
        let mut step = StepModel::new(common::tree(), name, "h200_sxm", "sglang", "0.5.14", true)
            .unwrap_or_else(|e| panic!("{e}"));
        step.latency(Phase::Context, &cp_shape(2, 1, isl, 2)).err().map(|e| e.to_string()).unwrap_or_default()
    };
    let beyond = err("zai-org/GLM-5.2-FP8", 20000);
    assert!(beyond.contains("DSA CP: isl=20000 exceeds the collected sparse-kernel grid (max isl=16384)"), "{beyond}");
    let dsv32 = err("deepseek-ai/DeepSeek-V3.2", 4096);
    assert!(
        dsv32.contains(
            "DSA CP modeling needs sparse tables ['mqa', 'topk_last', 'topk_flat'] for DeepseekV32ForCausalLM \
             (num_heads=128); collect dsv32_mqa_logits/dsv32_topk first."
        ),
        "{dsv32}"
    );
}
