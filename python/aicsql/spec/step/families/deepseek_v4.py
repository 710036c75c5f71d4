"""DEEPSEEKV4 op lists (``DeepSeekV4Model``; docs/spec/families_dsv4.md 1.2 - 2.4).

Per layer: an mHC "pre" module, the attention norm, the attention module,
an mHC "post" module, the FFN norm, the shared expert (``2 * (I_moe // tp)``
wide gate-up GEMM, SwiGLU, down GEMM) and the routed experts (router GEMM in
bfloat16, dispatch, MoE, dispatch). Layers are grouped: one op per kind with
count ``L``, except the attention, one op per compress ratio in the order the
ratios first appear in ``compress_ratios`` (first ``L`` entries), the SWA
layers (ratio 0) counted with the HCA ones (ratio 128, appended last if the
model has none) -- DeepSeek-V4-Flash CSA then HCA, -Pro HCA then CSA. Both
attention ops are named ``*_attention`` (their values add up at the first).

Context: the shared expert before the routed path; the token-major ops
(embedding, mHC, norms, GEMMs, the logits GEMM included) split their tokens
over the cp ranks; the MoE does not. Decode: the routed path (group A) and
the shared expert (group B) overlap (`OverlapOp`, ``max(A, B)``); counts
carry the MTP factor 1.0. Both phases' dispatches keep ``is_context`` True
and the context parallelism (families_dsv4 2.2, 5). The embedding weighs the
whole vocabulary; the logits GEMM is ``V // tp`` wide, bfloat16. Attention dp
reaches only the MoE ops; MegaMoE (``moe_backend``) is not an input of this
path.

`phase_quants` applies the family's quant rules (1.2): FMHA bfloat16 in both
phases, and on sglang the FP4-expert checkpoints' MoE label per GPU
generation (``sm_version >= 100``: ``w4a8_mxfp4_mxfp8_trtllm``, ``== 90``:
``w4a16_mxfp4_cutlass``).
"""

from __future__ import annotations

from typing import List, Tuple

from ...kernels.dsv4 import DSv4Geometry
from ..composite import OverlapOp
from ..dsv4_ops import DSv4ContextAttention, DSv4GenerationAttention, DSv4MHC
from ..model import ModelSpec
from ..ops import GEMM, P2P, ElementWise, Embedding, MoE, MoEDispatch, Op, Parallel, PhaseQuants

__all__ = ["build", "attention_groups", "phase_quants", "kv_bytes_per_sequence"]


def kv_bytes_per_sequence(model: ModelSpec, kv_bytes, seq_len) -> float:
    """``DeepSeekV4Model.get_kvcache_bytes_per_sequence`` (families_dsv4 7.1):
    per layer (the first ``L`` ratios, ratio-0 layers as pure SWA), the
    window-capped entries, the compressed entries, the fp32 compressor state
    and, for CSA, the fp4 indexer cache and its compressor state; a float
    accumulated layer by layer. Not divided by tp or cp."""
    cfg = model.dsv4
    s = max(0, seq_len)
    entry = cfg.head_dim * kv_bytes
    total = 0.0
    for ratio in cfg.compress_ratios:
        total += min(s, cfg.sliding_window) * entry
        if ratio:
            compressed = s // ratio
            total += compressed * entry
            total += 2 * ratio * (2 if ratio == 4 else 1) * cfg.head_dim * 4
            if ratio == 4:
                total += compressed * (cfg.index_head_dim * 0.5)
                total += 2 * ratio * 2 * cfg.index_head_dim * 4
    return total


def attention_groups(ratios) -> List[Tuple[int, int]]:
    """(ratio, layer count) per attention op (families_dsv4 1.4)."""
    counts = {}
    for r in ratios:
        counts[r] = counts.get(r, 0) + 1
    swa = counts.pop(0, 0)
    counts[128] = counts.get(128, 0) + swa
    return [(r, c) for r, c in counts.items() if c > 0]


def phase_quants(q: PhaseQuants, model: ModelSpec, backend: str, sm_version) -> PhaseQuants:
    """The DEEPSEEKV4 rules of families_dsv4 1.2 on a phase's quant modes."""
    moe = q.moe
    cfg = model.dsv4
    if backend == "sglang" and cfg is not None and cfg.expert_fp4:
        sm = int(sm_version if sm_version is not None else -1)
        if sm >= 100:
            moe = "w4a8_mxfp4_mxfp8_trtllm"
        elif sm == 90:
            moe = "w4a16_mxfp4_cutlass"
    return q._replace(fmha="bfloat16", moe=moe)


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    cfg = model.dsv4
    if cfg is None:  # pragma: no cover - parse_model always sets it for DEEPSEEKV4
        raise ValueError(f"{model.name!r}: no DeepSeek-V4 configuration")
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp, L, h, V, E = par.tp, model.num_layers, model.hidden, model.vocab, model.experts
    sf = 1.0  # the MTP scale factor at nextn = 0
    c = L * sf if gen else L
    one = 1 * sf if gen else 1
    sp = 1 if gen else par.cp  # the token-major context ops' seq split
    li = model.moe_inter // tp
    local_groups = max(1, cfg.o_groups // tp)

    def geometry(ratio: int) -> DSv4Geometry:
        return DSv4Geometry(model.heads // tp, model.heads, tp, h, cfg.q_lora_rank, cfg.o_lora_rank, cfg.head_dim,
                            cfg.qk_rope_head_dim, cfg.index_n_heads, cfg.index_head_dim, cfg.index_topk,
                            cfg.sliding_window, ratio, local_groups)  # fmt: skip

    attention: List[Op] = []
    for ratio, count in attention_groups(cfg.compress_ratios):
        if gen:
            attention.append(DSv4GenerationAttention(p + "attention", count * sf, geometry(ratio), q.kvcache, q.fmha,
                                                     q.gemm))  # fmt: skip
        else:
            attention.append(DSv4ContextAttention(p + "attention", count * 1.0, geometry(ratio), q.kvcache, q.fmha,
                                                  q.gemm, cp=par.cp))  # fmt: skip
    ops: List[Op] = [
        Embedding(p + "embedding", one, h, V, seq_split=sp),
        DSv4MHC(p + "mhc_pre", c, "pre", h, cfg.hc_mult, cfg.hc_sinkhorn_iters, seq_split=sp),
        ElementWise(p + "attn_norm", c, h, h, seq_split=sp),
        *attention,
        DSv4MHC(p + "mhc_post", c, "post", h, cfg.hc_mult, cfg.hc_sinkhorn_iters, seq_split=sp),
        ElementWise(p + "ffn_norm", c, h, h, seq_split=sp),
    ]
    shared: List[Op] = [
        GEMM(p + "shared_gate_up_gemm", c, 2 * li, h, q.gemm, seq_split=sp),
        ElementWise(p + "shared_act_gate", c, 2 * li, li, seq_split=sp),
        GEMM(p + "shared_ffn2_gemm", c, h, li, q.gemm, seq_split=sp),
    ]
    routed: List[Op] = [
        GEMM(p + "router_gemm", c, E, h, "bfloat16", seq_split=sp),
        MoEDispatch(p + "moe_pre_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                    attn_cp=par.cp, is_context=True),
        MoE(p + "moe", c, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe, model.distribution,
            par.attention_dp),
        MoEDispatch(p + "moe_post_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                    pre_dispatch=False, attn_cp=par.cp, is_context=True),
    ]  # fmt: skip
    if gen:
        ops.append(OverlapOp(p + "moe_overlap", routed, shared))
    else:
        ops += shared + routed
    ops.append(GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16", seq_split=sp))
    ops.append(P2P(p + "p2p", (par.pp - 1) * sf if gen else par.pp - 1, h, par.pp))
    return ops
