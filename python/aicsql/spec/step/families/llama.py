"""LLAMA (and QWEN3VL's text path) op lists: docs/spec 6; the proj and ffn2
GEMMs take a low-precision input (an fp8_static checkpoint subtracts the
scale-matrix table there too, families_mla 6); Qwen3-VL is the same list
without q/k-norm (families_hybrid 2: `ModelSpec.use_qk_norm` is False)."""

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
    Op,
    Parallel,
    PhaseQuants,
)


def build(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    gen = phase == "generation"
    p = "generation_" if gen else "context_"
    tp = par.tp
    L, h, H, d, I, V = model.num_layers, model.hidden, model.heads, model.head_dim, model.inter, model.vocab
    n, n_kv = model.heads_per_gpu(tp)
    c = L * 1.0 if gen else L  # generation counts carry the MTP factor 1.0
    one = 1 * 1.0 if gen else 1
    ops: List[Op] = [
        Embedding(p + "embedding", one, h, V // tp),
        ElementWise(p + "add_norm_1", c, 2 * h, 2 * h),
        GEMM(p + "qkv_gemm", c, H * d // tp + d * n_kv * 2, h, q.gemm),
    ]
    if gen:
        ops.append(GenerationAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache))
    else:
        ops.append(ContextAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache, q.fmha, model.use_qk_norm))
    return ops + [
        GEMM(p + "proj_gemm", c, h, H * d // tp, q.gemm, low_precision_input=True),
        ElementWise(p + "add_norm_2", c, 2 * h, 2 * h),
        GEMM(p + "gate_ffn1_gemm", c, 2 * I // tp, h, q.gemm),
        ElementWise(p + "act_gate", c, 2 * I // tp, I // tp),
        GEMM(p + "ffn2_gemm", c, h, I // tp, q.gemm, low_precision_input=True),
        GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16"),
        CustomAllReduce(p + "embedding_ar", one, h, tp),
        CustomAllReduce(p + "ar_1", c, h, tp),
        CustomAllReduce(p + "ar_2", c, h, tp),
        P2P(p + "p2p", par.pp - 1, h, par.pp),
    ]
