"""Entry points of the deployment search (``cli default``, docs/spec/search.md).

Plain Python::

    search_default(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, *, top_n=5, strict_sla=False,
                   options=None)
    search_agg(...same arguments...)
    search_disagg(...same arguments...)

``db`` is 'system/backend/version' (a shorter form takes the backend /
version keywords, as the other Python entry points do). `search_agg` /
`search_disagg` return a pyarrow Table of the mode's candidates in the
spec's order (``tokens/s/gpu`` descending, numpy's introsort on ties) with
SQL-style column names, ``pareto`` (the row is on the Pareto front) and
``best_rank`` (1..top_n for the best configs, else NULL); `search_default`
one row per mode (agg, disagg): whether it is the chosen one, its best
cluster rate, the rank-1 config and the candidate count, or the reason the
mode has none.

`run_search` returns everything with the spec's own column names (the
candidates, Pareto-front and best-config frames of each mode, in the spec's
row order, ``tokens/s/gpu_cluster`` appended to the last two), which is
what the goldens compare against.

The ``*_table(settings, *args)`` forms are the bridge's calling convention
(``py_engine_step``'s): the session's settings and the eight SQL arguments
``(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms)``, ``top_n``
and ``strict_sla`` from the settings ``aic.top_n`` (default 5) and
``aic.strict_sla`` (default false); a NULL argument gives no rows. The
Rust bridge registers a Python table function with the output columns of a
Rust one (``python_table_function(name, like, func)``); these are not
registered in SQL by this package yet (``_session.register``).

A search on one GPU has no disagg experiment (the spec builds it for
``total_gpus >= 2`` only): `search_default` then has the agg row alone and
`search_disagg` raises.

MTP speculative decoding (docs/spec/options.md 2, ``cli_default(...,
nextn=..., nextn_accepted=...)``): ``options`` takes the estimates' MTP
options, ``{"nextn": 2, "nextn_accepted": 1.4}`` (``nextn`` an integer >= 0
or 'auto', the checkpoint's ``num_nextn_predict_layers``; ``nextn_accepted``
required within ``[0, nextn]`` once the depth is > 0, ignored at depth 0);
the table forms read the settings ``aic.nextn`` and ``aic.nextn_accepted``
('' = unset). They are checked first, with the estimates' texts ('auto' once
the checkpoint has resolved it), before the arguments -- in the table forms
even before a NULL argument gives no rows. At a depth > 0 every candidate
is priced at that depth (the search's StepContext is the one of the resolved
depth: verification iterations, ``nextn + 1`` tokens per request and step,
activations times ``nextn + 1``), each agg point is projected over the
accepted tokens before the keep test (``tpot <= t``, ``ttft <= target`` on
the projected, 3-decimal values) and each decode worker row before the
matching; prefill rows are not projected (options.md 2.4, 2.5).

TRT-LLM's KV-cache knobs (options.md 3.2, ``cli_default(...,
free_gpu_memory_fraction=..., max_seq_len=...)``): ``options`` also takes
``max_seq_len`` and ``free_gpu_memory_fraction`` (settings
``aic.max_seq_len``, ``aic.free_gpu_memory_fraction``), checked as the
estimates check them and given to every agg point, where a point over the KV
budget ends its layout's budget loop like an OOM; vLLM, SGLang and the
disagg sweep ignore them, as the spec does. ``enable_chunked_prefill`` (the
CLI's ``--enable-chunked-prefill``, setting ``aic.enable_chunked_prefill``)
walks the agg budgets in steps of 512 instead of multiples of isl
(options.md 3.3). Images (``image_height``, ``image_width``, ``num_images``,
``enable_encoder_dp``; settings ``aic.image_*``, ``aic.num_images``,
``aic.enable_encoder_dp``) reach every agg point and both disagg roles as
``cli_default``'s do (options.md 4.9): the agg budgets, guards and balance
skip and the prefill batch list read the text isl, every priced point the
isl with the image tokens; agg points and prefill workers run the encoder.
The quantisation overrides of the estimates are refused: ``cli_default``
has none. ``request_latency_ms`` (setting ``aic.request_latency``) is
``--request-latency`` (docs/spec/experiments.md 3): both sweeps run the
(TTFT, TPOT) pairs of `search_limits` instead of the TPOT list, the front
minimises ``request_latency`` and the best configs are those within the
target, by cluster rate, then request latency.
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import pyarrow as pa

from ..step.api import _int_arg, _settings
from ..step.engine import DeploymentRefused, resolve_nextn, step_context
from ..step.options import (
    IMAGE_OPTIONS,
    MTP_OPTIONS,
    NO_OVERRIDES,
    Options,
    QuantOverrides,
    parse_options,
    settings_options,
)
from .pick import CLUSTER, best_configs, cluster_rate, pareto_front, with_cluster
from .sorts import sort_indexer, stable_indexer
from ..kernels.system import StepSystem
from .space import (
    ParallelLists,
    agg_lists,
    deployment_sizes,
    disagg_lists,
    enumerate_parallel,
    search_limits,
)
from ..serving.api import decode_database_text
from .sweep import SweepError, sweep_agg, sweep_disagg

__all__ = [
    "AGG_TABLE_SCHEMA",
    "DISAGG_TABLE_SCHEMA",
    "DEFAULT_TABLE_SCHEMA",
    "ModeResult",
    "SearchResult",
    "run_search",
    "search_agg",
    "search_disagg",
    "search_default",
    "search_agg_table",
    "search_disagg_table",
    "search_default_table",
    "search_recommend_table",
    "run_experiments",
    "run_recommend",
    "Recommendation",
    "ExperimentsResult",
    "RECOMMEND_TABLE_SCHEMA",
]

_F, _I, _S, _B = pa.float64(), pa.int64(), pa.utf8(), pa.bool_()

# SQL name -> (spec column, type)
_DB = "__db__"  # the database, system/backend/version, as the Rust functions report it

_AGG_COLUMNS = [
    ("model", "model", _S), ("db", _DB, _S), ("isl", "isl", _I), ("osl", "osl", _I), ("prefix", "prefix", _I),
    ("concurrency", "concurrency", _I), ("request_rate", "request_rate", _F), ("bs", "bs", _I),
    ("global_bs", "global_bs", _I), ("ttft_ms", "ttft", _F), ("tpot_ms", "tpot", _F),
    ("request_latency_ms", "request_latency", _F), ("encoder_latency_ms", "encoder_latency", _F),
    ("encoder_memory_gib", "encoder_memory", _F), ("seq_per_s", "seq/s", _F), ("seq_per_s_per_gpu", "seq/s/gpu", _F),
    ("tokens_per_s", "tokens/s", _F), ("tokens_per_s_per_gpu", "tokens/s/gpu", _F),
    ("tokens_per_s_per_user", "tokens/s/user", _F), ("tokens_per_s_per_gpu_cluster", CLUSTER, _F),
    ("num_total_gpus", "num_total_gpus", _I), ("tp", "tp", _I), ("pp", "pp", _I), ("dp", "dp", _I),
    ("moe_tp", "moe_tp", _I), ("moe_ep", "moe_ep", _I), ("cp", "cp", _I), ("parallel", "parallel", _S),
    ("gemm", "gemm", _S), ("kvcache", "kvcache", _S), ("fmha", "fmha", _S), ("moe", "moe", _S), ("comm", "comm", _S),
    ("memory_gib", "memory", _F), ("balance_score", "balance_score", _F), ("num_ctx_reqs", "num_ctx_reqs", _F),
    ("num_gen_reqs", "num_gen_reqs", _F), ("num_tokens", "num_tokens", _F), ("ctx_tokens", "ctx_tokens", _I),
    ("gen_tokens", "gen_tokens", _F), ("system", "system", _S), ("backend", "backend", _S),
    ("version", "version", _S),
]  # fmt: skip


def _side_columns(prefix: str, tag: str):
    cols = [(prefix + "parallel", tag + "parallel", _S)]
    cols += [(prefix + n, tag + n, _I) for n in ("tp", "pp", "dp", "cp", "moe_tp", "moe_ep", "bs", "global_bs",
                                                 "workers")]  # fmt: skip
    cols += [(prefix + "seq_per_s_per_worker", tag + "seq/s/worker", _F), (prefix + "memory_gib", tag + "memory", _F)]
    cols += [(prefix + n, tag + n, _S) for n in ("gemm", "kvcache", "fmha", "moe")]
    return cols


_DISAGG_COLUMNS = [
    ("model", "model", _S), ("db", _DB, _S), ("isl", "isl", _I), ("osl", "osl", _I), ("prefix", "prefix", _I),
    ("concurrency", "concurrency", _I), ("request_rate", "request_rate", _F), ("ttft_ms", "ttft", _F),
    ("tpot_ms", "tpot", _F), ("request_latency_ms", "request_latency", _F),
    ("encoder_latency_ms", "encoder_latency", _F), ("encoder_memory_gib", "(e)memory", _F), ("seq_per_s", "seq/s", _F),
    ("seq_per_s_per_gpu", "seq/s/gpu", _F), ("tokens_per_s", "tokens/s", _F),
    ("tokens_per_s_per_gpu", "tokens/s/gpu", _F), ("tokens_per_s_per_user", "tokens/s/user", _F),
    ("tokens_per_s_per_gpu_cluster", CLUSTER, _F), ("num_total_gpus", "num_total_gpus", _I),
    *_side_columns("prefill_", "(p)"), *_side_columns("decode_", "(d)"),
    ("comm", "(p)comm", _S), ("system", "(p)system", _S), ("backend", "(p)backend", _S),
    ("version", "(p)version", _S), ("decode_system", "(d)system", _S), ("decode_version", "(d)version", _S),
]  # fmt: skip

_MARKS = [pa.field("pareto", _B, nullable=False), pa.field("best_rank", _I)]
AGG_TABLE_SCHEMA = pa.schema([pa.field(n, t) for n, _c, t in _AGG_COLUMNS] + _MARKS)
DISAGG_TABLE_SCHEMA = pa.schema([pa.field(n, t) for n, _c, t in _DISAGG_COLUMNS] + _MARKS)
DEFAULT_TABLE_SCHEMA = pa.schema([
    pa.field("model", _S, nullable=False), pa.field("db", _S, nullable=False),
    pa.field("mode", _S, nullable=False), pa.field("experiment", _S, nullable=False),
    pa.field("chosen", _B, nullable=False),
    pa.field("candidates", _I, nullable=False), pa.field("best_tokens_per_s_per_gpu_cluster", _F),
    pa.field("parallel", _S), pa.field("bs", _I), pa.field("prefill_parallel", _S), pa.field("prefill_workers", _I),
    pa.field("decode_parallel", _S), pa.field("decode_bs", _I), pa.field("decode_workers", _I),
    pa.field("ttft_ms", _F), pa.field("tpot_ms", _F), pa.field("tokens_per_s_per_user", _F),
    pa.field("num_total_gpus", _I), pa.field("memory_gib", _F), pa.field("reason", _S),
])  # fmt: skip


class ModeResult(NamedTuple):
    """One experiment (serving mode): the spec's three frames (row dicts with
    the spec's column names), the positions of the Pareto and best rows in
    ``candidates``, the best cluster rate, or why there is nothing."""

    mode: str
    candidates: List[dict]
    pareto_fronts: List[dict]
    best_configs: List[dict]
    pareto_index: List[int]
    best_index: List[int]
    cluster: List[float]  # tokens/s/gpu_cluster of every candidate
    best_throughput: float
    reason: Optional[str]
    skipped: list  # (layout, message) of the layouts that raised
    stats: Dict[str, int]

    @property
    def ok(self) -> bool:
        return self.reason is None


class SearchResult(NamedTuple):
    modes: Dict[str, ModeResult]  # 'agg', 'disagg' (task order)
    chosen_exp: str  # 'agg', 'disagg' or 'none'
    best_throughputs: Dict[str, float]  # the modes that produced candidates


def _failed(mode: str, reason: str, skipped=(), stats=None) -> ModeResult:
    return ModeResult(mode, [], [], [], [], [], [], 0.0, reason, list(skipped), dict(stats or {}))


def _pick(mode: str, rows: List[dict], total_gpus: int, tpot: float, top_n: int, strict_sla: bool,
          skipped, stats, request_latency: Optional[float] = None) -> ModeResult:  # fmt: skip
    """``process_experiment_result`` -> ``pick_default`` (search.md 4, 5);
    with a request-latency target (experiments.md 3.5) the SLA, the front's
    x (minimised) and the best configs' constraint are ``request_latency``."""
    by_latency = request_latency is not None and request_latency > 0
    positions = list(range(len(rows)))
    if strict_sla:
        if by_latency:
            positions = [i for i in positions if rows[i]["request_latency"] <= request_latency]
        else:
            positions = [i for i in positions if rows[i]["tpot"] <= tpot]
    frame = with_cluster([rows[i] for i in positions], total_gpus)
    group = "(d)parallel" if mode == "disagg" else "parallel"
    if by_latency:
        front = [positions[k] for k in pareto_front(frame, "request_latency", maximize_x=False)]
        best = [positions[k] for k in best_configs(frame, total_gpus, request_latency, top_n, group,
                                                   "request_latency", ("request_latency", True))]  # fmt: skip
    else:
        front = [positions[k] for k in pareto_front(frame)]
        best = [positions[k] for k in best_configs(frame, total_gpus, tpot, top_n, group)]
    by_pos = {p: frame[k] for k, p in enumerate(positions)}
    best_rows = [by_pos[i] for i in best]
    throughput = float(best_rows[0][CLUSTER]) if best_rows else 0.0
    cluster = [cluster_rate(r, total_gpus) for r in rows]
    return ModeResult(mode, rows, [by_pos[i] for i in front], best_rows, front, best, cluster, throughput, None,
                      list(skipped), dict(stats))  # fmt: skip


def _replicas(target: float, load) -> int:
    """``np.ceil(target / load).astype(int).clip(lower=1)``: a non-finite
    quotient casts to the smallest int64 on the spec's platform, then clips."""
    q = target / load if load else math.inf
    r = math.ceil(q) if math.isfinite(q) and abs(q) < 9.2e18 else -(1 << 63)
    return max(1, r)


def _pick_load(mode: str, rows: List[dict], tpot: float, top_n: int, skipped, stats,
               request_latency: Optional[float], load: Tuple[str, float]) -> ModeResult:  # fmt: skip
    """``pick_load_match`` (experiments.md 4.5; pick:304-387,
    pareto:649-790): tokens/s/gpu_cluster = tokens/s/gpu, the usual front,
    and per layout the config needing the fewest GPUs for ``load``, ranked by
    GPUs then tokens/s/gpu; best throughput ``1 / GPUs`` of rank 1."""
    by_latency = request_latency is not None and request_latency > 0
    constraint, value = ("request_latency", request_latency) if by_latency else ("tpot", tpot)
    frame = [dict(r, **{CLUSTER: r["tokens/s/gpu"]}) for r in rows]
    x = "request_latency" if by_latency else "tokens/s/user"
    front = pareto_front(frame, x, maximize_x=not by_latency)
    cands = [i for i, r in enumerate(frame) if r[constraint] <= value]
    exceeded = not cands
    if exceeded:
        cands = list(range(len(frame)))
    kind, target = load
    col = "seq/s" if kind == "request_rate" else "concurrency"
    out = {}
    for i in cands:
        r = frame[i]
        replicas = _replicas(target, r[col])
        out[i] = dict(r, replicas_needed=replicas, total_gpus_needed=replicas * r["num_total_gpus"])
    group = "(d)parallel" if mode == "disagg" else "parallel"
    key = constraint if exceeded else "total_gpus_needed"
    best_of: Dict[str, int] = {}
    for i in cands:
        v = out[i][key]
        if isinstance(v, float) and math.isnan(v):
            continue
        g = out[i][group]
        if g not in best_of or v < out[best_of[g]][key]:
            best_of[g] = i
    picked = [best_of[g] for g in sorted(best_of)]
    if exceeded:
        order = sort_indexer([out[i][constraint] for i in picked])
    else:
        order = stable_indexer([out[i] for i in picked], [("total_gpus_needed", True), ("tokens/s/gpu", False)])
    best_idx = [picked[k] for k in order][:top_n]
    best_rows = [out[i] for i in best_idx]
    throughput = (1.0 / best_rows[0]["total_gpus_needed"]) if best_rows and best_rows[0]["total_gpus_needed"] > 0 \
        else 0.0
    cluster = [r[CLUSTER] for r in frame]
    return ModeResult(mode, rows, [frame[k] for k in front], best_rows, front, best_idx, cluster, throughput, None,
                      list(skipped), dict(stats))  # fmt: skip


class Recommendation(NamedTuple):
    """`run_recommend`'s answer: the budgets tried (the last answered), its
    search result (load-match picks; ``chosen_exp`` the experiment needing
    fewer GPUs, agg on a tie)."""

    budgets: List[int]
    result: SearchResult


def run_recommend(model: str, db: str, *, target_request_rate: Optional[float] = None,
                  target_concurrency: Optional[float] = None, isl: int = 4000, osl: int = 1000, prefix: int = 0,
                  ttft_ms: float = 2000.0, tpot_ms: float = 30.0, top_n: int = 5, data=None,
                  **kw) -> Recommendation:  # fmt: skip
    """``cli_recommend`` (experiments.md 4) in SILICON mode: budgets of one
    node's GPUs, doubled up to 64 while an experiment found nothing because
    nothing fitted in GPU memory; each budget's search as `run_search` with
    its ``load``."""
    if (target_request_rate is None) == (target_concurrency is None):
        raise ValueError("Exactly one of target_request_rate or target_concurrency must be provided.")
    if _asks_for_every_backend(db, kw.get("backend", "")):
        return _recommend_every_backend(model, db, target_request_rate, target_concurrency, isl, osl, prefix,
                                        ttft_ms, tpot_ms, top_n, data, kw)  # fmt: skip
    kind, target = (("request_rate", target_request_rate) if target_request_rate is not None
                    else ("concurrency", target_concurrency))  # fmt: skip
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not (math.isfinite(target) and target > 0):
        raise ValueError(f"Load target must be a positive finite number, got {target}.")
    s = _settings({"backend": kw.get("backend", ""), "version": kw.get("version", "latest")}, data)
    database = s.tree.resolve(db, s.backend, s.version)
    doc = s.tree.read_yaml(s.tree.system_yaml(database.system)) or {}
    node = int(StepSystem(database.system, doc, s.tree.system_yaml(database.system)).num_gpus_per_node)
    budgets = [node]
    while budgets[-1] * 2 <= 64:
        budgets.append(budgets[-1] * 2)
    tried: List[int] = []
    for k, budget in enumerate(budgets):
        tried.append(budget)
        res = run_search(model, db, budget, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n,
                         load=(kind, float(target)), node_gpus=node, data=data, **kw)  # fmt: skip
        retriable = any(not r.ok and str(r.reason).startswith(("InsufficientMemoryError", "KVCacheCapacityError"))
                        for r in res.modes.values())  # fmt: skip
        if not retriable or k == len(budgets) - 1:
            # max(1 / GPUs) over a dict the spec's thread pool fills in completion order: a tie goes to
            # the experiment that finished first, a race the disagg sweep (far fewer points) won in
            # every recommend golden, so disagg here (as on the Rust path).
            t = res.best_throughputs
            if "agg" in t and "disagg" in t:
                res = res._replace(chosen_exp="disagg" if t["disagg"] >= t["agg"] else "agg")
            return Recommendation(tried, res)
    raise AssertionError("the last budget returns")


class AutoRecommendation(NamedTuple):
    """`run_recommend` under backend 'auto': the budgets tried and the last
    one's experiments (merged above two by tokens/s/gpu)."""

    budgets: List[int]
    result: ExperimentsResult


def _recommend_every_backend(model, db, rate, concurrency, isl, osl, prefix, ttft_ms, tpot_ms, top_n, data,
                             kw) -> AutoRecommendation:  # fmt: skip
    """``cli_recommend(backend="auto")`` (experiments.md 4.3, 4.6): every
    backend's experiments per budget, escalating while one is out of memory."""
    kind, target = ("request_rate", rate) if rate is not None else ("concurrency", concurrency)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not (math.isfinite(target) and target > 0):
        raise ValueError(f"Load target must be a positive finite number, got {target}.")
    s = _settings({"backend": "vllm", "version": "latest"}, data)
    system = str(db).split("/")[0]
    node = int(StepSystem(system, s.tree.read_yaml(s.tree.system_yaml(system)) or {}).num_gpus_per_node)
    budgets = [node]
    while budgets[-1] * 2 <= 64:
        budgets.append(budgets[-1] * 2)
    kw = {k: v for k, v in kw.items() if k != "strict_sla"}
    tried: List[int] = []
    for k, budget in enumerate(budgets):
        tried.append(budget)
        # the tasks are built at one node's budget: disagg experiments from 2 GPUs a node
        res = run_experiments(model, db, budget, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n,
                              only=None if node >= 2 else "agg", load=(kind, float(target)), node_gpus=node,
                              data=data, **kw)  # fmt: skip
        retriable = any(str(e.result.reason).startswith(("InsufficientMemoryError", "KVCacheCapacityError"))
                        for e in res.experiments)  # fmt: skip
        if not retriable or k == len(budgets) - 1:
            return AutoRecommendation(tried, res)
    raise AssertionError("the last budget returns")


def _request_latency(v) -> Optional[float]:
    """A request-latency target (ms): a finite number; None (or <= 0, as the
    spec reads it) is no target."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"request_latency_ms = {v!r} must be a finite number of ms (<= 0 or None: no target)")
    return float(v) if v > 0 else None


def _positive(name: str, v) -> int:
    v = _int_arg(name, v)
    if v < 1:
        raise ValueError(f"{name} = {v} must be a positive integer")
    return v


def _target(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise ValueError(f"{name} = {v!r} must be a positive number (ms)")
    return float(v)


#: The options the searches take (`cli_default`'s): MTP, TRT-LLM's KV-cache knobs and images.
SEARCH_OPTIONS = MTP_OPTIONS + ("max_seq_len", "free_gpu_memory_fraction") + IMAGE_OPTIONS + ("decode_system",)


def _search_options(options) -> Options:
    """A search's ``options`` (a dict, `Options` or None), checked as the
    spec's ``cli_default`` checks them first: the MTP depth rule, and for a
    given depth the acceptance ('auto' waits for the checkpoint); the KV
    knobs and the images as the estimates check them. Quantisation overrides
    are refused: ``cli_default`` has none (options.md 1.1)."""
    parsed = parse_options(options)
    if parsed.quant != NO_OVERRIDES:
        given = sorted(k for k in (options if isinstance(options, dict) else {}) if k not in SEARCH_OPTIONS)
        raise ValueError(f"the searches take the options {', '.join(SEARCH_OPTIONS)} only, not "
                         f"{', '.join(given) or 'quantisation overrides'}")  # fmt: skip
    mtp = parsed.mtp
    if mtp.nextn != "auto":
        mtp.accepted_at(mtp.nextn)
    return parsed


#: The checkpoints the spec's search task runs at w4a8_mxfp4_mxfp8 experts on a
#: Blackwell-class TRT-LLM system (task_v2's ``_GPTOSS_BLACKWELL_MODELS``).
GPTOSS_BLACKWELL = frozenset({"openai/gpt-oss-120b", "openai/gpt-oss-20b"})


def search_role(tree, model: str, ctx, shared_layer: bool, nextn):
    """``ctx`` as one role of the spec's search task, whose quant resolution
    has a rule ``cli_estimate`` lacks (task_v2 ``_resolve_quant_modes``,
    experiments.md 1.5): GPT-OSS on trtllm on a system of SM >= 100 (the
    role's own) gets ``w4a8_mxfp4_mxfp8`` experts, the MoE mode not being
    given (the searches take no quant overrides)."""
    sm = ctx.kernels.system.sm_version
    if model in GPTOSS_BLACKWELL and ctx.db.backend == "trtllm" and (sm if sm is not None else -1) >= 100:
        return step_context(tree, model, ctx.db, shared_layer, QuantOverrides(moe="w4a8_mxfp4_mxfp8"), nextn)
    return ctx


def run_search(model: str, db: str, total_gpus: int, isl: int, osl: int, prefix: int = 0, ttft_ms: float = 2000.0,
               tpot_ms: float = 30.0, *, top_n: int = 5, strict_sla: bool = False,
               modes: Sequence[str] = ("agg", "disagg"),
               shared_layer: bool = True, backend: str = "", version: str = "latest",
               options: Optional[Dict[str, object]] = None, enable_chunked_prefill: bool = False,
               request_latency_ms: Optional[float] = None, load: Optional[Tuple[str, float]] = None,
               node_gpus: int = 0, data=None) -> SearchResult:  # fmt: skip
    """``cli_default`` (api:155) for one backend: the agg and disagg
    experiments (search.md 1.3; no DeepEP twins), each swept and picked.
    An experiment that finds nothing is reported with its reason; the chosen
    one is the larger best cluster rate, agg on a tie ('none' if neither).
    ``options``: the MTP options and the KV knobs (module doc);
    ``enable_chunked_prefill``: the agg sweep's budget list (module doc);
    ``request_latency_ms``: an end-to-end target (None or <= 0: none): the
    sweeps run (TTFT, TPOT) pairs and the picks rank by request latency
    (docs/spec/experiments.md 3). ``load`` ('request_rate' or
    'concurrency', the target) with ``node_gpus``: one budget step of
    `run_recommend` (experiments.md 4.4, 4.5): worker sizes the powers of
    two up to ``total_gpus``, disagg replicas at most ``node_gpus`` GPUs,
    load-match picks. ``options['decode_system']``: the disagg
    experiment's decode workers run on that system (experiments.md 1), its
    own latest version unless ``db`` or ``version`` names one."""
    parsed = _search_options(options)
    mtp, memory = parsed.mtp, parsed.memory
    if _asks_for_every_backend(db, backend):
        system = str(db).split("/")[0]
        raise ValueError(f"backend 'auto' (every backend of the system) is taken by search_default, which runs and "
                         f"names each backend's experiments; name one backend here, e.g. '{system}/vllm'")
    if not isinstance(model, str):
        raise ValueError(f"model = {model!r} is not a string")
    total_gpus = _positive("total_gpus", total_gpus)
    isl = _positive("isl", isl)
    osl = _positive("osl", osl)
    prefix = 0 if prefix is None else _int_arg("prefix", prefix)
    if not 0 <= prefix < isl:
        raise ValueError(f"prefix = {prefix} must be a non-negative integer smaller than isl = {isl} (the cached "
                         "part of the input)")
    ttft = _target("ttft_ms", ttft_ms)
    tpot = _target("tpot_ms", tpot_ms)
    top_n = _int_arg("top_n", top_n)
    if top_n < 1:
        raise ValueError(f"top_n = {top_n} must be a positive integer")
    latency = _request_latency(request_latency_ms)
    limits = search_limits(osl, ttft, latency)
    s = _settings({"backend": backend, "version": version, "on_miss": "null",
                   "shared_layer": "true" if shared_layer else "false"}, data)  # fmt: skip
    # cli_default settles the MTP options ('auto' from the checkpoint) before anything else is built
    nextn = resolve_nextn(s.tree, model, mtp.nextn)
    accepted = mtp.accepted_at(nextn)
    database = s.tree.resolve(db, s.backend, s.version)
    ctx = step_context(s.tree, model, database, s.shared_layer, None, nextn)
    spec_model = ctx.model
    be, system = database.backend, database.system
    # The decode role of the disagg experiment: its own system's database (experiments.md 1.3-1.4).
    decode_text = decode_database_text(db, database, parsed.decode_system, s.version)
    d_ctx = ctx
    if decode_text is not None and "disagg" in modes and total_gpus >= 2:
        d_database = s.tree.resolve(decode_text, s.backend, s.version)
        d_ctx = step_context(s.tree, model, d_database, s.shared_layer, None, nextn)
    # Each role's quant modes as the spec's search task resolves them.
    ctx, d_ctx = search_role(s.tree, model, ctx, s.shared_layer, nextn), search_role(s.tree, model, d_ctx,
                                                                                     s.shared_layer, nextn)
    results: Dict[str, ModeResult] = {}

    powers = [1 << i for i in range(total_gpus.bit_length()) if (1 << i) <= total_gpus]

    def sized(lists: ParallelLists) -> ParallelLists:  # _build_recommend_tasks' worker sizes
        return lists._replace(num_gpu=powers) if load is not None else lists

    def pick(mode: str, sweep) -> ModeResult:
        if load is not None:
            return _pick_load(mode, sweep.rows, tpot, top_n, sweep.skipped, sweep.stats, latency, load)
        return _pick(mode, sweep.rows, total_gpus, tpot, top_n, strict_sla, sweep.skipped, sweep.stats, latency)

    if "agg" in modes:
        lists = sized(agg_lists(spec_model.is_moe, be, system, total_gpus))
        tuples = enumerate_parallel(lists, spec_model.is_moe, be)
        try:
            sweep = sweep_agg(ctx, model, tuples, isl, osl, prefix, limits, accepted, memory,
                              bool(enable_chunked_prefill), parsed.images)  # fmt: skip
            results["agg"] = pick("agg", sweep)
        except SweepError as exc:
            results["agg"] = _failed("agg", f"{exc.kind}: {exc}")
    if "disagg" in modes and total_gpus >= 2:  # build_default_tasks: no disagg experiment below 2 GPUs
        p_lists, d_lists = disagg_lists(spec_model.is_moe, be, system, d_ctx.db.system, total_gpus)
        p_lists, d_lists = sized(p_lists), sized(d_lists)
        p_tuples = enumerate_parallel(p_lists, spec_model.is_moe, be)
        d_tuples = enumerate_parallel(d_lists, spec_model.is_moe, be)
        try:
            # The decode role keeps the checkpoint's FMHA label (Task._resolve_quant_modes).
            sweep = sweep_disagg(ctx, model, p_tuples, d_tuples, isl, osl, prefix, limits,
                                 deployment_sizes(node_gpus if load is not None else total_gpus),
                                 require_same_tp=(be == "sglang"),
                                 decode_fmha_label=d_ctx.model.quant.fmha, accepted=accepted,
                                 images=parsed.images, decode_ctx=d_ctx)  # fmt: skip
            if sweep.rows:
                results["disagg"] = pick("disagg", sweep)
            else:
                results["disagg"] = _failed("disagg", "no disaggregated deployment meets the TTFT and any "
                                            "swept TPOT", sweep.skipped, sweep.stats)  # fmt: skip
        except SweepError as exc:
            results["disagg"] = _failed("disagg", f"{exc.kind}: {exc}")
    throughputs = {m: r.best_throughput for m, r in results.items() if r.ok}
    chosen = max(throughputs, key=throughputs.get) if throughputs else "none"
    return SearchResult(results, chosen, throughputs)


# ---- --backend auto ---------------------------------------------------------------------------

#: The backends ``--backend auto`` visits, in ``BackendName``'s declaration order (experiments.md 2.1).
AUTO_BACKENDS = ("trtllm", "sglang", "vllm")


class Experiment(NamedTuple):
    """One experiment of an ``auto`` search: its name (``agg_vllm``), serving
    mode, backend, resolved database ('system/backend/version', '' when it
    did not resolve) and search (a failed one has its reason)."""

    name: str
    mode: str
    backend: str
    db: str
    result: ModeResult


class MergedPicks(NamedTuple):
    """The picks of one serving mode merged across experiments (rows of the
    experiments' frames, with ``backend``), and the rank-1 cluster rate."""

    best_configs: List[dict]
    pareto_fronts: Optional[List[dict]]
    best_throughput: float
    best_from: List[int]  # the experiment index of each merged best row
    best_at: List[Tuple[int, int]]  # (experiment, candidate position) of each merged best row
    pareto_at: List[Tuple[int, int]]  # the same for the merged front


class ExperimentsResult(NamedTuple):
    experiments: List[Experiment]
    merged: Optional[Dict[str, MergedPicks]]  # 'agg', 'disagg' when more than two experiments
    chosen_exp: str  # the spec's: 'agg' / 'disagg' merged, else an experiment's name; 'none'
    chosen: Optional[int]  # the experiment the chosen configuration comes from


def auto_backends(tree, system: str, version: str, decode_system: str = "") -> List[str]:
    """The backends an ``auto`` search keeps (experiments.md 2.2, the declared
    modes): those the system (and a decode system) has, at ``version`` when
    it is not 'latest'. ValueError when none is."""
    def has(sys_: str, b: str) -> bool:
        versions = tree.versions(sys_, b) if b in tree.backends(sys_) else []
        return bool(versions) and (version == "latest" or version in versions)

    other = decode_system.strip() if decode_system and decode_system.strip() != system else ""
    kept = [b for b in AUTO_BACKENDS if has(system, b) and (not other or has(other, b))]
    if not kept:
        raise ValueError(f"no backends available for system {system}"
                         f"{f' and decode system {other}' if other else ''}"
                         f"{'' if version == 'latest' else f' at version {version}'}; supported backends: "
                         f"{', '.join(sorted(tree.backends(system)))}")  # fmt: skip
    return kept


def run_experiments(model: str, db: str, total_gpus: int, isl: int, osl: int, prefix: int = 0,
                    ttft_ms: float = 2000.0, tpot_ms: float = 30.0, *, top_n: int = 5, strict_sla: bool = False,
                    shared_layer: bool = True, backend: str = "", version: str = "latest",
                    options: Optional[Dict[str, object]] = None, enable_chunked_prefill: bool = False,
                    request_latency_ms: Optional[float] = None, only: Optional[str] = None,
                    load: Optional[Tuple[str, float]] = None, node_gpus: int = 0,
                    data=None) -> ExperimentsResult:  # fmt: skip
    """``cli_default(backend="auto")`` (experiments.md 2): ``db`` is
    'system/auto[/version]' (or 'system' with ``backend='auto'``). Each kept
    backend's agg and (from 2 GPUs) disagg experiment, searched as
    `run_search` does; an experiment that raises or finds nothing is
    failed. With more than two experiments the picks are merged per mode
    (`MergedPicks`) and the spec's ``chosen_exp`` is 'agg' or 'disagg'.
    ``only``: that mode's experiments alone (the merge still counts every
    experiment the spec builds)."""
    parts = db.split("/")
    system = parts[0]
    named = parts[2] if len(parts) >= 3 else (version or "latest")
    s = _settings({"backend": "vllm", "version": "latest", "on_miss": "null"}, data)
    parsed = _search_options(options)
    kept = auto_backends(s.tree, system, named, parsed.decode_system)
    # The arguments are checked once, as the spec's parser checks them before any task.
    _positive("total_gpus", total_gpus), _positive("isl", isl), _positive("osl", osl)
    _target("ttft_ms", ttft_ms), _target("tpot_ms", tpot_ms)
    latency = _request_latency(request_latency_ms)
    experiments: List[Experiment] = []
    all_modes = ("agg", "disagg") if total_gpus >= 2 else ("agg",)
    modes = tuple(m for m in all_modes if only is None or m == only)
    for b in kept:
        b_db = f"{system}/{b}/{named}"
        try:
            resolved = s.tree.resolve(b_db, b, named)
            b_db = f"{resolved.system}/{resolved.backend}/{resolved.version}"
            res = run_search(model, b_db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n,
                             strict_sla=strict_sla, shared_layer=shared_layer, options=options,
                             enable_chunked_prefill=enable_chunked_prefill, request_latency_ms=request_latency_ms,
                             modes=modes, load=load, node_gpus=node_gpus, data=data)  # fmt: skip
            for mode in modes:
                r = res.modes[mode]
                if r.ok and not r.candidates:
                    r = _failed(mode, "no candidate", r.skipped, r.stats)
                experiments.append(Experiment(f"{mode}_{b}", mode, b, b_db, r))
        except (ValueError, KeyError, DeploymentRefused) as exc:  # the model cannot be priced on this backend
            for mode in modes:
                experiments.append(Experiment(f"{mode}_{b}", mode, b, b_db, _failed(mode, str(exc))))
    return _pick_experiments(experiments, top_n, latency, len(kept) * len(all_modes), later_on_tie=load is not None)


def _pick_experiments(experiments: List[Experiment], top_n: int, latency: Optional[float],
                      tasks: int, later_on_tie: bool = False) -> ExperimentsResult:  # fmt: skip
    """main:1957-1962 and cutils:99-202: no merge with two experiments or
    fewer (the highest own rank 1, the first on a tie); else per mode the
    merged best configs (single-key quicksort on the concatenation) and the
    front of the fronts; 'agg' wins a tie."""
    ok = [k for k, e in enumerate(experiments) if e.result.ok]
    if not ok:
        return ExperimentsResult(experiments, None, "none", None)
    if tasks <= 2:
        # the first maximum; under a load target the later (the spec's race, see run_recommend)
        k = max(reversed(ok) if later_on_tie else ok, key=lambda i: experiments[i].result.best_throughput)
        return ExperimentsResult(experiments, None, experiments[k].name, k)
    x, maximize = ("request_latency", False) if latency is not None else ("tokens/s/user", True)
    merged: Dict[str, MergedPicks] = {}
    for mode in ("agg", "disagg"):
        best_rows, best_at, front_rows, front_at = [], [], [], []
        for k in ok:
            e = experiments[k]
            if e.mode != mode:
                continue
            # the frames as copied, with the experiment's backend (a disagg frame gains the column at its end)
            best_rows += [dict(r, backend=e.backend) for r in e.result.best_configs]
            best_at += [(k, i) for i in e.result.best_index]
            front_rows += [dict(r, backend=e.backend) for r in e.result.pareto_fronts]
            front_at += [(k, i) for i in e.result.pareto_index]
        order = sort_indexer([r[CLUSTER] for r in best_rows], ascending=False)[:top_n]
        best = [best_rows[i] for i in order]
        front_order = pareto_front(front_rows, x, maximize_x=maximize) if front_rows else []
        front = [front_rows[i] for i in front_order] if front_rows else None
        merged[mode] = MergedPicks(best, front, float(best[0][CLUSTER]) if best else 0.0,
                                   [best_at[i][0] for i in order], [best_at[i] for i in order],
                                   [front_at[i] for i in front_order])  # fmt: skip
    chosen_mode = "disagg" if merged["disagg"].best_throughput > merged["agg"].best_throughput else "agg"
    picks = merged[chosen_mode]
    return ExperimentsResult(experiments, merged, chosen_mode, picks.best_from[0] if picks.best_from else None)


# ---- tables -----------------------------------------------------------------------------------


def _mode_table(result: ModeResult, columns, schema: pa.Schema) -> pa.Table:
    front = set(result.pareto_index)
    rank = {p: k + 1 for k, p in enumerate(result.best_index)}
    arrays = []
    for name, col, typ in columns:
        if col == CLUSTER:
            values = list(result.cluster)
        elif col == _DB:
            tag = "(p)" if "(p)system" in (result.candidates[0] if result.candidates else {}) else ""
            values = [f"{r[tag + 'system']}/{r[tag + 'backend']}/{r[tag + 'version']}" for r in result.candidates]
        else:
            values = [r.get(col, 1 if col == "(d)cp" else None) for r in result.candidates]
        if pa.types.is_floating(typ):
            values = [None if v is None else float(v) for v in values]
        elif pa.types.is_integer(typ):
            values = [None if v is None else int(v) for v in values]
        arrays.append(pa.array(values, type=typ))
    arrays.append(pa.array([i in front for i in range(len(result.candidates))], type=_B))
    arrays.append(pa.array([rank.get(i) for i in range(len(result.candidates))], type=_I))
    return pa.Table.from_arrays(arrays, schema=schema)


def search_agg(model: str, db: str, total_gpus: int, isl: int, osl: int, prefix: int = 0, ttft_ms: float = 2000.0,
               tpot_ms: float = 30.0, *, top_n: int = 5, strict_sla: bool = False, **kw) -> pa.Table:  # fmt: skip
    """The agg candidates of ``cli default`` (`AGG_TABLE_SCHEMA`), in the
    spec's order; ValueError with the reason if the sweep found nothing.
    ``kw``: `run_search`'s keywords (``options``: the MTP options)."""
    if _asks_for_every_backend(db, kw.get("backend", "")):
        return _every_backend_table("agg", model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n,
                                    strict_sla, kw)  # fmt: skip
    res = run_search(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n, strict_sla=strict_sla,
                     modes=("agg",), **kw)  # fmt: skip
    mode = res.modes["agg"]
    if not mode.ok:
        raise ValueError(mode.reason)
    return _mode_table(mode, _AGG_COLUMNS, AGG_TABLE_SCHEMA)


def search_disagg(model: str, db: str, total_gpus: int, isl: int, osl: int, prefix: int = 0,
                  ttft_ms: float = 2000.0, tpot_ms: float = 30.0, *, top_n: int = 5, strict_sla: bool = False,
                  **kw) -> pa.Table:  # fmt: skip
    """The disagg candidates of ``cli default`` (`DISAGG_TABLE_SCHEMA`), in the
    spec's order; ValueError with the reason if the sweep found nothing."""
    if _asks_for_every_backend(db, kw.get("backend", "")):
        return _every_backend_table("disagg", model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n,
                                    strict_sla, kw)  # fmt: skip
    res = run_search(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n, strict_sla=strict_sla,
                     modes=("disagg",), **kw)  # fmt: skip
    mode = res.modes.get("disagg")
    if mode is None:
        raise ValueError(f"search_disagg: total_gpus = {total_gpus}: a disaggregated deployment needs at least 2 GPUs")
    if not mode.ok:
        raise ValueError(mode.reason)
    return _mode_table(mode, _DISAGG_COLUMNS, DISAGG_TABLE_SCHEMA)


def _every_backend_table(mode: str, model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n, strict_sla,
                         kw) -> pa.Table:  # fmt: skip
    """``search_agg`` / ``search_disagg`` under backend 'auto': every backend's
    candidates of ``mode``, experiment after experiment, flagged by the merged
    picks when the spec merges (above two experiments), else by their own."""
    res = run_experiments(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n,
                          strict_sla=strict_sla, only=mode, **kw)  # fmt: skip
    columns, schema = (_AGG_COLUMNS, AGG_TABLE_SCHEMA) if mode == "agg" else (_DISAGG_COLUMNS, DISAGG_TABLE_SCHEMA)
    picks = res.merged.get(mode) if res.merged else None
    tables = []
    for k, e in enumerate(res.experiments):
        if e.mode != mode or not e.result.ok:
            continue
        r = e.result
        if picks is not None:
            r = r._replace(pareto_index=[i for x, i in picks.pareto_at if x == k],
                           best_index=[i for x, i in picks.best_at if x == k])  # fmt: skip
            rank = {i: n + 1 for n, (x, i) in enumerate(picks.best_at) if x == k}
            table = _mode_table(r, columns, schema)
            ranks = [rank.get(i) for i in range(len(r.candidates))]
            table = table.set_column(table.schema.get_field_index("best_rank"), "best_rank", pa.array(ranks, _I))
        else:
            table = _mode_table(r, columns, schema)
        tables.append(table)
    return pa.concat_tables(tables) if tables else schema.empty_table()


def default_rows(res: SearchResult, model: str = "", db: str = "") -> List[dict]:
    """The `search_default` rows of a `run_search` result (``db`` as resolved:
    system/backend/version, read off a candidate when there is one)."""
    out = []
    for r in res.modes.values():
        for c in r.candidates[:1]:
            tag = "(p)" if "(p)system" in c else ""
            db = f"{c[tag + 'system']}/{c[tag + 'backend']}/{c[tag + 'version']}"
    for mode, r in res.modes.items():
        row = {name: None for name in DEFAULT_TABLE_SCHEMA.names}
        row.update(model=model, db=db, mode=mode, experiment=mode, chosen=res.chosen_exp == mode,
                   candidates=len(r.candidates), reason=r.reason)  # fmt: skip
        if r.ok:
            row["best_tokens_per_s_per_gpu_cluster"] = r.best_throughput
            if r.best_configs:
                b = r.best_configs[0]
                if mode == "agg":
                    row.update(parallel=b["parallel"], bs=b["bs"], memory_gib=b["memory"])
                else:
                    row.update(prefill_parallel=b["(p)parallel"], prefill_workers=b["(p)workers"],
                               decode_parallel=b["(d)parallel"], decode_bs=b["(d)bs"], decode_workers=b["(d)workers"],
                               memory_gib=b["(d)memory"])  # fmt: skip
                row.update(ttft_ms=b["ttft"], tpot_ms=b["tpot"], tokens_per_s_per_user=b["tokens/s/user"],
                           num_total_gpus=b["num_total_gpus"])  # fmt: skip
            else:
                row["reason"] = "no candidate with a finite tpot and cluster rate"
        out.append(row)
    return out


def search_default(model: str, db: str, total_gpus: int, isl: int, osl: int, prefix: int = 0,
                   ttft_ms: float = 2000.0, tpot_ms: float = 30.0, *, top_n: int = 5, strict_sla: bool = False,
                   **kw) -> pa.Table:  # fmt: skip
    """``cli default``'s verdict (`DEFAULT_TABLE_SCHEMA`): one row per experiment
    built (agg; disagg from 2 GPUs), ``chosen`` on the one with the larger best
    cluster rate (agg on a tie; none if no experiment found a candidate)."""
    if _asks_for_every_backend(db, kw.get("backend", "")):
        return pa.Table.from_pylist(experiment_rows(run_experiments(
            model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n, strict_sla=strict_sla, **kw),
            model), schema=DEFAULT_TABLE_SCHEMA)  # fmt: skip
    res = run_search(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n=top_n, strict_sla=strict_sla,
                     **kw)  # fmt: skip
    return pa.Table.from_pylist(default_rows(res, model, db), schema=DEFAULT_TABLE_SCHEMA)


def _asks_for_every_backend(db, backend: str) -> bool:
    """'system/auto[/version]', or 'system' with the backend setting 'auto'."""
    parts = str(db).split("/")
    return (parts[1] if len(parts) >= 2 else str(backend or "")) == "auto"


def experiment_rows(res: ExperimentsResult, model: str) -> List[dict]:
    """The `search_default` rows of an ``auto`` search: one per experiment, in
    the spec's order, ``chosen`` on the experiment the chosen configuration
    comes from."""
    out = []
    for k, e in enumerate(res.experiments):
        one = SearchResult({e.mode: e.result}, "none", {})
        row = default_rows(one, model, e.db)[0]
        row.update(experiment=e.name, chosen=res.chosen == k)
        out.append(row)
    return out


# ---- the bridge's calling convention ------------------------------------------------------------

_ARG_NAMES = ("model", "db", "total_gpus", "isl", "osl", "prefix", "ttft_ms", "tpot_ms")


def _flag(text, name: str = "strict_sla") -> bool:
    value = str(text).strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"setting {name} = {text!r} is not a boolean")


def _settings_options(settings: Dict[str, object]) -> Options:
    """The search options of the session settings (``aic.nextn``,
    ``aic.nextn_accepted``, ``aic.max_seq_len``, ``aic.free_gpu_memory_fraction``,
    ``aic.image_height``, ``aic.image_width``, ``aic.num_images``,
    ``aic.enable_encoder_dp``; '' = unset), checked as `run_search` checks them. A quantisation setting
    is refused as the Rust searches refuse it."""
    quant = [k for k in ("gemm_quant", "moe_quant", "kvcache_quant", "fmha_quant", "comm_quant")
             if str(settings.get(k) or "").strip()]  # fmt: skip
    if quant:
        raise ValueError(f"the spec's search takes no quant overrides; unset {', '.join('aic.' + k for k in quant)} "
                         "(SET aic.kvcache_quant = '') first")  # fmt: skip
    options = settings_options({k: settings[k] for k in SEARCH_OPTIONS if k in settings})
    _search_options(options)
    return options


def _latency_setting(text) -> Optional[float]:
    """``aic.request_latency``: a number of ms; '' or 0 (or below): no target."""
    value = "" if text is None else str(text).strip()
    if not value:
        return None
    try:
        ms = float(value)
    except ValueError:
        ms = math.nan
    if not math.isfinite(ms):
        raise ValueError(f"aic.request_latency must be a number of ms (empty or 0: none), not {text!r}")
    return ms if ms > 0 else None


def _bridge(name: str, fn, schema: pa.Schema, settings, args, data) -> pa.RecordBatch:
    if len(args) != len(_ARG_NAMES):
        raise ValueError(f"{name}({', '.join(_ARG_NAMES)}) takes {len(_ARG_NAMES)} arguments, got {len(args)}")
    s = {str(k)[4:] if str(k).startswith("aic.") else str(k): v for k, v in (settings or {}).items()}
    options = _settings_options(s)  # checked before the arguments, a NULL one included
    chunked = _flag(s.get("enable_chunked_prefill") or "false", "enable_chunked_prefill")
    latency = _latency_setting(s.get("request_latency"))
    if any(v is None for v in args):
        return pa.RecordBatch.from_pylist([], schema=schema)
    top_n = s.get("top_n")
    top_n = 5 if top_n in (None, "") else int(str(top_n).strip())
    table = fn(*args, top_n=top_n, strict_sla=_flag(s.get("strict_sla", "false")),
               backend=str(s.get("backend") or ""), version=str(s.get("version") or "latest"),
               shared_layer=_flag(s.get("shared_layer", "true")), options=options,
               enable_chunked_prefill=chunked, request_latency_ms=latency, data=data)  # fmt: skip
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=schema)


def search_agg_table(settings: Dict[str, str], *args, data=None) -> pa.RecordBatch:
    """``py_search_agg(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms)``
    (settings ``aic.top_n``, default 5, ``aic.strict_sla``, default false, and
    the MTP options ``aic.nextn`` / ``aic.nextn_accepted``, default unset;
    a NULL argument gives no rows)."""
    return _bridge("py_search_agg", search_agg, AGG_TABLE_SCHEMA, settings, args, data)


def search_disagg_table(settings: Dict[str, str], *args, data=None) -> pa.RecordBatch:
    """``py_search_disagg(...)``: the arguments and settings of `search_agg_table`."""
    return _bridge("py_search_disagg", search_disagg, DISAGG_TABLE_SCHEMA, settings, args, data)


def search_default_table(settings: Dict[str, str], *args, data=None) -> pa.RecordBatch:
    """``py_search_default(...)``: the arguments and settings of `search_agg_table`."""
    return _bridge("py_search_default", search_default, DEFAULT_TABLE_SCHEMA, settings, args, data)


# ---- cli recommend as a table -------------------------------------------------------------------

RECOMMEND_TABLE_SCHEMA = pa.schema([
    pa.field("model", _S, nullable=False), pa.field("db", _S, nullable=False), pa.field("mode", _S, nullable=False),
    pa.field("experiment", _S, nullable=False), pa.field("rank", _I), pa.field("chosen", _B, nullable=False), pa.field("budget_gpus", _I, nullable=False),
    pa.field("replicas_needed", _I), pa.field("total_gpus_needed", _I), pa.field("tokens_per_s_per_gpu", _F),
    pa.field("seq_per_s", _F), pa.field("concurrency", _I), pa.field("ttft_ms", _F), pa.field("tpot_ms", _F),
    pa.field("request_latency_ms", _F), pa.field("tokens_per_s_per_user", _F), pa.field("num_total_gpus", _I),
    pa.field("parallel", _S), pa.field("bs", _I), pa.field("prefill_parallel", _S), pa.field("prefill_workers", _I),
    pa.field("decode_parallel", _S), pa.field("decode_bs", _I), pa.field("decode_workers", _I),
    pa.field("reason", _S),
])  # fmt: skip


def recommend_rows(rec: Recommendation, model: str, db: str) -> List[dict]:
    """The `search_recommend` rows: per experiment its load-match best
    configs by rank (or its reason), ``chosen`` on rank 1 of the chosen one."""
    out = []
    for mode, r in rec.result.modes.items():
        base = {name: None for name in RECOMMEND_TABLE_SCHEMA.names}
        base.update(model=model, db=db, mode=mode, experiment=mode, chosen=False, budget_gpus=rec.budgets[-1])
        if not r.ok or not r.best_configs:
            out.append(dict(base, reason=r.reason or "no candidate"))
            continue
        for k, b in enumerate(r.best_configs):
            row = dict(base, rank=k + 1, chosen=k == 0 and rec.result.chosen_exp == mode,
                       replicas_needed=b["replicas_needed"], total_gpus_needed=b["total_gpus_needed"],
                       tokens_per_s_per_gpu=b["tokens/s/gpu"], seq_per_s=b["seq/s"], concurrency=b["concurrency"],
                       ttft_ms=b["ttft"], tpot_ms=b["tpot"], request_latency_ms=b["request_latency"],
                       tokens_per_s_per_user=b["tokens/s/user"], num_total_gpus=b["num_total_gpus"])  # fmt: skip
            if mode == "agg":
                row.update(parallel=b["parallel"], bs=b["bs"])
            else:
                row.update(prefill_parallel=b["(p)parallel"], prefill_workers=b["(p)workers"],
                           decode_parallel=b["(d)parallel"], decode_bs=b["(d)bs"], decode_workers=b["(d)workers"])
            out.append(row)
    return out


def auto_recommend_rows(rec: AutoRecommendation, model: str) -> List[dict]:
    """The `search_recommend` rows under backend 'auto': per experiment its
    load-match best configs (or its reason), ``chosen`` on the merged
    winner's line (or the chosen experiment's rank 1)."""
    res = rec.result
    chosen_at = None
    if res.chosen is not None:
        if res.merged is not None:
            picks = res.merged[res.experiments[res.chosen].mode]
            chosen_at = picks.best_at[0] if picks.best_at else None
        elif res.experiments[res.chosen].result.best_index:
            chosen_at = (res.chosen, res.experiments[res.chosen].result.best_index[0])
    out = []
    for k, e in enumerate(res.experiments):
        one = Recommendation(rec.budgets, SearchResult({e.mode: e.result}, "none", {}))
        rows = recommend_rows(one, model, e.db)
        for row, i in zip(rows, e.result.best_index if e.result.ok else [None]):
            row["experiment"] = e.name
            row["chosen"] = chosen_at == (k, i)
        out += rows
    return out


def search_recommend_table(settings: Dict[str, str], *args, data=None) -> pa.RecordBatch:
    """``py_search_recommend(model, db, isl, osl, prefix, ttft_ms, tpot_ms,
    target_request_rate [, target_concurrency])``: `run_recommend` as the
    rows of ``search_recommend`` (`RECOMMEND_TABLE_SCHEMA`); a NULL model,
    database, length or limit gives no rows."""
    names = ("model", "db", "isl", "osl", "prefix", "ttft_ms", "tpot_ms", "target_request_rate", "target_concurrency")
    if len(args) not in (8, 9):
        raise ValueError(f"py_search_recommend({', '.join(names[:7])}, {names[7]} [, {names[8]}]) takes 8 or 9 "
                         f"arguments, got {len(args)}")  # fmt: skip
    s = {str(k)[4:] if str(k).startswith("aic.") else str(k): v for k, v in (settings or {}).items()}
    options = _settings_options(s)
    rate = args[7]
    concurrency = args[8] if len(args) == 9 else None
    if (rate is None) == (concurrency is None):
        raise ValueError("search_recommend: give exactly one of target_request_rate and target_concurrency "
                         "(the other NULL)")  # fmt: skip
    which, value = ("target_request_rate", rate) if rate is not None else ("target_concurrency", concurrency)
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"search_recommend: {which} = {float(value):g} must be a positive finite number")
    if any(v is None for v in args[:7]):
        return pa.RecordBatch.from_pylist([], schema=RECOMMEND_TABLE_SCHEMA)
    top_n = s.get("top_n")
    top_n = 5 if top_n in (None, "") else int(str(top_n).strip())
    model, db, isl, osl, prefix, ttft, tpot = args[:7]
    rec = run_recommend(model, db, target_request_rate=None if rate is None else float(rate),
                        target_concurrency=None if concurrency is None else float(concurrency), isl=isl, osl=osl,
                        prefix=prefix, ttft_ms=float(ttft), tpot_ms=float(tpot), top_n=top_n,
                        backend=str(s.get("backend") or ""), version=str(s.get("version") or "latest"),
                        shared_layer=_flag(s.get("shared_layer", "true")), options=options,
                        enable_chunked_prefill=_flag(s.get("enable_chunked_prefill") or "false",
                                                     "enable_chunked_prefill"),
                        request_latency_ms=_latency_setting(s.get("request_latency")), data=data)  # fmt: skip
    if isinstance(rec, AutoRecommendation):
        return pa.RecordBatch.from_pylist(auto_recommend_rows(rec, model), schema=RECOMMEND_TABLE_SCHEMA)
    res = rec.result
    resolved = next((f"{c['(p)system' if '(p)system' in c else 'system']}/"
                     f"{c['(p)backend' if '(p)backend' in c else 'backend']}/"
                     f"{c['(p)version' if '(p)version' in c else 'version']}"
                     for r in res.modes.values() for c in r.candidates[:1]), db)  # fmt: skip
    return pa.RecordBatch.from_pylist(recommend_rows(rec, model, resolved), schema=RECOMMEND_TABLE_SCHEMA)
