"""The ops of a step and what one application of each costs (docs/spec 6, 8, 10).

Every op has a *count* (a multiplier, usually the layer count L) and its
query returns ``count * per_application_latency``. `build_ops` lists a
model's context or generation ops in the SDK's order (the order is
observable: per-op values are summed in it, section 9.3).

An op is evaluated against a `Call` -- the step's ``x`` (tokens),
``batch_size``, ``s`` and ``prefix`` -- and returns an `OpValue`: the total
(count * per application), the interpolation path of its table lookups and
the first table lookup (how the goldens describe it).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from ..gemm import GemmMiss
from ..sol import GEMM_QUANTS, QuantMode
from ..kernels import Kernels, PerfMiss, lookup_call
from ..kernels.quant import FMHA_QUANTS, KV_QUANTS, MOE_QUANTS
from .model import HYBRIDMOE, LLAMA, MOE, ModelSpec

__all__ = ["Call", "OpValue", "Lookup", "build_ops", "Parallel"]

ACT = "bfloat16(act)"  # the quant label of elementwise / embedding ops (2-byte activations)


class Call(NamedTuple):
    """The arguments a step passes to every op (docs/spec 9)."""

    x: int  # tokens
    batch_size: int
    s: int
    prefix: int = 0


class Lookup(NamedTuple):
    """An op's first table lookup: table (file stem), method args and kwargs."""

    table: str
    args: list
    kwargs: dict


class OpValue(NamedTuple):
    total: float  # count * per-application latency (ms)
    path: Optional[str]  # interp path(s) of the lookups, None without a table lookup
    lookup: Optional[Lookup]


class Parallel(NamedTuple):
    """The parallel layout of a step (pp = 1, attention_dp = 1 here)."""

    tp: int
    moe_tp: int = 1
    moe_ep: int = 1
    attention_dp: int = 1
    pp: int = 1


# ---- GEMM path names -----------------------------------------------------------------

def _gemm_path(k: Kernels, q: QuantMode, m: int, n: int, kk: int) -> str:
    """The goldens' name for how the ScatteredSites resolver answers (m, n, k)."""
    s = k.gemm.slice(q)
    if s is None:
        return "miss"
    sid = s.site_id.get((n, kk))
    if sid is None:
        return "site_transfer"
    ms = s.curve_m[sid]
    if m in ms:
        return "exact_hit"
    if ms[0] < m < ms[-1]:
        return "own_site_curve_interpolation"
    return "own_site_curve_util_hold"


# ---- ops ----------------------------------------------------------------------------------


class Op:
    kind = ""

    def __init__(self, name: str, count):
        self.name = name
        self.count = count

    quant_label = ""

    def evaluate(self, k: Kernels, call: Call) -> OpValue:  # pragma: no cover - abstract
        raise NotImplementedError


class Embedding(Op):
    """Embedding lookup: memory-bound, ``mem_op(x*h*2)`` (docs/spec 6.1 #1)."""

    kind = "Embedding"
    quant_label = ACT

    def __init__(self, name, count, h: int):
        super().__init__(name, count)
        self.h = h

    def evaluate(self, k, call):
        return OpValue(k.system.mem_op(call.x * self.h * 2) * self.count, None, None)


class ElementWise(Op):
    """Elementwise op reading ``dim_in`` and writing ``dim_out`` 2-byte values per token."""

    kind = "ElementWise"
    quant_label = ACT

    def __init__(self, name, count, dim_in: int, dim_out: int):
        super().__init__(name, count)
        self.dim_in = dim_in
        self.dim_out = dim_out

    def evaluate(self, k, call):
        nbytes = call.x * self.dim_in * 2 + call.x * self.dim_out * 2
        return OpValue(k.system.mem_op(nbytes) * self.count, None, None)


class GEMM(Op):
    """A GEMM ``m x k by k x n`` with ``m = x`` (the logits GEMM of a context
    step is called with ``x = B``, see `run_phase`)."""

    kind = "GEMM"

    def __init__(self, name, count, n: int, k: int, quant: str):
        super().__init__(name, count)
        self.n = n
        self.k = k
        self.quant = GEMM_QUANTS[quant]

    @property
    def quant_label(self):
        return self.quant.name

    def evaluate(self, kernels, call):
        m, q = call.x, self.quant
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
        return OpValue(self.count * latency, _gemm_path(kernels, q, m, self.n, self.k), lookup)


class ContextAttention(Op):
    """Prefill attention: the FMHA table value plus the per-token extras (docs/spec 8.2)."""

    kind = "ContextAttention"

    def __init__(self, name, count, n, n_kv, d, w, kv: str, fmha: str, use_qk_norm: bool):
        super().__init__(name, count)
        self.n, self.n_kv, self.d, self.w = n, n_kv, d, w
        self.kv = KV_QUANTS[kv]
        self.fmha = FMHA_QUANTS[fmha]
        self.use_qk_norm = use_qk_norm

    @property
    def quant_label(self):
        return f"fmha={self.fmha.name},kv={self.kv.name}"

    def extras(self, k: Kernels) -> float:
        """qk-norm, rope and kv-write memory ops, per token (not scaled by B or isl), times 1.1."""
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

    def evaluate(self, k, call):
        table = k.context_attention
        args, kwargs = table.lookup_args(
            call.batch_size, call.s, call.prefix, self.n, self.n_kv, self.kv, self.fmha, self.d, self.w
        )
        value, path = table.query(
            call.batch_size, call.s, call.prefix, self.n, self.n_kv, self.kv, self.fmha, self.d, self.w
        )
        return OpValue(self.count * (value + self.extras(k)), path, Lookup("context_attention_perf", args, kwargs))


class GenerationAttention(Op):
    """Decode attention: the mean of five table lookups around s (docs/spec 8.3); no extras."""

    kind = "GenerationAttention"

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


class CustomAllReduce(Op):
    """Tensor-parallel all-reduce of the ``x*h`` activations (docs/spec 8.4)."""

    kind = "CustomAllReduce"
    quant_label = "half"

    def __init__(self, name, count, h: int, tp: int):
        super().__init__(name, count)
        self.h = h
        self.tp = tp

    def evaluate(self, k, call):
        if self.tp == 1:
            return OpValue(0.0 * self.count, None, None)
        size = call.x * self.h
        latency, path = k.custom_allreduce.query(self.tp, size)
        args, kwargs = k.custom_allreduce.lookup_args(self.tp, size)
        return OpValue(self.count * latency, path, Lookup("custom_allreduce_perf", args, kwargs))


class P2P(Op):
    """Pipeline hand-off; count pp-1 = 0 at pp = 1, and the op short-circuits (5.9)."""

    kind = "P2P"
    quant_label = ""

    def __init__(self, name, count, h: int, pp: int):
        super().__init__(name, count)
        self.h = h
        self.pp = pp

    def evaluate(self, k, call):
        if self.pp == 1:
            return OpValue(0.0, None, None)
        return OpValue(self.count * k.system.p2p_latency_ms(call.x * self.h * 2), None, None)


class MoE(Op):
    """The routed experts of one layer (docs/spec 10.3): the MoE table at ``x * attention_dp`` tokens."""

    kind = "MoE"

    def __init__(self, name, count, h, inter, topk, experts, etp, eep, quant: str, distribution: str, attention_dp=1):
        super().__init__(name, count)
        self.h, self.inter, self.topk, self.experts = h, inter, topk, experts
        self.etp, self.eep = etp, eep
        self.quant = MOE_QUANTS[quant]
        self.distribution = distribution
        self.attention_dp = attention_dp
        self.gated = True

    @property
    def quant_label(self):
        return self.quant.name

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
    """Token dispatch around the experts (docs/spec 10.3). At attention_dp = 1 on
    vllm, sglang (non-DeepEP) and trtllm it is one custom all-reduce of the
    ``x*h`` activations over ``G = moe_tp * moe_ep`` GPUs when ``attn_tp > 1``."""

    kind = "MoEDispatch"

    def __init__(self, name, count, h, etp, eep, attention_dp, quant: str):
        super().__init__(name, count)
        self.h = h
        self.g = etp * eep
        self.attention_dp = attention_dp
        self.quant = MOE_QUANTS[quant]

    @property
    def quant_label(self):
        return self.quant.name

    def evaluate(self, k, call):
        attn_tp = self.g // self.attention_dp
        if self.attention_dp > 1:
            raise ValueError("unsupported: attention_dp > 1 (MoE dispatch over NCCL)")
        if attn_tp <= 1:
            return OpValue(0.0, None, None)
        size = call.x * self.h
        latency, path = k.custom_allreduce.query(self.g, size)
        args, kwargs = k.custom_allreduce.lookup_args(self.g, size)
        return OpValue(self.count * latency, path, Lookup("custom_allreduce_perf", args, kwargs))


# ---- op lists --------------------------------------------------------------------------------


def build_ops(model: ModelSpec, phase: str, par: Parallel, gemm: str, moe: str, kv: str, fmha: str) -> List[Op]:
    """The model's op list for `phase` ('context' | 'generation'), in the SDK's order."""
    if model.family not in (LLAMA, MOE):
        raise ValueError(f"unsupported model family {model.family} ({model.architecture})")
    p = "context_" if phase == "context" else "generation_"
    gen = phase == "generation"
    tp = par.tp
    L, h, H, d, I, V = model.num_layers, model.hidden, model.heads, model.head_dim, model.inter, model.vocab
    n, n_kv = model.heads_per_gpu(tp)
    # Generation counts carry the MTP factor (nextn + 1 = 1): floats L*1.0.
    c = L * 1.0 if gen else L
    one = 1 * 1.0 if gen else 1
    attention_count = L / 1 if model.family == MOE else c

    ops: List[Op] = [
        Embedding(p + "embedding", one, h),
        ElementWise(p + "add_norm_1", c, 2 * h, 2 * h),
        GEMM(p + "qkv_gemm", c, H * d // tp + d * n_kv * 2, h, gemm),
    ]
    if gen:
        ops.append(GenerationAttention(p + "attention", attention_count, n, n_kv, d, 0, kv))
    else:
        ops.append(ContextAttention(p + "attention", attention_count, n, n_kv, d, 0, kv, fmha, model.use_qk_norm))
    ops += [
        GEMM(p + "proj_gemm", c, h, H * d // tp, gemm),
        ElementWise(p + "add_norm_2", c, 2 * h, 2 * h),
    ]
    if model.family == LLAMA:
        ops += [
            GEMM(p + "gate_ffn1_gemm", c, 2 * I // tp, h, gemm),
            ElementWise(p + "act_gate", c, 2 * I // tp, I // tp),
            GEMM(p + "ffn2_gemm", c, h, I // tp, gemm),
            GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16"),
            CustomAllReduce(p + "embedding_ar", one, h, tp),
            CustomAllReduce(p + "ar_1", c, h, tp),
            CustomAllReduce(p + "ar_2", c, h, tp),
            P2P(p + "p2p", par.pp - 1, h, par.pp),
        ]
    else:  # MOE: router, dispatch, experts; no ar_1 / ar_2; logits only in generation
        ops += [
            GEMM(p + "router_gemm", c, model.experts, h, "bfloat16"),
            MoEDispatch(p + "moe_pre_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, moe),
            MoE(p + "moe", c, h, model.moe_inter, model.topk, model.experts, par.moe_tp, par.moe_ep, moe,
                model.distribution, par.attention_dp),
            MoEDispatch(p + "moe_post_dispatch", c, h, par.moe_tp, par.moe_ep, par.attention_dp, moe),
        ]
        if gen:
            ops.append(GEMM(p + "logits_gemm", one, V // tp, h, "bfloat16"))
        ops += [
            CustomAllReduce(p + "embedding_ar", one, h, tp),
            P2P(p + "p2p", par.pp - 1, h, par.pp),
        ]
    return ops


def first_moe_lookup(model: ModelSpec, phase: str, par: Parallel, moe: str) -> MoE:
    """The first MoE op of a HYBRIDMOE (Llama-4) step -- the only part of that
    builder this port restates (docs/spec 10.4)."""
    if model.family != HYBRIDMOE:
        raise ValueError("not a HYBRIDMOE model")
    p = "context_" if phase == "context" else "generation_"
    return MoE(p + "moe", model.num_layers, model.hidden, model.moe_inter, model.topk, model.experts, par.moe_tp,
               par.moe_ep, moe, model.distribution, par.attention_dp)
