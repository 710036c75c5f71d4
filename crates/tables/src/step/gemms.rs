//! The GEMMs of a model's op list at a tensor-parallel degree, without a
//! database: what `aic.meta.model_gemms` lists so that "model shapes x
//! systems" is a plain join with `gemm_latency`.

use crate::model::ModelConfig;
use crate::quant::GemmQuant;
use crate::step::model::ModelDesc;
use crate::step::ops::{OpSpec, op_list};
use crate::step::quants;
use crate::step::types::{Phase, StepError};

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

/// The GEMM ops of `cfg` split over `tp` GPUs, in op-list order (the
/// generation list: it holds every GEMM both phases use, logits included).
/// Errors as the step does: unsupported architecture or quantization, heads
/// not divisible by `tp`. A MoE model is split as moe_ep = tp: its GEMM
/// shapes (attention, router, logits) do not depend on the expert split.
pub fn model_gemms(cfg: &ModelConfig, tp: u32) -> Result<Vec<ModelGemm>, StepError> {
    let desc = ModelDesc::from_config(cfg)?;
    let inferred = quants::infer(cfg)?;
    let moe_ep = desc.is_moe().then_some(tp);
    let par = desc.parallel(tp, None, moe_ep, "")?;
    let quants = quants::resolve(inferred, Phase::Generation, "", None);
    Ok(op_list(&desc, &par, &quants, Phase::Generation)
        .into_iter()
        .filter_map(|op| match op.spec {
            OpSpec::Gemm { n, k, quant, .. } => Some(ModelGemm { op: op.base, n, k, quant, count: op.count }),
            _ => None,
        })
        .collect())
}
