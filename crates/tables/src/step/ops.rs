//! The op lists of the LLAMA and MOE families (docs/spec 6, 10.2): which ops a
//! step runs, in which order, how often, with which shapes.

use crate::kernels::{DsaQuant, GdnKernel, GdnShape, Mamba2Kernel, Mamba2Shape, MoeShape};
use crate::modes::{FmhaQuant, KvQuant, MoeQuant};
use crate::quant::GemmQuant;
use crate::step::model::{Family, ModelDesc, Parallel};
use crate::step::types::{Dsv4Attn, OpKind, Phase, Quants};

/// What an op computes per application; `x` (tokens) and the attention
/// arguments come from the step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum OpSpec {
    /// `mem_op(x * h * 2)`; `rows` (the vocabulary on this GPU) only sizes
    /// its weights.
    Embedding {
        hidden: i64,
        rows: i64,
    },
    /// `mem_op(x * dim_in * 2 + x * dim_out * 2)`.
    ElementWise {
        dim_in: i64,
        dim_out: i64,
    },
    /// An [`ElementWise`](OpSpec::ElementWise) op over `x // split` tokens
    /// (floored, not the busiest rank's ceiling): DEEPSEEKV32's context
    /// add-norms under context parallelism (families_dsa.md 7).
    FloorSplitElementWise {
        dim_in: i64,
        dim_out: i64,
        split: i64,
    },
    /// `gemm(m, n, k)`; `m = x`, except `m = B` for the context logits GEMM.
    /// `low_precision_input`: the GEMM consumes an already quantised
    /// activation (proj, ffn2), which only changes an fp8_static GEMM.
    Gemm {
        n: i64,
        k: i64,
        quant: GemmQuant,
        m_is_batch: bool,
        low_precision_input: bool,
    },
    ContextAttention {
        n: i64,
        n_kv: i64,
        head_dim: i64,
        window: i64,
        kv: KvQuant,
        fmha: FmhaQuant,
        qk_norm: bool,
    },
    GenerationAttention {
        n: i64,
        n_kv: i64,
        head_dim: i64,
        window: i64,
        kv: KvQuant,
    },
    /// A vision encoder's attention over `batch` images of `s` patches
    /// each (docs/spec/options.md 4.5), bfloat16: `n` heads of `head_dim`.
    EncoderAttention {
        n: i64,
        head_dim: i64,
    },
    /// All-reduce of `x * hidden` elements over `tp` GPUs.
    AllReduce {
        tp: i64,
        hidden: i64,
    },
    /// Pipeline hand-off of `x * hidden` bf16 activations to the next
    /// stage; counted `pp - 1` times (`pp = 1` makes it 0). `seq_split`:
    /// under context parallelism a rank hands on its own share of the
    /// tokens (LLAMA, MOE, HYBRIDMOE); DEEPSEEK's hand-off is built without
    /// the split and moves every token.
    P2P {
        hidden: i64,
        seq_split: bool,
    },
    /// Context parallelism's KV all-gather over the `gpus` CP ranks, after
    /// the attention of each layer: `x * elements_per_token` half-precision
    /// elements (the KV a token keeps per layer, in 2-byte elements).
    CpAllGather {
        gpus: i64,
        elements_per_token: f64,
    },
    /// The routed experts at `x * dp` tokens (every rank's tokens).
    Moe {
        shape: MoeShape,
        dp: i64,
    },
    /// The exchange around the experts: before them (`pre`) and after. An
    /// all-reduce over the attention-tp group at `dp = 1`; with attention
    /// data parallelism the backend's gathers and scatters.
    MoeDispatch {
        hidden: i64,
        moe_tp: i64,
        moe_ep: i64,
        dp: i64,
        /// Context-parallel ranks of the exchange (the spec's
        /// `attn_cp_size`; 1 where a family does not pass it).
        cp: i64,
        /// The spec's `is_context` of the exchange at cp > 1: a context
        /// step gathers every rank's tokens for the experts and scatters
        /// them back; a decode step (not context-parallel) has nothing to
        /// gather and all-reduces the experts' output over the cp ranks.
        context: bool,
        pre: bool,
        /// The MoE quant MOE passes; HYBRIDMOE builds its dispatch without one.
        quant: Option<MoeQuant>,
    },
    /// The MLA block from the module table: `query_context_mla_module` or
    /// `query_generation_mla_module` at `heads = 128 // tp`.
    MlaModule {
        context: bool,
        heads: i64,
        kv: KvQuant,
        fmha: FmhaQuant,
        gemm: GemmQuant,
    },
    /// Granular prefill MLA attention (no per-token extras).
    ContextMla {
        heads: i64,
        kv: KvQuant,
        fmha: FmhaQuant,
    },
    /// Granular decode MLA attention: one lookup at `s`.
    GenerationMla {
        heads: i64,
        kv: KvQuant,
    },
    /// A decode BMM around the MLA kernel, at `batch` tokens.
    MlaBmm {
        heads: i64,
        quant: GemmQuant,
        pre: bool,
    },
    /// `subs[primary]`, or when its lookup misses, the sum of
    /// `subs[fallback.0..fallback.1]` in order from 0.0.
    Fallback {
        primary: usize,
        fallback: (usize, usize),
    },
    /// A gated-delta-net kernel at the model's unsharded linear-attention
    /// shape (every tp): the prompt's batch and length in context, the
    /// batch alone in a decode step.
    Gdn {
        kernel: GdnKernel,
        shape: GdnShape,
    },
    /// A Mamba-2 kernel at the model's unsharded state-space shape (every tp).
    Mamba2 {
        kernel: Mamba2Kernel,
        shape: Mamba2Shape,
    },
    /// A whole DSA layer from its module table at `heads = H // tp`: the
    /// full layers' value, or with a fraction `full_layers < 1` of the
    /// layers running the indexer, `w * full + (1 - w) * skip`. A context
    /// layer over `cp > 1` context-parallel ranks is the busiest rank's
    /// module with the sub-kernel swaps and all-gathers (families_dsa.md 7).
    Dsa {
        context: bool,
        heads: i64,
        quant: DsaQuant,
        full_layers: f64,
        cp: i64,
    },
    /// DeepSeek-V4's mHC module of one layer (`pre` or `post`), bfloat16,
    /// at the step's tokens (families_dsv4.md 4.1).
    Mhc {
        pre: bool,
        hidden: i64,
        hc: i64,
        iters: i64,
    },
    /// A DeepSeek-V4 compressed attention layer from its module table
    /// (families_dsv4.md 4.2-4.3).
    Dsv4Attention {
        context: bool,
        attn: Dsv4Attn,
    },
    /// `max(a, b)` of the sums of `subs[a.0..a.1]` and `subs[b.0..b.1]`.
    Overlap {
        a: (usize, usize),
        b: (usize, usize),
    },
}

/// One op of the list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Op {
    /// Name without the phase prefix (`qkv_gemm`).
    pub base: &'static str,
    pub kind: OpKind,
    /// Applications per step.
    pub count: f64,
    pub spec: OpSpec,
}

/// A step's op list: the named ops in order, and the inner ops of its
/// composite ops ([`OpSpec::Fallback`], [`OpSpec::Overlap`] index `subs`).
#[derive(Debug, Clone, Default)]
pub(crate) struct OpList {
    pub ops: Vec<Op>,
    pub subs: Vec<Op>,
}

impl Op {
    /// Whether the op's value depends on the step's sequence length (`s`,
    /// `prefix`): the attention ops, and composites holding one. The others
    /// depend on the token count and batch only, so the sampled decode steps
    /// of a generation pass (same batch, growing `s`) share their values.
    pub fn reads_sequence(&self, subs: &[Op]) -> bool {
        match self.spec {
            OpSpec::ContextAttention { .. }
            | OpSpec::GenerationAttention { .. }
            | OpSpec::MlaModule { .. }
            | OpSpec::ContextMla { .. }
            | OpSpec::GenerationMla { .. }
            | OpSpec::Dsa { .. }
            | OpSpec::Dsv4Attention { .. }
            | OpSpec::EncoderAttention { .. } => true,
            // A decode GDN kernel is keyed by batch alone.
            OpSpec::Gdn { kernel, .. } => kernel.is_context(),
            OpSpec::Mamba2 { kernel, .. } => kernel.is_context(),
            OpSpec::Fallback { primary, fallback } => {
                subs[primary].reads_sequence(subs)
                    || subs[fallback.0..fallback.1].iter().any(|o| o.reads_sequence(subs))
            }
            OpSpec::Overlap { a, b } => subs[a.0..a.1].iter().chain(&subs[b.0..b.1]).any(|o| o.reads_sequence(subs)),
            OpSpec::Embedding { .. }
            | OpSpec::ElementWise { .. }
            | OpSpec::FloorSplitElementWise { .. }
            | OpSpec::Gemm { .. }
            | OpSpec::AllReduce { .. }
            | OpSpec::P2P { .. }
            | OpSpec::CpAllGather { .. }
            | OpSpec::Moe { .. }
            | OpSpec::MoeDispatch { .. }
            | OpSpec::MlaBmm { .. }
            | OpSpec::Mhc { .. } => false,
        }
    }
}

impl OpList {
    fn plain(ops: Vec<Op>) -> OpList {
        OpList { ops, subs: Vec::new() }
    }

    /// Every leaf op (composites' inner ops in place of the composite), in order.
    pub fn leaves(&self) -> Vec<&Op> {
        let mut out = Vec::with_capacity(self.ops.len() + self.subs.len());
        for op in &self.ops {
            match op.spec {
                OpSpec::Fallback { primary, fallback } => {
                    out.push(&self.subs[primary]);
                    out.extend(&self.subs[fallback.0..fallback.1]);
                }
                OpSpec::Overlap { a, b } => {
                    out.extend(&self.subs[a.0..a.1]);
                    out.extend(&self.subs[b.0..b.1]);
                }
                _ => out.push(op),
            }
        }
        out
    }
}

/// The pipeline hand-off op: `pp - 1` applications per step, in every family.
pub(crate) fn p2p(par: &Parallel, hidden: i64) -> Op {
    Op { base: "p2p", kind: OpKind::P2P, count: (par.pp - 1) as f64, spec: OpSpec::P2P { hidden, seq_split: true } }
}

/// The logits GEMM every family ends with: the vocabulary split by tp, at
/// bfloat16 whatever the checkpoint, over one token per request (the
/// batch) in context as in decode.
pub(crate) fn logits_gemm(model: &ModelDesc, tp: i64, phase: Phase) -> Op {
    let spec = OpSpec::Gemm {
        n: model.vocab / tp,
        k: model.hidden,
        quant: GemmQuant::Bfloat16,
        m_is_batch: phase == Phase::Context,
        low_precision_input: false,
    };
    Op { base: "logits_gemm", kind: OpKind::Gemm, count: 1.0, spec }
}

/// SGLang's context-parallel KV all-gather of each layer (LLAMA, MOE,
/// DEEPSEEK): the bytes a token keeps per layer, in 2-byte (half)
/// elements, as the spec divides them (`kv_bytes(1) / layers / 2`).
pub(crate) fn cp_all_gather(base: &'static str, model: &ModelDesc, par: &Parallel, quants: &Quants, count: f64) -> Op {
    let kv_bytes = (quants.kv.memory() * crate::step::weights::kv_elements_per_token(model, par.tp).0) as f64;
    let elements_per_token = kv_bytes / model.layers as f64 / 2.0;
    Op { base, kind: OpKind::Nccl, count, spec: OpSpec::CpAllGather { gpus: par.cp, elements_per_token } }
}

/// Routed experts between their two exchanges, as QWEN35, GEMMA4MIX and
/// NEMOTRONH build them (the exchanges carry the MoE quant, no context
/// parallelism): `names` of the pre dispatch, the experts and the post
/// dispatch, each applied `count` times; `hidden` is the experts' width.
pub(crate) fn routed_experts(
    names: [&'static str; 3],
    count: f64,
    model: &ModelDesc,
    par: &Parallel,
    quants: &Quants,
    (hidden, gated): (i64, bool),
    phase: Phase,
) -> [Op; 3] {
    // Under context parallelism the dispatches take their CP collectives:
    // gathered and scattered in context, all-reduced after the experts in
    // decode (families that refuse cp always see cp 1 here).
    let dispatch = |pre| OpSpec::MoeDispatch {
        hidden,
        moe_tp: par.moe_tp,
        moe_ep: par.moe_ep,
        dp: par.dp,
        cp: par.cp,
        context: phase == Phase::Context,
        pre,
        quant: Some(quants.moe),
    };
    let experts = OpSpec::Moe {
        shape: MoeShape {
            hidden,
            inter: model.moe_inter,
            topk: model.topk,
            experts: model.experts,
            moe_tp: par.moe_tp,
            moe_ep: par.moe_ep,
            quant: quants.moe,
            gated,
            distribution: model.distribution,
        },
        dp: par.dp,
    };
    [
        Op { base: names[0], kind: OpKind::MoEDispatch, count, spec: dispatch(true) },
        Op { base: names[1], kind: OpKind::MoE, count, spec: experts },
        Op { base: names[2], kind: OpKind::MoEDispatch, count, spec: dispatch(false) },
    ]
}

/// The sliding window of GPT-OSS's windowed layers, hard-coded by the spec
/// (the config's `sliding_window` is not read).
const GPT_OSS_WINDOW: i64 = 128;

/// The op list of `phase` (HYBRIDMOE's is built by `step::hybrid`, DEEPSEEK /
/// KIMIK25's by `step::deepseek`).
pub(crate) fn op_list(model: &ModelDesc, par: &Parallel, quants: &Quants, phase: Phase) -> OpList {
    if let Some(hybrid) = &model.hybrid {
        return OpList::plain(crate::step::hybrid::op_list(model, hybrid, par, quants, phase));
    }
    if model.family == Family::Mla {
        return crate::step::deepseek::op_list(model, par, quants, phase);
    }
    if let Some(q) = &model.qwen35 {
        return OpList::plain(crate::step::qwen35::op_list(model, q, par, quants, phase));
    }
    if let Some(nh) = &model.nemotron_h {
        return OpList::plain(crate::step::nemotron_h::op_list(model, nh, par, quants, phase));
    }
    if let Some(v4) = &model.dsv4 {
        return crate::step::dsv4::op_list(model, v4, par, quants, phase);
    }
    if let Some(dsa) = &model.dsa {
        return crate::step::dsv32::op_list(model, dsa, par, quants, phase);
    }
    if let Some(nas) = &model.nemotron_nas {
        return OpList::plain(crate::step::nemotron_nas::op_list(model, nas, par, quants, phase));
    }
    if let Some(g) = &model.gemma4 {
        return OpList::plain(crate::step::gemma4::op_list(model, g, par, quants, phase));
    }
    OpList::plain(dense_or_moe(model, par, quants, phase))
}

fn dense_or_moe(model: &ModelDesc, par: &Parallel, quants: &Quants, phase: Phase) -> Vec<Op> {
    let (l, h) = (model.layers as f64, model.hidden);
    let (tp, n, n_kv, d) = (par.tp, par.n, par.n_kv, model.head_dim);
    let attn_width = model.heads * d / tp;
    let op = |base, kind, count, spec| Op { base, kind, count, spec };
    let gemm =
        |n: i64, k: i64, quant: GemmQuant| OpSpec::Gemm { n, k, quant, m_is_batch: false, low_precision_input: false };
    let gemm_lp =
        |n: i64, k: i64, quant: GemmQuant| OpSpec::Gemm { n, k, quant, m_is_batch: false, low_precision_input: true };
    // GPT-OSS prices half its layers with a 128-token window, the windowed
    // op first in the list (families_mla_gptoss_fp8static.md 4); both share
    // the op name, so the step sums them as one entry.
    let attention_count = if model.gpt_oss { l / 2.0 } else { l };
    let attention = |window: i64| match phase {
        Phase::Context => op(
            "attention",
            OpKind::ContextAttention,
            attention_count,
            OpSpec::ContextAttention {
                n,
                n_kv,
                head_dim: d,
                window,
                kv: quants.kv,
                fmha: quants.fmha,
                qk_norm: model.use_qk_norm,
            },
        ),
        Phase::Generation => op(
            "attention",
            OpKind::GenerationAttention,
            attention_count,
            OpSpec::GenerationAttention { n, n_kv, head_dim: d, window, kv: quants.kv },
        ),
    };
    let logits = logits_gemm(model, tp, phase);
    let mut ops = Vec::with_capacity(16);
    if model.gpt_oss {
        ops.push(attention(GPT_OSS_WINDOW));
    }
    ops.extend([
        op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab / tp }),
        op("add_norm_1", OpKind::ElementWise, l, OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h }),
        op("qkv_gemm", OpKind::Gemm, l, gemm(attn_width + d * n_kv * 2, h, quants.gemm)),
        attention(0),
    ]);
    if phase == Phase::Context && par.cp > 1 {
        ops.push(cp_all_gather("cp_all_gather", model, par, quants, l));
    }
    ops.extend([
        op("proj_gemm", OpKind::Gemm, l, gemm_lp(h, attn_width, quants.gemm)),
        op("add_norm_2", OpKind::ElementWise, l, OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h }),
    ]);
    let embedding_ar = op("embedding_ar", OpKind::CustomAllReduce, 1.0, OpSpec::AllReduce { tp, hidden: h });
    let p2p = p2p(par, h);
    match model.family {
        Family::Llama => {
            let inter = model.inter;
            ops.extend([
                op("gate_ffn1_gemm", OpKind::Gemm, l, gemm(2 * inter / tp, h, quants.gemm)),
                op(
                    "act_gate",
                    OpKind::ElementWise,
                    l,
                    OpSpec::ElementWise { dim_in: 2 * inter / tp, dim_out: inter / tp },
                ),
                op("ffn2_gemm", OpKind::Gemm, l, gemm_lp(h, inter / tp, quants.gemm)),
                logits,
                embedding_ar,
                op("ar_1", OpKind::CustomAllReduce, l, OpSpec::AllReduce { tp, hidden: h }),
                op("ar_2", OpKind::CustomAllReduce, l, OpSpec::AllReduce { tp, hidden: h }),
                p2p,
            ]);
        }
        Family::Moe
        | Family::HybridMoe
        | Family::Mla
        | Family::Qwen35
        | Family::Gemma4
        | Family::NemotronH
        | Family::NemotronNas
        | Family::Dsa
        | Family::Dsv4 => {
            let (moe_tp, moe_ep, quant) = (par.moe_tp, par.moe_ep, quants.moe);
            // The generation step is not context-parallel: its exchange is
            // the attention-tp one over the cp ranks.
            let cp = if phase == Phase::Context { par.cp } else { 1 };
            let dispatch = |pre| OpSpec::MoeDispatch {
                hidden: h,
                moe_tp,
                moe_ep,
                dp: par.dp,
                cp,
                context: true,
                pre,
                quant: Some(quant),
            };
            ops.extend([
                op("router_gemm", OpKind::Gemm, l, gemm(model.experts, h, GemmQuant::Bfloat16)),
                op("moe_pre_dispatch", OpKind::MoEDispatch, l, dispatch(true)),
                op(
                    "moe",
                    OpKind::MoE,
                    l,
                    OpSpec::Moe {
                        shape: MoeShape {
                            hidden: h,
                            inter: model.moe_inter,
                            topk: model.topk,
                            experts: model.experts,
                            moe_tp,
                            moe_ep,
                            quant,
                            gated: true,
                            distribution: model.distribution,
                        },
                        dp: par.dp,
                    },
                ),
                op("moe_post_dispatch", OpKind::MoEDispatch, l, dispatch(false)),
            ]);
            if phase == Phase::Generation {
                ops.push(logits);
            }
            ops.extend([embedding_ar, p2p]);
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::StepShape;

    fn qwen3_32b() -> ModelDesc {
        ModelDesc {
            architecture: "Qwen3ForCausalLM".into(),
            family: Family::Llama,
            layers: 64,
            hidden: 5120,
            heads: 64,
            kv_heads: 8,
            head_dim: 128,
            inter: 25600,
            vocab: 151936,
            topk: 0,
            experts: 0,
            moe_inter: 25600,
            use_qk_norm: true,
            distribution: "power_law_1.2",
            gpt_oss: false,
            hybrid: None,
            nemotron_h: None,
            nemotron_nas: None,
            dsa: None,
            dsv4: None,
            qwen35: None,
            gemma4: None,
            v_head_dim: 0,
            moe_block: None,
            spec_family: "LLAMA",
            mla_kv_width: 0,
            vision: None,
        }
    }

    /// Spec 12.1: tp 8 -> qkv n = 1280, proj k = 1024, ffn1 n = 6400,
    /// ffn2 k = 3200, logits n = 18992.
    #[test]
    fn llama_shapes_at_tp8() {
        let model = qwen3_32b();
        let shape = StepShape { tp: 8, pp: 1, dp: 1, cp: 1, batch: 1, isl: 1, osl: 1, moe_tp: None, moe_ep: None };
        let Ok(par) = model.parallel(&shape, "vllm") else { panic!() };
        assert_eq!((par.n, par.n_kv), (8, 1));
        let quants =
            Quants { gemm: GemmQuant::Fp8Block, kv: KvQuant::Fp8, fmha: FmhaQuant::Bfloat16, moe: MoeQuant::Fp8Block };
        let ops = op_list(&model, &par, &quants, Phase::Context).ops;
        let names: Vec<&str> = ops.iter().map(|o| o.base).collect();
        assert_eq!(
            names,
            [
                "embedding",
                "add_norm_1",
                "qkv_gemm",
                "attention",
                "proj_gemm",
                "add_norm_2",
                "gate_ffn1_gemm",
                "act_gate",
                "ffn2_gemm",
                "logits_gemm",
                "embedding_ar",
                "ar_1",
                "ar_2",
                "p2p"
            ]
        );
        let gemms: Vec<(i64, i64)> = ops
            .iter()
            .filter_map(|o| match o.spec {
                OpSpec::Gemm { n, k, .. } => Some((n, k)),
                _ => None,
            })
            .collect();
        assert_eq!(gemms, [(1280, 5120), (5120, 1024), (6400, 5120), (5120, 3200), (18992, 5120)]);
    }
}
