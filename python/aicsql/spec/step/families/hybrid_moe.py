"""HYBRIDMOE op lists (``HybridMoEModel``: Llama-4 Scout / Maverick,
MiMo-V2-Flash; families_hybrid 1.3 - 1.6).

Ops are grouped by layer type, in the fixed order global_moe, swa_moe,
swa_dense, global_dense (a type without layers is skipped), each group one op
per kind with the group's layer count: attention norm, qkv GEMM, attention
(window 0 and head ``d`` for global layers, the sliding window and SWA head
size for SWA layers; no q/k-norm), proj GEMM, FFN norm, then the MoE ops
(router GEMM only when ``E >= 128``, dispatches without a quant label) or the
dense SwiGLU ops. Every attention op is named ``*_attention``: the step sums
them into one entry. No all-reduce at all besides the MoE dispatches, no
embedding all-reduce; the embedding is charged once, the logits GEMM at the
end.

Attention dp > 1 (families_dp_cp.md 2): only the MoE ops of each MoE group
change -- the experts see ``x * dp`` tokens, the dispatches take their dp
collectives (`MoEDispatch`) -- in both phases; every other width is tp's.
The spec builds these dispatches without a quant mode, so trtllm's SM 100
all-gather moves the full bf16 volume even for a quantized checkpoint
(MOE and DEEPSEEK / KIMIK25 compress it by their MoE quant).

Context parallelism (cp > 1, sglang): the spec wires it after building the
lists -- every token-major context op (embedding, norms, GEMMs including the
logits GEMM, P2P) prices ``ceil(x / cp)`` tokens, the attention ops the
zigzag pair, the context dispatches gather / scatter over the cp ranks and
the decode dispatches take the decode-CP path (nothing before the experts,
an all-reduce after); per-attention-type KV all-gathers close the context list.
"""

from __future__ import annotations

from typing import Dict, List

from ...kernels.quant import COMM_QUANTS, KV_QUANTS
from ..model import HybridConfig, ModelSpec
from ..ops import (
    GEMM,
    P2P,
    ContextAttention,
    ElementWise,
    Embedding,
    GenerationAttention,
    MoE,
    NCCL,
    MoEDispatch,
    Op,
    Parallel,
    PhaseQuants,
)

_KINDS = ("global_moe", "swa_moe", "swa_dense", "global_dense")
ROUTER_MIN_EXPERTS = 128


def layer_counts(cfg: HybridConfig) -> Dict[str, int]:
    """Layers per type: (attention 1 = global, ffn 1 = MoE)."""
    counts = dict.fromkeys(_KINDS, 0)
    for attn, moe in zip(cfg.attn_layer_pattern, cfg.moe_layer_freq):
        counts[("global" if attn == 1 else "swa") + ("_moe" if moe == 1 else "_dense")] += 1
    return counts


def _dims(model: ModelSpec, tp: int) -> dict:
    """families_hybrid 1.3 (``_resolve_dims``): 0 overrides fall back to the model's values."""
    cfg = model.hybrid
    swa_kv = cfg.swa_num_kv_heads or model.kv_heads
    swa_hd = cfg.swa_head_dim or model.head_dim
    swa_vhd = cfg.swa_v_head_dim or model.head_dim
    glob_vhd = cfg.global_v_head_dim or model.head_dim
    swa_nkv = (swa_kv + tp - 1) // tp
    glob_nkv = (model.kv_heads + tp - 1) // tp
    H, d = model.heads, model.head_dim
    return {
        "swa": {"n_kv": swa_nkv, "qkv": H * swa_hd // tp + swa_nkv * (swa_hd + swa_vhd), "proj": H * swa_vhd // tp,
                "hd": swa_hd, "v_hd": swa_vhd, "window": cfg.sliding_window_size},
        "global": {"n_kv": glob_nkv, "qkv": H * d // tp + glob_nkv * (d + glob_vhd), "proj": H * glob_vhd // tp,
                   "hd": d, "v_hd": glob_vhd, "window": 0},
        "dense_ipt": (cfg.dense_inter_size or model.inter) // tp,
    }  # fmt: skip


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    if model.hybrid is None or len(model.hybrid.attn_layer_pattern) != model.num_layers:
        raise ValueError(f"HybridMoEConfig pattern length does not match num_layers ({model.num_layers}) "
                         f"of {model.name!r}")  # fmt: skip
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp, h, E = par.tp, model.hidden, model.experts
    sf = 1.0
    n = model.heads // tp
    dims = _dims(model, tp)
    sp = 1 if gen else par.cp  # context parallelism: the context ops' tokens split over cp ranks
    # The spec wires CP into the dispatches of both phases: context all-gather /
    # reduce-scatter, decode (is_context False) nothing / all-reduce.
    ops: List[Op] = [Embedding(p + "embedding", 1 * sf if gen else 1, h, model.vocab, seq_split=sp)]
    counts = layer_counts(model.hybrid)
    for kind, layers in counts.items():
        if layers == 0:
            continue
        c = layers * sf if gen else layers
        attn_kind, ffn_kind = kind.split("_")
        a = dims[attn_kind]
        group = p + (attn_kind if ffn_kind == "moe" else kind)  # context_global, ..., context_swa_dense
        ops += [
            ElementWise(group + "_attn_norm", c, 2 * h, 2 * h, seq_split=sp),
            GEMM(group + "_qkv_gemm", c, a["qkv"], h, q.gemm, seq_split=sp),
            GenerationAttention(p + "attention", c, n, a["n_kv"], a["hd"], a["window"], q.kvcache) if gen else
            ContextAttention(p + "attention", c, n, a["n_kv"], a["hd"], a["window"], q.kvcache, q.fmha, False,
                             cp=par.cp),
            GEMM(group + "_proj_gemm", c, h, a["proj"], q.gemm, low_precision_input=True, seq_split=sp),
        ]  # fmt: skip
        r = p + attn_kind  # the FFN ops' prefix: context_global / context_swa
        if ffn_kind == "moe":
            ops.append(ElementWise(group + "_moe_norm", c, 2 * h, 2 * h, seq_split=sp))
            if E >= ROUTER_MIN_EXPERTS:
                ops.append(GEMM(r + "_router_gemm", c, E, h, "bfloat16", seq_split=sp))
            ops += [
                MoEDispatch(r + "_moe_pre_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, None,
                            attn_cp=par.cp, is_context=not gen),
                MoE(r + "_moe", c, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe,
                    model.distribution, par.attention_dp),
                MoEDispatch(r + "_moe_post_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, None,
                            pre_dispatch=False, attn_cp=par.cp, is_context=not gen),
            ]  # fmt: skip
        else:
            ipt = dims["dense_ipt"]
            ops += [
                ElementWise(group + "_ffn_norm", c, 2 * h, 2 * h, seq_split=sp),
                GEMM(r + "_dense_gate_up_gemm", c, 2 * ipt, h, q.gemm, seq_split=sp),
                ElementWise(r + "_dense_act", c, 2 * ipt, ipt, seq_split=sp),
                GEMM(r + "_dense_down_gemm", c, h, ipt, q.gemm, low_precision_input=True, seq_split=sp),
            ]
    ops += [
        GEMM(p + "logits_gemm", 1 * sf if gen else 1, model.vocab // tp, h, "bfloat16", seq_split=sp),
        P2P(p + "p2p", (par.pp - 1) * sf if gen else par.pp - 1, h, par.pp, seq_split=sp),
    ]
    if not gen and par.cp > 1:
        ops += _cp_all_gathers(counts, dims, par.cp, KV_QUANTS[q.kvcache].memory, COMM_QUANTS[q.comm].memory)
    return ops


def _cp_all_gathers(counts: Dict[str, int], dims: dict, cp: int, kv_bytes: int, comm_bytes: int) -> List[Op]:
    """families_hybrid CP: one KV all-gather per attention type with layers
    (global, then SWA), appended after the P2P op, counted by the type's
    layers, of ``n_kv * (head_dim + v_head_dim) * kv_bytes / comm_bytes``
    elements per token (the SWA one sized by every new token, not the window)."""
    ops: List[Op] = []
    for attn_kind in ("global", "swa"):
        layers = counts[attn_kind + "_moe"] + counts[attn_kind + "_dense"]
        if layers > 0:
            a = dims[attn_kind]
            per_token = a["n_kv"] * (a["hd"] + a["v_hd"]) * kv_bytes
            ops.append(NCCL(f"context_cp_all_gather_{attn_kind}", layers, "all_gather", per_token / comm_bytes, cp))
    return ops
