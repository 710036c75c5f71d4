//! Quant modes of a step (docs/spec 3): inferred from the checkpoint, then the
//! FMHA guards, in the spec's order.

use crate::model::ModelConfig;
use crate::modes::{CommQuant, FmhaQuant, KvQuant, MoeQuant};
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
    /// The checkpoint sets no KV-cache mode (`kv` is the bfloat16 fallback):
    /// the data-driven FMHA check then reads every kv slice (options.md 1.2).
    pub kv_unset: bool,
}

/// Quant modes a caller sets instead of the checkpoint's (the spec's
/// `--gemm-quant-mode` ... `--comm-quant-mode`, docs/spec/options.md 1).
/// `None` keeps the checkpoint's mode. An explicit mode is never replaced
/// by a guard, and never triggers the checkpoint's own rules (an fp8
/// checkpoint implies fp8 KV cache and FMHA; an fp8 override does not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct QuantOverrides {
    pub gemm: Option<GemmQuant>,
    pub moe: Option<MoeQuant>,
    pub kv: Option<KvQuant>,
    pub fmha: Option<FmhaQuant>,
    pub comm: Option<CommQuant>,
}

impl QuantOverrides {
    pub fn is_empty(&self) -> bool {
        *self == QuantOverrides::default()
    }

    /// The checkpoint's modes with the explicit ones in their place
    /// (options.md 1.2 steps 2 and 6: explicit fields first, the inference
    /// fills the rest).
    pub(crate) fn apply(&self, mut inferred: Inferred) -> Inferred {
        if let Some(gemm) = self.gemm {
            inferred.gemm = gemm;
        }
        if let Some(moe) = self.moe {
            inferred.moe = moe;
        }
        if let Some(kv) = self.kv {
            inferred.kv = kv;
            inferred.kv_unset = false;
        }
        if let Some(fmha) = self.fmha {
            inferred.fmha = Some(fmha);
        }
        inferred
    }
}

/// docs/spec/families_mla_gptoss_fp8static.md 2.2 (ES 3.1 is its fp8 /
/// fp8_block / nvfp4 subset): the checkpoint's quant fields to modes. A
/// mode the checkpoint does not set is bfloat16.
pub(crate) fn infer(cfg: &ModelConfig) -> Result<Inferred, StepError> {
    let q = &cfg.quant;
    let algo = q.algo.as_deref();
    let unsupported =
        |what: &str| StepError::input(format!("{}: unsupported quantization method '{what}'", cfg.path.display()));
    let (mut gemm, mut moe) = (None, None);
    match algo {
        None => {}
        Some("fp8") if q.dynamic == Some(true) => (gemm, moe) = (Some(GemmQuant::Fp8), Some(MoeQuant::Fp8)),
        // Per-tensor FP8 without a dynamic activation scheme is static.
        Some("fp8") => (gemm, moe) = (Some(GemmQuant::Fp8Static), Some(MoeQuant::Fp8)),
        Some("fp8_block") => (gemm, moe) = (Some(GemmQuant::Fp8Block), Some(MoeQuant::Fp8Block)),
        Some("nvfp4") => (gemm, moe) = (Some(GemmQuant::Nvfp4), Some(MoeQuant::Nvfp4)),
        Some("mxfp4") => (gemm, moe) = (Some(GemmQuant::Bfloat16), Some(MoeQuant::W4a16Mxfp4)),
        Some("compressed-tensors") => {
            if let Some(base) = q.compressed_base.as_deref() {
                if !q.compressed_ignored.contains(&"attention") {
                    gemm = Some(base.parse::<GemmQuant>().map_err(|_| unsupported(base))?);
                }
                if !q.compressed_ignored.contains(&"routing_experts") {
                    moe = Some(base.parse::<MoeQuant>().map_err(|_| unsupported(base))?);
                }
            }
        }
        // ModelOpt per-layer quant, mapped onto one mode per category
        // (the coarsest the step knows): fp8 wins over nvfp4 for the GEMMs,
        // nvfp4 over fp8 for the routed experts.
        Some("mixed_precision") => {
            let has = |set: &[String], algo: &str| set.iter().any(|a| a == algo);
            if has(&q.mixed_other, "fp8") {
                gemm = Some(if q.dynamic == Some(true) { GemmQuant::Fp8 } else { GemmQuant::Fp8Static });
            } else if has(&q.mixed_other, "nvfp4") {
                gemm = Some(GemmQuant::Nvfp4);
            }
            if has(&q.mixed_moe, "nvfp4") {
                moe = Some(MoeQuant::Nvfp4);
            } else if has(&q.mixed_moe, "fp8") {
                moe = Some(MoeQuant::Fp8);
            }
        }
        Some(other) => return Err(unsupported(other)),
    }
    let kv_algo = q.kv_cache.as_deref();
    let mut kv = match kv_algo {
        None => None,
        Some("fp8") => Some(KvQuant::Fp8),
        Some("bfloat16") => Some(KvQuant::Bfloat16),
        Some(other) => {
            return Err(StepError::input(format!(
                "{}: unsupported kv cache quant algorithm '{other}'",
                cfg.path.display()
            )));
        }
    };
    let kv_unset = kv.is_none();
    let mut fmha = None;
    if algo.is_some() && (matches!(algo, Some("fp8" | "fp8_block" | "nvfp4")) || kv_algo == Some("fp8")) {
        fmha = Some(FmhaQuant::Fp8);
        kv = Some(KvQuant::Fp8);
    }
    Ok(Inferred {
        gemm: gemm.unwrap_or(GemmQuant::Bfloat16),
        moe: moe.unwrap_or(MoeQuant::Bfloat16),
        kv: kv.unwrap_or(KvQuant::Bfloat16),
        fmha,
        kv_unset: kv_unset && fmha.is_none(),
    })
}

/// Spec 3.2: (1) static_ctx only, from the data: fp8 attention math falls
/// back to bfloat16 when the context tables have rows for the kv dtype
/// (`context_fmha_modes`: the FMHA modes with such rows, empty without a
/// table), none in fp8 and some in bfloat16; (2) vLLM, only if (1) did not
/// decide: an inferred fp8 becomes bfloat16. An FMHA mode the caller set
/// (`explicit_fmha`) is kept as it is (docs/spec/options.md 1.2 steps 4
/// and 6; its refusal is the caller's).
pub(crate) fn resolve(
    inferred: Inferred,
    phase: Phase,
    backend: &str,
    context_fmha_modes: &[FmhaQuant],
    explicit_fmha: bool,
) -> Quants {
    let mut fmha = inferred.fmha;
    let mut explicit = explicit_fmha;
    if phase == Phase::Context && !explicit_fmha {
        let modes = context_fmha_modes;
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
