"""Assembling a static context or generation step (docs/spec 1, 3.2, 9, 10.1, 11.9).

Context (static_ctx)
    every op once with ``x = B * isl`` tokens -- except ops whose name
    contains ``logits_gemm``, which get ``x = B`` -- and the attention with
    ``batch_size = B, s = isl, prefix = 0``. ``context_latency`` is the sum of
    the per-op results in op-list order; TTFT equals it.

Generation (static_gen)
    decode steps are sampled with stride 32: for ``i = 0, 32, 64, ... <
    osl - 1`` every op runs with ``x = batch_size = B`` and ``s = isl + i + 1``
    and weighs ``repeat_i = min(32, osl - 1 - i)``. For each op name a running
    total ``acc[op] += value * repeat_i`` is kept over the samples in order,
    then the totals are summed in op-list order (9.3; summing each step first
    differs in the last ulp). TPOT = ``generation_latency / (osl - 1)`` (0 when
    ``osl <= 1``).

Values are aggregated per op *name* (two ops of one name add up at the
first one's place, 11.9).
"""

from __future__ import annotations

import json
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..data import Database, DataTree
from ..kernels import Kernels, PerfMiss, kernels_for
from ..limits import check_step
from .model import HYBRIDMOE, ModelSpec, check_gemm_quant, load_model
from .ops import Call, Op, OpValue, Parallel, build_ops, first_moe_lookup

__all__ = [
    "STRIDE",
    "PHASES",
    "StepMiss",
    "PhaseQuants",
    "StepContext",
    "step_context",
    "resolve_parallel",
]

STRIDE = 32
PHASES = ("context", "generation")


class StepMiss(Exception):
    """The spec raised PerfDataNotAvailable for one op's lookup (a *miss*)."""

    def __init__(self, op: str, miss: PerfMiss):
        super().__init__(f"{op}: {miss}")
        self.op = op
        self.miss = miss


class PhaseQuants(NamedTuple):
    """The quant modes a phase runs with, after the FMHA guards (3.2)."""

    gemm: str
    moe: str
    kvcache: str
    fmha: str
    comm: str = "half"

    def as_dict(self) -> Dict[str, str]:
        return dict(self._asdict())


def resolve_parallel(model: ModelSpec, backend: str, tp, moe_tp, moe_ep) -> Parallel:
    """Validate tp against the model and resolve the MoE layout (docs/spec 2, 10.1)."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp = {tp!r} must be a positive integer")
    if model.heads % tp != 0:
        raise ValueError(
            f"tp = {tp} does not divide the {model.heads} attention heads of {model.name!r}"
        )
    if not model.is_moe:
        return Parallel(tp)
    for name, v in (("moe_tp", moe_tp), ("moe_ep", moe_ep)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} = {v!r} must be a positive integer")
    if moe_tp is None and moe_ep is None:
        raise ValueError(
            f"{model.name!r} is a MoE model: give moe_tp and/or moe_ep (tp = moe_tp * moe_ep)"
        )
    if moe_tp is None:
        if tp % moe_ep:
            raise ValueError(f"moe_ep = {moe_ep} does not divide tp = {tp} (tp = moe_tp * moe_ep)")
        moe_tp = tp // moe_ep
    elif moe_ep is None:
        if tp % moe_tp:
            raise ValueError(f"moe_tp = {moe_tp} does not divide tp = {tp} (tp = moe_tp * moe_ep)")
        moe_ep = tp // moe_tp
    if moe_tp * moe_ep != tp:
        raise ValueError(f"moe_tp * moe_ep = {moe_tp} * {moe_ep} != tp = {tp} (attention_dp is 1)")
    if backend == "vllm" and moe_tp > 1 and moe_ep > 1:
        raise ValueError(f"vllm does not support moe_tp > 1 and moe_ep > 1 together (moe_tp = {moe_tp}, "
                         f"moe_ep = {moe_ep})")
    return Parallel(tp, moe_tp, moe_ep)


def _check_positive(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} = {v!r} must be a positive integer")


class _OpRun(NamedTuple):
    op: Op
    value: OpValue
    gen_index: Optional[int] = None
    gen_s: Optional[int] = None
    repeat: Optional[int] = None


class PhaseResult(NamedTuple):
    total_ms: float  # TTFT (context) or TPOT (generation)
    phase_latency_ms: float  # context_latency or generation_latency
    runs: List[_OpRun]  # every op application (generation: per sample)
    samples: List[Tuple[int, int, int]]  # generation: (i, s, repeat)


class StepContext:
    """Everything one (model, database, shared layer) needs, built once:
    the model, its tables, the per-phase quant modes."""

    def __init__(self, tree: DataTree, model: str, db: Database, shared_layer: bool):
        self.tree = tree
        self.db = db
        self.model = load_model(tree, model)
        self.kernels: Kernels = kernels_for(tree, db, shared_layer)
        if self.model.family != HYBRIDMOE:
            check_gemm_quant(self.model)
        self._quants: Dict[str, PhaseQuants] = {}
        self._lock = threading.Lock()

    # ---- 3.2: the FMHA guards -------------------------------------------------------

    def quants(self, phase: str) -> PhaseQuants:
        with self._lock:
            q = self._quants.get(phase)
        if q is not None:
            return q
        ck = self.model.quant
        fmha = None  # None = not set explicitly, the inferred mode still applies
        if phase == "context" and ck.fmha == "fp8":
            # Data-driven guard: the attn dtypes with rows under the run's kv dtype.
            dtypes = set(self.kernels.context_attention.attn_dtypes_for_kv(ck.kv))
            if dtypes and "fp8" not in dtypes and "bfloat16" in dtypes:
                fmha = "bfloat16"
        if fmha is None:
            fmha = ck.fmha
            if self.db.backend == "vllm" and fmha == "fp8":  # vLLM legacy guard
                fmha = "bfloat16"
        q = PhaseQuants(gemm=ck.gemm, moe=ck.moe, kvcache=ck.kv, fmha=fmha, comm=ck.comm)
        with self._lock:
            self._quants[phase] = q
        return q

    # ---- evaluating ------------------------------------------------------------------

    def _ops(self, phase: str, par: Parallel) -> List[Op]:
        q = self.quants(phase)
        return build_ops(self.model, phase, par, q.gemm, q.moe, q.kvcache, q.fmha)

    def _evaluate(self, op: Op, call: Call) -> OpValue:
        try:
            return op.evaluate(self.kernels, call)
        except PerfMiss as miss:
            raise StepMiss(op.name, miss) from None

    def _hybrid_moe(self, phase: str, par: Parallel, call: Call) -> None:
        """Llama-4: only the first MoE lookup is restated. A miss there is the
        spec's own error (its vllm 0.19.0 data lacks the slice); anything
        beyond it is unsupported."""
        op = first_moe_lookup(self.model, phase, par, self.quants(phase).moe)
        self._evaluate(op, call)
        raise ValueError(
            f"unsupported: {self.model.name!r} ({self.model.architecture}, HYBRIDMOE) beyond its first MoE "
            "lookup is not restated by aicsql.spec"
        )

    def run(self, phase: str, tp: int, batch: int, isl: int, osl: int, moe_tp=None, moe_ep=None) -> PhaseResult:
        """One static step of `phase`; StepMiss on a miss, ValueError on bad input."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
        _check_positive("batch", batch)
        _check_positive("isl", isl)
        _check_positive("osl", osl)
        check_step(tp, batch, isl, osl, moe_tp, moe_ep)
        par = resolve_parallel(self.model, self.db.backend, tp, moe_tp, moe_ep)
        prefix = 0
        if phase == "context":
            call = Call(batch * (isl - prefix), batch, isl - prefix, prefix)
            if self.model.family == HYBRIDMOE:
                self._hybrid_moe(phase, par, call)
            ops = self._ops(phase, par)
            runs = []
            totals: Dict[str, float] = {}
            for op in ops:
                c = Call(batch, batch, call.s, prefix) if "logits_gemm" in op.name else call
                value = self._evaluate(op, c)
                runs.append(_OpRun(op, value))
                totals[op.name] = totals[op.name] + value.total if op.name in totals else value.total
            latency = 0
            for v in totals.values():  # op-list order
                latency += v
            return PhaseResult(latency, latency, runs, [])

        # generation
        b = batch  # B' = B * (nextn + 1)
        if self.model.family == HYBRIDMOE:
            self._hybrid_moe(phase, par, Call(b, b, isl + 1, 0))
        ops = self._ops(phase, par)
        samples = [(i, isl + i + 1, min(STRIDE, osl - 1 - i)) for i in range(0, osl - 1, STRIDE)]
        runs = []
        acc: Dict[str, float] = {}
        fixed: Dict[int, OpValue] = {}  # s-independent ops: evaluated once, same bits every sample
        for i, s, repeat in samples:
            call = Call(b, b, s, 0)
            for j, op in enumerate(ops):
                if op.kind == "GenerationAttention":
                    value = self._evaluate(op, call)
                else:
                    value = fixed.get(j)
                    if value is None:
                        value = fixed[j] = self._evaluate(op, call)
                runs.append(_OpRun(op, value, i, s, repeat))
                weighted = value.total * repeat
                acc[op.name] = acc[op.name] + weighted if op.name in acc else weighted
        latency = 0
        for v in acc.values():  # op-list order
            latency += v
        tpot = latency / (osl - 1) if osl > 1 else 0.0
        return PhaseResult(tpot, latency, runs, samples)

    # ---- the detailed result ----------------------------------------------------------------

    def rows(self, phase: str, result: PhaseResult, batch: int, isl: int, osl: int) -> List[dict]:
        """One row per op application (generation: per sample), then per-sample
        ``__gen_step_total__`` rows and the ``__step_total__`` row -- the goldens' layout."""
        rows: List[dict] = []
        index: Dict[Tuple[Optional[int], str], int] = {}
        ops_in_step: Dict[Optional[int], int] = {}
        for run in result.runs:
            op, v = run.op, run.value
            key = (run.gen_index, op.name)
            if key in index:  # a repeated op name aggregates into its first row (11.9)
                row = rows[index[key]]
                row["total_ms"] += v.total
                row["count"] += op.count
                row["latency_ms"] = row["total_ms"] / row["count"] if row["count"] else 0.0
                row["weighted_total_ms"] = row["total_ms"] * run.repeat if run.repeat is not None else row["total_ms"]
                continue
            index[key] = len(rows)
            op_index = ops_in_step.get(run.gen_index, 0)
            ops_in_step[run.gen_index] = op_index + 1
            count = op.count
            rows.append(
                {
                    "phase": phase,
                    "row_kind": "op",
                    "op_index": op_index,
                    "op_name": op.name,
                    "op_kind": op.kind,
                    "count": float(count),
                    "quant": op.quant_label,
                    "lookup_table": v.lookup.table if v.lookup else None,
                    "lookup_args": json.dumps({"args": v.lookup.args, "kwargs": v.lookup.kwargs}) if v.lookup else None,
                    "interp_path": v.path,
                    "latency_ms": v.total / count if count else 0.0,
                    "total_ms": v.total,
                    "weighted_total_ms": v.total * run.repeat if run.repeat is not None else v.total,
                    "gen_step_index": run.gen_index,
                    "gen_s": run.gen_s,
                    "gen_repeat": run.repeat,
                }
            )
        if phase == "generation":
            # Each sample's total: its op rows' totals summed in row order.
            totals: Dict[Optional[int], float] = {}
            for row in rows:
                i = row["gen_step_index"]
                totals[i] = totals[i] + row["total_ms"] if i in totals else 0 + row["total_ms"]
            for i, s, repeat in result.samples:
                total = totals.get(i, 0)
                rows.append(
                    _total_row(phase, "gen_step_total", "__gen_step_total__", total, total * repeat, i, s, repeat)
                )
            last = _total_row(phase, "step_total", "__step_total__", result.phase_latency_ms, result.phase_latency_ms)
            last["lookup_args"] = json.dumps(
                {"batch_size": batch, "beam_width": 1, "isl": isl, "osl": osl, "stride": STRIDE}
            )
            last["tpot_ms"] = result.total_ms
            last["generation_latency_ms"] = result.phase_latency_ms
            rows.append(last)
        else:
            last = _total_row(phase, "step_total", "__step_total__", result.phase_latency_ms, result.phase_latency_ms)
            last["ttft_ms"] = result.total_ms
            last["context_latency_ms"] = result.phase_latency_ms
            rows.append(last)
        return rows


def _total_row(phase, kind, name, total, weighted, i=None, s=None, repeat=None) -> dict:
    return {
        "phase": phase,
        "row_kind": kind,
        "op_index": -1,
        "op_name": name,
        "op_kind": None,
        "count": None,
        "quant": None,
        "lookup_table": None,
        "lookup_args": None,
        "interp_path": None,
        "latency_ms": None,
        "total_ms": total,
        "weighted_total_ms": weighted,
        "gen_step_index": i,
        "gen_s": s,
        "gen_repeat": repeat,
    }


_CONTEXTS: Dict[Tuple[int, str, Database, bool], StepContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def step_context(tree: DataTree, model: str, db: Database, shared_layer: bool) -> StepContext:
    """The StepContext of (model, database, shared layer), built once per data tree."""
    key = (id(tree), model, db, bool(shared_layer))
    with _CONTEXTS_LOCK:
        ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = StepContext(tree, model, db, bool(shared_layer))
        with _CONTEXTS_LOCK:
            ctx = _CONTEXTS.setdefault(key, ctx)
    return ctx
