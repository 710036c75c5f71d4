//! Quant modes of a step (docs/spec 3): inferred from the checkpoint, then the
//! FMHA guards, in the spec's order.

use crate::kernels::ContextAttentionTable;
use crate::model::ModelConfig;
use crate::modes::{FmhaQuant, KvQuant, MoeQuant};
use crate::quant::GemmQuant;
use crate::step::types::{Phase, Quants, StepError};

/// What the checkpoint implies, before the backend guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inferred {
    pub gemm: GemmQuant,
    pub moe: MoeQuant,
    pub kv: KvQuant,
    /// `Some(Fp8)` when inference chose fp8 attention math; `None` = unset (bfloat16).
    pub fmha: Option<FmhaQuant>,
}

/// Spec 3.1.
pub(crate) fn infer(cfg: &ModelConfig) -> Result<Inferred, StepError> {
    let method = cfg.quant_method.as_deref().or(cfg.quant_algo.as_deref());
    let algo = match method {
        Some("fp8") if cfg.weight_block_size => Some("fp8_block"),
        other => other,
    };
    let (gemm, moe) = match algo {
        None => (GemmQuant::Bfloat16, MoeQuant::Bfloat16),
        Some("fp8_block") => (GemmQuant::Fp8Block, MoeQuant::Fp8Block),
        Some("fp8") if cfg.dynamic_activations => (GemmQuant::Fp8, MoeQuant::Fp8),
        Some("fp8") => (GemmQuant::Fp8Static, MoeQuant::Fp8),
        Some("nvfp4") => (GemmQuant::Nvfp4, MoeQuant::Nvfp4),
        Some(other) => {
            return Err(StepError::input(format!(
                "{}: unsupported quantization method '{other}' (supported: fp8, fp8 with weight_block_size, nvfp4)",
                cfg.path.display()
            )));
        }
    };
    let kv_algo = cfg.kv_cache_quant_algo.as_deref();
    let fp8_checkpoint = matches!(algo, Some("fp8" | "fp8_block" | "nvfp4"));
    let (kv, fmha) = if fp8_checkpoint || kv_algo == Some("fp8") {
        (KvQuant::Fp8, Some(FmhaQuant::Fp8))
    } else {
        let kv = match kv_algo {
            None | Some("bfloat16") => KvQuant::Bfloat16,
            Some(other) => other
                .parse::<KvQuant>()
                .map_err(|e| StepError::input(format!("{}: kv cache quant algo: {e}", cfg.path.display())))?,
        };
        (kv, None)
    };
    Ok(Inferred { gemm, moe, kv, fmha })
}

/// Spec 3.2: (1) static_ctx only, from the data: fp8 attention math falls
/// back to bfloat16 when the context table has rows for the kv dtype, none
/// in fp8 and some in bfloat16; (2) vLLM, only if (1) did not decide: an
/// inferred fp8 becomes bfloat16.
pub(crate) fn resolve(
    inferred: Inferred,
    phase: Phase,
    backend: &str,
    context_table: Option<&ContextAttentionTable>,
) -> Quants {
    let mut fmha = inferred.fmha;
    let mut explicit = false;
    if phase == Phase::Context
        && let Some(table) = context_table
    {
        let modes = table.fmha_modes_for_kv(inferred.kv);
        if !modes.is_empty()
            && !modes.contains(&FmhaQuant::Fp8)
            && modes.contains(&FmhaQuant::Bfloat16)
            && fmha == Some(FmhaQuant::Fp8)
        {
            fmha = Some(FmhaQuant::Bfloat16);
            explicit = true;
        }
    }
    if !explicit && backend == "vllm" && fmha == Some(FmhaQuant::Fp8) {
        fmha = Some(FmhaQuant::Bfloat16);
    }
    Quants { gemm: inferred.gemm, kv: inferred.kv, fmha: fmha.unwrap_or(FmhaQuant::Bfloat16), moe: inferred.moe }
}
