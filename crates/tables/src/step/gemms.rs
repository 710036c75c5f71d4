//! The GEMMs of a model's op list at a tensor-parallel degree, without a
//! database: what `aic.meta.model_gemms` lists so that "model shapes x
//! systems" is a plain join with `gemm_latency`.

use crate::model::ModelConfig;
use crate::quant::GemmQuant;
use crate::step::model::ModelDesc;
use crate::step::ops::{OpSpec, op_list};
use crate::step::types::{Phase, StepError};
use crate::step::{StepShape, quants};

/// One GEMM op: `m` is the tokens of the step (context: batch * isl for the
/// layer GEMMs, batch for logits; generation: batch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelGemm {
    /// Op name without the phase prefix (`qkv_gemm`).
    pub op: &'static str,
    pub n: i64,
    pub k: i64,
    /// The quant mode the spec prices this GEMM with.
    pub quant: GemmQuant,
    /// Applications per step (the layer count for per-layer GEMMs).
    pub count: f64,
}

/// The GEMM ops of `cfg` split over `tp` GPUs, in op-list order: the
/// generation list (it holds every GEMM of LLAMA and MOE steps, logits
/// included), then the context list's GEMMs of other shapes (DEEPSEEK /
/// KIMIK25: the prefill-only kv-up GEMM and the wider prefill proj GEMM).
/// The GEMMs inside a fallback (the MLA block's granular ops) are listed:
/// a step prices them wherever the module table has no answer.
/// Errors as the step does: unsupported architecture or quantization, heads
/// not divisible by `tp`. A MoE model is split as moe_ep = tp: its GEMM
/// shapes (attention, router, logits) do not depend on the expert split.
pub fn model_gemms(cfg: &ModelConfig, tp: u32) -> Result<Vec<ModelGemm>, StepError> {
    let desc = ModelDesc::from_config(cfg)?;
    let inferred = quants::infer(cfg)?;
    let moe_ep = desc.is_moe().then_some(tp);
    let shape = StepShape { tp, pp: 1, dp: 1, cp: 1, batch: 1, isl: 1, osl: 1, moe_tp: None, moe_ep };
    let par = desc.parallel(&shape, "")?;
    let mut out: Vec<ModelGemm> = Vec::new();
    for phase in [Phase::Generation, Phase::Context] {
        let quants = quants::resolve(inferred, phase, "", &[], false);
        for op in op_list(&desc, &par, &quants, phase).leaves() {
            if let OpSpec::Gemm { n, k, quant, .. } = op.spec {
                let gemm = ModelGemm { op: op.base, n, k, quant, count: op.count };
                if !out.iter().any(|g| (g.op, g.n, g.k, g.quant) == (gemm.op, n, k, quant)) {
                    out.push(gemm);
                }
            }
        }
    }
    Ok(out)
}
