"""MOE (and QWEN3VL_MOE's text path) op lists: docs/spec 10.2, with GPT-OSS's
differences (families_mla 4):

* a windowed attention op (window 128, hard-coded; the config's
  ``sliding_window`` and ``layer_types`` are not read) is prepended to each
  phase, **before** the embedding, and the regular attention op keeps window
  0; each costs half the layers (``L / 2``). Both share the attention op's
  name, so the step sums them into one entry at the first one's place;
* the MoE quant is whatever the checkpoint implies (mxfp4 ->
  ``w4a16_mxfp4``), distribution ``power_law_1.2`` as for every MOE model.

No ar_1 / ar_2 (the dispatches carry the tensor-parallel communication), no
context logits GEMM; the dispatches are labelled with the MoE quant. At
attention dp > 1 the experts see ``x * dp`` tokens and the dispatches
gather before / scatter after them over ``tp * dp`` GPUs (`MoEDispatch`),
as in HYBRIDMOE and DEEPSEEK / KIMIK25.

Context parallelism (cp > 1: sglang, tp = dp = 1, ``moe_tp * moe_ep = cp``):
the token-major context ops price ``ceil(x / cp)`` tokens, both attention ops
the zigzag pair, the KV all-gather follows the regular attention, and the
context dispatches all-gather / reduce-scatter the full volume over the cp
ranks (``attn_cp``); the experts see every token. The decode dispatches
keep their ``attn_tp = cp > 1`` all-reduces (the spec passes them no CP).
"""

from __future__ import annotations

from typing import List

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

GPT_OSS = "GptOssForCausalLM"
GPT_OSS_WINDOW = 128


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp = par.tp
    L, h, H, d, V, E = model.num_layers, model.hidden, model.heads, model.head_dim, model.vocab, model.experts
    n, n_kv = model.heads_per_gpu(tp)
    mtp = 1.0
    c = L * mtp if gen else L
    one = 1 * mtp if gen else 1
    sp = 1 if gen else par.cp  # context parallelism: the context ops' tokens split over cp ranks
    cp = 1 if gen else par.cp  # ... and the context dispatches' CP collectives
    ops: List[Op] = []
    attn_scale = 1
    if model.architecture == GPT_OSS:
        attn_scale = 2
        if gen:
            ops.append(GenerationAttention(p + "attention", L * mtp / attn_scale, n, n_kv, d, GPT_OSS_WINDOW,
                                           q.kvcache))  # fmt: skip
        else:
            ops.append(ContextAttention(p + "attention", L / attn_scale, n, n_kv, d, GPT_OSS_WINDOW, q.kvcache,
                                        q.fmha, model.use_qk_norm, cp=par.cp))  # fmt: skip
    ops += [
        Embedding(p + "embedding", one, h, V // tp, seq_split=sp),
        ElementWise(p + "add_norm_1", c, 2 * h, 2 * h, seq_split=sp),
        GEMM(p + "qkv_gemm", c, H * d // tp + d * n_kv * 2, h, q.gemm, seq_split=sp),
    ]
    if gen:
        ops.append(GenerationAttention(p + "attention", L / attn_scale * mtp, n, n_kv, d, 0, q.kvcache))
    else:
        ops.append(ContextAttention(p + "attention", L / attn_scale, n, n_kv, d, 0, q.kvcache, q.fmha,
                                    model.use_qk_norm, cp=par.cp))  # fmt: skip
        ops += cp_all_gather(model, par, q)
    ops += [
        GEMM(p + "proj_gemm", c, h, H * d // tp, q.gemm, low_precision_input=True, seq_split=sp),
        ElementWise(p + "add_norm_2", c, 2 * h, 2 * h, seq_split=sp),
        GEMM(p + "router_gemm", c, E, h, "bfloat16", seq_split=sp),
        MoEDispatch(p + "moe_pre_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe, attn_cp=cp),
        MoE(p + "moe", c, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe, model.distribution,
            par.attention_dp),
        MoEDispatch(p + "moe_post_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe, pre_dispatch=False,
                    attn_cp=cp),
    ]  # fmt: skip
    if gen:
        ops.append(GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16"))
    return ops + [
        CustomAllReduce(p + "embedding_ar", one, h, tp, seq_split=sp),
        P2P(p + "p2p", (par.pp - 1) * mtp if gen else par.pp - 1, h, par.pp, seq_split=sp),
    ]
