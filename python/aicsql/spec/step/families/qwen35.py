"""QWEN35 op lists (``Qwen35Model``: Qwen3.5 dense and MoE;
docs/spec/families_qwen35_gemma4.md 1.3 - 1.7).

Layers are grouped by type in a fixed order -- all gated-delta-net ("GDN",
linear attention) layers as one group, then all full-attention layers --
each group one op per kind with the group's layer count (a group without
layers is skipped; ``layer_types`` values other than ``linear_attention`` /
``full_attention`` are not counted):

* embedding (table rows ``V // tp``) and its all-reduce;
* GDN group: norm, in-projection GEMM of width ``(3*nk*hk + 2*nv*hv) // tp``
  (the spec's "Q + K + V + gate + beta" with a ``nk*hk`` beta term), the two
  GDN kernels -- ``causal_conv1d_fn`` / ``chunk_gated_delta_rule`` in
  context (``*_gdn_conv1d``, ``*_gdn_scan``), ``causal_conv1d_update`` /
  ``fused_sigmoid_gating_delta_rule_update`` in generation
  (``*_gdn_conv1d``, ``*_gdn_recurrence``), looked up with the *unsharded*
  GDN shape at every tp --, out-projection GEMM (``k = (nv*hv) // tp``),
  all-reduce, then the FFN ops with prefix ``*_gdn``;
* full-attention group: norm, qkv GEMM, attention (window 0, head ``d``, no
  q/k-norm although the checkpoint has one), proj GEMM, all-reduce, then the
  FFN ops with prefix ``*_full``;
* logits GEMM (bfloat16, ``V // tp``) and the P2P hand-off.

FFN ops of a group: norm, then either the dense SwiGLU (``gate_ffn1``,
``act_gate``, ``ffn2`` and an all-reduce) or, for ``E > 0``, the router
GEMM (only when ``E >= 128``), the MoE dispatch pair around the experts
(dispatches labelled with the MoE quant; distribution ``power_law_1.2``)
and the shared expert as a non-gated MLP of width ``S // tp`` (up GEMM,
"relu2" elementwise, down GEMM; only when ``S > 0``), with no FFN all-reduce.

Counts are ints in context and ``layers * 1.0`` in generation (no MTP).
Attention dp reaches only the MoE ops (the experts at ``x * dp`` tokens,
the dispatches' dp collectives); QWEN35 has no context parallelism (the
layout refuses cp > 1).
"""

from __future__ import annotations

from typing import List

from ...kernels.gdn import CHUNK_RULE, CONV1D_FN, CONV1D_UPDATE, DECODE_RULE, GDNShape
from ..model import ModelSpec
from ..ops import (
    GEMM,
    P2P,
    ContextAttention,
    CustomAllReduce,
    ElementWise,
    Embedding,
    GDNKernel,
    GenerationAttention,
    MoE,
    MoEDispatch,
    Op,
    Parallel,
    PhaseQuants,
)

ROUTER_MIN_EXPERTS = 128


def _ffn(model: ModelSpec, prefix: str, c, par: Parallel, q: PhaseQuants) -> List[Op]:
    """The FFN ops of one layer group (module doc)."""
    h, tp, E = model.hidden, par.tp, model.experts
    ops: List[Op] = [ElementWise(prefix + "_ffn_norm", c, 2 * h, 2 * h)]
    if E == 0:
        I = model.inter
        return ops + [
            GEMM(prefix + "_gate_ffn1_gemm", c, 2 * I // tp, h, q.gemm),
            ElementWise(prefix + "_act_gate", c, 2 * I // tp, I // tp),
            GEMM(prefix + "_ffn2_gemm", c, h, I // tp, q.gemm, low_precision_input=True),
            CustomAllReduce(prefix + "_ffn_ar", c, h, tp),
        ]
    if E >= ROUTER_MIN_EXPERTS:
        ops.append(GEMM(prefix + "_router_gemm", c, E, h, "bfloat16"))
    ops += [
        MoEDispatch(prefix + "_moe_pre_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe),
        MoE(prefix + "_moe", c, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe, model.distribution,
            par.attention_dp),
        MoEDispatch(prefix + "_moe_post_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                    pre_dispatch=False),
    ]  # fmt: skip
    S = model.qwen35.shared_expert_inter_size // tp
    if model.qwen35.shared_expert_inter_size > 0:
        ops += [
            GEMM(prefix + "_shared_up_gemm", c, S, h, q.gemm),
            ElementWise(prefix + "_shared_relu2", c, S, S),
            GEMM(prefix + "_shared_down_gemm", c, h, S, q.gemm, low_precision_input=True),
        ]
    return ops


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    cfg = model.qwen35
    if cfg is None:  # pragma: no cover - parse_model always sets it for QWEN35
        raise ValueError(f"{model.name!r}: no Qwen3.5 layer configuration")
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp, h, d, V = par.tp, model.hidden, model.head_dim, model.vocab
    n, n_kv = model.heads_per_gpu(tp)
    sf = 1.0  # the MTP scale factor at nextn = 0
    one = 1 * sf if gen else 1
    ops: List[Op] = [
        Embedding(p + "embedding", one, h, V // tp),
        CustomAllReduce(p + "embedding_ar", one, h, tp),
    ]
    linear, full = cfg.layer_counts()
    if linear > 0:
        c = linear * sf if gen else linear
        nk, hk, nv, hv = cfg.linear_num_key_heads, cfg.linear_key_head_dim, cfg.linear_num_value_heads, \
            cfg.linear_value_head_dim  # fmt: skip
        shape = GDNShape(h, nk, hk, nv, hv, cfg.linear_conv_kernel_dim)  # unsharded at every tp
        in_proj = (nk * hk + nk * hk + nv * hv + nv * hv + nk * hk) // tp
        if gen:
            kernels = [GDNKernel(p + "gdn_conv1d", c, CONV1D_UPDATE, phase, shape),
                       GDNKernel(p + "gdn_recurrence", c, DECODE_RULE, phase, shape)]  # fmt: skip
        else:
            kernels = [GDNKernel(p + "gdn_conv1d", c, CONV1D_FN, phase, shape),
                       GDNKernel(p + "gdn_scan", c, CHUNK_RULE, phase, shape)]  # fmt: skip
        ops += [
            ElementWise(p + "gdn_norm", c, 2 * h, 2 * h),
            GEMM(p + "gdn_in_proj_gemm", c, in_proj, h, q.gemm),
            *kernels,
            GEMM(p + "gdn_out_proj_gemm", c, h, nv * hv // tp, q.gemm, low_precision_input=True),
            CustomAllReduce(p + "gdn_ar", c, h, tp),
        ]
        ops += _ffn(model, p + "gdn", c, par, q)
    if full > 0:
        c = full * sf if gen else full
        if gen:
            attention: Op = GenerationAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache)
        else:
            attention = ContextAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache, q.fmha, False)
        ops += [
            ElementWise(p + "full_attn_norm", c, 2 * h, 2 * h),
            GEMM(p + "qkv_gemm", c, n * d + n_kv * d * 2, h, q.gemm),
            attention,
            GEMM(p + "proj_gemm", c, h, n * d, q.gemm, low_precision_input=True),
            CustomAllReduce(p + "full_ar", c, h, tp),
        ]
        ops += _ffn(model, p + "full", c, par, q)
    return ops + [
        GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16"),
        P2P(p + "p2p", (par.pp - 1) * sf if gen else par.pp - 1, h, par.pp),
    ]
