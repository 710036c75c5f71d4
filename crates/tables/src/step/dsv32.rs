//! DEEPSEEKV32: DeepSeek-V3.2 and GLM-5.x, MLA-style layers whose attention
//! is DeepSeek Sparse Attention (docs/spec/families_dsa.md). Unlike DEEPSEEK
//! the whole attention block is one lookup in the DSA module tables (no
//! fallback), at `H // tp` heads; the shared expert is split by moe_tp, not
//! tp; GLM checkpoints may keep the DSA block and the shared expert at
//! bfloat16; vllm pays no tp all-reduces.

use serde_json::Value;

use crate::error::TablesError;
use crate::kernels::{DsaArch, DsaQuant, MoeShape};
use crate::model::ModelConfig;
use crate::modes::KvQuant;
use crate::op_sol::index_key_bytes;
use crate::quant::GemmQuant;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpList, OpSpec, logits_gemm, p2p};
use crate::step::types::{OpKind, Phase, Quants, StepError};

/// What a DSA config adds (1.2-1.3, 2.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Dsa {
    pub arch: DsaArch,
    /// The fraction of layers that run the indexer on sglang (GLM-5.2's
    /// shared top-k index: 21/78); every other backend prices all layers full.
    pub sglang_full_layers: f64,
    /// GLM checkpoints whose exclusions name `self_attn`: the DSA block at bfloat16.
    pub dsa_bf16: bool,
    /// GLM checkpoints whose exclusions name `shared_expert`: the shared GEMMs at bfloat16.
    pub shared_bf16: bool,
    pub kv_lora_rank: i64,
    pub qk_rope_head_dim: i64,
    pub index_head_dim: i64,
}

/// The fields a DSA config must have (a `KeyError` in the spec).
const REQUIRED: [&str; 8] = [
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "index_head_dim",
    "index_n_heads",
    "index_topk",
];

impl Dsa {
    pub fn from_config(cfg: &ModelConfig, architecture: &str, layers: i64) -> Result<Dsa, StepError> {
        let text = &cfg.text;
        let corrupt = |what: String| StepError::Data(TablesError::document(&cfg.path, what));
        for key in REQUIRED {
            if text.get(key).is_none() {
                return Err(corrupt(format!("`{key}` is missing (a {architecture} config needs it)")));
            }
        }
        let field = |key: &str| -> Result<i64, StepError> {
            cfg.int(key).map_err(StepError::Data)?.ok_or_else(|| corrupt(format!("`{key}` must be an integer")))
        };
        let glm = architecture == "GlmMoeDsaForCausalLM";
        let excluded = |part: &str| glm && cfg.exclusion_globs.iter().any(|g| g.contains(part));
        Ok(Dsa {
            arch: if glm { DsaArch::GlmMoeDsa } else { DsaArch::DeepseekV32 },
            sglang_full_layers: full_layer_fraction(text, layers).map_err(corrupt)?,
            dsa_bf16: excluded("self_attn"),
            shared_bf16: excluded("shared_expert"),
            kv_lora_rank: field("kv_lora_rank")?,
            qk_rope_head_dim: field("qk_rope_head_dim")?,
            index_head_dim: field("index_head_dim")?,
        })
    }

    /// KV-cache bytes one token keeps over all layers (8): the latent at
    /// the kv quant, the 2-byte rope part and the FP8 indexer key.
    pub fn kv_bytes_per_token(&self, layers: i64, kv: KvQuant) -> i64 {
        let per_layer =
            self.kv_lora_rank * kv.memory() + self.qk_rope_head_dim * 2 + index_key_bytes(self.index_head_dim) as i64;
        layers * per_layer
    }
}

/// The fraction of layers computing the indexer (1.3): 1.0 unless the
/// config shares top-k indices across layers (`index_topk_freq` > 1 or an
/// `index_topk_pattern`).
fn full_layer_fraction(text: &Value, layers: i64) -> Result<f64, String> {
    let freq = match text.get("index_topk_freq") {
        None | Some(Value::Null) => 1,
        Some(v) => match v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)) {
            Some(0) => 1,
            Some(f) => f,
            None => return Err(format!("`index_topk_freq` must be a number, found {v}")),
        },
    };
    let pattern: Option<Vec<bool>> = match text.get("index_topk_pattern") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.chars().map(|c| c == 'S').collect()),
        Some(Value::Array(items)) => Some(items.iter().map(|v| v.as_str() == Some("S")).collect()),
        Some(v) => return Err(format!("`index_topk_pattern` must be a string or a list, found {v}")),
    };
    let offset = match text.get("index_skip_topk_offset") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_i64().ok_or_else(|| format!("`index_skip_topk_offset` must be an integer, found {v}"))?),
    };
    if freq <= 1 && pattern.as_ref().is_none_or(|p| p.is_empty()) {
        return Ok(1.0);
    }
    if layers == 0 {
        return Ok(1.0);
    }
    let skips = |lid: i64| match (&pattern, offset) {
        (Some(p), _) => usize::try_from(lid).ok().and_then(|i| p.get(i).copied()).unwrap_or(false),
        (None, Some(off)) => (lid - off + 1).max(0).rem_euclid(freq) != 0,
        (None, None) => (lid - 1).max(0).rem_euclid(freq) != 0,
    };
    let full = (0..layers).filter(|&lid| !skips(lid)).count();
    Ok(full as f64 / layers as f64)
}

fn op(base: &'static str, kind: OpKind, count: f64, spec: OpSpec) -> Op {
    Op { base, kind, count, spec }
}

fn gemm(base: &'static str, count: f64, n: i64, k: i64, quant: GemmQuant) -> Op {
    op(base, OpKind::Gemm, count, OpSpec::Gemm { n, k, quant, m_is_batch: false, low_precision_input: false })
}

/// The op list of `phase` (4.1 / 4.2).
pub(crate) fn op_list(model: &ModelDesc, dsa: &Dsa, par: &Parallel, quants: &Quants, phase: Phase) -> OpList {
    let (h, tp, l) = (model.hidden, par.tp, model.layers as f64);
    let context = phase == Phase::Context;
    // Under context parallelism the context add-norms see `x // cp` tokens
    // while every other token-major op sees all of them (families_dsa.md 7).
    let cp = if context { par.cp } else { 1 };
    let norm = if cp > 1 {
        OpSpec::FloorSplitElementWise { dim_in: 2 * h, dim_out: 2 * h, split: cp }
    } else {
        OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h }
    };
    let bf16_or = |bf16: bool| if bf16 { GemmQuant::Bfloat16 } else { quants.gemm };
    let attention = OpSpec::Dsa {
        context,
        heads: model.heads / tp,
        quant: DsaQuant {
            kv: quants.kv,
            fmha: quants.fmha,
            gemm: bf16_or(dsa.dsa_bf16),
            arch: dsa.arch,
            skip_indexer: false,
        },
        full_layers: if par.sglang { dsa.sglang_full_layers } else { 1.0 },
        cp,
    };
    let kind = if context { OpKind::ContextDsaModule } else { OpKind::GenerationDsaModule };
    // The shared expert, split by moe_tp at its own quant.
    let (inter, shared_q) = (model.moe_inter, bf16_or(dsa.shared_bf16));
    let shared = [
        gemm("shared_gate_up_gemm", l, 2 * inter / par.moe_tp, h, shared_q),
        op(
            "shared_act_gate",
            OpKind::ElementWise,
            l,
            OpSpec::ElementWise { dim_in: 2 * inter / par.moe_tp, dim_out: inter / par.moe_tp },
        ),
        gemm("shared_ffn2_gemm", l, h, inter / par.moe_tp, shared_q),
    ];
    let dispatch = |pre| OpSpec::MoeDispatch {
        hidden: h,
        moe_tp: par.moe_tp,
        moe_ep: par.moe_ep,
        dp: par.dp,
        cp: par.cp,
        context,
        pre,
        quant: Some(quants.moe),
    };
    let experts = MoeShape {
        hidden: h,
        inter,
        topk: model.topk,
        experts: model.experts,
        moe_tp: par.moe_tp,
        moe_ep: par.moe_ep,
        quant: quants.moe,
        gated: true,
        distribution: model.distribution,
    };
    let routed = [
        gemm("router_gemm", l, model.experts, h, GemmQuant::Bfloat16),
        op("moe_pre_dispatch", OpKind::MoEDispatch, l, dispatch(true)),
        op("moe", OpKind::MoE, l, OpSpec::Moe { shape: experts, dp: par.dp }),
        op("moe_post_dispatch", OpKind::MoEDispatch, l, dispatch(false)),
    ];
    let logits = logits_gemm(model, tp, phase);
    let mut ops = vec![
        op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab }),
        op("add_norm_1", OpKind::ElementWise, l, norm),
        op("attention", kind, l, attention),
        op("add_norm_2", OpKind::ElementWise, l, norm),
    ];
    let mut subs = Vec::new();
    if context {
        ops.extend(shared);
        ops.extend(routed);
    } else {
        // Decode overlaps the routed path with the shared expert.
        subs.extend(routed);
        subs.extend(shared);
        ops.push(op("moe_overlap", OpKind::OverlapOp, 1.0, OpSpec::Overlap { a: (0, 4), b: (4, 7) }));
    }
    ops.push(logits);
    ops.push(p2p(par, h));
    OpList { ops, subs }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GLM-5.2 (freq 4, offset 3, 78 layers): layers 0, 1, 2, 6, ..., 74 run
    /// the indexer, 21 of 78 (1.3), not a quarter.
    #[test]
    fn glm_52_runs_the_indexer_on_21_of_78_layers() {
        let cfg = serde_json::json!({"index_topk_freq": 4, "index_skip_topk_offset": 3});
        assert_eq!(full_layer_fraction(&cfg, 78), Ok(21.0 / 78.0));
        assert_eq!(full_layer_fraction(&serde_json::json!({}), 61), Ok(1.0));
        let pattern = serde_json::json!({"index_topk_pattern": "FFSS"});
        assert_eq!(full_layer_fraction(&pattern, 4), Ok(0.5));
        assert!(full_layer_fraction(&serde_json::json!({"index_topk_freq": "x"}), 4).is_err());
    }
}
