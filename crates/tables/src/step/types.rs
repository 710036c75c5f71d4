//! The public vocabulary of the engine step: queries, report rows, lookups
//! and errors.

use std::fmt;

use crate::error::{ErrorClass, TablesError};
use crate::kernels::{DsaQuant, GdnKernel, GdnShape, Mamba2Kernel, Mamba2Shape, MoeShape};
use crate::modes::{FmhaQuant, KvQuant, MoeQuant};
use crate::op_sol::Dsv4AttnDims;
use crate::quant::GemmQuant;

/// Which static step: prefill (`static_ctx`) or one decode step (`static_gen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Context,
    Generation,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Context => "context",
            Phase::Generation => "generation",
        }
    }

    /// Prefix of the phase's op names.
    pub(crate) fn prefix(self) -> &'static str {
        self.name()
    }
}

/// One engine-step estimate to compute.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StepQuery {
    /// `Org/Name`, as in `model_configs/Org--Name_config.json`.
    pub model: String,
    pub system: String,
    pub backend: String,
    pub version: String,
    pub phase: Phase,
    pub tp: u32,
    pub batch: u32,
    pub isl: u32,
    pub osl: u32,
    /// MoE parallelism; one may be `None` (inferred from `tp == moe_tp * moe_ep`).
    /// Dense models ignore both.
    pub moe_tp: Option<u32>,
    pub moe_ep: Option<u32>,
    /// Union the database's tables with older versions (docs/spec 4.2; on by default upstream).
    pub shared_layer: bool,
}

/// The quant modes a step ran with, after inference and the FMHA guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quants {
    pub gemm: GemmQuant,
    pub kv: KvQuant,
    pub fmha: FmhaQuant,
    pub moe: MoeQuant,
}

impl Quants {
    /// Communication always runs in `half`.
    pub const COMM: &'static str = "half";
}

/// The op classes of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    Embedding,
    ElementWise,
    Gemm,
    ContextAttention,
    GenerationAttention,
    CustomAllReduce,
    P2P,
    /// An NCCL collective of its own (context parallelism's KV all-gather).
    Nccl,
    MoE,
    MoEDispatch,
    /// The whole MLA block from one table (DeepSeek / Kimi).
    MlaModule,
    ContextMla,
    GenerationMla,
    MlaBmm,
    /// A primary op, or its fallback ops when the primary's lookup misses.
    FallbackOp,
    /// Two op groups on parallel streams: the longer one counts.
    OverlapOp,
    /// A gated-delta-net kernel of a linear-attention layer (Qwen3.5).
    GdnKernel,
    /// A Mamba-2 kernel of a state-space layer (Nemotron-H).
    Mamba2Kernel,
    /// A whole prefill DSA layer from its module table (DeepSeek-V3.2, GLM-5).
    ContextDsaModule,
    /// A whole decode DSA layer from its module table.
    GenerationDsaModule,
    /// DeepSeek-V4's mHC pre or post module of a layer.
    Dsv4Mhc,
    /// A prefill DeepSeek-V4 compressed attention layer (CSA / HCA).
    ContextDsv4Attention,
    /// A vision encoder's attention (Qwen3-VL's ViT): non-causal, no KV cache.
    EncoderAttention,
    /// A decode DeepSeek-V4 compressed attention layer.
    GenerationDsv4Attention,
}

impl OpKind {
    /// The SDK's class name (the goldens' `op_kind`).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Embedding => "Embedding",
            OpKind::ElementWise => "ElementWise",
            OpKind::Gemm => "GEMM",
            OpKind::ContextAttention => "ContextAttention",
            OpKind::GenerationAttention => "GenerationAttention",
            OpKind::CustomAllReduce => "CustomAllReduce",
            OpKind::P2P => "P2P",
            OpKind::Nccl => "NCCL",
            OpKind::MoE => "MoE",
            OpKind::MoEDispatch => "MoEDispatch",
            OpKind::MlaModule => "MLAModule",
            OpKind::ContextMla => "ContextMLA",
            OpKind::GenerationMla => "GenerationMLA",
            OpKind::MlaBmm => "MLABmm",
            OpKind::FallbackOp => "FallbackOp",
            OpKind::OverlapOp => "OverlapOp",
            OpKind::GdnKernel => "GDNKernel",
            OpKind::Mamba2Kernel => "Mamba2Kernel",
            OpKind::ContextDsaModule => "ContextDSAModule",
            OpKind::GenerationDsaModule => "GenerationDSAModule",
            OpKind::Dsv4Mhc => "DeepSeekV4MHCModule",
            OpKind::ContextDsv4Attention => "ContextDeepSeekV4AttentionModule",
            OpKind::EncoderAttention => "EncoderAttention",
            OpKind::GenerationDsv4Attention => "GenerationDeepSeekV4AttentionModule",
        }
    }
}

/// The first perf-table lookup an op makes, with its arguments in the SDK's order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lookup {
    Gemm {
        m: i64,
        n: i64,
        k: i64,
        quant: GemmQuant,
    },
    ContextAttention {
        b: i64,
        s: i64,
        prefix: i64,
        n: i64,
        n_kv: i64,
        kv: KvQuant,
        fmha: FmhaQuant,
        window: i64,
        head_size: i64,
    },
    GenerationAttention {
        b: i64,
        s: i64,
        n: i64,
        n_kv: i64,
        kv: KvQuant,
        window: i64,
        head_size: i64,
    },
    /// `query_encoder_attention(b, s, n, head_size, fmha)`: `b` images of `s` patches.
    EncoderAttention {
        b: i64,
        s: i64,
        n: i64,
        head_size: i64,
        fmha: FmhaQuant,
    },
    /// `query_custom_allreduce("half", tp, size)`.
    CustomAllReduce {
        tp: i64,
        size: i64,
    },
    /// `query_nccl("half", g, op, size)`.
    Nccl {
        g: i64,
        op: &'static str,
        size: i64,
    },
    Moe {
        num_tokens: i64,
        shape: MoeShape,
    },
    /// `query_compute_scale(m, k, "fp8_static")`.
    ComputeScale {
        m: i64,
        k: i64,
    },
    /// `query_scale_matrix(m, k, "fp8_static")`.
    ScaleMatrix {
        m: i64,
        k: i64,
    },
    /// `query_context_mla_module(b=, s=, prefix=, num_heads=, ...)`.
    ContextMlaModule {
        b: i64,
        s: i64,
        prefix: i64,
        heads: i64,
        kv: KvQuant,
        fmha: FmhaQuant,
        gemm: GemmQuant,
    },
    /// `query_generation_mla_module(b=, s=, num_heads=, ...)`.
    GenerationMlaModule {
        b: i64,
        s: i64,
        heads: i64,
        kv: KvQuant,
        gemm: GemmQuant,
    },
    /// `query_context_mla(b=, s=, prefix=, num_heads=, ...)`.
    ContextMla {
        b: i64,
        s: i64,
        prefix: i64,
        heads: i64,
        kv: KvQuant,
        fmha: FmhaQuant,
    },
    /// `query_generation_mla(b, s, heads, kv)`.
    GenerationMla {
        b: i64,
        s: i64,
        heads: i64,
        kv: KvQuant,
    },
    /// `query_mla_bmm(tokens, heads, quant, pre)`.
    MlaBmm {
        tokens: i64,
        heads: i64,
        quant: GemmQuant,
        pre: bool,
    },
    /// `query_gdn(phase=, kernel_source=, batch_size=, seq_len=, ...)`;
    /// `seq_len` is `None` for a decode kernel.
    Gdn {
        kernel: GdnKernel,
        batch: i64,
        seq_len: Option<i64>,
        shape: GdnShape,
    },
    /// `query_mamba2(phase=, kernel_source=, batch_size=, seq_len=, ...)`.
    Mamba2 {
        kernel: Mamba2Kernel,
        batch: i64,
        seq_len: Option<i64>,
        shape: Mamba2Shape,
    },
    /// `query_context_dsa_module(b=, s=, prefix=, num_heads=, ...)` (the full
    /// layers' lookup; a skip-indexer layer's has `skip_indexer` set).
    ContextDsa {
        b: i64,
        s: i64,
        prefix: i64,
        heads: i64,
        quant: DsaQuant,
        /// The context-parallel lookup asks for the `flashmla_kv` kernel bucket first.
        flashmla_kv: bool,
    },
    /// `query_generation_dsa_module(b=, s=, num_heads=, ...)`.
    GenerationDsa {
        b: i64,
        s: i64,
        heads: i64,
        quant: DsaQuant,
    },
    /// `query_mhc_module(num_tokens=, hidden_size=, hc_mult=, sinkhorn_iters=, op=)`.
    Mhc {
        tokens: i64,
        hidden: i64,
        hc: i64,
        iters: i64,
        pre: bool,
    },
    /// `query_context_deepseek_v4_attention_module(b=, s=, prefix=, ...)`.
    ContextDsv4 {
        b: i64,
        s: i64,
        prefix: i64,
        attn: Dsv4Attn,
    },
    /// `query_generation_deepseek_v4_attention_module(b=, s=, ...)`.
    GenerationDsv4 {
        b: i64,
        s: i64,
        attn: Dsv4Attn,
    },
}

/// A DeepSeek-V4 attention module as the op builds it: the SOL's geometry
/// plus the two arguments only the lookup prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dsv4Attn {
    pub dims: Dsv4AttnDims,
    pub native_heads: i64,
    pub tp: i64,
}

impl Dsv4Attn {
    /// The kwargs after `b`, `s` (and `prefix`), in the spec's order.
    fn kwargs(&self) -> String {
        let d = &self.dims;
        format!(
            r#""num_heads": {}, "native_heads": {}, "tp_size": {}, "hidden_size": {}, "q_lora_rank": {}, "o_lora_rank": {}, "head_dim": {}, "rope_head_dim": {}, "index_n_heads": {}, "index_head_dim": {}, "index_topk": {}, "window_size": {}, "compress_ratio": {}, "o_groups": {}, "kvcache_quant_mode": "{}", "fmha_quant_mode": "{}", "gemm_quant_mode": "{}""#,
            d.heads,
            self.native_heads,
            self.tp,
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
            d.o_groups,
            d.kv,
            d.fmha,
            d.gemm
        )
    }
}

impl Lookup {
    /// The perf table the lookup reads (`gemm_perf`).
    pub fn table(&self) -> &'static str {
        match self {
            Lookup::Gemm { .. } => "gemm_perf",
            Lookup::ContextAttention { .. } => "context_attention_perf",
            Lookup::GenerationAttention { .. } => "generation_attention_perf",
            Lookup::EncoderAttention { .. } => "encoder_attention_perf",
            Lookup::CustomAllReduce { .. } => "custom_allreduce_perf",
            Lookup::Nccl { .. } => "nccl_perf",
            Lookup::Moe { .. } => "moe_perf",
            Lookup::ComputeScale { .. } => "computescale_perf",
            Lookup::ScaleMatrix { .. } => "scale_matrix_perf",
            Lookup::ContextMlaModule { .. } => "mla_context_module_perf",
            Lookup::GenerationMlaModule { .. } => "mla_generation_module_perf",
            Lookup::ContextMla { .. } => "context_mla_perf",
            Lookup::GenerationMla { .. } => "generation_mla_perf",
            Lookup::MlaBmm { .. } => "mla_bmm_perf",
            // The spec's report names the method here, not the file.
            Lookup::Gdn { .. } => "query_gdn",
            Lookup::Mamba2 { .. } => "query_mamba2",
            Lookup::ContextDsa { .. } => "query_context_dsa_module",
            Lookup::GenerationDsa { .. } => "query_generation_dsa_module",
            Lookup::Mhc { .. } => "query_mhc_module",
            Lookup::ContextDsv4 { .. } => "query_context_deepseek_v4_attention_module",
            Lookup::GenerationDsv4 { .. } => "query_generation_deepseek_v4_attention_module",
        }
    }

    /// The SDK's `PerfDatabase` method (`query_gemm`).
    pub fn method(&self) -> &'static str {
        match self {
            Lookup::Gemm { .. } => "query_gemm",
            Lookup::ContextAttention { .. } => "query_context_attention",
            Lookup::GenerationAttention { .. } => "query_generation_attention",
            Lookup::EncoderAttention { .. } => "query_encoder_attention",
            Lookup::CustomAllReduce { .. } => "query_custom_allreduce",
            Lookup::Nccl { .. } => "query_nccl",
            Lookup::Moe { .. } => "query_moe",
            Lookup::ComputeScale { .. } => "query_compute_scale",
            Lookup::ScaleMatrix { .. } => "query_scale_matrix",
            Lookup::ContextMlaModule { .. } => "query_context_mla_module",
            Lookup::GenerationMlaModule { .. } => "query_generation_mla_module",
            Lookup::ContextMla { .. } => "query_context_mla",
            Lookup::GenerationMla { .. } => "query_generation_mla",
            Lookup::MlaBmm { .. } => "query_mla_bmm",
            Lookup::Gdn { .. } => "query_gdn",
            Lookup::Mamba2 { .. } => "query_mamba2",
            Lookup::ContextDsa { .. } => "query_context_dsa_module",
            Lookup::GenerationDsa { .. } => "query_generation_dsa_module",
            Lookup::Mhc { .. } => "query_mhc_module",
            Lookup::ContextDsv4 { .. } => "query_context_deepseek_v4_attention_module",
            Lookup::GenerationDsv4 { .. } => "query_generation_deepseek_v4_attention_module",
        }
    }

    /// The call's arguments as the goldens' `lookup_args` JSON prints them:
    /// `{"args": [1024, 1280, 5120, "fp8_block"], "kwargs": {}}`.
    pub fn args_json(&self) -> String {
        match *self {
            Lookup::Gemm { m, n, k, quant } => format!(r#"{{"args": [{m}, {n}, {k}, "{quant}"], "kwargs": {{}}}}"#),
            Lookup::ContextAttention { b, s, prefix, n, n_kv, kv, fmha, window, head_size } => format!(
                r#"{{"args": [{b}, {s}, {prefix}, {n}, {n_kv}, "{kv}", "{fmha}"], "kwargs": {{"window_size": {window}, "head_size": {head_size}}}}}"#
            ),
            Lookup::GenerationAttention { b, s, n, n_kv, kv, window, head_size } => format!(
                r#"{{"args": [{b}, {s}, {n}, {n_kv}, "{kv}"], "kwargs": {{"window_size": {window}, "head_size": {head_size}}}}}"#
            ),
            Lookup::EncoderAttention { b, s, n, head_size, fmha } => {
                format!(r#"{{"args": [{b}, {s}, {n}, {head_size}, "{fmha}"], "kwargs": {{}}}}"#)
            }
            Lookup::CustomAllReduce { tp, size } => format!(r#"{{"args": ["half", {tp}, {size}], "kwargs": {{}}}}"#),
            Lookup::Nccl { g, op, size } => format!(r#"{{"args": ["half", {g}, "{op}", {size}], "kwargs": {{}}}}"#),
            Lookup::ComputeScale { m, k } | Lookup::ScaleMatrix { m, k } => {
                format!(r#"{{"args": [{m}, {k}, "fp8_static"], "kwargs": {{}}}}"#)
            }
            Lookup::ContextMlaModule { b, s, prefix, heads, kv, fmha, gemm } => format!(
                r#"{{"args": [], "kwargs": {{"b": {b}, "s": {s}, "prefix": {prefix}, "num_heads": {heads}, "kvcache_quant_mode": "{kv}", "fmha_quant_mode": "{fmha}", "gemm_quant_mode": "{gemm}"}}}}"#
            ),
            Lookup::GenerationMlaModule { b, s, heads, kv, gemm } => format!(
                r#"{{"args": [], "kwargs": {{"b": {b}, "s": {s}, "num_heads": {heads}, "kv_cache_dtype": "{kv}", "gemm_quant_mode": "{gemm}"}}}}"#
            ),
            Lookup::ContextMla { b, s, prefix, heads, kv, fmha } => format!(
                r#"{{"args": [], "kwargs": {{"b": {b}, "s": {s}, "prefix": {prefix}, "num_heads": {heads}, "kvcache_quant_mode": "{kv}", "fmha_quant_mode": "{fmha}"}}}}"#
            ),
            Lookup::GenerationMla { b, s, heads, kv } => {
                format!(r#"{{"args": [{b}, {s}, {heads}, "{kv}"], "kwargs": {{}}}}"#)
            }
            Lookup::MlaBmm { tokens, heads, quant, pre } => {
                format!(r#"{{"args": [{tokens}, {heads}, "{quant}", {pre}], "kwargs": {{}}}}"#)
            }
            Lookup::Gdn { kernel, batch, seq_len, shape } => {
                let seq = seq_len.map_or_else(|| "null".to_string(), |s| s.to_string());
                let GdnShape { d_model, k_heads, k_head_dim, v_heads, v_head_dim, d_conv } = shape;
                format!(
                    r#"{{"args": [], "kwargs": {{"phase": "{}", "kernel_source": "{}", "batch_size": {batch}, "seq_len": {seq}, "d_model": {d_model}, "num_k_heads": {k_heads}, "head_k_dim": {k_head_dim}, "num_v_heads": {v_heads}, "head_v_dim": {v_head_dim}, "d_conv": {d_conv}}}}}"#,
                    kernel.phase(),
                    kernel.name()
                )
            }
            Lookup::ContextDsa { b, s, prefix, heads, quant: q, flashmla_kv } => format!(
                r#"{{"args": [], "kwargs": {{"b": {b}, "s": {s}, "prefix": {prefix}, "num_heads": {heads}, "kvcache_quant_mode": "{}", "fmha_quant_mode": "{}", "gemm_quant_mode": "{}", "architecture": "{}", {}"skip_indexer": {}}}}}"#,
                q.kv,
                q.fmha,
                q.gemm,
                q.arch.name(),
                if flashmla_kv { r#""dsa_backend": "flashmla_kv", "# } else { "" },
                if q.skip_indexer { "true" } else { "false" }
            ),
            Lookup::GenerationDsa { b, s, heads, quant: q } => format!(
                r#"{{"args": [], "kwargs": {{"b": {b}, "s": {s}, "num_heads": {heads}, "kv_cache_dtype": "{}", "gemm_quant_mode": "{}", "architecture": "{}", "skip_indexer": {}}}}}"#,
                q.kv,
                q.gemm,
                q.arch.name(),
                if q.skip_indexer { "true" } else { "false" }
            ),
            Lookup::Mhc { tokens, hidden, hc, iters, pre } => format!(
                r#"{{"args": [], "kwargs": {{"num_tokens": {tokens}, "hidden_size": {hidden}, "hc_mult": {hc}, "sinkhorn_iters": {iters}, "op": "{}", "quant_mode": "bfloat16"}}}}"#,
                if pre { "pre" } else { "post" }
            ),
            Lookup::ContextDsv4 { b, s, prefix, attn } => {
                format!(r#"{{"args": [], "kwargs": {{"b": {b}, "s": {s}, "prefix": {prefix}, {}}}}}"#, attn.kwargs())
            }
            Lookup::GenerationDsv4 { b, s, attn } => {
                format!(r#"{{"args": [], "kwargs": {{"b": {b}, "s": {s}, {}}}}}"#, attn.kwargs())
            }
            Lookup::Mamba2 { kernel, batch, seq_len, shape } => {
                let seq = seq_len.map_or_else(|| "null".to_string(), |s| s.to_string());
                let Mamba2Shape { d_model, d_state, d_conv, heads, head_dim, groups, chunk } = shape;
                format!(
                    r#"{{"args": [], "kwargs": {{"phase": "{}", "kernel_source": "{}", "batch_size": {batch}, "seq_len": {seq}, "d_model": {d_model}, "d_state": {d_state}, "d_conv": {d_conv}, "nheads": {heads}, "head_dim": {head_dim}, "n_groups": {groups}, "chunk_size": {chunk}}}}}"#,
                    kernel.phase(),
                    kernel.name()
                )
            }
            Lookup::Moe {
                num_tokens,
                shape: MoeShape { hidden, inter, topk, experts, moe_tp, moe_ep, quant, distribution, gated },
            } => {
                format!(
                    r#"{{"args": [], "kwargs": {{"num_tokens": {num_tokens}, "hidden_size": {hidden}, "inter_size": {inter}, "topk": {topk}, "num_experts": {experts}, "moe_tp_size": {moe_tp}, "moe_ep_size": {moe_ep}, "quant_mode": "{quant}", "workload_distribution": "{distribution}", "is_context": true, "moe_backend": null, "is_gated": {gated}, "enable_eplb": false}}}}"#
                )
            }
        }
    }
}

impl fmt::Display for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method(), self.args_json())
    }
}

/// What a report row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// One op of the step (for generation: at one sampled decode step).
    Op,
    /// The sum of one sampled decode step's ops (`__gen_step_total__`).
    GenStepTotal,
}

/// One row of a step report.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRow {
    pub row_kind: RowKind,
    /// Position in the op list; -1 for totals.
    pub op_index: i32,
    /// `context_qkv_gemm`, or `__gen_step_total__`.
    pub op_name: String,
    pub op_kind: Option<OpKind>,
    /// Applications per step (`L` for per-layer ops); `None` for totals.
    pub count: Option<f64>,
    /// `fp8_block`, `fmha=bfloat16,kv=fp8`, `kv=fp8`, `half`, `bfloat16(act)`, or empty.
    pub quant: String,
    pub lookup: Option<Lookup>,
    /// `exact_hit`, `site_transfer`, `grid_interpolation`, ... (several joined by `,`).
    pub interp_path: Option<String>,
    /// Latency of one application, `total_ms / count` as the SDK reports
    /// it; `None` for totals.
    pub latency_ms: Option<f64>,
    /// `latency_ms * count` (for a step total: the step's sum).
    pub total_ms: f64,
    /// Contribution to the phase latency (generation: `total_ms * gen_repeat`).
    pub weighted_total_ms: f64,
    /// `silicon` (table), `empirical` (formula), `mixed` (both), `sol`
    /// (a roofline standing in for a table with nothing to say, GDN only).
    pub source: &'static str,
    /// Generation only: the sample's first decode step `i`, its sequence
    /// length `isl + i + 1` and how many decode steps it stands for.
    pub gen_step_index: Option<u32>,
    pub gen_s: Option<u32>,
    pub gen_repeat: Option<u32>,
}

/// The result of [`engine_step`](super::engine_step).
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    pub phase: Phase,
    /// Context: the ops in list order. Generation: per sample, the ops in
    /// list order followed by the sample's `__gen_step_total__` row.
    pub rows: Vec<OpRow>,
    /// Context: TTFT (ms). Generation: TPOT (ms; 0 when `osl <= 1`).
    pub total_ms: f64,
    /// Context: the context latency (= TTFT). Generation: all `osl - 1` decode steps.
    pub phase_latency_ms: f64,
    pub quants: Quants,
}

/// Why a step has no estimate.
#[derive(Debug)]
pub enum StepError {
    /// A perf-table lookup of an op found no data (the spec raises
    /// `PerfDataNotAvailableError`): never a silently smaller total.
    Miss { op: String, lookup: Option<Box<Lookup>>, message: String },
    /// The query names something that is not mounted, gives an invalid
    /// value, or asks for what the spec refuses (an unsupported architecture).
    Input(String),
    /// The spec refuses the deployment for what it is, not for a missing
    /// table (fp8_block experts whose per-GPU width is not a multiple of the
    /// weight block): like a miss, NULL with its reason under
    /// `aic.on_miss = 'null'`, so a grid over layouts always answers.
    Refused(String),
    /// The data could not be read or is corrupt, or aicsql has a bug:
    /// always an error, never a NULL.
    Data(TablesError),
}

impl StepError {
    pub(crate) fn input(message: impl Into<String>) -> StepError {
        StepError::Input(message.into())
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Miss { op, lookup: Some(lookup), message } => {
                write!(f, "perf data not available for op '{op}': {lookup}: {message}")
            }
            StepError::Miss { op, lookup: None, message } => {
                write!(f, "perf data not available for op '{op}': {message}")
            }
            StepError::Input(message) | StepError::Refused(message) => f.write_str(message),
            StepError::Data(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StepError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StepError::Data(e) => Some(e),
            _ => None,
        }
    }
}

/// A failure to set up a step (its model, its database): names that match
/// nothing and invalid values are the query's fault; a database without the
/// tables every step needs cannot run steps at all; corrupt data and bugs
/// stay what they are.
impl From<TablesError> for StepError {
    fn from(e: TablesError) -> Self {
        match e.class() {
            ErrorClass::NotFound | ErrorClass::Invalid | ErrorClass::Miss => StepError::Input(e.to_string()),
            ErrorClass::Corrupt | ErrorClass::Internal => StepError::Data(e),
        }
    }
}
