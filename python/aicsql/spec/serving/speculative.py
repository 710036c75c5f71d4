"""MTP speculative decoding's acceptance projection (docs/spec/options.md 2.4;
the spec's ``SpeculativeDecodingProfile.project_summary``).

A step at draft depth ``nextn`` prices one *verification* iteration
(`aicsql.spec.step.engine`): its TPOT is the cost of an iteration, not of an
output token. With ``a`` accepted draft tokens per iteration on average, an
iteration makes ``p = 1 + a`` tokens of progress, and the projection turns
the iteration metrics into service metrics, on the spec's 3-decimal frame:

1. every float of the row rounded to 3 decimals (numpy's rounding);
2. ``tpot /= p``; ``request_latency = ttft + tpot * max(osl - 1, 0)``;
3. ``ratio``: ``p`` -- except an aggregated vllm row, where vllm's Little's
   law cap is re-applied to the new latency: ``min(p, max(0, concurrency *
   1000 / request_latency / seq_s))`` (``p`` when a divisor is 0);
4. the request rate, seq/s, seq/s/gpu, tokens/s, tokens/s/gpu times
   ``ratio``; tokens/s/user (the rounded ``1000 / old tpot``) times ``p``;
5. rounded to 3 decimals again.

Only for ``a > 0``: at ``a = 0`` (MTP off, or on with nothing accepted) the
spec returns the summary untouched, unrounded. Applied to the aggregated
result and to the disaggregated decode worker's row (before the rate
matching); a prefill worker is never projected.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Tuple

from .rounding import round3_row

__all__ = ["project_agg", "project_decode"]


class _Fields(NamedTuple):
    """Where a row keeps what the projection reads and writes."""

    ttft: str
    tpot: str
    request_latency: str
    seq_s: str
    per_user: str
    rates: Tuple[str, ...]  # scaled by the ratio (those present)


# the estimate_agg struct's field names
_AGG = _Fields("ttft_ms", "tpot_ms", "request_latency_ms", "seq_per_s", "tokens_per_s_per_user",
               ("request_rate", "seq_per_s", "seq_per_s_per_gpu", "tokens_per_s", "tokens_per_s_per_gpu"))  # fmt: skip
# the spec's static worker row (`estimate._static_row`)
_STATIC = _Fields("ttft", "tpot", "request_latency", "seq/s", "tokens/s/user",
                  ("request_rate", "seq/s", "seq/s/gpu", "tokens/s", "tokens/s/gpu"))  # fmt: skip


# The estimate_agg fields that are columns of the spec's summary frame (ColumnsAgg), which
# DataFrame.round(3) rounds; the rest (the schedule's step latencies and counts) are aicsql's
# own and keep their values, as the Rust path keeps them.
_AGG_FRAME = frozenset(("ttft_ms", "tpot_ms", "request_latency_ms", "tokens_per_s", "tokens_per_s_per_gpu",
                        "tokens_per_s_per_user", "seq_per_s", "seq_per_s_per_gpu", "request_rate", "memory_gib",
                        "balance_score", "num_ctx_reqs", "num_gen_reqs", "num_tokens", "encoder_latency_ms",
                        "encoder_memory_gib"))  # fmt: skip


def _round_frame(row: dict, frame) -> dict:
    """``DataFrame.round(3)`` of the frame's columns (all of them: ``frame`` None)."""
    if frame is None:
        return round3_row(row)
    rounded = round3_row({k: v for k, v in row.items() if k in frame})
    return {k: rounded.get(k, v) for k, v in row.items()}


def _project(row: dict, fields: _Fields, progress: float, ratio_of: Callable[[dict], float], frame=None) -> dict:
    """Steps 1-5 of the module doc on a copy of `row`; ``frame``: the keys the
    spec's frame rounds (None: every float of the row)."""
    f = _round_frame(row, frame)
    f[fields.tpot] = f[fields.tpot] / progress
    f[fields.request_latency] = f[fields.ttft] + f[fields.tpot] * max(f["osl"] - 1, 0)
    ratio = ratio_of(f)
    for name in fields.rates:
        if name in f:
            f[name] = f[name] * ratio
    f[fields.per_user] = f[fields.per_user] * progress
    return _round_frame(f, frame)


def _little_cap(f: dict, progress: float) -> float:
    """vllm's aggregated ratio: the request rate Little's law allows at the
    projected latency over the current one, clipped to [0, progress]; the
    spec's NaN (a zero divisor) falls back to progress."""
    latency, seq_s = f[_AGG.request_latency], f[_AGG.seq_s]
    if latency == 0 or seq_s == 0:
        return progress
    ratio = f["concurrency"] * 1000.0 / latency / seq_s
    if math.isnan(ratio):
        return progress
    return min(max(ratio, 0.0), progress)


def project_agg(row: dict, accepted: float, backend: str) -> dict:
    """The aggregated result projected at `accepted` tokens per iteration
    (role 'agg'); the row itself when nothing is accepted."""
    if accepted <= 0:
        return row
    progress = 1.0 + accepted
    if backend.lower() == "vllm":
        return _project(row, _AGG, progress, lambda f: _little_cap(f, progress), _AGG_FRAME)
    return _project(row, _AGG, progress, lambda f: progress, _AGG_FRAME)


def project_decode(row: dict, accepted: float) -> dict:
    """A decode worker's rounded static row projected (role 'decode': the
    ratio is the progress); the row itself when nothing is accepted."""
    if accepted <= 0:
        return row
    progress = 1.0 + accepted
    return _project(row, _STATIC, progress, lambda f: progress)
