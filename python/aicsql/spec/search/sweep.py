"""``sweep_agg`` and ``sweep_disagg`` of aiconfigurator v0.11.0 (``sdk/sweep.py``),
restated on plain lists of row dicts with the spec's column names
(docs/spec/search.md sections 2 and 3). Each point is priced by the serving
path (`aicsql.spec.serving.estimate`: `agg_point`, `static_worker_row`).

MTP speculative decoding (docs/spec/options.md 2.4, 2.5): the `StepContext`
carries the draft depth (it prices verification iterations), and
``accepted``, the accepted draft tokens per iteration (0.0: no projection),
projects every priced agg point (role 'agg', before the keep test, which then
compares the projected, 3-decimal values) and every decode worker row (role
'decode', before the matching); prefill rows are never projected.

Frames are lists of dicts keyed by ``ColumnsAgg`` / ``ColumnsDisagg``; a
``DataFrame.round(3)`` is `round_row` (numpy's rounding of every float,
ints and strings untouched); single-key sorts are `sort_indexer` (numpy's
introsort behind pandas' descending trick), multi-key sorts
`stable_indexer`, ``groupby`` `group_keys` (search.md 6).
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..serving.estimate import (
    AUTOSCALE_TTFT_CORRECTION_FACTOR,
    RATE_MATCHING_DECODE_DEGRADATION_FACTOR,
    RATE_MATCHING_PREFILL_DEGRADATION_FACTOR,
    agg_point,
    numpy_round3,
    resolve_layout,
    static_worker_row,
    worker,
)
from ..serving.speculative import project_decode
from ..step.engine import StepContext
from ..step.options import NO_IMAGES, NO_MEMORY_OPTIONS, ImageOptions, MemoryOptions
from .sorts import group_keys, sort_indexer, stable_indexer, take
from .space import (
    AGG_BATCH_SCHEDULE,
    AGG_MAX_BATCH_SIZE,
    AGG_TOP_K,
    DECODE_BATCH_SCHEDULE,
    DECODE_MAX_NUM_TOKENS,
    MAX_DECODE_WORKERS,
    MAX_PREFILL_WORKERS,
    PREFILL_MAX_BATCH_SIZE,
    Parallel6,
    agg_ctx_tokens,
)

__all__ = [
    "COLUMNS_AGG",
    "COLUMNS_DISAGG",
    "SweepError",
    "SweepResult",
    "WorkerRows",
    "round_row",
    "sweep_agg",
    "sweep_disagg",
    "disagg_workers",
    "match_workers",
    "rate_match",
]

# common:688
COLUMNS_AGG = [
    "model", "isl", "osl", "prefix", "concurrency", "request_rate", "bs", "global_bs", "ttft", "tpot",
    "request_latency", "encoder_latency", "encoder_memory", "seq/s", "seq/s/gpu", "tokens/s", "tokens/s/gpu",
    "tokens/s/user", "num_total_gpus", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp", "parallel", "gemm", "kvcache",
    "fmha", "moe", "comm", "memory", "balance_score", "num_ctx_reqs", "num_gen_reqs", "num_tokens", "ctx_tokens",
    "gen_tokens", "backend", "version", "system", "power_w",
]  # fmt: skip
# common:736
COLUMNS_DISAGG = [
    "model", "isl", "osl", "prefix", "concurrency", "request_rate", "(p)bs", "(p)global_bs", "(p)workers", "(d)bs",
    "(d)global_bs", "(d)workers", "ttft", "tpot", "request_latency", "encoder_latency", "seq/s", "seq/s/gpu",
    "tokens/s", "tokens/s/gpu", "tokens/s/user", "(p)seq/s/worker", "(d)seq/s/worker", "num_total_gpus", "(p)tp",
    "(p)pp", "(p)dp", "(p)moe_tp", "(p)moe_ep", "(p)cp", "(p)parallel", "(p)gemm", "(p)kvcache", "(p)fmha", "(p)moe",
    "(p)comm", "(p)memory", "(p)backend", "(p)version", "(p)system", "(d)tp", "(d)pp", "(d)dp", "(d)moe_tp",
    "(d)moe_ep", "(d)parallel", "(d)gemm", "(d)kvcache", "(d)fmha", "(d)moe", "(d)comm", "(d)memory", "(d)backend",
    "(d)version", "(d)system", "(e)workers", "(e)tp", "(e)pp", "(e)parallel", "(e)memory", "power_w",
]  # fmt: skip

_PREFILL_DEG = RATE_MATCHING_PREFILL_DEGRADATION_FACTOR
_DECODE_DEG = RATE_MATCHING_DECODE_DEGRADATION_FACTOR
_TTFT_CORRECTION = AUTOSCALE_TTFT_CORRECTION_FACTOR
_DECODE_FILTER_RATIO_MIN = 0.0
_DECODE_FILTER_RATIO_MAX = 1.0
_MAX_DECODE_WORKERS_PER_CATEGORY = 16
_MAX_PREFILL_CANDIDATES = 32  # sweep's _MAX_PREFILL_WORKERS: the prefill rows kept per TPOT value
_DISAGG_TOP_K = 5


class SweepError(Exception):
    """A sweep that found nothing (the spec's RuntimeError,
    InsufficientMemoryError, KVCacheCapacityError or NoFeasibleConfigError):
    ``kind`` names which; the experiment is dropped."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class SweepResult(NamedTuple):
    rows: List[dict]  # the candidates frame, in order
    skipped: List[Tuple[str, str]]  # (layout label, message) of every layout whose model or a point raised
    stats: Dict[str, int]


def round_row(row: dict) -> dict:
    """``DataFrame(...).round(3)`` of one row: numpy's rounding of the floats."""
    return {k: (numpy_round3(v) if isinstance(v, float) else v) for k, v in row.items()}


def _label(t: Parallel6) -> str:
    tp, pp, dp, moe_tp, moe_ep, cp = t
    return f"tp{tp}pp{pp}dp{dp}etp{moe_tp}ep{moe_ep}" + (f"cp{cp}" if cp > 1 else "")


def _layout(ctx: StepContext, t: Parallel6):
    tp, pp, dp, moe_tp, moe_ep, cp = t
    return resolve_layout(ctx, tp, moe_tp, moe_ep, dp, pp, cp)


# ---- agg (search.md 2) ---------------------------------------------------------------------------


def _agg_row(model: str, result, isl: int, osl: int, prefix: int, encoder: bool = False) -> dict:
    """The ``ColumnsAgg`` row dict of one point (``get_result_dict``), unrounded.
    ``encoder``: whether the worker runs an encoder phase (images); without
    one the spec's ``encoder_latency`` is the int 0 (options.md 4.9)."""
    r = result.row
    return {
        "model": model, "isl": isl, "osl": osl, "prefix": prefix, "concurrency": r["concurrency"],
        "request_rate": r["request_rate"], "bs": r["bs"], "global_bs": r["global_bs"], "ttft": r["ttft_ms"],
        "tpot": r["tpot_ms"], "request_latency": r["request_latency_ms"],
        "encoder_latency": r["encoder_latency_ms"] if encoder else 0, "encoder_memory": r["encoder_memory_gib"], "seq/s": r["seq_per_s"], "seq/s/gpu": r["seq_per_s_per_gpu"],
        "tokens/s": r["tokens_per_s"], "tokens/s/gpu": r["tokens_per_s_per_gpu"],
        "tokens/s/user": r["tokens_per_s_per_user"], "num_total_gpus": r["num_total_gpus"], "tp": r["tp"],
        "pp": r["pp"], "dp": r["dp"], "moe_tp": r["moe_tp"], "moe_ep": r["moe_ep"], "cp": r["cp"],
        "parallel": r["parallel"], "gemm": r["gemm"], "kvcache": r["kvcache"], "fmha": r["fmha"], "moe": r["moe"],
        "comm": r["comm"], "memory": r["memory_gib"], "balance_score": r["balance_score"],
        # float64 columns of the frame (b = 1 gives the int 1 for the request counts)
        "num_ctx_reqs": float(r["num_ctx_reqs"]), "num_gen_reqs": float(r["num_gen_reqs"]),
        "num_tokens": float(r["num_tokens"]), "ctx_tokens": r["ctx_tokens"], "gen_tokens": float(r["gen_tokens"]),
        "backend": r["backend"], "version": r["version"], "system": r["system"], "power_w": 0.0,
    }  # fmt: skip


class _AggPoints(NamedTuple):
    points: List[Tuple[float, float, dict]]  # (unrounded tpot, unrounded ttft, rounded row), walk order
    saw_model_fit: bool
    saw_memory_fit: bool
    priced: int


def _walk_agg(w, model: str, isl: int, osl: int, prefix: int, accepted: float = 0.0,
              memory: MemoryOptions = NO_MEMORY_OPTIONS, chunked_prefill: bool = False) -> _AggPoints:  # fmt: skip
    """The priced points of one layout (search.md 2.2): batch sizes ascending,
    context budgets ascending, the two breaks, the balance skip, OOM / KV-OOM
    breaks. The grid does not depend on the TPOT value, so it is walked once.
    ``accepted`` > 0: each point is the MTP-projected one (rounded), so the
    tpot / ttft kept for the keep test are the projected values. ``memory``:
    TRT-LLM's KV knobs, given to every point (options.md 3.2);
    ``chunked_prefill``: the budgets' list (options.md 3.3)."""
    b_list = [b for b in AGG_BATCH_SCHEDULE if b <= AGG_MAX_BATCH_SIZE]
    c_list = agg_ctx_tokens(isl, enable_chunked_prefill=chunked_prefill)
    capped: List[float] = []
    points: List[Tuple[float, float, dict]] = []
    saw_model_fit = saw_memory_fit = False
    priced = 0
    for b in b_list:
        for c in c_list:
            need = float(math.ceil(c / isl))
            if b - need < 0:
                break
            if b > 1 and b - need < 1:
                break
            balance_score = isl * b / c / osl
            if balance_score > 1:
                gen_tokens = b // balance_score
                if gen_tokens > 1 and gen_tokens in capped:
                    continue
                capped.append(gen_tokens)
            result = agg_point(w, b, isl, osl, prefix, c, max_seq_len=memory.max_seq_len,
                               free_gpu_memory_fraction=memory.free_gpu_memory_fraction, accepted=accepted)  # fmt: skip
            priced += 1
            model_oom = result.oom
            kv_oom = result.kv_warning is not None
            saw_model_fit |= not model_oom
            saw_memory_fit |= not model_oom and not kv_oom
            if model_oom or kv_oom:
                break
            row = _agg_row(model, result, isl, osl, prefix, w.encoder.work.active)
            points.append((row["tpot"], row["ttft"], round_row(row)))
    return _AggPoints(points, saw_model_fit, saw_memory_fit, priced)


def sweep_agg(ctx: StepContext, model: str, tuples: Sequence[Parallel6], isl: int, osl: int, prefix: int,
              limits: Sequence[Tuple[float, float]], accepted: float = 0.0,
              memory: MemoryOptions = NO_MEMORY_OPTIONS, chunked_prefill: bool = False,
              images: ImageOptions = NO_IMAGES) -> SweepResult:  # fmt: skip
    """``sweep_agg`` (sweep:359-535): per layout, per (TTFT, TPOT) limit of
    ``limits`` (`search_limits`), the top 10 points by ``seq/s`` under both
    (unrounded ``tpot <= t_tpot`` and ``ttft <= t_ttft``); then
    ``drop_duplicates`` and the ``tokens/s/gpu`` sort. SweepError when
    nothing was found. ``accepted``: the MTP acceptance of the points'
    projection (module doc; 0.0 = none); ``memory`` and ``chunked_prefill``:
    `_walk_agg`'s; ``images``: every point's (options.md 4.9: the budgets, the
    guards and the balance skip read the text isl, the points the effective one)."""
    results: List[dict] = []
    skipped: List[Tuple[str, str]] = []
    saw_model_fit = saw_memory_fit = False
    stats = {"layouts": len(tuples), "layouts_kept": 0, "calls_with_rows": 0, "rows_before_dedupe": 0, "priced": 0}
    for t in tuples:
        try:
            w = worker(ctx, _layout(ctx, t), "context", images)  # get_model: may raise
            walk = _walk_agg(w, model, isl, osl, prefix, accepted, memory, chunked_prefill)  # any point may raise: the layout gives nothing
        except Exception as exc:  # the spec's per-configuration ``except Exception``
            skipped.append((_label(t), str(exc)))
            continue
        stats["layouts_kept"] += 1
        stats["priced"] += walk.priced
        saw_model_fit |= walk.saw_model_fit
        saw_memory_fit |= walk.saw_memory_fit
        for ttft, tpot in limits:
            kept = [row for p_tpot, p_ttft, row in walk.points if p_tpot <= tpot and p_ttft <= ttft]
            if not kept:
                continue
            frame = take(kept, sort_indexer([r["seq/s"] for r in kept], ascending=False))[:AGG_TOP_K]
            stats["calls_with_rows"] += 1
            stats["rows_before_dedupe"] += len(frame)
            results.extend(frame)
    if results:
        rows = _drop_duplicates(results, COLUMNS_AGG)
        rows = take(rows, sort_indexer([r["tokens/s/gpu"] for r in rows], ascending=False))
        return SweepResult(rows, skipped, stats)
    if skipped:
        raise SweepError(f"sweep_agg: no results for any parallel configuration. Last exception: {skipped[-1][1]}",
                         "RuntimeError")  # fmt: skip
    if not saw_model_fit:
        raise SweepError("sweep_agg: no results — model does not fit in GPU memory for any parallel config.",
                         "InsufficientMemoryError")  # fmt: skip
    if not saw_memory_fit:
        raise SweepError("sweep_agg: no results — requested batch_size exceeds KV cache capacity for all configs.",
                         "KVCacheCapacityError")  # fmt: skip
    raise SweepError("sweep_agg: no parallel configuration met TTFT/TPOT or request-latency constraints.",
                     "NoFeasibleConfigError")  # fmt: skip


def _drop_duplicates(rows: List[dict], columns: Sequence[str]) -> List[dict]:
    """``drop_duplicates(subset=columns, keep="first", ignore_index=True)``."""
    seen = set()
    out = []
    for r in rows:
        key = tuple(r[c] for c in columns)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


# ---- disagg (search.md 3) ------------------------------------------------------------------------


class WorkerRows(NamedTuple):
    rows: List[dict]  # ColumnsStatic records (rounded), in (layout, batch) order
    skipped: List[Tuple[str, str]]


def disagg_workers(ctx: StepContext, model: str, tuples: Sequence[Parallel6], role: str, batches: Sequence[int],
                   isl: int, osl: int, prefix: int, fmha_label: Optional[str] = None,
                   accepted: float = 0.0, images: ImageOptions = NO_IMAGES) -> WorkerRows:  # fmt: skip
    """``_get_disagg_worker_candidates`` (sweep:541-635): per layout, per batch
    size ascending, the static worker row (rounded) until the first OOM; a
    layout that raises keeps the rows it already gave. ``fmha_label``
    replaces the worker's FMHA label (the decode role's checkpoint label,
    search.md 3.2). ``accepted`` > 0: a decode row is the MTP-projected one
    (options.md 2.4, role 'decode'); a prefill row is never projected.
    ``images``: a prefill row runs the encoder, a decode row reads the image
    tokens (options.md 4.9). SweepError when no row at all."""
    mode = "static_ctx" if role == "prefill" else "static_gen"
    rows: List[dict] = []
    skipped: List[Tuple[str, str]] = []
    all_oom = True
    for t in tuples:
        try:
            w = worker(ctx, _layout(ctx, t), "context" if role == "prefill" else "generation", images)
            for b in batches:
                row, oom = static_worker_row(w, mode, b, isl, osl, prefix)
                if oom:
                    break
                all_oom = False
                if role != "prefill":
                    row = project_decode(row, accepted)
                row["model"] = model
                if fmha_label is not None:
                    row["fmha"] = fmha_label
                rows.append(row)
        except Exception as exc:  # the spec's per-configuration ``except Exception``
            skipped.append((_label(t), str(exc)))
            continue
    if not rows:
        if skipped:
            raise SweepError(f"sweep_disagg/{role}: no results for any parallel config. "
                             f"Last exception: {skipped[-1][1]}", "RuntimeError")  # fmt: skip
        if all_oom:
            raise SweepError(f"sweep_disagg/{role}: no results — model does not fit in GPU memory for any parallel "
                             "config.", "InsufficientMemoryError")  # fmt: skip
        raise SweepError(f"sweep_disagg/{role}: no parallel configuration met TTFT/TPOT or request-latency "
                         "constraints.", "NoFeasibleConfigError")  # fmt: skip
    return WorkerRows(rows, skipped)


def match_workers(p_seq: float, p_gpus: int, d_seq: float, d_gpus: int, sizes: frozenset,
                  p_workers: int = MAX_PREFILL_WORKERS,
                  d_workers: int = MAX_DECODE_WORKERS) -> Tuple[int, int]:  # fmt: skip
    """``_match_workers`` (sweep:905-932): the (prefill, decode) worker counts
    with the largest ``min(p * np * 0.9, d * nd * 0.92) / n`` over the
    deployments whose GPU count ``n`` is a member of ``sizes``; the first
    strict improvement in (decode, prefill) order; (-1, -1) if none."""
    best = 0.0
    answer = (-1, -1)
    for np_, nd, n in _worker_counts(p_gpus, d_gpus, sizes, p_workers, d_workers):
        v = min(p_seq * np_ * _PREFILL_DEG, d_seq * nd * _DECODE_DEG) / n
        if v > best:
            best = v
            answer = (np_, nd)
    return answer


_WORKER_COUNTS: Dict[tuple, Tuple[Tuple[int, int, int], ...]] = {}


def _worker_counts(p_gpus: int, d_gpus: int, sizes: frozenset, p_workers: int,
                   d_workers: int) -> Tuple[Tuple[int, int, int], ...]:  # fmt: skip
    """The ``(prefill workers, decode workers, GPUs)`` `match_workers` weighs,
    in its (decode, prefill) order: those whose GPU count is a deployment
    size. They depend on the two workers' GPU counts only, so a search lists
    them once per pair instead of walking 32 x 32 counts per rate."""
    key = (p_gpus, d_gpus, sizes, p_workers, d_workers)
    counts = _WORKER_COUNTS.get(key)
    if counts is None:
        counts = tuple(
            (np_, nd, p_gpus * np_ + d_gpus * nd)
            for nd in range(1, d_workers + 1)
            for np_ in range(1, p_workers + 1)
            if not sizes or p_gpus * np_ + d_gpus * nd in sizes
        )
        if len(_WORKER_COUNTS) >= 4096:
            _WORKER_COUNTS.clear()
        _WORKER_COUNTS[key] = counts
    return counts


def _deployment_rate(p: dict, np_: int, d: dict, nd: int) -> Tuple[float, int, float]:
    """(seq/s, GPUs, tokens/s/gpu) of ``np_`` prefill and ``nd`` decode
    workers: what `rate_match` writes and the per-category pick compares."""
    seq_s = min(p["seq/s"] * np_ * _PREFILL_DEG, d["seq/s"] * nd * _DECODE_DEG)
    num_total_gpus = p["pp"] * p["tp"] * p["dp"] * np_ + d["pp"] * d["tp"] * d["dp"] * nd
    tokens_s_gpu = seq_s * p["osl"] / num_total_gpus if num_total_gpus > 0 else 0.0
    return seq_s, num_total_gpus, tokens_s_gpu


def rate_match(p: dict, np_: int, d: dict, nd: int) -> dict:
    """``_rate_match_dict`` (sweep:97-205): one deployment row (unrounded)."""
    osl = p["osl"]
    seq_s = min(p["seq/s"] * np_ * _PREFILL_DEG, d["seq/s"] * nd * _DECODE_DEG)
    prefill_gpus = p["pp"] * p["tp"] * p["dp"]
    decode_gpus = d["pp"] * d["tp"] * d["dp"]
    num_total_gpus = prefill_gpus * np_ + decode_gpus * nd
    seq_s_gpu = seq_s / num_total_gpus if num_total_gpus > 0 else 0.0
    tokens_s = seq_s * osl
    tokens_s_gpu = tokens_s / num_total_gpus if num_total_gpus > 0 else 0.0
    encoder_latency = float(p.get("encoder_latency", 0.0))
    encoder_memory = float(p.get("encoder_memory", 0.0))
    request_latency = p["ttft"] + d["tpot"] * max(osl - 1, 0)
    ttft = p["ttft"]
    tpot = d["tpot"]
    decode_time = tpot * max(osl - 1, 0)
    total_time = ttft + decode_time
    prefill_power = p.get("power_w", 0.0)
    decode_power = d.get("power_w", 0.0)
    power = (prefill_power * ttft + decode_power * decode_time) / total_time if total_time > 0 else 0.0
    row = {
        "model": p["model"], "isl": p["isl"], "osl": osl, "prefix": p["prefix"],
        "concurrency": d["concurrency"] * nd, "request_rate": seq_s,
        "(p)bs": p["bs"], "(p)global_bs": p["global_bs"], "(p)workers": np_,
        "(d)bs": d["bs"], "(d)global_bs": d["global_bs"], "(d)workers": nd,
        "ttft": ttft, "tpot": tpot, "request_latency": request_latency, "encoder_latency": encoder_latency,
        "seq/s": seq_s, "seq/s/gpu": seq_s_gpu, "tokens/s": tokens_s, "tokens/s/gpu": tokens_s_gpu,
        "tokens/s/user": d["tokens/s/user"], "(p)seq/s/worker": p["seq/s"], "(d)seq/s/worker": d["seq/s"],
        "num_total_gpus": num_total_gpus,
    }  # fmt: skip
    for side, w in (("(p)", p), ("(d)", d)):
        row.update({side + k: w[k] for k in ("tp", "pp", "dp", "moe_tp", "moe_ep")})
        if side == "(p)":
            row["(p)cp"] = w.get("cp", 1)
        row.update({side + k: w[k] for k in ("parallel", "gemm", "kvcache", "fmha", "moe", "comm", "memory")})
        row.update({side + k: w.get(k, "") for k in ("backend", "version", "system")})
    row.update({"(e)workers": 0, "(e)tp": 0, "(e)pp": 0, "(e)parallel": "", "(e)memory": encoder_memory,
                "power_w": power})  # fmt: skip
    return {c: row[c] for c in COLUMNS_DISAGG}


def sweep_disagg(ctx: StepContext, model: str, prefill_tuples: Sequence[Parallel6],
                 decode_tuples: Sequence[Parallel6], isl: int, osl: int, prefix: int,
                 limits: Sequence[Tuple[float, float]], sizes: Sequence[int], require_same_tp: bool,
                 decode_fmha_label: Optional[str] = None, accepted: float = 0.0,
                 images: ImageOptions = NO_IMAGES, decode_ctx: Optional[StepContext] = None) -> SweepResult:  # fmt: skip
    """``sweep_disagg`` (sweep:739-965) with the Task's defaults (search.md 3),
    per (TTFT, TPOT) limit of ``limits`` (`search_limits`);
    ``accepted``: the MTP acceptance projecting the decode rows (module doc);
    ``images``: both roles' (the prefill batch list reads the text isl);
    ``decode_ctx``: the decode workers' system's context (experiments.md
    1.4; None: ``ctx``)."""
    prefill_batches = list(range(1, max(PREFILL_MAX_BATCH_SIZE * isl, isl) // isl + 1))
    decode_batches = [b for b in DECODE_BATCH_SCHEDULE if b <= DECODE_MAX_NUM_TOKENS]
    prefill = disagg_workers(ctx, model, prefill_tuples, "prefill", prefill_batches, isl, osl, prefix,
                             images=images)  # fmt: skip
    decode = disagg_workers(decode_ctx or ctx, model, decode_tuples, "decode", decode_batches, isl, osl, prefix,
                            decode_fmha_label, accepted, images)  # fmt: skip
    stats = {"prefill_rows": len(prefill.rows), "decode_rows": len(decode.rows), "t_with_result": 0,
             "rows_before_dedupe": 0}  # fmt: skip
    skipped = [("prefill " + a, b) for a, b in prefill.skipped] + [("decode " + a, b) for a, b in decode.skipped]
    size_set = frozenset(sizes)
    memo: Dict[tuple, Tuple[int, int]] = {}

    # Step 1 depends on the TTFT limit only: corrected ttft, strict TTFT filter,
    # stable sort [seq/s/gpu desc, global_bs asc], head(32).
    corrected = [dict(p, ttft=p["ttft"] * _TTFT_CORRECTION) for p in prefill.rows]
    by_ttft: Dict[float, List[dict]] = {}

    results: List[dict] = []
    for ttft, tpot in limits:
        p_cands = by_ttft.get(ttft)
        if p_cands is None:
            p_cands = [p for p in corrected if p["ttft"] < ttft]
            p_cands = take(p_cands, stable_indexer(p_cands, [("seq/s/gpu", False), ("global_bs", True)]))
            p_cands = by_ttft[ttft] = p_cands[:_MAX_PREFILL_CANDIDATES]
        if not p_cands:
            continue
        d_cands = [d for d in decode.rows
                   if d["tpot"] < tpot * _DECODE_FILTER_RATIO_MAX and d["tpot"] > tpot * _DECODE_FILTER_RATIO_MIN]
        if not d_cands:
            continue
        best_rows: List[dict] = []
        for _key, positions in group_keys(d_cands, "parallel"):
            group = take(d_cands, positions)
            group = take(group, sort_indexer([d["seq/s/gpu"] for d in group], ascending=False))
            group = group[:_MAX_DECODE_WORKERS_PER_CATEGORY]
            # The category's row: max by (tokens/s/gpu, -GPUs), the first of
            # equals (Python's max); only the winner's row is built.
            best = None
            best_key = None
            for d in group:
                d_seq = float(d["seq/s"])
                d_gpus = d["num_total_gpus"]
                for p in p_cands:
                    if require_same_tp and p["tp"] != d["tp"]:
                        continue
                    key = (float(p["seq/s"]), p["num_total_gpus"], d_seq, d_gpus)
                    match = memo.get(key)
                    if match is None:
                        match = memo[key] = match_workers(key[0], key[1], d_seq, d_gpus, size_set)
                    np_, nd = match
                    if np_ == -1 or nd == -1:
                        continue
                    _, gpus, tokens_s_gpu = _deployment_rate(p, np_, d, nd)
                    rank = (tokens_s_gpu, -gpus)
                    if best is None or rank > best_key:
                        best, best_key = (p, np_, d, nd), rank
            if best is not None:
                best_rows.append(rate_match(*best))
        if not best_rows:
            continue
        frame = [round_row(r) for r in best_rows]
        frame = take(frame, sort_indexer([r["tokens/s/gpu"] for r in frame], ascending=False))[:_DISAGG_TOP_K]
        stats["t_with_result"] += 1
        stats["rows_before_dedupe"] += len(frame)
        results.extend(frame)
    if not results:
        return SweepResult([], skipped, stats)
    rows = _drop_duplicates(results, COLUMNS_DISAGG)
    rows = take(rows, sort_indexer([r["tokens/s/gpu"] for r in rows], ascending=False))
    return SweepResult(rows, skipped, stats)
