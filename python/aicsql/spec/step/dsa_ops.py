"""The DSA ops of DEEPSEEKV32 (docs/spec/families_dsa.md 6, 7).

`ContextDSAModule`
    ``query_context_dsa_module(b=B, s, prefix, heads, kv, fmha, gemm,
    architecture, skip_indexer)``, ``value * count``.
`GenerationDSAModule`
    ``query_generation_dsa_module(b=B, s, heads, kv, gemm, architecture,
    skip_indexer)``, ``value * count``.

With a full-layer fraction ``w < 1`` (GLM-5.2 on sglang, families_dsa 1.3)
both the full and the skip-indexer table are read and combined as ``w *
full + (1.0 - w) * skip`` before the count is applied (6.5). At context
parallelism (cp > 1, section 7) the context op prices each table kind with
the sub-kernel deltas and two NCCL all-gathers, scales each by the count
and then amortises. Both ops weigh 0.0 and have no quant label.

`ScaledElementWise` is an ElementWise op whose token count is first floor-
divided by ``scale_num_tokens`` (the spec's ``x //= scale_num_tokens``):
DEEPSEEKV32's context add-norms at cp > 1.
"""

from __future__ import annotations

from ..kernels.dsa import DSA_DIMS, SparseKernels
from ..kernels.miss import PerfMiss, lookup_call
from ..kernels.quant import COMM_QUANTS, FMHA_QUANTS, KV_QUANTS
from ..sol import GEMM_QUANTS
from .ops import Call, ElementWise, Lookup, Op, OpValue, join_paths

__all__ = ["ContextDSAModule", "GenerationDSAModule", "ScaledElementWise"]

_HALF = COMM_QUANTS["half"]


class ScaledElementWise(ElementWise):
    """ElementWise over ``x // scale_num_tokens`` tokens (families_dsa 7)."""

    def __init__(self, name, count, dim_in: int, dim_out: int, scale_num_tokens: int = 1):
        super().__init__(name, count, dim_in, dim_out)
        self.scale_num_tokens = scale_num_tokens

    def evaluate(self, k, call: Call) -> OpValue:
        x = call.x // self.scale_num_tokens
        nbytes = x * self.dim_in * 2 + x * self.dim_out * 2
        return OpValue(k.system.mem_op(nbytes) * self.count, None, None)


class _DSAModule(Op):
    quant_label = ""

    def __init__(self, name, count, heads: int, kv: str, gemm: str, architecture: str, full_fraction: float):
        super().__init__(name, count)
        self.heads = heads
        self.kv = KV_QUANTS[kv]
        self.gemm = GEMM_QUANTS[gemm]
        self.architecture = architecture
        self.w = float(full_fraction)


class ContextDSAModule(_DSAModule):
    """The whole DSA attention block of a prefill step (6.3; cp > 1: section 7)."""

    kind = "ContextDSAModule"

    def __init__(self, name, count, heads, kv, fmha: str, gemm, architecture, full_fraction, cp: int = 1):
        super().__init__(name, count, heads, kv, gemm, architecture, full_fraction)
        self.fmha = FMHA_QUANTS[fmha]
        self.cp = cp

    def _query(self, k, b, s, prefix, skip: bool, bucket: str = "trtllm"):
        return k.dsa_context.query(b, s, self.heads, self.kv, self.gemm, self.architecture, skip, prefix, self.fmha,
                                   bucket)  # fmt: skip

    def _lookup(self, k, b, s, prefix, bucket=None) -> Lookup:
        table = k.dsa_context
        return Lookup(table.method, [], table.lookup_kwargs(b, s, self.heads, self.kv, self.gemm, self.architecture,
                                                            False, prefix, self.fmha, bucket))  # fmt: skip

    def evaluate(self, k, call: Call) -> OpValue:
        b, s, prefix = call.batch_size, call.s, call.prefix
        w = self.w
        if self.cp > 1:
            full, path = self._query_cp(k, b, s, prefix, False)
            full = full * self.count
            lookup = self._lookup(k, b, max(1, -(-s // self.cp)), prefix, "flashmla_kv")
            if w >= 1.0:
                return OpValue(full, path, lookup)
            skip, skip_path = self._query_cp(k, b, s, prefix, True)
            skip = skip * self.count
            return OpValue(w * full + (1.0 - w) * skip, join_paths([path, skip_path]), lookup)
        full, path = self._query(k, b, s, prefix, False)
        paths = [path]
        if w >= 1.0:
            latency = full
        else:
            skip, skip_path = self._query(k, b, s, prefix, True)
            paths.append(skip_path)
            latency = w * full + (1.0 - w) * skip
        return OpValue(latency * self.count, join_paths(paths), self._lookup(k, b, s, prefix))

    def _query_cp(self, k, b, isl, prefix, skip: bool):
        """``ContextDSAModule._query_cp`` unscaled (section 7): the per-card module
        value, the mqa / top-k deltas, the two attention all-gathers."""
        cp = self.cp
        per_card = max(1, -(-isl // cp))
        sparse: SparseKernels = k.dsa_sparse(self.architecture, self.heads)
        kwargs = k.dsa_context.lookup_kwargs(b, per_card, self.heads, self.kv, self.gemm, self.architecture, skip,
                                             prefix, self.fmha, "flashmla_kv")  # fmt: skip

        def miss(reason: str) -> PerfMiss:
            return PerfMiss("dsa_context_module_perf", lookup_call("ContextDSAModule._query_cp", [], kwargs), reason)

        tables = sparse.tables
        missing = [] if skip else [kind for kind in ("mqa", "topk_last", "topk_flat") if not tables[kind]]
        if missing:
            raise miss(f"DSA CP modeling needs sparse tables {missing} for {self.architecture} (num_heads="
                       f"{self.heads}); collect {sparse.prefix}_mqa_logits/{sparse.prefix}_topk first.")  # fmt: skip
        base, path = self._query(k, b, per_card, prefix, skip, "flashmla_kv")
        base = float(base)
        mqa = sparse.batch_slice(tables["mqa"], b)
        top_last = sparse.batch_slice(tables["topk_last"], b)
        top_flat = sparse.batch_slice(tables["topk_flat"], b)
        mqa_full = sparse.lookup(mqa, isl, prefix, miss)
        mqa_per_card = sparse.lookup(mqa, per_card, prefix, miss)
        top_full = sparse.lookup(top_last, isl, prefix, miss)
        flat_per_card = sparse.lookup(top_flat, per_card, prefix, miss)
        latency = base
        if not skip and None not in (mqa_full, mqa_per_card, top_full, flat_per_card):
            delta_mqa = mqa_full / cp - mqa_per_card
            delta_topk = top_full / cp - flat_per_card
            latency += delta_mqa + delta_topk
        dims = DSA_DIMS.get(self.architecture)
        kv_lora, rope, index_head_dim = (dims.kv_lora_rank, dims.qk_rope_head_dim, dims.index_head_dim) if dims \
            else (512, 64, 128)  # fmt: skip
        paths = [path]
        ag_kv = 0.0
        if not skip:
            ag_kv, p = k.nccl.query(_HALF, "all_gather", cp, b * isl * index_head_dim)
            ag_kv = float(ag_kv)
            paths.append(p)
        ag_lse, p = k.nccl.query(_HALF, "all_gather", cp, b * isl * (kv_lora + rope))
        paths.append(p)
        latency += ag_kv + float(ag_lse)
        return latency, join_paths(paths)


class GenerationDSAModule(_DSAModule):
    """The whole DSA attention block of a decode step (6.4): one lookup at s per table kind."""

    kind = "GenerationDSAModule"
    s_dependent = True

    def evaluate(self, k, call: Call) -> OpValue:
        b, s = call.batch_size, call.s
        table = k.dsa_generation
        full, path = table.query(b, s, self.heads, self.kv, self.gemm, self.architecture, False)
        paths = [path]
        if self.w >= 1.0:
            latency = full
        else:
            skip, skip_path = table.query(b, s, self.heads, self.kv, self.gemm, self.architecture, True)
            paths.append(skip_path)
            latency = self.w * full + (1.0 - self.w) * skip
        lookup = Lookup(table.method, [], table.lookup_kwargs(b, s, self.heads, self.kv, self.gemm, self.architecture,
                                                              False))  # fmt: skip
        return OpValue(latency * self.count, join_paths(paths), lookup)
