"""DEEPSEEKV32 op lists (``DeepSeekV32Model``, non-WideEP: DeepSeek-V3.2 and
GLM-5.x; docs/spec/families_dsa.md 3, 4).

* The attention block is **one** op per phase, ``context_attention`` /
  ``generation_attention`` (`ContextDSAModule` / `GenerationDSAModule`): the
  DSA module tables at ``H // tp`` heads (not DEEPSEEK's ``128 // tp``), the
  architecture's constant dims, the DSA gemm quant (bfloat16 when a GLM
  checkpoint's exclusion globs mention ``self_attn``), and on sglang the
  full-layer fraction ``w`` (GLM-5.2: 21/78) that mixes in the skip-indexer
  table. No fallback: a DSA miss is a step miss.
* Every layer is MoE plus a shared expert of width ``moe_intermediate_size``
  sharded by **moe_tp** (not tp), at the shared-expert quant (bfloat16 when a
  GLM checkpoint excludes ``shared_expert``); router and logits bfloat16;
  distribution ``power_law_1.01``.
* Decode overlaps the routed path with the shared expert (`OverlapOp`).
* No tp all-reduce on any backend (DEEPSEEK pays two on vllm), no embedding
  all-reduce; the dispatches are the only collectives.
* Context parallelism (cp > 1, sglang, tp = dp = 1; section 7): only the two
  context add-norms divide their tokens (floor, ``x // cp``), the DSA op
  prices the per-card module with the sub-kernel deltas and two all-gathers,
  the dispatches take their CP collectives; embedding, shared expert, router,
  experts and logits see every token.
"""

from __future__ import annotations

from typing import List

from ..composite import OverlapOp
from ..dsa_ops import ContextDSAModule, GenerationDSAModule, ScaledElementWise
from ..model import ModelSpec
from ..ops import GEMM, P2P, ElementWise, Embedding, MoE, MoEDispatch, Op, Parallel, PhaseQuants


def _quants(model: ModelSpec, q: PhaseQuants):
    cfg = model.dsa
    dsa_q = "bfloat16" if cfg.attention_unquantized else q.gemm
    shared_q = "bfloat16" if cfg.shared_experts_unquantized else q.gemm
    return dsa_q, shared_q


def _shared(p: str, count, model: ModelSpec, par: Parallel, quant: str) -> List[Op]:
    h, I, etp = model.hidden, model.moe_inter, par.moe_tp
    return [
        GEMM(p + "shared_gate_up_gemm", count, 2 * I // etp, h, quant),
        ElementWise(p + "shared_act_gate", count, 2 * I // etp, I // etp),
        GEMM(p + "shared_ffn2_gemm", count, h, I // etp, quant),
    ]


def _routed(p: str, count, model: ModelSpec, par: Parallel, q: PhaseQuants, gen: bool) -> List[Op]:
    h, E = model.hidden, model.experts
    return [
        GEMM(p + "router_gemm", count, E, h, "bfloat16"),
        MoEDispatch(p + "moe_pre_dispatch", count, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                    attn_cp=par.cp, is_context=not gen),
        MoE(p + "moe", count, h, model.moe_inter, model.topk, E, par.moe_tp, par.moe_ep, q.moe, model.distribution,
            par.attention_dp),
        MoEDispatch(p + "moe_post_dispatch", count, h, par.moe_tp, par.moe_ep, par.attention_dp, q.moe,
                    pre_dispatch=False, attn_cp=par.cp, is_context=not gen),
    ]  # fmt: skip


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    cfg = model.dsa
    if cfg is None:  # pragma: no cover - parse_model always sets it for DEEPSEEKV32
        raise ValueError(f"{model.name!r}: no DSA configuration")
    tp, L, h, V = par.tp, model.num_layers, model.hidden, model.vocab
    heads = model.heads // tp
    dsa_q, shared_q = _quants(model, q)
    w = cfg.sglang_full_fraction if backend == "sglang" else 1.0
    arch = model.architecture
    if phase == "context":
        p, cp = "context_", par.cp

        def norm(name):
            if cp == 1:
                return ElementWise(p + name, L, 2 * h, 2 * h)
            return ScaledElementWise(p + name, L, 2 * h, 2 * h, scale_num_tokens=cp)

        return [
            Embedding(p + "embedding", 1, h, V),
            norm("add_norm_1"),
            ContextDSAModule(p + "attention", L, heads, q.kvcache, q.fmha, dsa_q, arch, w, cp=cp),
            norm("add_norm_2"),
            *_shared(p, L, model, par, shared_q),
            *_routed(p, L, model, par, q, False),
            GEMM(p + "logits_gemm", 1, V // tp, h, "bfloat16"),
            P2P(p + "p2p", par.pp - 1, h, par.pp),
        ]
    p, mtp = "generation_", 1.0
    c = L * mtp
    return [
        Embedding(p + "embedding", 1 * mtp, h, V),
        ElementWise(p + "add_norm_1", c, 2 * h, 2 * h),
        GenerationDSAModule(p + "attention", c, heads, q.kvcache, dsa_q, arch, w),
        ElementWise(p + "add_norm_2", c, 2 * h, 2 * h),
        OverlapOp(p + "moe_overlap", _routed(p, c, model, par, q, True), _shared(p, c, model, par, shared_q)),
        GEMM(p + "logits_gemm", 1 * mtp, V // tp, h, "bfloat16"),
        P2P(p + "p2p", (par.pp - 1) * mtp, h, par.pp),
    ]
