//! Weight and KV-cache sizes of a model's ops, as the spec's memory model
//! counts them (`Operation.get_weights`, `get_kvcache_elements_per_token`).
//!
//! Only what the spec counts is counted: an op that stores no weights in
//! the spec (attention, MLA, communication, element-wise) counts 0 here too,
//! even where a real kernel holds some (the MLA projections of the module
//! ops, for one). The arithmetic keeps Python's types: an integer product
//! stays exact until it meets a float, a float size floors with Python's
//! float `//`.

use crate::op_sol::Dsv4AttnDims;
use crate::pymath::py_floordiv;
use crate::step::WindowedKv;
use crate::step::model::{Family, ModelDesc};
use crate::step::ops::{Op, OpSpec};
use crate::system::Num;

/// One op's `get_weights()`: bytes on one GPU, times its count.
pub(crate) fn op_weights(op: &Op, subs: &[Op]) -> f64 {
    match op.spec {
        OpSpec::Embedding { hidden, rows } => int_times(i128::from(rows) * i128::from(hidden) * 2, op.count),
        OpSpec::Gemm { n, k, quant, .. } => match quant.memory() {
            Num::Int(bytes) => int_times(i128::from(n) * i128::from(k) * bytes, op.count),
            Num::Float(bytes) => (n * k) as f64 * bytes * op.count,
        },
        OpSpec::Moe { shape, .. } => {
            let gemms: i128 = if shape.gated { 3 } else { 2 };
            let elements = i128::from(shape.hidden) * i128::from(shape.inter) * i128::from(shape.experts);
            let (ep, tp) = (shape.moe_ep.max(1), shape.moe_tp.max(1));
            match shape.quant.memory() {
                Num::Int(bytes) => int_times(
                    (elements * bytes * gemms).div_euclid(i128::from(ep)).div_euclid(i128::from(tp)),
                    op.count,
                ),
                Num::Float(bytes) => {
                    let w = elements as f64 * bytes * gemms as f64;
                    py_floordiv(py_floordiv(w, ep as f64), tp as f64) * op.count
                }
            }
        }
        // The primary's weights when it has any, else the fallback's sum.
        OpSpec::Fallback { primary, fallback } => {
            let w = op_weights(&subs[primary], subs);
            if w > 0.0 { w } else { subs[fallback.0..fallback.1].iter().fold(0.0, |sum, o| sum + op_weights(o, subs)) }
        }
        OpSpec::Overlap { a, b } => {
            subs[a.0..a.1].iter().chain(&subs[b.0..b.1]).fold(0.0, |sum, o| sum + op_weights(o, subs))
        }
        // Two sites' mixing parameters per layer, bfloat16 (families_dsv4.md 4.1).
        OpSpec::Mhc { hidden, hc, .. } => {
            let (hc, mix) = (i128::from(hc), i128::from((2 + hc) * hc));
            int_times(2 * (mix * hc * i128::from(hidden) + mix + 3) * 2, op.count)
        }
        OpSpec::Dsv4Attention { attn, .. } => dsv4_attention_weights(&attn.dims) * op.count,
        OpSpec::ElementWise { .. }
        | OpSpec::FloorSplitElementWise { .. }
        | OpSpec::ContextAttention { .. }
        | OpSpec::GenerationAttention { .. }
        | OpSpec::EncoderAttention { .. }
        | OpSpec::AllReduce { .. }
        | OpSpec::P2P { .. }
        | OpSpec::CpAllGather { .. }
        | OpSpec::MoeDispatch { .. }
        | OpSpec::MlaModule { .. }
        | OpSpec::ContextMla { .. }
        | OpSpec::GenerationMla { .. }
        | OpSpec::MlaBmm { .. }
        | OpSpec::Gdn { .. }
        | OpSpec::Mamba2 { .. }
        | OpSpec::Dsa { .. } => 0.0,
    }
}

/// One DeepSeek-V4 attention layer's weights (families_dsv4.md 4.2): the
/// projections (and compressors, indexer) at the GEMM quant, the output
/// absorption and indexer gate in bfloat16, the fp32 sinks and positions.
fn dsv4_attention_weights(d: &Dsv4AttnDims) -> f64 {
    let [n, h, qr, or, hd, inh, ihd, ratio, og] =
        [d.heads, d.hidden, d.q_lora, d.o_lora, d.head_dim, d.index_heads, d.index_head_dim, d.ratio, d.o_groups]
            .map(i128::from);
    let mut gemm = h * qr + qr * n * hd + h * hd + og * or * h;
    let mut bf16 = n * hd * or;
    let mut fp32 = n;
    if ratio != 0 {
        let cm = if ratio == 4 { 2 } else { 1 };
        gemm += 2 * h * cm * hd;
        fp32 += ratio * cm * hd;
    }
    if ratio == 4 {
        gemm += qr * inh * ihd + 2 * h * 2 * ihd;
        bf16 += h * inh;
        fp32 += ratio * 2 * ihd;
    }
    match d.gemm.memory() {
        Num::Int(bytes) => (gemm * bytes + bf16 * 2 + fp32 * 4) as f64,
        Num::Float(bytes) => gemm as f64 * bytes + (bf16 * 2) as f64 + (fp32 * 4) as f64,
    }
}

/// An exact integer size times an op count: Python multiplies the int by an
/// int count exactly and rounds once when the result meets a float.
fn int_times(bytes: i128, count: f64) -> f64 {
    if count.fract() == 0.0 && count.abs() < 9.0e15 { (bytes * count as i128) as f64 } else { bytes as f64 * count }
}

/// KV-cache elements one token keeps on one GPU over all layers at `tp`,
/// and the windowed share of them: the MLA latent (`layers *
/// (kv_lora_rank + qk_rope_head_dim)`, not split by tp); Gemma 4's per
/// layer type, its sliding-window layers windowed (families_qwen35_gemma4.md
/// 9.1); else `ceil(Hkv / tp) * head_size * layers * 2`.
pub(crate) fn kv_elements_per_token(d: &ModelDesc, tp: i64) -> (i64, Option<WindowedKv>) {
    let per_gpu = |heads: i64| (heads + tp - 1) / tp;
    if d.family == Family::Mla {
        return (d.layers * d.mla_kv_width, None);
    }
    if let Some(g) = &d.gemma4 {
        let windowed = 2 * g.swa_layers * per_gpu(g.swa_kv_heads) * g.swa_head_dim;
        let global = 2 * g.global_layers * per_gpu(g.global_kv_heads) * g.global_head_dim;
        return (windowed + global, Some(WindowedKv { elements_per_token: windowed, window: g.window }));
    }
    (per_gpu(d.kv_heads) * d.head_dim * d.layers * 2, None)
}
