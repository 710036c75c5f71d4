//! Speed-of-light latencies of the non-GEMM ops (docs/spec sections 5.1, 5.3-5.9)
//! and the empirical memory-op formula, in Python's arithmetic: products of
//! ints are exact (i128 here), `int / int` is correctly rounded, an int
//! meeting a float converts first, and expressions run left to right.
//! The GEMM SOL lives in [`crate::sol`].

mod dsv4;

pub use dsv4::Dsv4AttnDims;

use crate::pymath::{py_mul, py_true_div};
use crate::system::{Num, SystemSpec};

/// The DSA module's structural dimensions (families_dsa.md 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DsaDims {
    pub hidden: i64,
    pub q_lora: i64,
    pub kv_lora: i64,
    pub qk_nope: i64,
    pub qk_rope: i64,
    pub v_head: i64,
    pub index_topk: i64,
    pub index_head_dim: i64,
    pub index_heads: i64,
}

impl DsaDims {
    /// Bytes of one token's FP8 indexer key: the key plus a 4-byte scale
    /// per 128 elements.
    pub fn index_bytes(&self) -> i128 {
        index_key_bytes(self.index_head_dim)
    }

    /// `qk_nope + qk_rope`: a query / key head's width.
    fn qk(&self) -> i128 {
        i128::from(self.qk_nope + self.qk_rope)
    }

    /// `kv_lora + qk_rope`: the latent a token keeps.
    fn latent(&self) -> i128 {
        i128::from(self.kv_lora + self.qk_rope)
    }

    /// `[hidden, q_lora, kv_lora, qk_nope, v_head, index_head_dim,
    /// index_heads, down-projection width]` as Python ints.
    fn widths(&self) -> [i128; 8] {
        let proj_out = self.q_lora + self.kv_lora + self.qk_rope + self.index_head_dim;
        [
            self.hidden,
            self.q_lora,
            self.kv_lora,
            self.qk_nope,
            self.v_head,
            self.index_head_dim,
            self.index_heads,
            proj_out,
        ]
        .map(i128::from)
    }

    /// Flops of the module's projections (down, q-up, indexer q and
    /// weights, output, the absorbed k / v up-projections) for `t` tokens
    /// over `n` heads; the same terms in both phases (6.2), exact ints.
    fn projection_flops(&self, t: i128, n: i128) -> i128 {
        let [hs, ql, kl, qn, vd, ihd, inh, proj_out] = self.widths();
        let qk = self.qk();
        2 * t * hs * proj_out
            + 2 * t * ql * (n * qk)
            + 2 * t * ql * (inh * ihd)
            + 2 * t * hs * inh
            + 2 * t * (n * vd) * hs
            + 2 * n * t * qn * kl
            + 2 * n * t * kl * vd
    }

    /// Weight elements the module reads for `n` heads (6.2).
    fn weight_elements(&self, n: i128) -> i128 {
        let [hs, ql, _, _, vd, ihd, inh, proj_out] = self.widths();
        hs * proj_out + ql * n * self.qk() + ql * inh * ihd + hs * inh + n * vd * hs
    }
}

/// `ihd + ceil(ihd / 128) * 4`: an FP8 indexer key with its scales.
pub fn index_key_bytes(index_head_dim: i64) -> i128 {
    let ihd = i128::from(index_head_dim);
    ihd + (ihd + 127).div_euclid(128) * 4
}

/// `a + b_1 + b_2 + ...` in Python, left to right: exact while all are ints.
fn num_sum(a: Option<Num>, ints: &[i128]) -> Num {
    ints.iter().fold(a.unwrap_or(Num::Float(f64::NAN)), |sum, &b| match sum {
        Num::Int(a) => Num::Int(a + b),
        Num::Float(a) => Num::Float(a + b as f64),
    })
}

/// The system constants the formulas use, validated once.
#[derive(Debug, Clone, Copy)]
pub struct OpSol {
    mem_bw: Num,
    bf16_flops: Num,
    fp8_flops: Option<Num>,
    fp4_flops: Option<Num>,
    /// `mem_bw * mem_bw_empirical_scaling_factor`, as Python forms it.
    mem_op_bw: Num,
    mem_const: Num,
    gpus_per_node: i64,
    sm_version: Option<i64>,
    gpus_per_rack: Option<i64>,
    intra_node_bw: Num,
    inter_node_bw: Num,
    inter_rack_bw: Option<Num>,
    p2p_latency: Num,
}

fn positive(value: Num) -> bool {
    match value {
        Num::Int(i) => i > 0,
        Num::Float(f) => f.is_finite() && f > 0.0,
    }
}

/// `a / b` for a divisor already checked to be non-zero.
#[inline]
fn div(a: Num, b: Num) -> f64 {
    py_true_div(a, b).unwrap_or(f64::NAN)
}

/// Python's `max(a, b)`: `a` unless `b > a`.
#[inline]
fn py_max(a: f64, b: f64) -> f64 {
    if b > a { b } else { a }
}

impl OpSol {
    /// Errors name the offending `systems/<system>.yaml` field.
    pub fn new(spec: &SystemSpec) -> Result<OpSol, String> {
        let checks = [
            ("gpu.mem_bw", Some(spec.mem_bw)),
            ("gpu.bfloat16_tc_flops", Some(spec.bfloat16_tc_flops)),
            ("gpu.mem_bw_empirical_scaling_factor", Some(spec.mem_bw_empirical_scaling_factor)),
            ("node.intra_node_bw", Some(spec.intra_node_bw)),
            ("node.inter_node_bw", Some(spec.inter_node_bw)),
            ("node.inter_rack_bw", spec.inter_rack_bw),
        ];
        for (field, value) in checks {
            if let Some(v) = value
                && !positive(v)
            {
                return Err(format!("{field} must be a positive number, found {v:?}"));
            }
        }
        if spec.num_gpus_per_node < 1 {
            return Err(format!("node.num_gpus_per_node must be at least 1, found {}", spec.num_gpus_per_node));
        }
        let mem_op_bw = py_mul(spec.mem_bw, spec.mem_bw_empirical_scaling_factor)
            .ok_or_else(|| "gpu.mem_bw * gpu.mem_bw_empirical_scaling_factor overflows".to_string())?;
        Ok(OpSol {
            mem_bw: spec.mem_bw,
            bf16_flops: spec.bfloat16_tc_flops,
            fp8_flops: spec.fp8_tc_flops,
            fp4_flops: spec.fp4_tc_flops,
            mem_op_bw,
            mem_const: spec.mem_empirical_constant_latency,
            gpus_per_node: spec.num_gpus_per_node,
            sm_version: spec.sm_version,
            gpus_per_rack: spec.num_gpus_per_rack,
            intra_node_bw: spec.intra_node_bw,
            inter_node_bw: spec.inter_node_bw,
            inter_rack_bw: spec.inter_rack_bw,
            p2p_latency: spec.p2p_latency,
        })
    }

    pub fn gpus_per_node(&self) -> i64 {
        self.gpus_per_node
    }

    /// `gpu.sm_version` (100 for Blackwell B200 / GB200), when the YAML gives it.
    pub fn sm_version(&self) -> Option<i64> {
        self.sm_version
    }

    /// Point-to-point bandwidth for `g` GPUs (5.1).
    pub fn bw(&self, g: i64) -> Num {
        if g <= self.gpus_per_node {
            self.intra_node_bw
        } else if self.gpus_per_rack.is_none_or(|rack| g <= rack) {
            self.inter_node_bw
        } else {
            self.inter_rack_bw.unwrap_or(self.inter_node_bw)
        }
    }

    /// `(bytes / (mem_bw * scaling) + constant) * 1000` (5.5).
    /// `factor * m * k / mem_bw * 1000`: the SOL of the compute-scale (2)
    /// and scale-matrix (3) kernels (families_mla_gptoss_fp8static.md 7.4).
    pub fn scale_memory(&self, factor: i64, m: i64, k: i64) -> f64 {
        div(Num::Int(i128::from(factor) * i128::from(m) * i128::from(k)), self.mem_bw) * 1000.0
    }

    /// The memory roofline of a gated-delta-net kernel (bytes read plus
    /// written over the raw `mem_bw`, no empirical factor or constant;
    /// families_qwen35_gemma4.md 2.4). `seq_len`: the prompt length of a
    /// context kernel, `None` for a decode step.
    pub fn gdn(&self, kernel: &str, batch: i64, seq_len: Option<i64>, shape: &crate::kernels::GdnShape) -> f64 {
        let i = i128::from;
        let (b, s) = (i(batch), seq_len.map(i).filter(|s| *s != 0));
        let x = s.map_or(b, |s| b * s);
        let (key, value) = (i(shape.k_heads) * i(shape.k_head_dim), i(shape.v_heads) * i(shape.v_head_dim));
        let state = i(shape.v_heads) * i(shape.k_head_dim) * i(shape.v_head_dim);
        let bytes = match kernel {
            "causal_conv1d_fn" | "causal_conv1d_update" => {
                let channels = key + value;
                x * channels * (i(shape.d_conv) + 1) * 2 + x * channels * 2
            }
            "chunk_gated_delta_rule" => {
                let chunks = s.map_or(0, |s| (s / 64) * state * 2 * b);
                (x * (key + value) * 2 + state * 2 * b + chunks) + (x * value * 2 + state * 2 * b + chunks)
            }
            "fused_sigmoid_gating_delta_rule_update" => {
                (x * (key + value) * 2 + state * 2 * b) + (x * value * 2 + state * 2 * b)
            }
            _ => x * i(shape.d_model) * 2 * 2,
        };
        div(Num::Int(bytes), self.mem_bw) * 1000.0
    }

    /// The memory roofline of a Mamba-2 kernel (raw `mem_bw`, like the GDN
    /// one; families_nemotron.md 1.6): `conv` for the two convolution
    /// kernels, else the state-space scan / update. `seq_len`: the prompt
    /// length of a context kernel, `None` for a decode step.
    pub fn mamba2(&self, conv: bool, batch: i64, seq_len: Option<i64>, shape: &crate::kernels::Mamba2Shape) -> f64 {
        let i = i128::from;
        let x = seq_len.map_or(i(batch), |s| i(batch) * i(s));
        let inner = i(shape.heads) * i(shape.head_dim);
        let bytes = if conv {
            let channels = inner + 2 * i(shape.groups) * i(shape.d_state);
            x * channels * (i(shape.d_conv) + 1) * 2 + x * channels * 2
        } else {
            x * (inner + i(shape.groups) * i(shape.d_state) * 2 + i(shape.heads)) * 2 + x * inner * 2
        };
        div(Num::Int(bytes), self.mem_bw) * 1000.0
    }

    /// A pipeline hand-off of `bytes` (no table: the spec's formula in
    /// every database mode): `(bytes / inter_node_bw + p2p_latency) * 1000`.
    pub fn p2p(&self, bytes: i64) -> f64 {
        (div(Num::Int(i128::from(bytes)), self.inter_node_bw) + self.p2p_latency.as_f64()) * 1000.0
    }

    pub fn mem_op(&self, bytes: i64) -> f64 {
        let t = div(Num::Int(i128::from(bytes)), self.mem_op_bw);
        (t + self.mem_const.as_f64()) * 1000.0
    }

    /// Context attention (5.3).
    #[allow(clippy::too_many_arguments)]
    pub fn context_attention(
        &self,
        b: i64,
        s: i64,
        prefix: i64,
        n: i64,
        n_kv: i64,
        h: i64,
        w: i64,
        kv_memory: i64,
        fmha_compute: i64,
    ) -> f64 {
        let (b, s, prefix, n, n_kv, h, w) = (
            i128::from(b),
            i128::from(s),
            i128::from(prefix),
            i128::from(n),
            i128::from(n_kv),
            i128::from(h),
            i128::from(w),
        );
        let full = s + prefix;
        let ops = if w > 0 && full > w {
            Num::Int(2 * b * (full - prefix) * w * n * h * 2)
        } else {
            Num::Float(div(Num::Int(2 * b * (full * full - prefix * prefix) * n * h * 2), Num::Int(2)))
        };
        let mem = 2 * b * (n * (full - prefix) * h + n * (full - prefix) * h)
            + i128::from(kv_memory) * b * (2 * n_kv * full * h);
        let sol_math = div(ops, self.bf16_flops) * 1000.0 / fmha_compute as f64;
        let sol_mem = div(Num::Int(mem), self.mem_bw) * 1000.0;
        py_max(sol_math, sol_mem)
    }

    /// Vision-encoder attention (families_hybrid_vl_databases.md 3.6):
    /// non-causal, so the full `s^2` of math and no halving; Q, K, V read
    /// and the output written once in bfloat16, no KV cache.
    pub fn encoder_attention(&self, b: i64, s: i64, n: i64, h: i64, fmha_compute: i64) -> f64 {
        let (b, s, n, h) = (i128::from(b), i128::from(s), i128::from(n), i128::from(h));
        let ops = 2 * b * s * s * n * h * 2;
        let mem = 2 * b * (3 * n * s * h + n * s * h);
        let sol_math = div(Num::Int(ops), self.bf16_flops) * 1000.0 / fmha_compute as f64;
        let sol_mem = div(Num::Int(mem), self.mem_bw) * 1000.0;
        py_max(sol_math, sol_mem)
    }

    /// Generation attention (5.4); the math runs at fp8 rate for an fp8 cache.
    #[allow(clippy::too_many_arguments)]
    pub fn generation_attention(
        &self,
        b: i64,
        s: i64,
        n: i64,
        n_kv: i64,
        h: i64,
        w: i64,
        kv_memory: i64,
        kv_is_fp8: bool,
    ) -> f64 {
        let (b, s, n, n_kv, h, w) =
            (i128::from(b), i128::from(s), i128::from(n), i128::from(n_kv), i128::from(h), i128::from(w));
        let kv_len = if w > 0 { (s - 1).min(w) } else { s - 1 };
        let ops = 2 * b * n * h * 2 * kv_len;
        let mem = b * (n * h * 2 + 2 * n_kv * kv_len * h * i128::from(kv_memory) + n * h * 2);
        let mult = if kv_is_fp8 { 2.0 } else { 1.0 };
        let sol_math = div(Num::Int(ops), self.bf16_flops) * 1000.0 / mult;
        let sol_mem = div(Num::Int(mem), self.mem_bw) * 1000.0;
        py_max(sol_math, sol_mem)
    }

    /// Context MLA, granular and module tables (families_mla_gptoss_fp8static.md
    /// 7.3): 192-wide q/k plus 128-wide v heads, causal. The `/ 2` makes the
    /// op count a float before the width and the causal area multiply it.
    pub fn context_mla(&self, b: i64, s: i64, prefix: i64, n: i64, kv_memory: i64, fmha_compute: i64) -> f64 {
        let (b, s, prefix, n) = (i128::from(b), i128::from(s), i128::from(prefix), i128::from(n));
        let full = s + prefix;
        let ops = crate::pymath::int_true_div(b * n * 2, 2).unwrap_or(f64::NAN)
            * 320.0
            * (full * full - prefix * prefix) as f64;
        let mem = b * n * (i128::from(kv_memory) * full * 320 + 2 * s * 320);
        let sol_math = div(Num::Float(ops), self.bf16_flops) * 1000.0 / fmha_compute as f64;
        let sol_mem = div(Num::Int(mem), self.mem_bw) * 1000.0;
        py_max(sol_math, sol_mem)
    }

    /// (math, memory) ms of the decode MLA kernel (7.3): 1088-wide heads
    /// over `s` positions, a 576-wide compressed cache; an fp8 cache
    /// computes at the fp8 FMHA rate.
    fn generation_mla_terms(&self, b: i64, s: i64, n: i64, kv_memory: i64, kv_is_fp8: bool) -> (f64, f64) {
        let (b, s, n) = (i128::from(b), i128::from(s), i128::from(n));
        let compute = if kv_is_fp8 { 2.0 } else { 1.0 };
        let ops = 2 * b * n * 1088 * s;
        let mem = b * (n * 1088 * 2 + (s - 1) * 576 * i128::from(kv_memory));
        (div(Num::Int(ops), self.bf16_flops) * 1000.0 / compute, div(Num::Int(mem), self.mem_bw) * 1000.0)
    }

    /// The granular decode MLA kernel (7.3).
    pub fn generation_mla(&self, b: i64, s: i64, n: i64, kv_memory: i64, kv_is_fp8: bool) -> f64 {
        let (math, mem) = self.generation_mla_terms(b, s, n, kv_memory, kv_is_fp8);
        py_max(math, mem)
    }

    /// The decode MLA module (7.3): the kernel's terms plus the two BMMs
    /// around it, added per component before the max.
    #[allow(clippy::too_many_arguments)]
    pub fn generation_mla_module(
        &self,
        b: i64,
        s: i64,
        n: i64,
        kv_memory: i64,
        kv_is_fp8: bool,
        gemm_memory: Num,
        gemm_compute: i64,
    ) -> f64 {
        let (mut math, mut mem) = self.generation_mla_terms(b, s, n, kv_memory, kv_is_fp8);
        let (bi, ni) = (i128::from(b), i128::from(n));
        let bmm_ops = 2 * 2 * bi * ni * 128 * 512;
        let bmm_mem = py_mul(Num::Int(2 * ni * (bi * 640 + 128 * 512)), gemm_memory);
        let flops = py_mul(self.bf16_flops, Num::Int(i128::from(gemm_compute)));
        math += flops.map(|f| div(Num::Int(bmm_ops), f)).unwrap_or(f64::NAN) * 1000.0;
        mem += bmm_mem.map(|m| div(m, self.mem_bw)).unwrap_or(f64::NAN) * 1000.0;
        py_max(math, mem)
    }

    /// One MLA BMM of `tokens` tokens over `n` heads (7.3): 128 x 512 per head.
    pub fn mla_bmm(&self, tokens: i64, n: i64, memory: Num, compute: i64) -> f64 {
        let (t, n) = (i128::from(tokens), i128::from(n));
        let ops = 2 * t * n * 128 * 512;
        let flops = py_mul(self.bf16_flops, Num::Int(i128::from(compute)));
        let math = flops.map(|f| div(Num::Int(ops), f)).unwrap_or(f64::NAN) * 1000.0;
        let mem = py_mul(Num::Int(n * (t * 640 + 128 * 512)), memory).map(|m| div(m, self.mem_bw)).unwrap_or(f64::NAN)
            * 1000.0;
        py_max(math, mem)
    }

    /// Tensor-core flops of a compute factor: the system's bfloat16, fp8 or
    /// fp4 figure, or bfloat16's times the factor where the YAML has none.
    fn tc_flops(&self, compute: i64) -> Num {
        let listed = match compute {
            1 => Some(self.bf16_flops),
            2 => self.fp8_flops,
            4 => self.fp4_flops,
            _ => None,
        };
        listed.or_else(|| py_mul(self.bf16_flops, Num::Int(i128::from(compute)))).unwrap_or(Num::Float(f64::NAN))
    }

    /// The context DSA module (families_dsa.md 6.2) at `(b, s, prefix, n)`:
    /// projections, indexer and sparse attention against the raw `mem_bw`.
    /// `quants` = (kv bytes, fmha bytes, fmha compute, DSA gemm bytes, DSA
    /// gemm compute); a skip-indexer layer has no indexer terms.
    pub fn dsa_context(
        &self,
        d: &DsaDims,
        (b, s, prefix, n): (i64, i64, i64, i64),
        (kv_mem, fmha_mem, fmha_compute, gemm_mem, gemm_compute): (i64, i64, i64, Num, i64),
        skip: bool,
    ) -> f64 {
        let [b, s, prefix, n] = [b, s, prefix, n].map(i128::from);
        let [kl, itk, ihd, inh] = [d.kv_lora, d.index_topk, d.index_head_dim, d.index_heads].map(i128::from);
        let (qk, ad, idx_bytes) = (d.qk(), d.latent(), d.index_bytes());
        let full = s + prefix;
        let t = b * s;
        let gemm_ops = d.projection_flops(t, n);
        let indexed = !skip && full > itk;
        let idx_ops = if indexed { 2 * t * inh * ihd * full } else { 0 };
        let eff = full.min(itk);
        let pairs = if full <= itk {
            (b * (full * (full + 1) - prefix * (prefix + 1))).div_euclid(2)
        } else if prefix >= itk {
            t * itk
        } else {
            (b * (itk * (itk + 1) - prefix * (prefix + 1))).div_euclid(2) + b * (full - itk) * itk
        };
        let attn_ops = 2 * n * (ad + kl) * pairs;
        let weights = d.weight_elements(n);
        // Left to right: the ints join a float weights term one by one.
        let terms = [
            b * n * eff * ad * i128::from(kv_mem),
            if indexed { b * full * idx_bytes } else { 0 },
            t * n * qk * i128::from(fmha_mem) * 2,
        ];
        let bytes = num_sum(py_mul(Num::Int(weights), gemm_mem), &terms);
        let math = div(Num::Int(gemm_ops), self.tc_flops(gemm_compute))
            + div(Num::Int(idx_ops), self.tc_flops(2))
            + div(Num::Int(attn_ops), self.tc_flops(fmha_compute));
        py_max(math * 1000.0, div(bytes, self.mem_bw) * 1000.0)
    }

    /// The decode DSA module (families_dsa.md 6.2) at `(b, s, n)`: the
    /// indexer reads every cached token, attention the top-k of them.
    pub fn dsa_generation(
        &self,
        d: &DsaDims,
        (b, s, n): (i64, i64, i64),
        kv_mem: i64,
        gemm_mem: Num,
        gemm_compute: i64,
    ) -> f64 {
        let [b, s, n] = [b, s, n].map(i128::from);
        let [kl, itk, ihd, inh] = [d.kv_lora, d.index_topk, d.index_head_dim, d.index_heads].map(i128::from);
        let (ad, idx_bytes) = (d.latent(), d.index_bytes());
        let t = b;
        let eff = s.min(itk);
        let gemm_ops = d.projection_flops(t, n);
        let idx_ops = 2 * t * inh * ihd * s;
        let attn_ops = 2 * t * n * (ad + kl) * eff;
        let weights = d.weight_elements(n);
        let bytes =
            num_sum(py_mul(Num::Int(weights), gemm_mem), &[b * s * idx_bytes, b * eff * ad * i128::from(kv_mem)]);
        let math = div(Num::Int(gemm_ops), self.tc_flops(gemm_compute))
            + div(Num::Int(idx_ops), self.tc_flops(2))
            + div(Num::Int(attn_ops), self.tc_flops(1));
        py_max(math * 1000.0, div(bytes, self.mem_bw) * 1000.0)
    }

    /// Custom all-reduce of `size` elements over `tp` GPUs (5.6).
    pub fn custom_allreduce(&self, tp: i64, size: i64) -> f64 {
        if tp == 1 {
            return 0.0;
        }
        let t = div(Num::Int(2 * i128::from(size) * 2), Num::Int(i128::from(tp)));
        div(Num::Float(t * (tp - 1) as f64), self.bw(tp)) * 1000.0
    }

    /// NCCL collective of `size` elements over `g` GPUs (5.7).
    pub fn nccl(&self, memory: Num, g: i64, op: &str, size: i64) -> f64 {
        let bytes = py_mul(memory, Num::Int(i128::from(size)))
            .and_then(|v| py_mul(v, Num::Int(i128::from(g - 1))))
            .map(|v| div(v, Num::Int(i128::from(g))))
            .unwrap_or(f64::NAN);
        let t = div(Num::Float(bytes), self.bw(g)) * 1000.0;
        if op == "all_reduce" { 2.0 * t } else { t }
    }

    /// Fused MoE experts (5.8): `tokens` routed to `topk` of `experts`.
    #[allow(clippy::too_many_arguments)]
    pub fn moe(
        &self,
        tokens: i64,
        hidden: i64,
        inter: i64,
        topk: i64,
        experts: i64,
        etp: i64,
        eep: i64,
        memory: Num,
        compute: i64,
        gated: bool,
    ) -> f64 {
        let (t, h, i, topk, e, etp, eep) = (
            i128::from(tokens),
            i128::from(hidden),
            i128::from(inter),
            i128::from(topk),
            i128::from(experts),
            i128::from(etp),
            i128::from(eep),
        );
        if etp < 1 || eep < 1 {
            return f64::NAN;
        }
        let gates: i128 = if gated { 3 } else { 2 };
        let tt = t * topk;
        let ops = tt * h * i * gates * 2 / eep / etp;
        let elements = tt / eep * h * 2 + tt / eep * i * gates / etp + h * i * gates / etp * (e / eep).min(tt / eep);
        let mem = py_mul(memory, Num::Int(elements)).map(|m| div(m, self.mem_bw)).unwrap_or(f64::NAN) * 1000.0;
        let flops = py_mul(self.bf16_flops, Num::Int(i128::from(compute)));
        let math = flops.map(|f| div(Num::Int(ops), f)).unwrap_or(f64::NAN) * 1000.0;
        py_max(math, mem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> OpSol {
        let spec = crate::test_data::h200_spec();
        OpSol::new(&spec).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The spec's worked example (12.1 / 12.2); values from python3 evaluating
    /// `(b / (4800000000000 * 0.8) + 0.000003) * 1000`.
    #[test]
    fn mem_op_like_python() {
        let sol = h200();
        assert_eq!(sol.mem_op(10_485_760), 0.005730666666666667);
        assert_eq!(sol.mem_op(2048), 0.0030005333333333333);
        assert_eq!(sol.mem_op(10_240), 0.0030026666666666665);
    }

    /// python3: `max(2*1*(1024*1024)*8*128*2/2 / 989e12*1000/1, ...)` etc.
    #[test]
    fn attention_sol_like_python() {
        let sol = h200();
        // Context, b=1 s=1024 n=8 n_kv=1 d=128, kv fp8 (1 byte), fmha bf16.
        let ops = 2.0 * 1.0 * (1024.0 * 1024.0) * 8.0 * 128.0 * 2.0 / 2.0;
        let mem = (2 * (8 * 1024 * 128 * 2) + 2 * 1024 * 128) as f64;
        let want = f64::max(ops / 989e12 * 1000.0, mem / 4.8e12 * 1000.0);
        assert_eq!(sol.context_attention(1, 1024, 0, 8, 1, 128, 0, 1, 1), want);
        // Generation, memory-bound: b * (n*h*2 + 2*n_kv*(s-1)*h*1 + n*h*2) / mem_bw * 1000.
        let mem = (8 * 128 * 2 + 2 * 1024 * 128 + 8 * 128 * 2) as f64;
        assert_eq!(sol.generation_attention(1, 1025, 8, 1, 128, 0, 1, true), mem / 4.8e12 * 1000.0);
    }

    #[test]
    fn allreduce_sol() {
        let sol = h200();
        assert_eq!(sol.custom_allreduce(1, 4096), 0.0);
        // 2*5120*2/8 = 2560; * 7 = 17920; / 450e9 * 1000.
        assert_eq!(sol.custom_allreduce(8, 5120), 17920.0 / 450e9 * 1000.0);
    }
}
