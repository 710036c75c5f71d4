//! The serving runtimes' differences, as the spec models them
//! (`backends/{trtllm,vllm,sglang}_backend.py` over `base_backend.py`):
//! activation memory coefficients and floors, the decode tokens of a mixed
//! step, the pipeline-drain correction of TPOT, vLLM's prefill dispatch
//! overhead, TTFT queueing and throughput cap, and TRT-LLM's KV budget.

use crate::error::ServingError;

/// A serving runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Trtllm,
    Vllm,
    Sglang,
}

/// Activation bytes per token and head dimension by tp (1, 2, 4, 8).
type Coefficients = [f64; 4];

const TRTLLM_DENSE: Coefficients = [11.0, 6.5, 5.0, 5.0];
const TRTLLM_MOE: Coefficients = [22.0, 13.0, 10.0, 10.0];
const TRTLLM_DEFAULT: Coefficients = [10.0, 6.0, 5.0, 5.0];
const SGLANG_DENSE: Coefficients = [14.0, 8.5, 6.5, 6.5];
const SGLANG_MOE: Coefficients = [28.0, 17.0, 13.0, 13.0];
const SGLANG_DEFAULT: Coefficients = [13.0, 8.0, 6.5, 6.5];

/// Families that pay a MoE block-scale dispatch workspace on top of the
/// activations.
const MOE_WORKSPACE_FAMILIES: [&str; 5] = ["GEMMA4MIX", "DEEPSEEK", "DEEPSEEKV32", "DEEPSEEKV4", "KIMIK25"];

/// TRT-LLM's KV budget: the default free-memory fraction, the allocator's
/// reserve and the formula's tolerance.
const TRTLLM_FREE_GPU_MEMORY_FRACTION: f64 = 0.9;
const TRTLLM_KV_RESERVED_FRACTION: f64 = 0.015;
const TRTLLM_KV_TOLERANCE: f64 = 0.02;
/// TRT-LLM sizes activations for its build-time `max_num_tokens`.
const TRTLLM_MAX_NUM_TOKENS: f64 = 8192.0;

impl Backend {
    pub fn from_name(name: &str) -> Result<Backend, ServingError> {
        match name {
            "trtllm" => Ok(Backend::Trtllm),
            "vllm" => Ok(Backend::Vllm),
            "sglang" => Ok(Backend::Sglang),
            other => Err(ServingError::input(format!(
                "no serving model for backend '{other}' (the spec serves trtllm, vllm and sglang)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Trtllm => "trtllm",
            Backend::Vllm => "vllm",
            Backend::Sglang => "sglang",
        }
    }

    /// The activation coefficient of `family` at `tp` (clamped to 8); the
    /// spec has none for other degrees (a `KeyError` there).
    pub(crate) fn activation_coefficient(self, family: &str, tp: u32) -> Result<f64, ServingError> {
        let table = match (self, family) {
            (Backend::Sglang, "LLAMA") => SGLANG_DENSE,
            (Backend::Sglang, f) if f == "MOE" || MOE_WORKSPACE_FAMILIES.contains(&f) => SGLANG_MOE,
            (Backend::Sglang, _) => SGLANG_DEFAULT,
            (_, "LLAMA") => TRTLLM_DENSE,
            (_, f) if f == "MOE" || MOE_WORKSPACE_FAMILIES.contains(&f) => TRTLLM_MOE,
            _ => TRTLLM_DEFAULT,
        };
        let index = match tp.min(8) {
            1 => 0,
            2 => 1,
            4 => 2,
            8 => 3,
            other => {
                return Err(ServingError::input(format!(
                    "the spec's memory model has no activation coefficient for tp {other} (tp must be 1, 2, 4 or at least 8)"
                )));
            }
        };
        Ok(table[index])
    }

    /// Whether `family` adds the MoE dispatch workspace.
    pub(crate) fn has_moe_workspace(family: &str) -> bool {
        MOE_WORKSPACE_FAMILIES.contains(&family)
    }

    /// The workspace's feature width: TRT-LLM (and vLLM, which mirrors it)
    /// keeps the attention width `h` except for GEMMA4MIX; the base rule
    /// (SGLang) uses the residual hidden size.
    pub(crate) fn moe_workspace_width(self, family: &str, attention_width: i64, hidden: i64) -> i64 {
        match self {
            Backend::Trtllm | Backend::Vllm if family != "GEMMA4MIX" => attention_width,
            _ => hidden,
        }
    }

    /// The floor of the activation memory, bytes.
    pub(crate) fn min_activation_bytes(self) -> f64 {
        match self {
            Backend::Sglang => 90.0 * 1024.0 * 1024.0,
            _ => 70.0 * 1024.0 * 1024.0,
        }
    }

    /// Multiplicative overheads on activations and on other memory
    /// (`1.0 + frac`; SGLang's Python runtime only).
    pub(crate) fn overheads(self) -> Option<(f64, f64)> {
        match self {
            Backend::Sglang => Some((1.0 + 0.15, 1.0 + 0.20)),
            _ => None,
        }
    }

    /// Agg memory: TRT-LLM sizes activations for `max_num_tokens`, not the
    /// step's tokens.
    pub(crate) fn agg_activation_tokens(self, num_tokens: f64) -> f64 {
        match self {
            Backend::Trtllm => TRTLLM_MAX_NUM_TOKENS,
            _ => num_tokens,
        }
    }

    /// TRT-LLM's KV-cache budget check `(free fraction, reserved, tolerance)`;
    /// the other runtimes do none.
    pub(crate) fn kv_budget(self) -> Option<(f64, f64, f64)> {
        match self {
            Backend::Trtllm => {
                Some((TRTLLM_FREE_GPU_MEMORY_FRACTION, TRTLLM_KV_RESERVED_FRACTION, TRTLLM_KV_TOLERANCE))
            }
            _ => None,
        }
    }

    /// Decode tokens that share a mixed step with `ctx_tokens` of prefill
    /// (batch `b > 1`). vLLM serialises prefill: every request but the ones
    /// prefilling decodes. The base rule spreads the batch over the steps
    /// prefill takes when they outnumber `osl`.
    pub(crate) fn mix_step_gen_tokens(self, b: u32, ctx_tokens: u32, isl: u32, osl: u32) -> i64 {
        let others = i64::from(b) - (f64::from(ctx_tokens) / f64::from(isl)).ceil() as i64;
        if self == Backend::Vllm {
            return others.max(1);
        }
        let steps = (f64::from(isl) * f64::from(b) / f64::from(ctx_tokens)).ceil();
        if steps >= f64::from(osl) {
            // int(b // (steps / osl)): Python's float floor division.
            return (aicsql_tables::pymath::py_floordiv(f64::from(b), steps / f64::from(osl)) as i64).max(1);
        }
        others.max(1)
    }

    /// Mixed steps that count toward TPOT: TRT-LLM and SGLang drop ~3 steps
    /// of pipeline drain at the prefill/decode boundary.
    pub(crate) fn tpot_mix_steps(self, mix_steps: f64) -> f64 {
        match self {
            Backend::Vllm => mix_steps,
            _ => (mix_steps - 3.0).max(1.0),
        }
    }

    /// vLLM's CPU dispatch cost per request, 0.8 ms per layer.
    pub(crate) fn prefill_dispatch_ms(self, layers: i64) -> f64 {
        match self {
            Backend::Vllm => layers as f64 * 0.8,
            _ => 0.0,
        }
    }

    /// The factor from one request's prefill time to TTFT.
    pub(crate) fn ttft_queueing_factor(self, b: u32, steps_to_finish_ctx: f64) -> f64 {
        match self {
            Backend::Vllm if b <= 1 => 1.0,
            Backend::Vllm => (1.0 + f64::from(b).log2() / 8.0).min(2.0),
            _ => (2.0 + (steps_to_finish_ctx - 3.0) / 2.0 / 10.0).min(4.0),
        }
    }

    /// vLLM caps output throughput at Little's law for `b` requests of
    /// `ttft + tpot * (osl - 1)` each.
    pub(crate) fn throughput_cap(self, step_throughput: f64, ttft: f64, tpot: f64, b: u32, osl: u32) -> f64 {
        if self != Backend::Vllm {
            return step_throughput;
        }
        let generated = f64::from(osl.saturating_sub(1));
        let request_latency = ttft + tpot * generated;
        if request_latency <= 0.0 {
            return step_throughput;
        }
        let little = f64::from(b) * generated * 1000.0 / request_latency;
        if little < step_throughput { little } else { step_throughput }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_follow_family_and_backend() {
        let c = |b: Backend, f: &str, tp: u32| b.activation_coefficient(f, tp).ok();
        assert_eq!(c(Backend::Trtllm, "LLAMA", 2), Some(6.5));
        assert_eq!(c(Backend::Vllm, "MOE", 16), Some(10.0));
        assert_eq!(c(Backend::Sglang, "KIMIK25", 1), Some(28.0));
        assert_eq!(c(Backend::Sglang, "QWEN3VL", 4), Some(6.5));
        assert_eq!(c(Backend::Trtllm, "HYBRIDMOE", 1), Some(10.0));
        assert_eq!(c(Backend::Trtllm, "LLAMA", 3), None);
    }

    #[test]
    fn mixed_step_decode_tokens() {
        // vLLM: b - ceil(ctx / isl), at least 1.
        assert_eq!(Backend::Vllm.mix_step_gen_tokens(16, 8192, 4000, 10), 13);
        assert_eq!(Backend::Vllm.mix_step_gen_tokens(2, 8192, 1000, 10), 1);
        // Base: prefill needs ceil(4000 * 16 / 4000) = 16 steps >= osl 8, so
        // int(16 // (16 / 8)) = 8 decode tokens per step.
        assert_eq!(Backend::Trtllm.mix_step_gen_tokens(16, 4000, 4000, 8), 8);
        assert_eq!(Backend::Sglang.mix_step_gen_tokens(16, 4000, 4000, 100), 15);
    }

    #[test]
    fn ttft_factors() {
        assert_eq!(Backend::Vllm.ttft_queueing_factor(1, 1.0), 1.0);
        assert_eq!(Backend::Vllm.ttft_queueing_factor(16, 1.0), 1.5);
        assert_eq!(Backend::Vllm.ttft_queueing_factor(1024, 1.0), 2.0);
        assert_eq!(Backend::Trtllm.ttft_queueing_factor(8, 13.0), 2.5);
        assert_eq!(Backend::Sglang.ttft_queueing_factor(8, 100.0), 4.0);
    }
}
