"""GEMMA4MIX op lists (``Gemma4MixModel``: Gemma 4;
docs/spec/families_qwen35_gemma4.md 3.3 - 3.7).

Layers are grouped by attention type in a fixed order -- sliding-window
("SWA") layers first, then global ones (the reverse of HYBRIDMOE) -- each
group one op per kind with the group's layer count (a group without layers
is skipped):

* attention norm, qkv GEMM, attention, proj GEMM: SWA layers with the
  config's window, SWA kv heads and head size; global layers with window 0,
  the global kv heads and head size, their qkv GEMM narrowed to one K/V
  projection when ``attention_k_eq_v`` (the attention op and its extras still
  count K and V); both attention ops are named ``*_attention`` (the step sums
  them into one entry at the SWA one's place); no q/k-norm;
* FFN norm, the shared dense MLP (gate-up GEMM of width ``2 * (I // tp)``,
  act, down GEMM) and -- unless the model is dense (``topk`` or ``E`` 0) --
  the routed experts: router GEMM (only when ``E >= 128``), MoE dispatch pair
  (labelled with the MoE quant) around the experts (distribution
  ``power_law_1.01``).

The embedding (rows: the full vocabulary) opens the list, the logits GEMM
(bfloat16, ``V // tp``) and the P2P hand-off close it. No all-reduce outside
the MoE dispatches. Counts are ints in context and ``layers * 1.0`` in
generation.

Attention dp reaches only the MoE ops. Context parallelism (cp > 1, sglang,
tp = dp = 1) as HYBRIDMOE's: every token-major context op prices ``ceil(x /
cp)`` tokens (the logits GEMM included), the attention ops the zigzag pair,
the dispatches take their CP collectives in both phases (context all-gather
/ reduce-scatter; decode nothing before the experts, an all-reduce after),
and one KV all-gather per attention type closes the context list -- SWA then
global, of ``n_kv * head * 2 * kv_bytes / comm_bytes`` elements per token
(not window-capped).
"""

from __future__ import annotations

from typing import List, Tuple

from ...kernels.quant import COMM_QUANTS, KV_QUANTS
from ..model import ModelSpec
from ..ops import (
    GEMM,
    NCCL,
    P2P,
    ContextAttention,
    ElementWise,
    Embedding,
    GenerationAttention,
    MoE,
    MoEDispatch,
    Op,
    Parallel,
    PhaseQuants,
)

ROUTER_MIN_EXPERTS = 128


def _attention_dims(model: ModelSpec, tp: int) -> List[Tuple[str, int, dict]]:
    """families_qwen35_gemma4 3.3 (``_resolve_dims``): (kind, layers, dims) per type, SWA first."""
    cfg = model.gemma4
    H = model.heads
    swa_nkv = (cfg.swa_num_kv_heads + tp - 1) // tp
    glob_nkv = (cfg.global_num_kv_heads + tp - 1) // tp
    swa_hd, glob_hd = cfg.swa_head_dim, cfg.global_head_dim
    swa, glob = cfg.layer_counts()
    return [
        ("swa", swa, {"n_kv": swa_nkv, "hd": swa_hd, "window": cfg.sliding_window_size,
                      "qkv": H * swa_hd // tp + swa_nkv * swa_hd * 2, "proj": H * swa_hd // tp}),
        ("global", glob, {"n_kv": glob_nkv, "hd": glob_hd, "window": 0,
                          "qkv": H * glob_hd // tp + glob_nkv * glob_hd * (1 if cfg.attention_k_eq_v else 2),
                          "proj": H * glob_hd // tp}),
    ]  # fmt: skip


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    cfg = model.gemma4
    if cfg is None:  # pragma: no cover - parse_model always sets it for GEMMA4MIX
        raise ValueError(f"{model.name!r}: no Gemma 4 layer configuration")
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp, h, E, V = par.tp, model.hidden, model.experts, model.vocab
    n = model.heads // tp
    ipt = model.inter // tp
    sf = 1.0  # the MTP scale factor at nextn = 0
    one = 1 * sf if gen else 1
    sp = 1 if gen else par.cp  # context parallelism: the context ops' tokens split over cp ranks
    dims = _attention_dims(model, tp)
    ops: List[Op] = [Embedding(p + "embedding", one, h, V, seq_split=sp)]
    for kind, layers, a in dims:
        if layers <= 0:
            continue
        c = layers * sf if gen else layers
        g = p + kind
        if gen:
            attention: Op = GenerationAttention(p + "attention", c, n, a["n_kv"], a["hd"], a["window"], q.kvcache)
        else:
            attention = ContextAttention(p + "attention", c, n, a["n_kv"], a["hd"], a["window"], q.kvcache, q.fmha,
                                         False, cp=par.cp)  # fmt: skip
        ops += [
            ElementWise(g + "_attn_norm", c, 2 * h, 2 * h, seq_split=sp),
            GEMM(g + "_qkv_gemm", c, a["qkv"], h, q.gemm, seq_split=sp),
            attention,
            GEMM(g + "_proj_gemm", c, h, a["proj"], q.gemm, low_precision_input=True, seq_split=sp),
            ElementWise(g + "_ffn_norm", c, 2 * h, 2 * h, seq_split=sp),
            GEMM(g + "_shared_mlp_gate_up_gemm", c, 2 * ipt, h, q.gemm, seq_split=sp),
            ElementWise(g + "_shared_mlp_act", c, 2 * ipt, ipt, seq_split=sp),
            GEMM(g + "_shared_mlp_down_gemm", c, h, ipt, q.gemm, low_precision_input=True, seq_split=sp),
        ]
        if model.gemma4_dense:
            continue
        if E >= ROUTER_MIN_EXPERTS:
            ops.append(GEMM(g + "_router_gemm", c, E, h, "bfloat16", seq_split=sp))
        ops += [
            MoEDispatch(g + "_moe_pre_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                        attn_cp=par.cp, is_context=not gen),
            MoE(g + "_moe", c, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe, model.distribution,
                par.attention_dp),
            MoEDispatch(g + "_moe_post_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                        pre_dispatch=False, attn_cp=par.cp, is_context=not gen),
        ]  # fmt: skip
    ops += [
        GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16", seq_split=sp),
        P2P(p + "p2p", (par.pp - 1) * sf if gen else par.pp - 1, h, par.pp, seq_split=sp),
    ]
    if not gen and par.cp > 1:
        kv_bytes, comm_bytes = KV_QUANTS[q.kvcache].memory, COMM_QUANTS[q.comm].memory
        for kind, layers, a in dims:
            if layers > 0:
                per_token = a["n_kv"] * a["hd"] * 2 * kv_bytes / comm_bytes
                ops.append(NCCL(f"context_cp_all_gather_{kind}", layers, "all_gather", per_token, par.cp))
    return ops
