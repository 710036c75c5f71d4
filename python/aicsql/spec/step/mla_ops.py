"""The MLA ops of DeepSeek / Kimi (docs/spec/families_mla_gptoss_fp8static.md 3.5).

| op | lookup | result |
|---|---|---|
| `MLAModule`, context | ``query_context_mla_module(b=B, s, prefix, heads, kv, fmha, gemm)`` | value * count |
| `MLAModule`, generation | ``query_generation_mla_module(b=B, s, heads, kv, gemm)`` | value * count |
| `ContextMLA` | ``query_context_mla(b=B, s, prefix, heads, kv, fmha)`` -- no 1.1 extras | value * count |
| `GenerationMLA` | ``query_generation_mla(B, s, heads, kv)`` -- one lookup, no 5-point mean | value * count |
| `MLABmm` | ``query_mla_bmm(B, H // tp, bmm quant, pre)`` | value * count |

``heads`` is ``128 // tp`` for the module and the granular attention tables
whatever the model's head count (3.1). Decode ops need beam width 1, which is
the only width a static step has.
"""

from __future__ import annotations

from ..kernels.quant import FMHA_QUANTS, KV_QUANTS
from ..sol import GEMM_QUANTS, gemm_mode
from .ops import Call, Lookup, Op, OpValue, join_paths

__all__ = ["ContextMLA", "GenerationMLA", "MLABmm", "MLAModule"]


class MLAModule(Op):
    """The whole MLA block as one profiled op: projections, attention, output (both phases)."""

    kind = "MLAModule"

    def __init__(self, name, count, is_context: bool, heads: int, kv: str, fmha: str, gemm: str):
        super().__init__(name, count)
        self.is_context = is_context
        self.heads = heads
        self.kv = KV_QUANTS[kv]
        self.fmha = FMHA_QUANTS[fmha]
        self.gemm = gemm_mode(gemm)
        self.s_dependent = not is_context

    def evaluate(self, k, call: Call) -> OpValue:
        if self.is_context:
            table = k.context_mla_module
            args, kwargs = table.lookup_args(call.batch_size, call.s, call.prefix, self.heads, self.kv, self.fmha,
                                             self.gemm)  # fmt: skip
            value, path = table.query(call.batch_size, call.s, call.prefix, self.heads, self.kv, self.fmha, self.gemm)
        else:
            table = k.generation_mla_module
            args, kwargs = table.lookup_args(call.batch_size, call.s, self.heads, self.kv, self.gemm)
            value, path = table.query(call.batch_size, call.s, self.heads, self.kv, self.gemm)
        return OpValue(value * self.count, path, Lookup(table.stem, args, kwargs))


class ContextMLA(Op):
    """Granular prefill MLA attention (the module's fallback on trtllm / sglang)."""

    kind = "ContextMLA"

    def __init__(self, name, count, heads: int, kv: str, fmha: str, cp: int = 1):
        super().__init__(name, count)
        self.heads = heads
        self.kv = KV_QUANTS[kv]
        self.fmha = FMHA_QUANTS[fmha]
        self.cp = cp

    def _query(self, table, b, s, prefix):
        args, kwargs = table.lookup_args(b, s, prefix, self.heads, self.kv, self.fmha)
        value, path = table.query(b, s, prefix, self.heads, self.kv, self.fmha)
        return value, path, Lookup(table.stem, args, kwargs)

    def evaluate(self, k, call: Call) -> OpValue:
        table = k.context_mla
        if self.cp > 1:  # zigzag rank 0, as ContextAttention: c = max(1, ceil(s / (2 cp)))
            s, prefix = call.s, call.prefix
            c = max(1, -(-s // (2 * self.cp)))
            first, first_path, lookup = self._query(table, call.batch_size, c, prefix)
            last, last_path, _ = self._query(table, call.batch_size, c, prefix + s - c)
            return OpValue((first + last) * self.count, join_paths([first_path, last_path]), lookup)
        value, path, lookup = self._query(table, call.batch_size, call.s, call.prefix)
        return OpValue(value * self.count, path, lookup)


class GenerationMLA(Op):
    """Granular decode MLA attention: one lookup at s."""

    kind = "GenerationMLA"
    s_dependent = True

    def __init__(self, name, count, heads: int, kv: str):
        super().__init__(name, count)
        self.heads = heads
        self.kv = KV_QUANTS[kv]

    def evaluate(self, k, call: Call) -> OpValue:
        table = k.generation_mla
        args, kwargs = table.lookup_args(call.batch_size, call.s, self.heads, self.kv)
        value, path = table.query(call.batch_size, call.s, self.heads, self.kv)
        return OpValue(value * self.count, path, Lookup(table.stem, args, kwargs))


class MLABmm(Op):
    """The decode BMM before (``pre``) or after the MLA kernel, at ``batch_size`` tokens."""

    kind = "MLABmm"

    def __init__(self, name, count, heads: int, quant: str, pre: bool):
        super().__init__(name, count)
        self.heads = heads
        self.quant = GEMM_QUANTS[quant]
        self.pre = pre

    def evaluate(self, k, call: Call) -> OpValue:
        table = k.mla_bmm
        args, kwargs = table.lookup_args(call.batch_size, self.heads, self.quant, self.pre)
        value, path = table.query(call.batch_size, self.heads, self.quant, self.pre)
        return OpValue(value * self.count, path, Lookup(table.stem, args, kwargs))
