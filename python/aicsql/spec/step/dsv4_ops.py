"""The DeepSeek-V4 ops (docs/spec/families_dsv4.md 2, 4, 5).

| op | lookup (the goldens' lookup_table) | result |
|---|---|---|
| `DSv4MHC` | ``query_mhc_module(num_tokens, hidden_size, hc_mult, sinkhorn_iters, op, quant_mode="bfloat16")`` at ``ceil(x / seq_split)`` tokens | value * count |
| `DSv4ContextAttention` | ``query_context_deepseek_v4_attention_module(b=B, s, prefix, geometry..., quants)``; cp > 1: section 5's composition | value * count |
| `DSv4GenerationAttention` | ``query_generation_deepseek_v4_attention_module(b=B, s, geometry..., quants)``, one lookup per decode step | value * count |

The attention values are whole-module latencies (projections, compressor,
indexer, top-k, kernel): no per-token extras. Weights: families_dsv4 4.1,
4.2 (``get_weights``), times the count.
"""

from __future__ import annotations

from ..kernels import Kernels
from ..kernels.dsv4 import (
    CONTEXT_METHOD,
    GENERATION_METHOD,
    MHC_METHOD,
    DSv4Geometry,
    attention_weights,
)
from ..kernels.miss import PerfMiss, lookup_call
from ..kernels.quant import COMM_QUANTS, FMHA_QUANTS, KV_QUANTS
from ..sol import GEMM_QUANTS
from .ops import Call, Lookup, Op, OpValue, join_paths, per_rank

__all__ = ["DSv4MHC", "DSv4ContextAttention", "DSv4GenerationAttention"]

_HALF = COMM_QUANTS["half"]
_BF16 = GEMM_QUANTS["bfloat16"]


class DSv4MHC(Op):
    """One manifold-constrained hyper-connection site pair of every layer,
    ``op`` "pre" (before attention) or "post" (after it), looked up at the
    busiest rank's token count (4.1)."""

    kind = "DeepSeekV4MHCModule"

    def __init__(self, name, count, op: str, h: int, hc_mult: int, sinkhorn_iters: int, seq_split: int = 1):
        super().__init__(name, count)
        if op not in ("pre", "post"):
            raise ValueError(f"Unsupported DeepSeek-V4 mHC op: {op}")
        self.op = op
        self.h = h
        self.hc_mult = hc_mult
        self.sinkhorn_iters = sinkhorn_iters
        self.seq_split = seq_split

    def weights(self):
        mix = (2 + self.hc_mult) * self.hc_mult
        return 2 * (mix * self.hc_mult * self.h + mix + 3) * _BF16.memory * self.count

    def evaluate(self, k: Kernels, call: Call) -> OpValue:
        tokens = per_rank(call.x, self.seq_split)
        kwargs = {"num_tokens": tokens, "hidden_size": self.h, "hc_mult": self.hc_mult,
                  "sinkhorn_iters": self.sinkhorn_iters, "op": self.op, "quant_mode": "bfloat16"}  # fmt: skip
        latency, path = k.dsv4.mhc(tokens, self.h, self.hc_mult, self.sinkhorn_iters, self.op, kwargs)
        return OpValue(latency * self.count, path, Lookup(MHC_METHOD, [], kwargs))


class _Attention(Op):
    def __init__(self, name, count, geometry: DSv4Geometry, kv: str, fmha: str, gemm: str):
        super().__init__(name, count)
        self.g = geometry
        self.kv = KV_QUANTS[kv]
        self.fmha = FMHA_QUANTS[fmha]
        self.gemm = GEMM_QUANTS[gemm]

    def weights(self):
        return attention_weights(self.g, self.gemm) * self.count

    def _kwargs(self) -> dict:
        return self.g.lookup_kwargs(self.kv.name, self.fmha.name, self.gemm.name)


class DSv4ContextAttention(_Attention):
    """A group of context attention modules of one compress ratio (4.2); with
    context parallelism (cp > 1, sglang) the module of section 5: the base at
    the busiest rank's ``ceil(s / cp)`` tokens plus the CSA sub-kernel swaps
    (paged MQA logits, top-k) and the all-gathers of the indexer keys, the
    windowed KV (HCA) and the compressed KV."""

    kind = "ContextDeepSeekV4AttentionModule"

    def __init__(self, name, count, geometry: DSv4Geometry, kv: str, fmha: str, gemm: str, cp: int = 1):
        super().__init__(name, count, geometry, kv, fmha, gemm)
        self.cp = cp

    def _base(self, k: Kernels, b, s, prefix):
        kwargs = {"b": b, "s": s, "prefix": prefix, **self._kwargs()}
        latency, path = k.dsv4.context_attention(b, s, prefix, self.g, self.kv, self.fmha, self.gemm, kwargs)
        return latency, path, Lookup(CONTEXT_METHOD, [], kwargs)

    def evaluate(self, k: Kernels, call: Call) -> OpValue:
        b, s, prefix = call.batch_size, call.s, call.prefix
        if self.cp <= 1:
            latency, path, lookup = self._base(k, b, s, prefix)
            return OpValue(latency * self.count, path, lookup)
        return self._evaluate_cp(k, b, s, prefix)

    def _evaluate_cp(self, k: Kernels, b, isl, prefix) -> OpValue:
        cp, g = self.cp, self.g
        per_card = max(1, -(-isl // cp))
        latency, base_path, lookup = self._base(k, b, per_card, prefix)
        latency = float(latency)
        paths = [base_path]

        def all_gather(elements):
            value, path = k.nccl.query(_HALF, "all_gather", cp, int(b * elements))
            paths.append(path)
            return float(value)

        tables = k.dsv4
        if g.ratio == 4:
            mqa_full = tables.mqa(b, isl, prefix, g.tp, g.native_heads)
            mqa_card = tables.mqa(b, per_card, prefix, g.tp, g.native_heads)
            top_full = tables.top_last_at(isl, prefix, g.native_heads, b)
            top_card = tables.top_last_at(per_card, prefix, g.native_heads, b)
            if None in (mqa_full, mqa_card, top_full, top_card):
                raise PerfMiss("dsv4_paged_mqa_logits_module_perf", lookup_call(CONTEXT_METHOD, (), lookup.kwargs), (
                    "DeepSeek-V4 CSA CP modeling needs sparse tables (paged_mqa_logits + csa_topk_calib top_last) at "
                    f"num_heads={g.native_heads}, b={b}; collect dsv4_paged_mqa_logits_module / dsv4_csa_topk_calib "
                    "first."))  # fmt: skip
            latency += (mqa_full / cp - mqa_card) + (top_full / cp - top_card)
            latency += all_gather(isl * g.index_head_dim)
        else:
            window = g.window or isl
            latency += all_gather(min(isl, window) * g.head_dim)
        if g.ratio:
            latency += all_gather((isl // g.ratio) * g.head_dim)
        return OpValue(latency * self.count, join_paths(paths), lookup)


class DSv4GenerationAttention(_Attention):
    """A group of decode attention modules of one compress ratio (4.3): one
    lookup at the decode step's own ``s`` (the table keys the absolute KV
    length ``isl + step``)."""

    kind = "GenerationDeepSeekV4AttentionModule"
    s_dependent = True

    def evaluate(self, k: Kernels, call: Call) -> OpValue:
        b, s = call.batch_size, call.s
        kwargs = {"b": b, "s": s, **self._kwargs()}
        latency, path = k.dsv4.generation_attention(b, s, self.g, self.kv, self.gemm, kwargs)
        return OpValue(latency * self.count, path, Lookup(GENERATION_METHOD, [], kwargs))
