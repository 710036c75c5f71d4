"""The leaf ops of a step and what one application of each costs
(docs/spec 6, 8, 10; families_mla_gptoss_fp8static.md 5, 6;
families_hybrid_vl_databases.md 1.6; families_qwen35_gemma4.md 1.6, 2;
families_nemotron.md 1.6, 3).

Every op has a *count* (a multiplier, usually a layer count) and its query
returns ``count * per_application_latency`` (one multiplication). Its
`Op.weights` are the spec's ``get_weights()``, ``weight bytes * count``: a
GEMM ``n * k * quant.memory``, the embedding ``rows * h * 2`` (rows =
``V // tp`` for LLAMA / MOE, ``V`` for DEEPSEEK / HYBRIDMOE), the routed
experts ``h * I * E * quant.memory * gemms // moe_ep // moe_tp`` (3 GEMMs
gated, 2 not); attention, elementwise, GDN, Mamba-2 and communication ops
weigh 0.0. An op is evaluated
against a `Call` -- the step's ``x`` (tokens), ``batch_size``, ``s`` and
``prefix`` -- and returns an `OpValue`: the total, the interpolation path of
its table lookups, its first table lookup (how the goldens describe an op)
and, for the ops whose lookup falls back to a SOL instead of missing
(`GDNKernel`, `Mamba2Kernel`), the source of the value (``"silicon"`` /
``"sol"``). The MLA
ops are in `mla_ops`, the composite ones in `composite`, the op lists in
`families`.

Context parallelism (cp > 1, sglang's prefill all-gather CP): a token-major
context op built with ``seq_split = cp`` (embedding, elementwise, GEMM,
custom all-reduce, P2P, NCCL) prices the busiest rank's share of its tokens,
``ceil(x / cp)`` -- computed as ``-(-x // cp)``, which keeps a float token
count a float as the spec's does; ``ContextAttention`` with ``cp > 1`` prices
rank 0 of the zigzag split (two lookups, see there); `MoEDispatch` switches
to its CP collectives with ``attn_cp > 1``. Generation ops never split.
"""

from __future__ import annotations

import bisect
import copy
from typing import List, NamedTuple, Optional, Tuple

from ..gemm import GemmMiss
from ..kernels import Kernels, NcclTable, PerfMiss, lookup_call
from ..kernels.gdn import LOOKUP_METHOD as GDN_LOOKUP, GDNShape, GDNTable
from ..kernels.mamba2 import LOOKUP_METHOD as MAMBA2_LOOKUP, Mamba2Shape, Mamba2Table
from ..kernels.quant import COMM_QUANTS, FMHA_QUANTS, KV_QUANTS, MOE_QUANTS
from ..sol import QuantMode, gemm_mode, gemm_sol

__all__ = [
    "ACT",
    "Call",
    "ContextAttention",
    "CustomAllReduce",
    "ElementWise",
    "Embedding",
    "EncoderAttention",
    "GEMM",
    "GDNKernel",
    "GenerationAttention",
    "Lookup",
    "Mamba2Kernel",
    "MoE",
    "MoEDispatch",
    "Op",
    "OpValue",
    "NCCL",
    "P2P",
    "Parallel",
    "PhaseQuants",
    "join_paths",
]

_HALF = COMM_QUANTS["half"]
ACT = "bfloat16(act)"  # the quant label of elementwise / embedding ops (2-byte activations)


class Call(NamedTuple):
    """The arguments a step passes to every op (docs/spec 9)."""

    x: int  # tokens
    batch_size: int
    s: int
    prefix: int = 0


class Lookup(NamedTuple):
    """A table lookup: table (file stem), the spec's method args and kwargs."""

    table: str
    args: list
    kwargs: dict


class OpValue(NamedTuple):
    total: float  # count * per-application latency (ms)
    path: Optional[str]  # interp path(s) of the lookups, None without a table lookup
    lookup: Optional[Lookup]  # the first table lookup the op made
    # Where the value came from, for lookups that answer with a SOL instead of
    # missing: "silicon" or "sol" (GDNKernel, Mamba2Kernel); None for every other op.
    source: Optional[str] = None


class Parallel(NamedTuple):
    """The parallel layout of a step: tensor, MoE, attention data (the MoE
    families of `engine.DP_FAMILIES`), pipeline and context (sglang only,
    with tp = dp = 1) parallelism."""

    tp: int
    moe_tp: int = 1
    moe_ep: int = 1
    attention_dp: int = 1
    pp: int = 1
    cp: int = 1


def per_rank(x, split: int):
    """The busiest rank's share of `x` tokens over `split` context-parallel
    ranks, ``ceil(x / split)`` as the spec writes it (``-(-x // split)``: a
    float count stays a float); `x` itself when there is no split."""
    if split == 1:
        return x
    return -(-x // split)


class PhaseQuants(NamedTuple):
    """The quant modes a phase runs with, after the FMHA guards (docs/spec 3.2)."""

    gemm: str
    moe: str
    kvcache: str
    fmha: str
    comm: str = "half"

    def as_dict(self):
        return dict(self._asdict())


def join_paths(paths) -> Optional[str]:
    """Several lookups' interp paths as the goldens print them: distinct, sorted, ','-joined."""
    distinct = sorted({p for p in paths if p})
    return ",".join(distinct) if distinct else None


# ---- GEMM path names -----------------------------------------------------------------


def _on_curve(ms, m) -> bool:
    """Whether m is one of a site curve's points (sorted, unique: a binary
    search instead of a walk along the curve on every GEMM)."""
    i = bisect.bisect_left(ms, m)
    return i < len(ms) and ms[i] == m


def _gemm_path(k: Kernels, q: QuantMode, m: int, n: int, kk: int) -> str:
    """The goldens' name for how the ScatteredSites resolver answers (m, n, k);
    a transfer whose blended neighbours hold a curve util is
    ``site_transfer+curve_util_hold``."""
    s = k.gemm.slice(q)
    if s is None:
        return "miss"
    sid = s.site_id.get((n, kk))
    if sid is None:
        for neighbour in s.neighbours(m, n, kk):
            ms = s.curve_m[neighbour]
            if not _on_curve(ms, m) and not ms[0] < m < ms[-1]:
                return "site_transfer+curve_util_hold"
        return "site_transfer"
    ms = s.curve_m[sid]
    if _on_curve(ms, m):
        return "exact_hit"
    if ms[0] < m < ms[-1]:
        return "own_site_curve_interpolation"
    return "own_site_curve_util_hold"


# ---- ops ----------------------------------------------------------------------------------


class Op:
    kind = ""
    quant_label = ""
    # Whether the value changes with the decode step's s (only then is a
    # generation op evaluated at every sampled step).
    s_dependent = False

    def __init__(self, name: str, count):
        self.name = name
        self.count = count

    def evaluate(self, k: Kernels, call: Call) -> OpValue:  # pragma: no cover - abstract
        raise NotImplementedError

    def weights(self) -> float:
        """Weight bytes on one GPU (the spec's ``get_weights``): ``0.0 * count`` unless overridden."""
        return 0.0

    def scaled(self, factor: float) -> "Op":
        """A copy whose count is ``count * factor``: a generation op at the MTP
        factor (docs/spec/options.md 2.3). Every op reads its count when it is
        evaluated, never before, so a copy with the new count is the op the
        spec builds with the scaled count."""
        op = copy.copy(self)
        op.count = self.count * factor
        return op


class Embedding(Op):
    """Embedding lookup: memory-bound, ``mem_op(x*h*2)`` (docs/spec 6.1 #1)."""

    kind = "Embedding"
    quant_label = ACT

    def __init__(self, name, count, h: int, rows: int = 0, seq_split: int = 1):
        super().__init__(name, count)
        self.h = h
        self.rows = rows  # the table's rows: V // tp or V, only its weights read it
        self.seq_split = seq_split

    def evaluate(self, k, call):
        x = per_rank(call.x, self.seq_split)
        return OpValue(k.system.mem_op(x * self.h * 2) * self.count, None, None)

    def weights(self):
        return self.rows * self.h * 2 * self.count


class ElementWise(Op):
    """Elementwise op reading ``dim_in`` and writing ``dim_out`` 2-byte values per token."""

    kind = "ElementWise"
    quant_label = ACT

    def __init__(self, name, count, dim_in: int, dim_out: int, seq_split: int = 1):
        super().__init__(name, count)
        self.dim_in = dim_in
        self.dim_out = dim_out
        self.seq_split = seq_split

    def evaluate(self, k, call):
        x = per_rank(call.x, self.seq_split)
        nbytes = x * self.dim_in * 2 + x * self.dim_out * 2
        return OpValue(k.system.mem_op(nbytes) * self.count, None, None)


class GEMM(Op):
    """A GEMM ``m x k by k x n`` with ``m = x`` (the logits GEMM of a context
    step is called with ``x = B``, see the engine).

    fp8_static (families_mla 6): the fp8 table value minus the compute-scale
    value at ``(x, k)`` and, for a ``low_precision_input`` GEMM, minus the
    scale-matrix value too, then floored at the GEMM's own SOL (computed with
    fp8_static): ``max(floor, (G - CS) - SM) * count``."""

    kind = "GEMM"

    def __init__(self, name, count, n: int, k: int, quant: str, low_precision_input: bool = False,
                 seq_split: int = 1):  # fmt: skip
        super().__init__(name, count)
        self.n = n
        self.k = k
        self.quant = gemm_mode(quant)
        self.low_precision_input = low_precision_input
        self.seq_split = seq_split  # context parallelism: m = ceil(x / cp)

    @property
    def quant_label(self):
        return self.quant.name

    def weights(self):
        return self.n * self.k * self.quant.memory * self.count

    def evaluate(self, kernels, call):
        m, q = per_rank(call.x, self.seq_split), self.quant
        lookup = Lookup("gemm_perf", [m, self.n, self.k, q.name], {})
        table = kernels.gemm
        try:
            latency = table.latency(q, m, self.n, self.k)
        except GemmMiss as miss:
            raise PerfMiss(
                "gemm_perf",
                lookup_call("query_gemm", lookup.args),
                table.miss_message(q, m, self.n, self.k, miss.reason),
            ) from None
        path = _gemm_path(kernels, q, m, self.n, self.k)
        if q.name != "fp8_static":
            return OpValue(self.count * latency, path, lookup)
        paths = [path]
        scale, scale_path = kernels.compute_scale.query(m, self.k, q)
        latency = latency - scale
        paths.append(scale_path)
        if self.low_precision_input:
            scale, scale_path = kernels.scale_matrix.query(m, self.k, q)
            latency = latency - scale
            paths.append(scale_path)
        floor = gemm_sol(kernels.gemm.system, q, m, self.n, self.k)
        return OpValue(max(floor, latency) * self.count, join_paths(paths), lookup)


class ContextAttention(Op):
    """Prefill attention: the FMHA table value plus the per-token extras (docs/spec 8.2).

    Context parallelism (``cp > 1``): rank 0 of the zigzag split holds the
    first and the last of ``2 * cp`` chunks of ``c = max(1, ceil(s / (2 *
    cp)))`` tokens; the table is read for ``c`` tokens after ``prefix`` and
    for ``c`` tokens after ``prefix + s - c``, the two values added, then
    the extras once: ``count * ((A + B) + extras)``."""

    kind = "ContextAttention"

    def __init__(self, name, count, n, n_kv, d, w, kv: str, fmha: str, use_qk_norm: bool, cp: int = 1):
        super().__init__(name, count)
        self.n, self.n_kv, self.d, self.w = n, n_kv, d, w
        self.kv = KV_QUANTS[kv]
        self.fmha = FMHA_QUANTS[fmha]
        self.use_qk_norm = use_qk_norm
        self.cp = cp

    @property
    def quant_label(self):
        return f"fmha={self.fmha.name},kv={self.kv.name}"

    def extras(self, k: Kernels) -> float:
        """qk-norm, rope and kv-write memory ops, per token (not scaled by B or isl), times 1.1.
        V is counted at the Q/K head size (families_hybrid 1.6)."""
        mem_op = k.system.mem_op
        q_num = self.n * self.d
        k_num = self.n_kv * self.d
        v_num = self.n_kv * self.d
        extra = 0.0
        if self.use_qk_norm:
            extra += 2 * (2 * mem_op(q_num * 2) + 2 * mem_op(k_num * 2))
        rope = 2 * mem_op(q_num * 2 + k_num * 2)
        kv_write = mem_op(k_num * self.fmha.memory) + mem_op(v_num * self.fmha.memory)  # fmha width
        # The SDK adds rope and kv write together first, then to the qk-norm
        # term: qk + (rope + kv), not (qk + rope) + kv. The goldens cannot tell
        # the two apart; the engine-step parity scan did (MiniMax-M2.5, 1 ulp).
        extra += rope + kv_write
        return 1.1 * extra

    def _query(self, table, b, s, prefix):
        args, kwargs = table.lookup_args(b, s, prefix, self.n, self.n_kv, self.kv, self.fmha, self.d, self.w)
        value, path = table.query(b, s, prefix, self.n, self.n_kv, self.kv, self.fmha, self.d, self.w)
        return value, path, Lookup("context_attention_perf", args, kwargs)

    def evaluate(self, k, call):
        table = k.context_attention
        if self.cp > 1:
            s, prefix = call.s, call.prefix
            c = max(1, -(-s // (2 * self.cp)))
            first, first_path, lookup = self._query(table, call.batch_size, c, prefix)
            last, last_path, _ = self._query(table, call.batch_size, c, prefix + s - c)
            value, path = first + last, join_paths([first_path, last_path])
        else:
            value, path, lookup = self._query(table, call.batch_size, call.s, call.prefix)
        return OpValue(self.count * (value + self.extras(k)), path, lookup)


class EncoderAttention(Op):
    """The vision encoder's self-attention (families_hybrid 3.6): every image
    a separate sequence of ``s`` patches (``batch_size`` images), the table
    value times the count; no extras (the encoder's RoPE is its own
    elementwise op), weights 0. Always bfloat16."""

    kind = "EncoderAttention"

    def __init__(self, name, count, n: int, d: int, fmha: str = "bfloat16"):
        super().__init__(name, count)
        self.n, self.d = n, d
        self.fmha = FMHA_QUANTS[fmha]

    @property
    def quant_label(self):
        return f"fmha={self.fmha.name}"

    def evaluate(self, k, call):
        table = k.encoder_attention
        args, kwargs = table.lookup_args(call.batch_size, call.s, self.n, self.d, self.fmha)
        value, path = table.query(call.batch_size, call.s, self.n, self.d, self.fmha)
        return OpValue(value * self.count, path, Lookup("encoder_attention_perf", args, kwargs))


class GenerationAttention(Op):
    """Decode attention: the mean of five table lookups around s (docs/spec 8.3); no extras."""

    kind = "GenerationAttention"
    s_dependent = True

    def __init__(self, name, count, n, n_kv, d, w, kv: str):
        super().__init__(name, count)
        self.n, self.n_kv, self.d, self.w = n, n_kv, d, w
        self.kv = KV_QUANTS[kv]

    @property
    def quant_label(self):
        return f"kv={self.kv.name}"

    def evaluate(self, k, call):
        table = k.generation_attention
        args, kwargs = table.lookup_args(call.batch_size, call.s, self.n, self.n_kv, self.kv, self.d, self.w)
        value, path = table.query(call.batch_size, call.s, self.n, self.n_kv, self.kv, self.d, self.w)
        return OpValue(self.count * value, path, Lookup("generation_attention_perf", args, kwargs))


class GDNKernel(Op):
    """One gated-delta-net kernel of a QWEN35 layer group (families_qwen35_gemma4
    1.6, 2): the GDN table's value for the model's *unsharded* GDN shape at
    every tp, times the count; no extras, weights 0.

    Context kernels are looked up at ``(batch_size, s)``, generation kernels
    at ``batch_size`` with ``seq_len = None``: their value does not depend on
    the decode step (``s_dependent`` False). The lookup never misses: a
    missing table, kernel, shape or grid anchor is the kernel's memory SOL,
    reported with source ``"sol"`` and no interp path. The lookup is recorded
    under the spec's method name ``query_gdn`` (the goldens' lookup_table)."""

    kind = "GDNKernel"
    quant_label = ""
    s_dependent = False

    def __init__(self, name, count, kernel: str, phase: str, shape: GDNShape):
        super().__init__(name, count)
        self.kernel = kernel
        self.phase = phase
        self.shape = GDNShape(*shape)

    def evaluate(self, k, call):
        seq_len = call.s if self.phase == "context" else None
        latency, path, source = k.gdn.query(self.phase, self.kernel, call.batch_size, seq_len, self.shape)
        kwargs = GDNTable.lookup_kwargs(self.phase, self.kernel, call.batch_size, seq_len, self.shape)
        return OpValue(self.count * latency, path, Lookup(GDN_LOOKUP, [], kwargs), source)


class Mamba2Kernel(Op):
    """One Mamba-2 kernel of a NEMOTRONH Mamba layer group (families_nemotron
    1.6, 3): the Mamba-2 table's value for the model-level (*unsharded*)
    dims -- ``d_model = h``, heads, head dim, state, conv width, groups,
    chunk size -- at every tp, times the count; no extras, weights 0.

    Context kernels (``causal_conv1d_fn``, ``mamba_chunk_scan_combined``) are
    looked up at ``(batch_size, s)``, generation kernels
    (``causal_conv1d_update``, ``selective_state_update``) at ``batch_size``
    with ``seq_len = None``: their value does not depend on the decode step
    (``s_dependent`` False). The lookup never misses: whatever the table
    cannot answer -- on every vllm / sglang database everything, and the scan
    and decode kernels everywhere -- is the kernel's memory SOL at the raw
    ``mem_bw``, reported with source ``"sol"`` and no interp path. The lookup
    is recorded under the spec's method name ``query_mamba2`` (the goldens'
    lookup_table)."""

    kind = "Mamba2Kernel"
    quant_label = ""
    s_dependent = False

    def __init__(self, name, count, kernel: str, phase: str, shape: Mamba2Shape):
        super().__init__(name, count)
        self.kernel = kernel
        self.phase = phase
        self.shape = Mamba2Shape(*shape)

    def evaluate(self, k, call):
        seq_len = call.s if self.phase == "context" else None
        latency, path, source = k.mamba2.query(self.phase, self.kernel, call.batch_size, seq_len, self.shape)
        kwargs = Mamba2Table.lookup_kwargs(self.phase, self.kernel, call.batch_size, seq_len, self.shape)
        return OpValue(self.count * latency, path, Lookup(MAMBA2_LOOKUP, [], kwargs), source)


def _all_reduce(k: Kernels, count, gpus: int, size: int) -> OpValue:
    """``count`` custom all-reduces of `size` elements over `gpus` GPUs (docs/spec 8.4)."""
    latency, path = k.custom_allreduce.query(gpus, size)
    args, kwargs = k.custom_allreduce.lookup_args(gpus, size)
    return OpValue(count * latency, path, Lookup("custom_allreduce_perf", args, kwargs))


class CustomAllReduce(Op):
    """Tensor-parallel all-reduce of the ``x*h`` activations (docs/spec 8.4)."""

    kind = "CustomAllReduce"
    quant_label = "half"

    def __init__(self, name, count, h: int, tp: int, seq_split: int = 1):
        super().__init__(name, count)
        self.h = h
        self.tp = tp
        self.seq_split = seq_split

    def evaluate(self, k, call):
        if self.tp == 1:
            return OpValue(0.0 * self.count, None, None)
        return _all_reduce(k, self.count, self.tp, per_rank(call.x, self.seq_split) * self.h)


class P2P(Op):
    """Pipeline hand-off between stages (5.9): count ``pp - 1`` (generation
    ``(pp - 1) * 1.0``), free at pp = 1; else ``ceil(x / seq_split) * h``
    2-byte activations over the inter-node link: ``(bytes / inter_node_bw +
    p2p_latency) * 1000`` ms per hand-off (no table)."""

    kind = "P2P"
    quant_label = ""

    def __init__(self, name, count, h: int, pp: int, seq_split: int = 1):
        super().__init__(name, count)
        self.h = h
        self.pp = pp
        self.seq_split = seq_split

    def evaluate(self, k, call):
        if self.pp == 1:
            return OpValue(0.0, None, None)
        size = per_rank(call.x, self.seq_split) * self.h
        return OpValue(self.count * k.system.p2p_latency_ms(size * 2), None, None)


class NCCL(Op):
    """One NCCL collective per application (``query_nccl('half', gpus, op,
    size)``) of ``size = ceil(x / seq_split) * elements_per_token`` elements
    -- the context-parallel KV all-gather after the attention (its elements
    per token are the layer's KV bytes per token / 2, a float)."""

    kind = "NCCL"
    quant_label = "half"

    def __init__(self, name, count, op: str, elements_per_token, gpus: int, seq_split: int = 1):
        super().__init__(name, count)
        self.op = op
        self.elements_per_token = elements_per_token
        self.gpus = gpus
        self.seq_split = seq_split

    def evaluate(self, k, call):
        # the spec divides by its seq_split even when it is 1: -(-x // 1)
        size = (-(-call.x // self.seq_split)) * self.elements_per_token
        latency, path, lookup = _nccl(k, self.op, self.gpus, size)
        return OpValue(latency * self.count, path, lookup)


class MoE(Op):
    """The routed experts of one layer (docs/spec 10.3): the MoE table at ``x * attention_dp`` tokens.

    ``gated``: SwiGLU experts (3 GEMMs, every family but one) or, ``False``,
    NEMOTRONH's ReLU² experts (2 GEMMs: the SOL and the weights count two,
    trtllm's nvfp4 low-latency table is not consulted; the table slice has
    no gated key; families_nemotron 1.6)."""

    kind = "MoE"

    def __init__(self, name, count, h, inter, topk, experts, etp, eep, quant: str, distribution: str, attention_dp=1,
                 gated: bool = True):  # fmt: skip
        super().__init__(name, count)
        self.h, self.inter, self.topk, self.experts = h, inter, topk, experts
        self.etp, self.eep = etp, eep
        self.quant = MOE_QUANTS[quant]
        self.distribution = distribution
        self.attention_dp = attention_dp
        self.gated = gated

    @property
    def quant_label(self):
        return self.quant.name

    def weights(self):
        gemms = 3 if self.gated else 2
        return self.h * self.inter * self.experts * self.quant.memory * gemms // self.eep // self.etp * self.count

    def evaluate(self, k, call):
        tokens = call.x * self.attention_dp
        table = k.moe
        value, path = table.query(
            tokens, self.h, self.inter, self.topk, self.experts, self.etp, self.eep, self.quant, self.distribution,
            self.gated,
        )
        kwargs = table.lookup_kwargs(
            tokens, self.h, self.inter, self.topk, self.experts, self.etp, self.eep, self.quant, self.distribution,
            self.gated,
        )
        return OpValue(self.count * value, path, Lookup("moe_perf", [], kwargs))


class MoEDispatch(Op):
    """Token dispatch around the experts (docs/spec 10.3, families_mla 5.4;
    the spec's ``MoEDispatch.query`` on vllm, sglang without DeepEP and
    trtllm), over ``G = moe_tp * moe_ep`` GPUs with ``attn_tp = G //
    attention_dp`` and ``volume = x * h`` elements.

    attention_dp = 1: one custom all-reduce of the volume over G GPUs when
    ``attn_tp > 1`` (the all-reduce switches to NCCL on 72-GPU nodes beyond 4
    GPUs), else free -- the same number on every backend.

    attention_dp > 1 (``pre_dispatch``: before the experts, else after):

    * trtllm (``attn_tp == 1``: the spec asserts tp and dp are not both > 1):
      NCCL all-gather of ``volume * dp`` before, reduce-scatter of ``volume
      * dp`` after; on SM 100 the gathered volume is the quant-compressed
      one, ``(x_volume + sf_volume) * dp`` (nvfp4: ``volume / 4`` plus
      ``volume / 4 / 8`` scales; fp8 / fp8_block: ``volume / 2 + 0``; else
      ``volume + 0``). SM 100 with ``moe_tp == 1`` on a node of >= 72 GPUs
      uses the trtllm all-to-all table instead, which this port does not
      have (ValueError);
    * vllm: ``0`` + the custom all-reduce of the volume over G GPUs when
      ``attn_tp > 1`` + the NCCL all-gather (before) / reduce-scatter
      (after) of ``volume * dp`` over G GPUs;
    * sglang: ``attn_tp > 1``: before, reduce-scatter of the volume over
      the attn_tp GPUs + all-gather of ``volume * dp`` over G; after,
      reduce-scatter of ``volume * dp`` over G + all-gather of the volume
      over attn_tp; ``attn_tp == 1``: all-gather / reduce-scatter of
      ``volume * dp`` over G.

    Context parallelism (sglang only, where cp > 1 needs tp = dp = 1, so
    ``G = cp`` and ``attn_tp = G``): a dispatch built with ``attn_cp > 1``
    takes the spec's CP branch -- context (``is_context``): NCCL all-gather
    of the (unsplit) volume over G before the experts, reduce-scatter of it
    after; decode (``is_context = False``, HYBRIDMOE / DEEPSEEK): nothing
    before, a custom all-reduce of the volume over G after. A dispatch
    without ``attn_cp`` (MOE's decode dispatches) sees ``attn_tp = G > 1``
    and pays the all-reduce both times.

    The sum of a phase's collectives is multiplied by the count once.
    ``quant`` labels the op (HYBRIDMOE builds its dispatches without one:
    the label is ``None``) and sizes the trtllm SM 100 all-gather."""

    kind = "MoEDispatch"

    def __init__(self, name, count, h, etp, eep, attention_dp, quant: Optional[str], pre_dispatch: bool = True,
                 attn_cp: int = 1, is_context: bool = True):  # fmt: skip
        super().__init__(name, count)
        self.h = h
        self.etp = etp
        self.g = etp * eep
        self.attention_dp = attention_dp
        self.quant = MOE_QUANTS[quant] if quant is not None else None
        self.pre_dispatch = pre_dispatch
        self.attn_cp = attn_cp
        self.is_context = is_context

    @property
    def quant_label(self):
        return self.quant.name if self.quant is not None else "None"

    def evaluate(self, k, call):
        attn_tp = self.g // self.attention_dp
        if self.attn_cp > 1 and k.db.backend == "sglang" and not (attn_tp > 1 and self.attention_dp > 1):
            return self._evaluate_cp(k, call)
        if self.attention_dp == 1:
            if attn_tp <= 1:
                return OpValue(0.0, None, None)
            return _all_reduce(k, self.count, self.g, call.x * self.h)
        return self._evaluate_dp(k, call, attn_tp)

    def _evaluate_cp(self, k: Kernels, call: Call) -> OpValue:
        volume = call.x * self.h
        if self.is_context:
            latency, path, lookup = _nccl(k, "all_gather" if self.pre_dispatch else "reduce_scatter", self.g, volume)
            return OpValue(latency * self.count, path, lookup)
        if self.pre_dispatch:  # decode: the tokens are replicated over the CP ranks, routing is local
            return OpValue(0.0, None, None)
        return _all_reduce(k, self.count, self.g, volume)

    def _evaluate_dp(self, k: Kernels, call: Call, attn_tp: int) -> OpValue:
        volume = call.x * self.h
        dp, g, pre = self.attention_dp, self.g, self.pre_dispatch
        backend = k.db.backend
        values: List[Tuple[float, Optional[str], Optional[Lookup]]] = []
        if backend == "trtllm":
            if attn_tp > 1:
                raise ValueError(f"trtllm does not support TP>1 and DP>1 for attn simultaneously "
                                 f"(attention tp = {attn_tp}, dp = {dp})")  # fmt: skip
            if k.system.sm_version == 100:
                check_trtllm_alltoall(k.system, self.etp, dp)
                if pre:
                    q = self.quant
                    if q is not None and q.name == "nvfp4":
                        x_volume, sf_volume = volume / 4, volume / 4 / 8
                    elif q is not None and q.name in ("fp8", "fp8_block"):
                        x_volume, sf_volume = volume / 2, 0
                    else:
                        x_volume, sf_volume = volume, 0
                    values.append(_nccl(k, "all_gather", g, (x_volume + sf_volume) * dp))
                else:
                    values.append(_nccl(k, "reduce_scatter", g, volume * dp))
            else:
                values.append(_nccl(k, "all_gather" if pre else "reduce_scatter", g, volume * dp))
        elif backend == "vllm":
            if attn_tp > 1:
                latency, path = k.custom_allreduce.query(g, volume)
                args, kwargs = k.custom_allreduce.lookup_args(g, volume)
                values.append((latency, path, Lookup("custom_allreduce_perf", args, kwargs)))
            values.append(_nccl(k, "all_gather" if pre else "reduce_scatter", g, volume * dp))
        elif backend == "sglang":
            if attn_tp > 1:  # attention tp and dp combined
                if pre:
                    values.append(_nccl(k, "reduce_scatter", attn_tp, volume))
                    values.append(_nccl(k, "all_gather", g, volume * dp))
                else:
                    values.append(_nccl(k, "reduce_scatter", g, volume * dp))
                    values.append(_nccl(k, "all_gather", attn_tp, volume))
            else:
                values.append(_nccl(k, "all_gather" if pre else "reduce_scatter", g, volume * dp))
        else:
            raise ValueError(f"MoEDispatch: Not implemented for backend {backend}")
        # The spec: comm_latency = first (vllm: 0 + first), += the next; times the count.
        latency = 0
        for value, _, _ in values:
            latency = latency + value
        lookup = next((lu for _, _, lu in values if lu is not None), None)
        return OpValue(latency * self.count, join_paths(p for _, p, _ in values), lookup)


def check_trtllm_alltoall(system, moe_tp: int, attention_dp: int) -> None:
    """trtllm on SM 100 with attention dp > 1, moe_tp 1 and >= 72 GPUs per
    node dispatches with the trtllm all-to-all table (``alltoall_dispatch``
    / ``alltoall_combine``), which neither path has: ValueError."""
    if attention_dp > 1 and moe_tp == 1 and system.sm_version == 100 and system.num_gpus_per_node >= 72:
        raise ValueError(
            "unsupported: trtllm's MoE all-to-all (query_trtllm_alltoall: alltoall_dispatch / alltoall_combine, "
            f"SM 100, {system.num_gpus_per_node} GPUs per node, attention dp = {attention_dp}, moe_tp = 1); "
            "its table is not built in aicsql.spec"
        )


def _nccl(k: Kernels, op: str, g: int, size) -> Tuple[float, Optional[str], Optional[Lookup]]:
    """One NCCL collective (``query_nccl('half', g, op, size)``): latency, path, lookup (None when g = 1)."""
    latency, path = k.nccl.query(_HALF, op, g, size)
    if g == 1:
        return latency, path, None
    args, kwargs = NcclTable.lookup_args(_HALF, op, g, size)
    return latency, path, Lookup("nccl_perf", args, kwargs)


def first_lookup(values: List[OpValue]) -> Optional[Lookup]:
    """The first table lookup among several ops' values, in their order."""
    for v in values:
        if v.lookup is not None:
            return v.lookup
    return None
