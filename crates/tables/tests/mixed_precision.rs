//! ModelOpt mixed-precision checkpoints (`quant_algo: MIXED_PRECISION`,
//! per-layer algorithms in `quantized_layers` / `config_groups`): the spec
//! maps them onto one GEMM and one MoE mode (fp8 layers make the GEMMs
//! fp8_static unless activations are dynamic, nvfp4 experts the MoE nvfp4).
//! TTFT / TPOT of the three shipped checkpoints equal the spec's, run
//! in-process (aiconfigurator v0.11.0, Python engine step, merged data tree;
//! tp 2, batch 4, isl 2048, osl 128), bit for bit.

mod common;

use aicsql_tables::{Phase, StepModel, StepShape};

/// (model, db, moe_ep, the spec's TTFT, its TPOT).
#[rustfmt::skip]
const CASES: [(&str, &str, Option<u32>, f64, f64); 3] = [
    ("nvidia/Qwen3.6-27B-NVFP4", "b200_sxm/sglang/0.5.14", None, 157.064892796624, 5.24480967593016),
    ("nvidia/Qwen3.6-35B-A3B-NVFP4", "b200_sxm/trtllm/1.3.0rc20", Some(2), 52.42616172993201, 4.165169706069174),
    ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", "b200_sxm/vllm/0.24.0", Some(2), 40.91152811725188,
     3.0119033207194796),
];

#[test]
fn mixed_precision_checkpoints_equal_the_spec() {
    for (model, db, moe_ep, ttft, tpot) in CASES {
        let mut parts = db.split('/');
        let (system, backend, version) =
            (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let mut step = StepModel::new(common::tree(), model, system, backend, version, true)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        let shape =
            StepShape { tp: 2, pp: 1, dp: 1, cp: 1, batch: 4, isl: 2048, osl: 128, moe_tp: moe_ep.map(|_| 1), moe_ep };
        let got_ttft = step.latency(Phase::Context, &shape).unwrap_or_else(|e| panic!("{model}: {e}"));
        let got_tpot = step.latency(Phase::Generation, &shape).unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!((got_ttft, got_tpot), (ttft, tpot), "{model} on {db}");
    }
}
