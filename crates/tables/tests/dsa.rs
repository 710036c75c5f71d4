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
