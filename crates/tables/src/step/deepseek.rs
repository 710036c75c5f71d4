//! DEEPSEEK and KIMIK25 (docs/spec/families_mla_gptoss_fp8static.md 3): MLA
//! attention, every layer a routed MoE plus a shared expert.
//!
//! * The attention block is a fallback: the MLA module table if it answers,
//!   else granular ops -- q-down, q-up, (prefill) kv-up GEMMs, the attention,
//!   the output GEMM -- whose shapes are DeepSeek-V3's literals (2112, 24576,
//!   32768, 1536, 512, 128 x 128), used unchanged for Kimi. Off vllm the
//!   granular attention is the MLA tables' (decode: BMM, kernel, BMM); on
//!   vllm it is plain attention with `Hkv // tp` kv heads and the
//!   `v_head_dim` head size.
//! * The module and the granular MLA tables are priced at `128 // tp`
//!   heads whatever the model has; the BMMs and vllm's attention at `H // tp`.
//! * The shared expert (`moe_intermediate_size` wide) is split by the
//!   attention tp; `first_k_dense_replace` and `n_shared_experts` are not read.
//! * Decode overlaps the routed path with the shared expert.
//! * vllm pays two tp all-reduces per layer; nobody an embedding all-reduce.

use crate::kernels::MoeShape;
use crate::quant::GemmQuant;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpList, OpSpec, logits_gemm};
use crate::step::types::{OpKind, Phase, Quants};

/// The MLA tables' head count before tp.
const MLA_HEADS: i64 = 128;

fn op(base: &'static str, kind: OpKind, count: f64, spec: OpSpec) -> Op {
    Op { base, kind, count, spec }
}

fn gemm(base: &'static str, count: f64, n: i64, k: i64, quant: GemmQuant) -> Op {
    op(base, OpKind::Gemm, count, OpSpec::Gemm { n, k, quant, m_is_batch: false, low_precision_input: false })
}

/// Router, dispatch, experts, dispatch.
fn routed(model: &ModelDesc, par: &Parallel, quants: &Quants, phase: Phase, count: f64) -> [Op; 4] {
    let h = model.hidden;
    // Context parallelism reaches both phases' exchanges; only the context
    // step's is a context one (docs/spec/families_dp_cp.md 6).
    let dispatch = |pre| OpSpec::MoeDispatch {
        hidden: h,
        moe_tp: par.moe_tp,
        moe_ep: par.moe_ep,
        dp: par.dp,
        cp: par.cp,
        context: phase == Phase::Context,
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
    [
        gemm("router_gemm", count, model.experts, h, GemmQuant::Bfloat16),
        op("moe_pre_dispatch", OpKind::MoEDispatch, count, dispatch(true)),
        op("moe", OpKind::MoE, count, OpSpec::Moe { shape: experts, dp: par.dp }),
        op("moe_post_dispatch", OpKind::MoEDispatch, count, dispatch(false)),
    ]
}

/// The shared expert, split by the attention tp.
fn shared(model: &ModelDesc, par: &Parallel, quants: &Quants, count: f64) -> [Op; 3] {
    let (h, inter, tp) = (model.hidden, model.moe_inter, par.tp);
    [
        gemm("shared_gate_up_gemm", count, 2 * inter / tp, h, quants.gemm),
        op(
            "shared_act_gate",
            OpKind::ElementWise,
            count,
            OpSpec::ElementWise { dim_in: 2 * inter / tp, dim_out: inter / tp },
        ),
        gemm("shared_ffn2_gemm", count, h, inter / tp, quants.gemm),
    ]
}

/// Appends `ops` to `subs`; their index range.
fn push(subs: &mut Vec<Op>, ops: impl IntoIterator<Item = Op>) -> (usize, usize) {
    let start = subs.len();
    subs.extend(ops);
    (start, subs.len())
}

pub(crate) fn op_list(model: &ModelDesc, par: &Parallel, quants: &Quants, phase: Phase) -> OpList {
    let (tp, h) = (par.tp, model.hidden);
    let l = model.layers as f64;
    let vllm = par.vllm;
    let heads = MLA_HEADS / tp;
    // vllm's attention: H // tp heads, Hkv // tp kv heads (floor), the v head size.
    let (n, n_kv) = (model.heads / tp, model.kv_heads / tp);
    let vllm_head = if model.v_head_dim > 0 { model.v_head_dim } else { model.head_dim };
    let bmm_quant = if quants.gemm == GemmQuant::Bfloat16 { GemmQuant::Bfloat16 } else { GemmQuant::Fp8 };
    let (kv, fmha) = (quants.kv, quants.fmha);
    let norm = OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h };
    let logits = logits_gemm(model, tp, phase);
    let tp_allreduce = op("tp_allreduce", OpKind::CustomAllReduce, 2.0 * l, OpSpec::AllReduce { tp, hidden: h });
    // DEEPSEEK's hand-off is built without the context-parallel split.
    let mut p2p = crate::step::ops::p2p(par, h);
    p2p.spec = OpSpec::P2P { hidden: h, seq_split: false };
    let mut subs: Vec<Op> = Vec::new();
    // Under context parallelism the module is priced at the full sequence
    // and charged for a cp-th of the layers (the spec's "uniform" form).
    let module_count = if phase == Phase::Context && par.cp > 1 { l / par.cp as f64 } else { l };
    let module = op(
        "mla_module",
        OpKind::MlaModule,
        module_count,
        OpSpec::MlaModule { context: phase == Phase::Context, heads, kv, fmha, gemm: quants.gemm },
    );
    let primary = push(&mut subs, [module]).0;
    let mut ops = vec![
        op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab }),
        op("add_norm_1", OpKind::ElementWise, l, norm),
    ];
    match phase {
        Phase::Context => {
            let attention = if vllm {
                op(
                    "attention",
                    OpKind::ContextAttention,
                    l,
                    OpSpec::ContextAttention { n, n_kv, head_dim: vllm_head, window: 0, kv, fmha, qk_norm: false },
                )
            } else {
                op("attention", OpKind::ContextMla, l, OpSpec::ContextMla { heads, kv, fmha })
            };
            let fallback = push(
                &mut subs,
                [
                    gemm("downscale_gemm", l, 2112, h, quants.gemm),
                    gemm("q_b_proj_gemm", l, 24576 / tp, 1536, quants.gemm),
                    gemm("kv_b_proj_gemm", l, 32768 / tp, 512, quants.gemm),
                    attention,
                    gemm("proj_gemm", l, h, 128 * 128 / tp, quants.gemm),
                ],
            );
            ops.push(op("mla_block", OpKind::FallbackOp, 1.0, OpSpec::Fallback { primary, fallback }));
            if par.cp > 1 {
                // Each layer's latent KV gathered from the cp ranks.
                ops.push(crate::step::ops::cp_all_gather("cp_all_gather", model, par, quants, l));
            }
            ops.push(op("add_norm_2", OpKind::ElementWise, l, norm));
            ops.extend(shared(model, par, quants, l));
            ops.extend(routed(model, par, quants, phase, l));
            ops.push(logits);
        }
        Phase::Generation => {
            let mut fallback_ops = vec![
                gemm("downscale_gemm", l, 2112, h, quants.gemm),
                gemm("q_b_proj_gemm", l, 24576 / tp, 1536, quants.gemm),
            ];
            if vllm {
                fallback_ops.push(op(
                    "attention",
                    OpKind::GenerationAttention,
                    l,
                    OpSpec::GenerationAttention { n, n_kv, head_dim: vllm_head, window: 0, kv },
                ));
            } else {
                fallback_ops.extend([
                    op("bmm_pre", OpKind::MlaBmm, l, OpSpec::MlaBmm { heads: n, quant: bmm_quant, pre: true }),
                    op("attention", OpKind::GenerationMla, l, OpSpec::GenerationMla { heads, kv }),
                    op("bmm_post", OpKind::MlaBmm, l, OpSpec::MlaBmm { heads: n, quant: bmm_quant, pre: false }),
                ]);
            }
            fallback_ops.push(gemm("proj_gemm", l, h, h / tp, quants.gemm));
            let fallback = push(&mut subs, fallback_ops);
            ops.push(op("mla_block", OpKind::FallbackOp, 1.0, OpSpec::Fallback { primary, fallback }));
            ops.push(op("add_norm_2", OpKind::ElementWise, l, norm));
            let a = push(&mut subs, routed(model, par, quants, phase, l));
            let b = push(&mut subs, shared(model, par, quants, l));
            ops.push(op("moe_overlap", OpKind::OverlapOp, 1.0, OpSpec::Overlap { a, b }));
            ops.push(logits);
        }
    }
    if vllm {
        ops.push(tp_allreduce);
    }
    ops.push(p2p);
    OpList { ops, subs }
}
