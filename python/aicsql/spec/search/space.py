"""The search space of ``cli default`` (docs/spec/search.md 1.3-1.6): the
experiments, the per-role candidate lists, ``enumerate_parallel_config``,
and the sweeps' fixed lists (TPOT sweep, batch schedules, context-token
budgets, deployment sizes).

Only what ``cli_default`` reaches without WideEP, DeepEP, MegaMoE,
request-latency mode or the large-PP additions is restated; the DeepEP
twins (``agg_deepep`` / ``disagg_deepep``) are not built (their
``wideep_deepep_*`` tables are not modelled on this path).
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Tuple

__all__ = [
    "TPOT_SWEEP",
    "search_limits",
    "AGG_BATCH_SCHEDULE",
    "DECODE_BATCH_SCHEDULE",
    "NUM_GPU_PER_REPLICA",
    "ParallelLists",
    "agg_lists",
    "disagg_lists",
    "enumerate_parallel",
    "agg_ctx_tokens",
    "deployment_sizes",
    "tuple_counts",
]

Parallel6 = Tuple[int, int, int, int, int, int]  # (tp, pp, dp, moe_tp, moe_ep, cp)

# task:81 -- 1..19, then 20, 25, ..., 295 (75 values, ascending)
TPOT_SWEEP: List[int] = list(range(1, 20, 1)) + list(range(20, 300, 5))

# cu:256-260 -- the TTFT values of a request-latency target (docs/spec/experiments.md 3.2)
REQUEST_LATENCY_TTFTS = (300, 400, 500, 600, 800, 1000, 1200, 1400, 1600, 2000, 3000, 5000, 8000)
REQUEST_LATENCY_FRACTIONS = (0.1, 0.2, 0.3, 0.5, 0.7)


def search_limits(osl: int, ttft: float, request_latency: Optional[float] = None) -> List[Tuple[float, float]]:
    """The (TTFT, TPOT) limits both sweeps run (experiments.md 3.2): without
    a request-latency target (None or <= 0), the user's TTFT with every TPOT
    of `TPOT_SWEEP`; with one, R, the fixed TTFT values, the fractions of R
    below 300 or above 8000 and the user's TTFT, those below R ascending,
    each with the TPOT that spends the rest of R on ``osl - 1`` tokens.
    ValueError for ``osl <= 1`` (the spec's assertion)."""
    if request_latency is None or not request_latency > 0:
        return [(ttft, t) for t in TPOT_SWEEP]
    if osl <= 1:
        raise ValueError(f"a request-latency target needs osl > 1, got osl = {osl}")
    lo, hi = REQUEST_LATENCY_TTFTS[0], REQUEST_LATENCY_TTFTS[-1]
    values = list(REQUEST_LATENCY_TTFTS)
    values += [v for v in (request_latency * p for p in REQUEST_LATENCY_FRACTIONS) if v < lo or v > hi]
    values.append(ttft)
    distinct: List[float] = []
    for v in values:  # a set: numerically equal values are one
        if v not in distinct:
            distinct.append(v)
    return [(t, (request_latency - t) / (osl - 1)) for t in sorted(v for v in distinct if v < request_latency)]

# sweep:81-89 (kept <= max_batch_size = 512 by the sweep: 44 values)
AGG_BATCH_SCHEDULE: List[int] = (
    list(range(1, 16, 1)) + list(range(16, 32, 4)) + list(range(32, 64, 8)) + list(range(64, 256, 16))
    + list(range(256, 512, 32)) + list(range(512, 1024, 256)) + [1024]
)  # fmt: skip
AGG_MAX_BATCH_SIZE = 512
AGG_TOP_K = 10
AGG_CTX_STRIDE = 512

# sweep:74-78 (96 values, all <= decode_max_num_tokens = 512)
DECODE_BATCH_SCHEDULE: List[int] = (
    list(range(1, 16, 1)) + list(range(16, 32, 2)) + list(range(32, 128, 4)) + list(range(128, 512, 8)) + [512]
)
DECODE_MAX_NUM_TOKENS = 512  # Task.decode_max_batch_size
PREFILL_MAX_BATCH_SIZE = 1  # Task.prefill_max_batch_size

# task:1046 and the worker-count lists (task:1050-1052)
NUM_GPU_PER_REPLICA: List[int] = [1, 2, 4, 8] + list(range(16, 129, 8))
MAX_GPU_PER_REPLICA = 128
MAX_PREFILL_WORKERS = 32
MAX_DECODE_WORKERS = 32

_X = [1, 2, 4, 8]
_BLACKWELL_WIDE = ("gb200", "gb300")


class ParallelLists(NamedTuple):
    num_gpu: List[int]
    tp: List[int]
    pp: List[int]
    dp: List[int]
    moe_tp: List[int]
    moe_ep: List[int]
    cp: List[int]


def _cp_list(backend: str) -> List[int]:
    """``_default_cp_list_for`` (task:63): every model class this path prices
    (LLAMA, MOE, HYBRIDMOE, QWEN3VL(_MOE) through their LLAMA / MOE bases,
    DEEPSEEK / KIMIK25) declares ``supports_cp`` for sglang only."""
    return [1, 2, 4, 8] if backend == "sglang" else [1]


def _budget(values: List[int], total_gpus: int) -> List[int]:
    return [n for n in values if n <= total_gpus]


def agg_lists(is_moe: bool, backend: str, system: str, total_gpus: int) -> ParallelLists:
    """``_resolve_agg_search`` (task:961-1025) and the GPU budget (task:941-959)."""
    cp = _cp_list(backend)
    if not is_moe:
        wide = [1, 2, 4, 8, 16] if system in _BLACKWELL_WIDE else list(_X)
        return ParallelLists(_budget(wide, total_gpus), list(wide), [1], [1], [1], [1], cp)
    if backend in ("sglang", "trtllm", "vllm"):
        # sglang without WideEP / deepep / megamoe; trtllm and vllm without WideEP
        return ParallelLists(_budget(_X, total_gpus), list(_X), [1], list(_X), list(_X), list(_X), cp)
    raise ValueError(f"unsupported backend {backend!r}")


def disagg_lists(is_moe: bool, backend: str, prefill_system: str, decode_system: str,
                 total_gpus: int) -> Tuple[ParallelLists, ParallelLists]:  # fmt: skip
    """``build_disagg_parallel_lists`` (task:157-300, no WideEP, no ``moe_backend``,
    no PP), ``_fill_role_search`` (decode cp = [1]) and the GPU budget."""
    cp = _cp_list(backend)
    if not is_moe:
        roles = []
        for system in (prefill_system, decode_system):
            wide = [1, 2, 4, 8, 16] if system in _BLACKWELL_WIDE else list(_X)
            roles.append((wide, list(wide)))
        (pn, pt), (dn, dt) = roles
        prefill = ParallelLists(_budget(pn, total_gpus), pt, [1], [1], [1], [1], cp)
        decode = ParallelLists(_budget(dn, total_gpus), dt, [1], [1], [1], [1], [1])
        return prefill, decode
    if backend not in ("sglang", "trtllm", "vllm"):
        raise ValueError(f"Invalid backend: {backend}")
    # sglang (standard comm): moe_ep [1, 2, 4, 8]; trtllm / vllm: x -- the same lists here
    prefill = ParallelLists(_budget(_X, total_gpus), list(_X), [1], list(_X), list(_X), list(_X), cp)
    decode = ParallelLists(_budget(_X, total_gpus), list(_X), [1], list(_X), list(_X), list(_X), [1])
    return prefill, decode


def enumerate_parallel(lists: ParallelLists, is_moe: bool, backend: str) -> List[Parallel6]:
    """``enumerate_parallel_config`` (cu:139-240) without WideEP / DeepEP / MegaMoE:
    nested loops tp, pp, (MoE: dp, moe_tp, moe_ep), cp, in list order."""
    cp_list = list(lists.cp)
    if backend != "sglang":
        bad = sorted({c for c in cp_list if c != 1})
        if bad:
            raise ValueError(f"CP is only supported on sglang; got cp_list={bad} for backend={backend}.")
        cp_list = [1]
    out: List[Parallel6] = []
    for tp in lists.tp:
        for pp in lists.pp:
            if is_moe:
                for dp in lists.dp:
                    for moe_tp in lists.moe_tp:
                        for moe_ep in lists.moe_ep:
                            for cp in cp_list:
                                if dp * tp * pp * cp not in lists.num_gpu:
                                    continue
                                if dp * tp * cp != moe_tp * moe_ep:
                                    continue
                                if backend == "trtllm" and dp > 1 and tp > 1:
                                    continue
                                if backend == "vllm" and moe_tp > 1 and moe_ep > 1:
                                    continue
                                out.append((tp, pp, dp, moe_tp, moe_ep, cp))
            else:
                for cp in cp_list:
                    if tp * pp * cp in lists.num_gpu:
                        out.append((tp, pp, 1, 1, 1, cp))
    return out


def agg_ctx_tokens(isl: int, ctx_stride: int = AGG_CTX_STRIDE, enable_chunked_prefill: bool = False) -> List[int]:
    """``_agg_ctx_tokens_list`` (sweep:212-253)."""
    max_normal = 8192
    max_ctx = max(max_normal, isl * 2)
    stride = max(ctx_stride, max_normal // 16)
    stride_large = max(1024, stride, max_ctx // 8)
    if not enable_chunked_prefill:
        stride, stride_large = max(isl, stride), int(math.ceil(stride_large / isl) * isl)
    out: List[int] = []
    c = 0
    while True:
        c += stride if c < max_normal else stride_large
        if c > max_ctx:
            break
        out.append(c)
    for i in (1, 2):
        if isl * i not in out:
            out.append(isl * i)
    out.sort()
    return out


def deployment_sizes(total_gpus: int) -> List[int]:
    """The disagg deployment list: ``num_gpu_per_replica`` kept ``<= min(total_gpus, 128)``
    (task:954, task:1480-1484) -- a membership test in the matching (search.md 3.4)."""
    cap = min(total_gpus, MAX_GPU_PER_REPLICA)
    return [n for n in NUM_GPU_PER_REPLICA if n <= cap]


def tuple_counts(tuples: List[Parallel6]) -> Dict[int, int]:
    counts: Dict[int, int] = {}
    for t in tuples:
        counts[t[0]] = counts.get(t[0], 0) + 1
    return counts
