//! DEEPSEEKV4: DeepSeek-V4-Flash / -Pro (docs/spec/families_dsv4.md). Every
//! decoder layer is wrapped in mHC pre / post modules and runs one of three
//! compressed attentions, each priced whole from its module table: CSA
//! (ratio 4, top-k indexer), HCA (ratio 128) and SWA (ratio 0, priced as
//! HCA). The FFN is one shared expert of `I_moe // tp` plus routed experts;
//! decode overlaps the two.

use serde_json::Value;

use crate::error::TablesError;
use crate::kernels::MoeShape;
use crate::model::ModelConfig;
use crate::modes::{FmhaQuant, KvQuant, MoeQuant};
use crate::op_sol::Dsv4AttnDims;
use crate::quant::GemmQuant;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpList, OpSpec};
use crate::step::quants::Inferred;
use crate::step::types::{Dsv4Attn, OpKind, Phase, Quants, StepError};

/// The attention groups a model can have: at most CSA and HCA (SWA joins HCA).
const MAX_GROUPS: usize = 2;

/// What a DeepSeek-V4 config adds (1.1), every field required.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Dsv4 {
    pub q_lora: i64,
    pub o_lora: i64,
    pub o_groups: i64,
    pub rope_dim: i64,
    pub index_heads: i64,
    pub index_head_dim: i64,
    pub index_topk: i64,
    pub window: i64,
    pub hc: i64,
    pub sinkhorn_iters: i64,
    /// `(ratio, layers)` per attention op, in first-appearance order (1.4).
    pub groups: [(i64, i64); MAX_GROUPS],
    pub group_count: usize,
    /// Layers per ratio of the first `L` entries, SWA counted apart: the
    /// KV cache keeps SWA layers window-only (7.1).
    pub swa_layers: i64,
    pub csa_layers: i64,
    pub hca_layers: i64,
    /// `expert_dtype == "fp4"`: the experts are MXFP4 (1.2 rule 1).
    pub fp4_experts: bool,
}

/// The `DeepSeekV4Config` keys (a `KeyError` in the spec when absent).
const REQUIRED: [&str; 16] = [
    "q_lora_rank",
    "o_lora_rank",
    "o_groups",
    "head_dim",
    "qk_rope_head_dim",
    "index_head_dim",
    "index_n_heads",
    "index_topk",
    "sliding_window",
    "compress_ratios",
    "compress_rope_theta",
    "num_hash_layers",
    "hc_mult",
    "hc_sinkhorn_iters",
    "hc_eps",
    "n_shared_experts",
];

impl Dsv4 {
    pub fn from_config(cfg: &ModelConfig, layers: i64) -> Result<Dsv4, StepError> {
        let text = &cfg.text;
        let corrupt = |what: String| StepError::Data(TablesError::document(&cfg.path, what));
        for key in REQUIRED {
            if text.get(key).is_none() {
                return Err(corrupt(format!("`{key}` is missing (a DeepseekV4ForCausalLM config needs it)")));
            }
        }
        let field = |key: &str| -> Result<i64, StepError> {
            cfg.int(key).map_err(StepError::Data)?.ok_or_else(|| corrupt(format!("`{key}` must be an integer")))
        };
        let ratios = text
            .get("compress_ratios")
            .and_then(Value::as_array)
            .ok_or_else(|| corrupt("`compress_ratios` must be a list of integers".to_string()))?;
        let wanted = usize::try_from(layers).unwrap_or(0);
        if ratios.len() < wanted {
            return Err(StepError::input(format!(
                "DeepSeek-V4 compress_ratios length {} is smaller than num_hidden_layers {layers}",
                ratios.len()
            )));
        }
        // Only the first L ratios count (the last entry is the MTP layer's).
        let mut first_seen: Vec<(i64, i64)> = Vec::new();
        let mut unknown: Vec<i64> = Vec::new();
        for r in &ratios[..wanted] {
            let r = r.as_i64().ok_or_else(|| corrupt(format!("`compress_ratios` holds {r}, not an integer")))?;
            if ![0, 4, 128].contains(&r) && !unknown.contains(&r) {
                unknown.push(r);
            }
            match first_seen.iter_mut().find(|(k, _)| *k == r) {
                Some((_, n)) => *n += 1,
                None => first_seen.push((r, 1)),
            }
        }
        if !unknown.is_empty() {
            unknown.sort_unstable();
            let list: Vec<String> = unknown.iter().map(i64::to_string).collect();
            return Err(StepError::input(format!("Unsupported DeepSeek-V4 compress_ratios: [{}]", list.join(", "))));
        }
        let count = |r: i64| first_seen.iter().find(|(k, _)| *k == r).map_or(0, |(_, n)| *n);
        let (swa, csa, hca) = (count(0), count(4), count(128));
        // SWA layers are priced as HCA ones: their count moves to ratio 128,
        // appended last when the model had no HCA layer (1.4).
        let mut order: Vec<(i64, i64)> = first_seen.iter().copied().filter(|(r, _)| *r != 0).collect();
        if swa > 0 {
            match order.iter_mut().find(|(r, _)| *r == 128) {
                Some((_, n)) => *n += swa,
                None => order.push((128, swa)),
            }
        }
        let mut groups = [(0, 0); MAX_GROUPS];
        let mut group_count = 0;
        for (r, n) in order.into_iter().filter(|(_, n)| *n > 0) {
            groups[group_count] = (r, n);
            group_count += 1;
        }
        let fp4_experts = text.get("expert_dtype").and_then(Value::as_str).is_some_and(|d| d.to_lowercase() == "fp4");
        Ok(Dsv4 {
            q_lora: field("q_lora_rank")?,
            o_lora: field("o_lora_rank")?,
            o_groups: field("o_groups")?,
            rope_dim: field("qk_rope_head_dim")?,
            index_heads: field("index_n_heads")?,
            index_head_dim: field("index_head_dim")?,
            index_topk: field("index_topk")?,
            window: field("sliding_window")?,
            hc: field("hc_mult")?,
            sinkhorn_iters: field("hc_sinkhorn_iters")?,
            groups,
            group_count,
            swa_layers: swa,
            csa_layers: csa,
            hca_layers: hca,
            fp4_experts,
        })
    }

    /// The checkpoint's modes after the DeepSeek-V4 rules (1.2): MXFP4
    /// experts, an fp8 KV cache, bfloat16 attention math.
    pub fn infer(&self, mut inferred: Inferred) -> Inferred {
        if self.fp4_experts {
            inferred.moe = MoeQuant::W4a8Mxfp4Mxfp8;
        }
        inferred.kv = KvQuant::Fp8;
        inferred.fmha = None;
        inferred
    }

    /// A phase's modes on a database (1.2, `resolve_dsv4_moe_arch`): on
    /// sglang the MXFP4 experts run FlashInfer's TRT-LLM kernel on Blackwell
    /// (`sm_version >= 100`) and its CUTLASS kernel on Hopper (90).
    pub fn quants(&self, mut quants: Quants, backend: &str, sm_version: Option<i64>) -> Quants {
        quants.fmha = FmhaQuant::Bfloat16;
        quants.kv = KvQuant::Fp8;
        if self.fp4_experts && backend == "sglang" {
            match sm_version {
                Some(sm) if sm >= 100 => quants.moe = MoeQuant::W4a8Mxfp4Mxfp8Trtllm,
                Some(90) => quants.moe = MoeQuant::W4a16Mxfp4Cutlass,
                _ => {}
            }
        }
        quants
    }

    /// The KV cache's layout at the phase's kv quant (7.1).
    pub fn kv_cache(&self, head_dim: i64, kv: KvQuant) -> Dsv4KvCache {
        Dsv4KvCache {
            swa_layers: self.swa_layers,
            csa_layers: self.csa_layers,
            hca_layers: self.hca_layers,
            window: self.window,
            head_dim,
            index_head_dim: self.index_head_dim,
            kv_bytes: kv.memory(),
        }
    }
}

/// DeepSeek-V4's KV cache per sequence (families_dsv4.md 7.1): one shared
/// latent per layer (not divided by tp), window-capped, plus each
/// compressed layer's entries and fp32 compressor state, and the CSA
/// layers' fp4 indexer cache with its own state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dsv4KvCache {
    pub swa_layers: i64,
    pub csa_layers: i64,
    pub hca_layers: i64,
    pub window: i64,
    pub head_dim: i64,
    pub index_head_dim: i64,
    /// Bytes per cached element (1 at fp8).
    pub kv_bytes: i64,
}

impl Dsv4KvCache {
    /// Bytes of one sequence of `tokens` (negative counts as 0).
    pub fn bytes_per_sequence(&self, tokens: f64) -> f64 {
        let s = tokens.max(0.0);
        let e = (self.head_dim * self.kv_bytes) as f64;
        let (hd, ihd) = (self.head_dim as f64, self.index_head_dim as f64);
        let window = s.min(self.window as f64) * e;
        let layer = |r: i64| {
            let rf = r as f64;
            let c = (s / rf).floor();
            let mut total = window + c * e + 2.0 * rf * if r == 4 { 2.0 } else { 1.0 } * hd * 4.0;
            if r == 4 {
                total += c * (ihd * 0.5) + 2.0 * rf * 2.0 * ihd * 4.0;
            }
            total
        };
        // Every term is a whole number below 2^53: the layer order of the
        // spec's float sum cannot change it.
        let (swa, csa, hca) = (self.swa_layers as f64, self.csa_layers as f64, self.hca_layers as f64);
        swa * window + csa * layer(4) + hca * layer(128)
    }
}

fn op(base: &'static str, kind: OpKind, count: f64, spec: OpSpec) -> Op {
    Op { base, kind, count, spec }
}

fn gemm(base: &'static str, count: f64, n: i64, k: i64, quant: GemmQuant, m_is_batch: bool) -> Op {
    op(base, OpKind::Gemm, count, OpSpec::Gemm { n, k, quant, m_is_batch, low_precision_input: false })
}

/// The op list of `phase` (2.1 / 2.2).
pub(crate) fn op_list(model: &ModelDesc, v4: &Dsv4, par: &Parallel, quants: &Quants, phase: Phase) -> OpList {
    let (h, tp, l) = (model.hidden, par.tp, model.layers as f64);
    let context = phase == Phase::Context;
    let norm = OpSpec::ElementWise { dim_in: h, dim_out: h };
    let mhc = |pre| OpSpec::Mhc { pre, hidden: h, hc: v4.hc, iters: v4.sinkhorn_iters };
    let li = model.moe_inter / tp;
    let shared = [
        gemm("shared_gate_up_gemm", l, 2 * li, h, quants.gemm, false),
        op("shared_act_gate", OpKind::ElementWise, l, OpSpec::ElementWise { dim_in: 2 * li, dim_out: li }),
        gemm("shared_ffn2_gemm", l, h, li, quants.gemm, false),
    ];
    // DeepSeek-V4's exchanges keep `is_context` in decode too (surprise 11).
    let dispatch = |pre| OpSpec::MoeDispatch {
        hidden: h,
        moe_tp: par.moe_tp,
        moe_ep: par.moe_ep,
        dp: par.dp,
        cp: par.cp,
        context: true,
        pre,
        quant: Some(quants.moe),
    };
    let experts = MoeShape {
        hidden: h,
        inter: model.moe_inter,
        topk: model.topk,
        experts: model.experts,
        moe_tp: par.moe_tp,
        moe_ep: par.moe_ep,
        quant: quants.moe,
        gated: true,
        distribution: model.distribution,
    };
    let routed = [
        gemm("router_gemm", l, model.experts, h, GemmQuant::Bfloat16, false),
        op("moe_pre_dispatch", OpKind::MoEDispatch, l, dispatch(true)),
        op("moe", OpKind::MoE, l, OpSpec::Moe { shape: experts, dp: par.dp }),
        op("moe_post_dispatch", OpKind::MoEDispatch, l, dispatch(false)),
    ];
    let kind = if context { OpKind::ContextDsv4Attention } else { OpKind::GenerationDsv4Attention };
    let attention = |ratio: i64| Dsv4Attn {
        dims: Dsv4AttnDims {
            heads: model.heads / tp,
            hidden: h,
            q_lora: v4.q_lora,
            o_lora: v4.o_lora,
            head_dim: model.head_dim,
            rope_dim: v4.rope_dim,
            index_heads: v4.index_heads,
            index_head_dim: v4.index_head_dim,
            index_topk: v4.index_topk,
            window: v4.window,
            ratio,
            o_groups: (v4.o_groups / tp).max(1),
            kv: quants.kv,
            fmha: quants.fmha,
            gemm: quants.gemm,
        },
        native_heads: model.heads,
        tp,
    };
    let mut ops = vec![
        op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab }),
        op("mhc_pre", OpKind::Dsv4Mhc, l, mhc(true)),
        op("attn_norm", OpKind::ElementWise, l, norm),
    ];
    for &(ratio, layers) in &v4.groups[..v4.group_count] {
        let spec = OpSpec::Dsv4Attention { context, attn: attention(ratio) };
        ops.push(op("attention", kind, layers as f64, spec));
    }
    ops.push(op("mhc_post", OpKind::Dsv4Mhc, l, mhc(false)));
    ops.push(op("ffn_norm", OpKind::ElementWise, l, norm));
    let mut subs = Vec::new();
    if context {
        ops.extend(shared);
        ops.extend(routed);
    } else {
        subs.extend(routed);
        subs.extend(shared);
        ops.push(op("moe_overlap", OpKind::OverlapOp, 1.0, OpSpec::Overlap { a: (0, 4), b: (4, 7) }));
    }
    ops.push(gemm("logits_gemm", 1.0, model.vocab / tp, h, GemmQuant::Bfloat16, context));
    // The hand-off moves every token (no context split, 2.1).
    let p2p = OpSpec::P2P { hidden: h, seq_split: false };
    ops.push(op("p2p", OpKind::P2P, (par.pp - 1) as f64, p2p));
    OpList { ops, subs }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flash() -> Dsv4 {
        Dsv4 {
            q_lora: 1024,
            o_lora: 1024,
            o_groups: 8,
            rope_dim: 64,
            index_heads: 64,
            index_head_dim: 128,
            index_topk: 512,
            window: 128,
            hc: 4,
            sinkhorn_iters: 20,
            groups: [(4, 21), (128, 22)],
            group_count: 2,
            swa_layers: 2,
            csa_layers: 21,
            hca_layers: 20,
            fp4_experts: true,
        }
    }

    /// 7.1: Flash's KV bytes at 1, 1025 and 4224 tokens.
    #[test]
    fn flash_kv_cache_of_one_sequence() {
        let kv = flash().kv_cache(512, KvQuant::Fp8);
        assert_eq!(kv.bytes_per_sequence(1.0), 11_367_936.0);
        assert_eq!(kv.bytes_per_sequence(1025.0), 17_342_464.0);
        assert_eq!(kv.bytes_per_sequence(4224.0), 27_275_264.0);
    }
}
