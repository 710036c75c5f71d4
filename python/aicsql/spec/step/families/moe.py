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
attention dp > 1 (this family only) the experts see ``x * dp`` tokens and
the dispatches gather before / scatter after them over ``tp * dp`` GPUs
(`MoEDispatch`).
"""

from __future__ import annotations

from typing import List

from ..model import ModelSpec
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
    ops: List[Op] = []
    attn_scale = 1
    if model.architecture == GPT_OSS:
        attn_scale = 2
        if gen:
            ops.append(GenerationAttention(p + "attention", L * mtp / attn_scale, n, n_kv, d, GPT_OSS_WINDOW,
                                           q.kvcache))  # fmt: skip
        else:
            ops.append(ContextAttention(p + "attention", L / attn_scale, n, n_kv, d, GPT_OSS_WINDOW, q.kvcache,
                                        q.fmha, model.use_qk_norm))  # fmt: skip
    ops += [
        Embedding(p + "embedding", one, h, V // tp),
        ElementWise(p + "add_norm_1", c, 2 * h, 2 * h),
        GEMM(p + "qkv_gemm", c, H * d // tp + d * n_kv * 2, h, q.gemm),
    ]
    if gen:
        ops.append(GenerationAttention(p + "attention", L / attn_scale * mtp, n, n_kv, d, 0, q.kvcache))
    else:
        ops.append(ContextAttention(p + "attention", L / attn_scale, n, n_kv, d, 0, q.kvcache, q.fmha,
                                    model.use_qk_norm))  # fmt: skip
    ops += [
        GEMM(p + "proj_gemm", c, h, H * d // tp, q.gemm, low_precision_input=True),
        ElementWise(p + "add_norm_2", c, 2 * h, 2 * h),
        GEMM(p + "router_gemm", c, E, h, "bfloat16"),
        MoEDispatch(p + "moe_pre_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe),
        MoE(p + "moe", c, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe, model.distribution,
            par.attention_dp),
        MoEDispatch(p + "moe_post_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe, pre_dispatch=False),
    ]  # fmt: skip
    if gen:
        ops.append(GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16"))
    return ops + [
        CustomAllReduce(p + "embedding_ar", one, h, tp),
        P2P(p + "p2p", par.pp - 1, h, par.pp),
    ]
