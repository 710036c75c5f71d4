"""DEEPSEEK and KIMIK25 op lists (``DeepSeekModel``, non-WideEP; families_mla 3).

* The attention block is a `FallbackOp`: the MLA module table if it answers,
  else granular ops -- q-down GEMM, q-up GEMM, (context) kv-up GEMM, the
  attention, the output GEMM -- whose shapes are DeepSeek-V3's literals
  (2112, 24576, 32768, 1536, 512, 128 x 128), used unchanged for Kimi. On
  trtllm / sglang the granular attention is the MLA tables' (ContextMLA;
  decode MLABmm + GenerationMLA + MLABmm); on vllm plain GQA attention with
  ``Hkv // tp`` kv heads (floor) and the ``v_head_dim`` head size.
* MLA head count of the module and the granular MLA tables: ``128 // tp``
  whatever H is; the BMMs and the vllm attention use ``H // tp``.
* Every layer is MoE plus a shared expert of width ``moe_intermediate_size``
  sharded by the attention tp (``first_k_dense_replace`` and
  ``n_shared_experts`` are not read); distribution ``power_law_1.01``.
* Decode overlaps the routed path (router, dispatches, experts) with the
  shared expert (`OverlapOp`).
* vllm pays two tp all-reduces per layer (``*_tp_allreduce``); nobody pays an
  embedding all-reduce.
* Attention dp > 1 (families_dp_cp.md 5): the routed experts see ``x * dp``
  tokens and the dispatches (labelled with the MoE quant, which sizes
  trtllm's SM 100 all-gather) take their dp collectives; the MLA block, the
  shared expert and the vllm all-reduces keep their tp widths, so at tp 1
  every attention rank runs the whole shared expert.
* Context parallelism (cp > 1, sglang, tp = dp = 1): the MLA module counts
  ``L / cp`` layers at the full token count, the granular fallback's GEMMs
  ``ceil(x / cp)`` tokens and its context MLA the zigzag pair; an all-gather
  of the MLA latent KV follows the block; the token-major ops split, the
  dispatches take their CP collectives in both phases (decode: nothing
  before, an all-reduce after), the experts and the context P2P see every
  token (the spec's context P2P has no seq_split here, unlike LLAMA / MOE).
"""

from __future__ import annotations

from typing import List

from ..composite import FallbackOp, OverlapOp
from ..mla_ops import ContextMLA, GenerationMLA, MLABmm, MLAModule
from ..model import ModelSpec
from .llama import cp_all_gather
from ..ops import (
    GEMM,
    P2P,
    ContextAttention,
    CustomAllReduce,
    ElementWise,
    Embedding,
    GenerationAttention,
    MoE,
    MoEDispatch,
    Op,
    Parallel,
    PhaseQuants,
)

MLA_HEADS = 128  # the module / granular MLA tables' head count before tp


def _routed(p: str, count, model: ModelSpec, par: Parallel, q: PhaseQuants, gen: bool) -> List[Op]:
    h, E = model.hidden, model.experts
    sp = 1 if gen else par.cp
    return [
        GEMM(p + "router_gemm", count, E, h, "bfloat16", seq_split=sp),
        MoEDispatch(p + "moe_pre_dispatch", count, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                    attn_cp=par.cp, is_context=not gen),
        MoE(p + "moe", count, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe, model.distribution,
            par.attention_dp),
        MoEDispatch(p + "moe_post_dispatch", count, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                    pre_dispatch=False, attn_cp=par.cp, is_context=not gen),
    ]  # fmt: skip


def _shared(p: str, count, model: ModelSpec, par: Parallel, q: PhaseQuants, gen: bool) -> List[Op]:
    h, I, tp = model.hidden, model.moe_inter, par.tp
    sp = 1 if gen else par.cp
    return [
        GEMM(p + "shared_gate_up_gemm", count, 2 * I // tp, h, q.gemm, seq_split=sp),
        ElementWise(p + "shared_act_gate", count, 2 * I // tp, I // tp, seq_split=sp),
        GEMM(p + "shared_ffn2_gemm", count, h, I // tp, q.gemm, seq_split=sp),
    ]


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    tp, L, h, V = par.tp, model.num_layers, model.hidden, model.vocab
    vllm = backend == "vllm"
    heads = MLA_HEADS // tp
    n, n_kv = model.heads // tp, model.kv_heads // tp
    vllm_head = model.v_head_dim or model.head_dim
    bmm_quant = "fp8" if q.gemm != "bfloat16" else "bfloat16"
    if phase == "context":
        p = "context_"
        cp = par.cp
        # the MLA module and the vllm attention count L / cp layers under CP
        # (sglang's all-gather style: attn_count_div = cp; only sglang takes cp > 1)
        attn_div = cp
        attention = (
            ContextAttention(p + "attention", L / attn_div, n, n_kv, vllm_head, 0, q.kvcache, q.fmha, False)
            if vllm else ContextMLA(p + "attention", L, heads, q.kvcache, q.fmha, cp=cp)
        )  # fmt: skip
        block = FallbackOp(
            p + "mla_block",
            MLAModule(p + "mla_module", L / attn_div, True, heads, q.kvcache, q.fmha, q.gemm),
            [
                GEMM(p + "downscale_gemm", L, 2112, h, q.gemm, seq_split=cp),
                GEMM(p + "q_b_proj_gemm", L, 24576 // tp, 1536, q.gemm, seq_split=cp),
                GEMM(p + "kv_b_proj_gemm", L, 32768 // tp, 512, q.gemm, seq_split=cp),
                attention,
                GEMM(p + "proj_gemm", L, h, 128 * 128 // tp, q.gemm, seq_split=cp),
            ],
        )
        ops: List[Op] = [
            Embedding(p + "embedding", 1, h, V, seq_split=cp),
            ElementWise(p + "add_norm_1", L, 2 * h, 2 * h, seq_split=cp),
            block,
            *cp_all_gather(model, par, q),
            ElementWise(p + "add_norm_2", L, 2 * h, 2 * h, seq_split=cp),
            *_shared(p, L, model, par, q, False),
            *_routed(p, L, model, par, q, False),
            GEMM(p + "logits_gemm", 1, V // tp, h, "bfloat16", seq_split=cp),
        ]
        if vllm:
            ops.append(CustomAllReduce(p + "tp_allreduce", 2 * L, h, tp))
        ops.append(P2P(p + "p2p", par.pp - 1, h, par.pp))  # the spec builds this P2P without seq_split
        return ops

    p, mtp = "generation_", 1.0
    c = L * mtp
    attention: List[Op] = (
        [GenerationAttention(p + "attention", c, n, n_kv, vllm_head, 0, q.kvcache)]
        if vllm
        else [
            MLABmm(p + "bmm_pre", c, n, bmm_quant, True),
            GenerationMLA(p + "attention", c, heads, q.kvcache),
            MLABmm(p + "bmm_post", c, n, bmm_quant, False),
        ]
    )
    block = FallbackOp(
        p + "mla_block",
        MLAModule(p + "mla_module", c, False, heads, q.kvcache, q.fmha, q.gemm),
        [
            GEMM(p + "downscale_gemm", c, 2112, h, q.gemm),
            GEMM(p + "q_b_proj_gemm", c, 24576 // tp, 1536, q.gemm),
            *attention,
            GEMM(p + "proj_gemm", c, h, h // tp, q.gemm),
        ],
    )
    ops = [
        Embedding(p + "embedding", 1 * mtp, h, V),
        ElementWise(p + "add_norm_1", c, 2 * h, 2 * h),
        block,
        ElementWise(p + "add_norm_2", c, 2 * h, 2 * h),
        OverlapOp(p + "moe_overlap", _routed(p, c, model, par, q, True), _shared(p, c, model, par, q, True)),
        GEMM(p + "logits_gemm", 1 * mtp, V // tp, h, "bfloat16"),
    ]
    if vllm:
        ops.append(CustomAllReduce(p + "tp_allreduce", 2 * L * mtp, h, tp))
    ops.append(P2P(p + "p2p", (par.pp - 1) * mtp, h, par.pp))
    return ops
