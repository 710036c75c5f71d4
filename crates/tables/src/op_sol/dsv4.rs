//! Speed-of-light latencies of DeepSeek-V4's module ops (docs/spec/families_dsv4.md
//! 4.1, 4.4): the mHC pre / post module and the compressed attention module.
//! Python's int / float promotion is kept term by term: integer products stay
//! exact (`i128`), a term becomes a float only where the spec's does (a
//! fractional quant size, the 0.0 defaults of the CSA-only terms), and the
//! sums and divisions run in the spec's order.

use super::{OpSol, div, py_max};
use crate::modes::{FmhaQuant, KvQuant};
use crate::pymath::py_mul;
use crate::quant::GemmQuant;
use crate::system::Num;

/// Python's `a + b`: exact for two ints, a float sum otherwise.
fn add(a: Num, b: Num) -> Num {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Num::Int(x + y),
        _ => Num::Float(a.as_f64() + b.as_f64()),
    }
}

/// `a * b` with Python's promotion (NaN past 128 bits, which no shape reaches).
fn mul(a: Num, b: Num) -> Num {
    py_mul(a, b).unwrap_or(Num::Float(f64::NAN))
}

/// One compressed-attention module's geometry and quants as the SOL reads
/// them (4.2 arguments): `heads` local, `o_groups` already `max(1, og // tp)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dsv4AttnDims {
    pub heads: i64,
    pub hidden: i64,
    pub q_lora: i64,
    pub o_lora: i64,
    pub head_dim: i64,
    pub rope_dim: i64,
    pub index_heads: i64,
    pub index_head_dim: i64,
    pub index_topk: i64,
    pub window: i64,
    pub ratio: i64,
    pub o_groups: i64,
    pub kv: KvQuant,
    pub fmha: FmhaQuant,
    pub gemm: GemmQuant,
}

/// `sum over queries of min(prefix + i + 1, limit)`, times the batch (4.4).
fn causal_limited_pairs(b: i128, q: i128, p: i128, limit: i128) -> i128 {
    if limit <= 0 || q <= 0 {
        return 0;
    }
    let full = p + q;
    if p >= limit {
        return b * q * limit;
    }
    if full <= limit {
        return (b * (full * (full + 1) - p * (p + 1))).div_euclid(2);
    }
    (b * (limit * (limit + 1) - p * (p + 1))).div_euclid(2) + b * (full - limit) * limit
}

/// `sum_{i <= n} floor(i / r)`.
fn sum_floor_upto(n: i128, r: i128) -> i128 {
    if n < 0 {
        return 0;
    }
    let (q, rem) = (n.div_euclid(r), n.rem_euclid(r));
    (r * q * (q - 1)).div_euclid(2) + q * (rem + 1)
}

/// Compressed-KV pairs of a prefill chunk, each query seeing at most `limit`
/// compressed entries (4.4).
fn compressed_pairs(b: i128, q: i128, p: i128, r: i128, limit: i128) -> i128 {
    if r <= 0 || q <= 0 || limit <= 0 {
        return 0;
    }
    let (start, end, sat) = (p + 1, p + q, limit * r);
    let total = if end < sat {
        sum_floor_upto(end, r) - sum_floor_upto(start - 1, r)
    } else if start >= sat {
        q * limit
    } else {
        sum_floor_upto(sat - 1, r) - sum_floor_upto(start - 1, r) + (end - sat + 1) * limit
    };
    b * total
}

impl OpSol {
    /// The mHC module of one decoder layer (two sites) at `tokens` (4.1),
    /// bfloat16: `pre` (the Sinkhorn mixing) or `post`.
    pub fn mhc(&self, tokens: i64, hidden: i64, hc: i64, iters: i64, pre: bool) -> f64 {
        let (nt, h, hc, it) = (i128::from(tokens), i128::from(hidden), i128::from(hc), i128::from(iters));
        const SITES: i128 = 2;
        const MEM: i128 = 2;
        let (hd_c, mix) = (hc * h, (2 + hc) * hc);
        let ops = if pre {
            SITES * (2 * nt * hd_c * mix + nt * hd_c * 3 + nt * (hc * hc + 2 * hc) * it + 2 * nt * hc * h)
        } else {
            SITES * (2 * nt * hc * hc * h + 2 * nt * hc * h)
        };
        let params = SITES * (mix * hd_c + mix + 3) * MEM;
        let mut act = SITES * nt * hd_c * MEM * 2;
        if pre {
            act += SITES * nt * (2 * hc + hc * hc) * 4;
        }
        let math = div(Num::Int(ops), self.tc_flops(1)) * 1000.0;
        let mem = div(Num::Int(params + act), self.mem_bw) * 1000.0;
        py_max(math, mem)
    }

    /// The compressed attention module (4.4) at `(b, s, prefix)` (context)
    /// or `(b, s)` (decode, `prefix` 0; the attention dtype follows the KV cache).
    pub fn dsv4_attention(&self, d: &Dsv4AttnDims, context: bool, b: i64, s: i64, prefix: i64) -> f64 {
        let [b, s, p] = [b, s, prefix].map(i128::from);
        let [n, h, qr, or, hd, rope, inh, ihd, itopk, win, ratio] = [
            d.heads,
            d.hidden,
            d.q_lora,
            d.o_lora,
            d.head_dim,
            d.rope_dim,
            d.index_heads,
            d.index_head_dim,
            d.index_topk,
            d.window,
            d.ratio,
        ]
        .map(i128::from);
        let fmha = if context {
            d.fmha
        } else if d.kv == KvQuant::Fp8 {
            FmhaQuant::Fp8
        } else {
            FmhaQuant::Bfloat16
        };
        let gq_mem = d.gemm.memory();
        let t = if context { b * s } else { b };
        let kv_len = if context { p + s } else { (s - 1).max(0) };
        let g = i128::from(d.o_groups.max(1));
        let csa = ratio == 4;
        let proj = 2 * t * h * qr + 2 * t * qr * n * hd + 2 * t * h * hd + 2 * t * g * or * h;
        let absorb = 2 * t * n * hd * or;
        let cm: i128 = if csa { 2 } else { 1 };
        let comp = if ratio != 0 {
            let mut c = 4 * t * h * cm * hd + 2 * t * cm * hd;
            if csa {
                c += 4 * t * h * 2 * ihd + 2 * t * 2 * ihd;
            }
            Num::Int(c)
        } else {
            Num::Float(0.0)
        };
        let limit = |kv_len: i128| if csa { itopk } else { (kv_len.div_euclid(ratio.max(1))).max(0) };
        let (win_pairs, comp_pairs) = if context {
            let comp = if ratio != 0 { compressed_pairs(b, s, p, ratio, limit(kv_len)) } else { 0 };
            (causal_limited_pairs(b, s, p, win), comp)
        } else {
            let comp = if ratio != 0 { b * kv_len.div_euclid(ratio).min(limit(kv_len)) } else { 0 };
            (b * kv_len.min(win), comp)
        };
        let pairs = win_pairs + comp_pairs;
        let attn = 4 * n * hd * pairs;
        let (idx, idx_bf16, idx_cache) = if csa {
            let clen = kv_len.div_euclid(ratio);
            let iq = t;
            let idx = 2 * iq * qr * inh * ihd + 2 * iq * clen * inh * ihd;
            let cache = (b * clen) as f64 * (ihd as f64 * 0.5);
            (Num::Int(idx), Num::Int(2 * iq * h * inh), cache)
        } else {
            (Num::Float(0.0), Num::Float(0.0), 0.0)
        };
        let mut w_gemm = mul(Num::Int(h * qr + qr * n * hd + h * hd + g * or * h), gq_mem);
        let mut w_bf16 = n * hd * or * 2;
        if ratio != 0 {
            w_gemm = add(w_gemm, mul(Num::Int(2 * h * cm * hd), gq_mem));
        }
        if csa {
            w_gemm = add(w_gemm, mul(Num::Int(qr * inh * ihd), gq_mem));
            w_bf16 += h * inh * 2;
        }
        let act = mul(Num::Int(t * (h + qr + n * hd + hd + g * or)), gq_mem);
        let kv = pairs * hd * i128::from(d.kv.memory());
        let rope_bytes = t * n * rope * i128::from(fmha.memory());
        let math = div(add(Num::Int(proj), comp), self.tc_flops(d.gemm.compute()))
            + div(add(Num::Int(absorb), idx_bf16), self.tc_flops(1))
            + div(idx, self.tc_flops(2))
            + div(Num::Int(attn), self.tc_flops(fmha.compute()));
        let bytes = [Num::Int(w_bf16), act, Num::Int(kv), Num::Float(idx_cache), Num::Int(rope_bytes)]
            .into_iter()
            .fold(w_gemm, add);
        py_max(math * 1000.0, div(bytes, self.mem_bw) * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pair counts of 4.4 against their sums written out.
    #[test]
    fn pair_counts_match_their_definitions() {
        for (b, q, p, limit) in [(1, 1024, 0, 128), (2, 100, 50, 128), (3, 10, 200, 128), (1, 64, 0, 128)] {
            let brute: i128 = (0..q).map(|i| (p + i + 1).min(limit)).sum::<i128>() * b;
            assert_eq!(causal_limited_pairs(b, q, p, limit), brute);
        }
        for (b, q, p, r, limit) in
            [(1, 1024, 0, 4, 512), (2, 4096, 0, 4, 512), (1, 300, 2000, 128, 17), (1, 5, 3, 4, 1)]
        {
            let brute: i128 = (p + 1..=p + q).map(|e| (e / r).min(limit)).sum::<i128>() * b;
            assert_eq!(compressed_pairs(b, q, p, r, limit), brute);
        }
    }
}
