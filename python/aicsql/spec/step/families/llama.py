"""LLAMA (and QWEN3VL's text path) op lists: docs/spec 6; the proj and ffn2
GEMMs take a low-precision input (an fp8_static checkpoint subtracts the
scale-matrix table there too, families_mla 6); Qwen3-VL is the same list
without q/k-norm (families_hybrid 2: `ModelSpec.use_qk_norm` is False).

Pipeline parallelism keeps every layer in the list (the spec does not divide
the counts by pp): the stages' hand-offs are the P2P op, ``pp - 1`` of them.
Context parallelism (cp > 1, sglang, tp = 1): every context op but the
attention prices ``ceil(x / cp)`` tokens -- the logits GEMM ``ceil(B /
cp)`` rows --, the attention is the zigzag rank-0 pair of lookups, and a KV
all-gather (`cp_all_gather`) follows it; generation is not context-parallel."""

from __future__ import annotations

from typing import List

from ...kernels.quant import COMM_QUANTS, KV_QUANTS
from ..model import ModelSpec
from ..ops import (
    GEMM,
    P2P,
    ContextAttention,
    CustomAllReduce,
    ElementWise,
    Embedding,
    GenerationAttention,
    NCCL,
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
    sp = 1 if gen else par.cp  # context parallelism splits the context ops' tokens
    ops: List[Op] = [
        Embedding(p + "embedding", one, h, V // tp, seq_split=sp),
        ElementWise(p + "add_norm_1", c, 2 * h, 2 * h, seq_split=sp),
        GEMM(p + "qkv_gemm", c, H * d // tp + d * n_kv * 2, h, q.gemm, seq_split=sp),
    ]
    if gen:
        ops.append(GenerationAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache))
    else:
        ops.append(ContextAttention(p + "attention", c, n, n_kv, d, 0, q.kvcache, q.fmha, model.use_qk_norm,
                                    cp=par.cp))  # fmt: skip
        ops += cp_all_gather(model, par, q)
    return ops + [
        GEMM(p + "proj_gemm", c, h, H * d // tp, q.gemm, low_precision_input=True, seq_split=sp),
        ElementWise(p + "add_norm_2", c, 2 * h, 2 * h, seq_split=sp),
        GEMM(p + "gate_ffn1_gemm", c, 2 * I // tp, h, q.gemm, seq_split=sp),
        ElementWise(p + "act_gate", c, 2 * I // tp, I // tp, seq_split=sp),
        GEMM(p + "ffn2_gemm", c, h, I // tp, q.gemm, low_precision_input=True, seq_split=sp),
        GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16", seq_split=sp),
        CustomAllReduce(p + "embedding_ar", one, h, tp, seq_split=sp),
        CustomAllReduce(p + "ar_1", c, h, tp, seq_split=sp),
        CustomAllReduce(p + "ar_2", c, h, tp, seq_split=sp),
        P2P(p + "p2p", (par.pp - 1) * 1.0 if gen else par.pp - 1, h, par.pp, seq_split=sp),
    ]


def cp_all_gather(model: ModelSpec, par: Parallel, q: PhaseQuants) -> List[Op]:
    """The context-parallel KV all-gather (the spec's ``_cp_attn_comm_ops``,
    sglang's all-gather style) placed right after the context attention: one
    NCCL all-gather per layer over the cp ranks of the layer's KV per token;
    nothing at cp = 1."""
    if par.cp <= 1:
        return []
    elements = model.cp_kv_elements_per_layer_token(par.tp, KV_QUANTS[q.kvcache].memory, COMM_QUANTS[q.comm].memory)
    return [NCCL("context_cp_all_gather", model.num_layers, "all_gather", elements, par.cp)]
