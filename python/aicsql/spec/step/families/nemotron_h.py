"""NEMOTRONH op lists (``NemotronHModel``: Nemotron-3 Nano / Super / Ultra,
Nemotron-H-56B; docs/spec/families_nemotron.md 1.3 - 1.6).

Layers are grouped by type in a fixed order -- Mamba-2 (``M``), attention
(``*``), MoE (``E``), dense MLP (``-``) -- each group one op per kind with
the group's layer count taken from the pattern (``num_hidden_layers`` plays
no role; a group without layers is skipped):

* the embedding (table rows: the full vocabulary), **no** all-reduce after it;
* Mamba group: norm, in-projection GEMM of width ``2*di + 2*ng*d_state + mh``
  (per-GPU floor divisions ``mh = heads // tp``, ``di = mh * head_dim``,
  ``ng = n_groups // tp``, unchecked), the two Mamba-2 kernels --
  ``causal_conv1d_fn`` / ``mamba_chunk_scan_combined`` in context,
  ``causal_conv1d_update`` / ``selective_state_update`` in generation, named
  ``*_mamba_conv1d`` / ``*_mamba_ssm`` and looked up with the *unsharded*
  model dims at every tp --, out-projection GEMM (``k = di``), all-reduce;
* attention group: norm, qkv GEMM, attention (window 0, head ``d``, no
  q/k-norm), proj GEMM (low-precision input), all-reduce;
* MoE group: norm, the shared expert as a non-gated MLP of width
  ``I_sh // tp`` (up GEMM, "relu2" elementwise, down GEMM with low-precision
  input), the router GEMM (bfloat16, whatever the expert count), for a
  latent MoE the fc1 latent projection (``h -> latent // tp``), the
  dispatch pair around the **non-gated** experts -- both on the hidden size
  ``moe_h`` (the latent width when set, else ``h``), the dispatches
  labelled with the MoE quant, distribution ``power_law_1.01`` --, the fc2
  latent projection back (low-precision input), then an all-reduce of the
  ``x*h`` activations over tp (so three collectives per MoE layer on
  vllm / sglang at attention dp 1);
* MLP group: norm, up GEMM (``I // tp``), "relu2", down GEMM, all-reduce;
* the P2P hand-off, **then** the logits GEMM (bfloat16, ``V // tp``).

Only the proj, shared-down and fc2-latent GEMMs are flagged low-precision
input (it matters for fp8_static checkpoints). Counts are ints in context
and ``layers * 1.0`` in generation (no MTP). Attention dp reaches only the
MoE ops (the experts at ``x * dp`` tokens, the dispatches' dp collectives);
NEMOTRONH has no context parallelism (the layout refuses cp > 1).
"""

from __future__ import annotations

from typing import List

from ...kernels.mamba2 import CHUNK_SCAN, CONV1D_FN, CONV1D_UPDATE, STATE_UPDATE, Mamba2Shape
from ..model import ModelSpec
from ..ops import (
    GEMM,
    P2P,
    ContextAttention,
    CustomAllReduce,
    ElementWise,
    Embedding,
    GenerationAttention,
    Mamba2Kernel,
    MoE,
    MoEDispatch,
    Op,
    Parallel,
    PhaseQuants,
)


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    cfg = model.nemotron_h
    if cfg is None:  # pragma: no cover - parse_model always sets it for NEMOTRONH
        raise ValueError(f"{model.name!r}: no Nemotron-H layer configuration")
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp, h, d, V, E = par.tp, model.hidden, model.head_dim, model.vocab, model.experts
    sf = 1.0  # the MTP scale factor at nextn = 0
    one = 1 * sf if gen else 1
    mamba, attention, moe, mlp = cfg.layer_counts()
    ops: List[Op] = [Embedding(p + "embedding", one, h, V)]
    if mamba > 0:
        c = mamba * sf if gen else mamba
        mh = cfg.mamba_heads // tp
        di = mh * cfg.mamba_head_dim
        ng = cfg.n_groups // tp
        shape = Mamba2Shape(h, cfg.d_state, cfg.d_conv, cfg.mamba_heads, cfg.mamba_head_dim, cfg.n_groups,
                            cfg.chunk_size)  # unsharded at every tp  # fmt: skip
        conv, scan = (CONV1D_UPDATE, STATE_UPDATE) if gen else (CONV1D_FN, CHUNK_SCAN)
        ops += [
            ElementWise(p + "mamba_norm", c, 2 * h, 2 * h),
            GEMM(p + "mamba_in_proj_gemm", c, 2 * di + 2 * ng * cfg.d_state + mh, h, q.gemm),
            Mamba2Kernel(p + "mamba_conv1d", c, conv, phase, shape),
            Mamba2Kernel(p + "mamba_ssm", c, scan, phase, shape),
            GEMM(p + "mamba_out_proj_gemm", c, h, di, q.gemm),
            CustomAllReduce(p + "mamba_ar", c, h, tp),
        ]
    if attention > 0:
        c = attention * sf if gen else attention
        n, n_kv = model.heads_per_gpu(tp)
        if gen:
            attn: Op = GenerationAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache)
        else:
            attn = ContextAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache, q.fmha, False)
        ops += [
            ElementWise(p + "attn_norm", c, 2 * h, 2 * h),
            GEMM(p + "qkv_gemm", c, model.heads * d // tp + d * n_kv * 2, h, q.gemm),
            attn,
            GEMM(p + "proj_gemm", c, h, model.heads * d // tp, q.gemm, low_precision_input=True),
            CustomAllReduce(p + "attn_ar", c, h, tp),
        ]
    if moe > 0:
        c = moe * sf if gen else moe
        if cfg.shared_inter is None:
            raise ValueError(f"{model.name!r}: moe_shared_expert_intermediate_size is null (the spec fails on it)")
        shared = cfg.shared_inter // tp
        moe_h = cfg.latent if cfg.latent > 0 else h
        latent = cfg.latent // tp
        ops += [
            ElementWise(p + "moe_norm", c, 2 * h, 2 * h),
            GEMM(p + "shared_up_gemm", c, shared, h, q.gemm),
            ElementWise(p + "shared_relu2", c, shared, shared),
            GEMM(p + "shared_down_gemm", c, h, shared, q.gemm, low_precision_input=True),
            GEMM(p + "router_gemm", c, E, h, "bfloat16"),
        ]
        if cfg.latent > 0:
            ops.append(GEMM(p + "fc1_latent_proj_gemm", c, latent, h, q.gemm))
        ops += [
            MoEDispatch(p + "moe_pre_dispatch", c, moe_h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe),
            MoE(p + "moe", c, moe_h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe,
                model.distribution, par.attention_dp, gated=False),
            MoEDispatch(p + "moe_post_dispatch", c, moe_h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                        pre_dispatch=False),
        ]  # fmt: skip
        if cfg.latent > 0:
            ops.append(GEMM(p + "fc2_latent_proj_gemm", c, h, latent, q.gemm, low_precision_input=True))
        ops.append(CustomAllReduce(p + "moe_ar", c, h, tp))
    if mlp > 0:
        c = mlp * sf if gen else mlp
        width = model.inter // tp
        ops += [
            ElementWise(p + "mlp_norm", c, 2 * h, 2 * h),
            GEMM(p + "mlp_up_gemm", c, width, h, q.gemm),
            ElementWise(p + "mlp_relu2", c, width, width),
            GEMM(p + "mlp_down_gemm", c, h, width, q.gemm),
            CustomAllReduce(p + "mlp_ar", c, h, tp),
        ]
    return ops + [
        P2P(p + "p2p", (par.pp - 1) * sf if gen else par.pp - 1, h, par.pp),
        GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16"),
    ]
