"""NEMOTRONNAS op lists (``NemotronNas``: Llama-3.3-Nemotron-Super-49B;
docs/spec/families_nemotron.md 2.3 - 2.6).

The layers come as groups of consecutive identical blocks (`NasBlockGroup`,
in layer order, parsed from ``block_configs``); every group contributes its
ops with the group's block count (an int in *both* phases: the family has
no MTP factor):

* unless its attention is a no-op: norm (``add_norm_1``), qkv GEMM,
  attention, proj GEMM, all-reduce (``ar_1``) -- with ``n_kv = ceil((H //
  n_heads_in_group) / tp)`` and head size **128** for the attention op
  whatever ``d`` (the spec builds it without one), ``d`` for the GEMMs;
* unless its FFN is a no-op: norm (``add_norm_2``), gate+up GEMM of width
  ``(2 * I_b) // tp``, the activation (``act_gate``), down GEMM (``k = I_b //
  tp``), all-reduce (``ar_2``) -- with the block's intermediate size ``I_b``
  from `ffn_intermediate_size`.

The embedding (rows: the full vocabulary) opens the list, with no
all-reduce; the P2P hand-off then the logits GEMM (bfloat16, ``V // tp``)
close it. No GEMM is flagged low-precision input.

Op names repeat across groups (``context_qkv_gemm`` once per attention
group, ...): the step sums them per name in first-appearance order
(`engine`), which is what the spec's totals are. A model without block
groups (no ``block_configs``, or ``NemotronForCausalLM``) has empty op lists
-- a step of latency 0 -- and a logged warning, as in the spec.
"""

from __future__ import annotations

import logging
from typing import List

from ..model import ModelSpec
from ..ops import GEMM, P2P, ContextAttention, CustomAllReduce, ElementWise, Embedding, GenerationAttention, Op, \
    Parallel, PhaseQuants  # fmt: skip

__all__ = ["build", "ffn_intermediate_size", "ATTENTION_HEAD_SIZE"]

ATTENTION_HEAD_SIZE = 128  # the attention op's default head size, used whatever the model's d
_log = logging.getLogger(__name__)


def ffn_intermediate_size(ffn_mult, hidden: int) -> int:
    """The spec's ``_ffn_mult_to_intermediate_size``: ``int(2 * mult * h / 3)``
    (float arithmetic left to right, truncated) rounded **up** to a multiple
    of 256 (h 8192: 0.5 -> 2816, 1.0 -> 5632, 5.25 -> 28672)."""
    t = int((2 * ffn_mult) * hidden / 3)
    return t if t % 256 == 0 else t + 256 - t % 256


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    groups = model.nas_groups
    if not groups:
        _log.warning("NemotronNAS model '%s' missing block configs in model metadata; leaving pipelines empty.",
                     model.name)  # fmt: skip
        return []
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp, h, d, H, V = par.tp, model.hidden, model.head_dim, model.heads, model.vocab
    n = H // tp
    ops: List[Op] = [Embedding(p + "embedding", 1, h, V)]
    for g in groups:
        c = g.count
        if not g.attn_no_op:
            if g.n_heads_in_group is None:
                raise ValueError(f"{model.name!r}: a NemotronNAS block with attention has no n_heads_in_group")
            n_kv = (H // g.n_heads_in_group + tp - 1) // tp
            if gen:
                attention: Op = GenerationAttention(p + "attention", c, n, n_kv, ATTENTION_HEAD_SIZE, 0, q.kvcache)
            else:
                attention = ContextAttention(p + "attention", c, n, n_kv, ATTENTION_HEAD_SIZE, 0, q.kvcache, q.fmha,
                                             False)  # fmt: skip
            ops += [
                ElementWise(p + "add_norm_1", c, 2 * h, 2 * h),
                GEMM(p + "qkv_gemm", c, H * d // tp + d * n_kv * 2, h, q.gemm),
                attention,
                GEMM(p + "proj_gemm", c, h, H * d // tp, q.gemm),
                CustomAllReduce(p + "ar_1", c, h, tp),
            ]
        if not g.ffn_no_op:
            inter = ffn_intermediate_size(g.ffn_mult, h)
            gate = 2 * inter // tp
            ops += [
                ElementWise(p + "add_norm_2", c, 2 * h, 2 * h),
                GEMM(p + "gate_ffn1_gemm", c, gate, h, q.gemm),
                ElementWise(p + "act_gate", c, gate, inter // tp),
                GEMM(p + "ffn2_gemm", c, h, inter // tp, q.gemm),
                CustomAllReduce(p + "ar_2", c, h, tp),
            ]
    return ops + [
        P2P(p + "p2p", par.pp - 1, h, par.pp),
        GEMM(p + "logits_gemm", 1, V // tp, h, "bfloat16"),
    ]
