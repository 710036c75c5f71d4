"""Entry points of the engine-step estimator (the Python path).

``step_latency_batch`` is what the Rust bridge calls, with the session's
``aic.*`` settings as strings (see ``aicsql.spec.functions``):

``backend`` / ``version``  complete a database argument that names less than
                           'system/backend/version' (the GEMM path's rule)
``on_miss``                'null': a spec miss gives NULL; 'error': ValueError
                           naming the op and its lookup
``shared_layer``           'true' = the spec's default source union

Bad input -- unknown model, database or phase, an unsupported architecture
or checkpoint, tp not dividing the heads, an inconsistent MoE layout --
always raises ValueError naming it. NULL in gives NULL out (``moe_tp`` /
``moe_ep`` NULL just means "not given").

``engine_step`` returns the full breakdown (the goldens' rows), and
``step_latency`` the phase's number: TTFT for 'context', TPOT for
'generation' (ms).
"""

from __future__ import annotations

from typing import Dict, List, Optional

import pyarrow as pa

from ..data import Database, DataTree
from .engine import PHASES, StepMiss, step_context

__all__ = ["engine_step", "step_latency", "step_latency_batch"]


def _settings(settings: Optional[Dict[str, str]], data):
    from ..functions import _Settings  # the GEMM path's settings parser (lazy: functions imports us)

    return _Settings(settings, data)


def _plain_settings(shared_layer: bool) -> Dict[str, str]:
    return {"backend": "", "version": "latest", "on_miss": "error", "shared_layer": "true" if shared_layer else "false"}


def _int_arg(name: str, v, optional: bool = False) -> Optional[int]:
    """An integer argument (integral floats accepted, e.g. from a float64 column)."""
    if v is None and optional:
        return None
    if isinstance(v, bool):
        raise ValueError(f"{name} = {v!r} is not an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise ValueError(f"{name} = {v!r} is not an integer")


def _phase(phase) -> str:
    text = str(phase).strip().lower() if isinstance(phase, str) else phase
    if text not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
    return text


def _run(tree: DataTree, database: Database, shared: bool, model, phase, tp, batch, isl, osl, moe_tp, moe_ep):
    ctx = step_context(tree, model, database, shared)
    ph = _phase(phase)
    result = ctx.run(
        ph,
        _int_arg("tp", tp),
        _int_arg("batch", batch),
        _int_arg("isl", isl),
        _int_arg("osl", osl),
        _int_arg("moe_tp", moe_tp, optional=True),
        _int_arg("moe_ep", moe_ep, optional=True),
    )
    return ctx, ph, result


def engine_step(
    model: str,
    db: str,
    phase: str,
    tp: int,
    batch: int,
    isl: int,
    osl: int,
    moe_tp: Optional[int] = None,
    moe_ep: Optional[int] = None,
    *,
    shared_layer: bool = True,
    data=None,
) -> dict:
    """One static step, op by op.

    Returns ``{"rows": [...], "total_ms": TTFT or TPOT, "phase_latency_ms":
    context or generation latency, "quants": {...}}``; the rows follow the
    goldens (one per op application -- per sample step in generation -- then
    ``__gen_step_total__`` rows and a ``__step_total__`` row). A miss raises
    ValueError naming the op and its lookup."""
    s = _settings(_plain_settings(shared_layer), data)
    database = s.tree.resolve(db, s.backend, s.version)
    try:
        ctx, ph, result = _run(s.tree, database, s.shared_layer, model, phase, tp, batch, isl, osl, moe_tp, moe_ep)
    except StepMiss as miss:
        raise ValueError(str(miss)) from None
    return {
        "rows": ctx.rows(ph, result, _int_arg("batch", batch), _int_arg("isl", isl), _int_arg("osl", osl)),
        "total_ms": result.total_ms,
        "phase_latency_ms": result.phase_latency_ms,
        "quants": ctx.quants(ph).as_dict(),
    }


def step_latency(
    model: str,
    db: str,
    phase: str,
    tp: int,
    batch: int,
    isl: int,
    osl: int,
    moe_tp: Optional[int] = None,
    moe_ep: Optional[int] = None,
    *,
    shared_layer: bool = True,
    data=None,
) -> float:
    """TTFT ('context') or TPOT ('generation') in ms; a miss raises ValueError."""
    s = _settings(_plain_settings(shared_layer), data)
    database = s.tree.resolve(db, s.backend, s.version)
    try:
        return _run(s.tree, database, s.shared_layer, model, phase, tp, batch, isl, osl, moe_tp, moe_ep)[2].total_ms
    except StepMiss as miss:
        raise ValueError(str(miss)) from None


def _pylist(array, n: Optional[int] = None) -> list:
    if array is None:
        return [None] * (n or 0)
    if isinstance(array, (pa.Array, pa.ChunkedArray)):
        return array.to_pylist()
    if isinstance(array, pa.Scalar):
        return [array.as_py()]
    return list(array)


def step_latency_batch(
    settings: Dict[str, str],
    model: pa.Array,
    db: pa.Array,
    phase: pa.Array,
    tp: pa.Array,
    batch: pa.Array,
    isl: pa.Array,
    osl: pa.Array,
    moe_tp: Optional[pa.Array] = None,
    moe_ep: Optional[pa.Array] = None,
    *,
    data=None,
) -> pa.Array:
    """`step_latency` for each row (float64). NULL in any required argument
    gives NULL; a miss gives NULL (``on_miss = 'null'``) or ValueError naming
    the op and lookup (``'error'``); bad input raises ValueError.

    Tables, model and quant modes are built once per (model, database,
    shared layer); a repeated configuration is computed once."""
    s = _settings(settings, data)
    cols = [_pylist(a) for a in (model, db, phase, tp, batch, isl, osl)]
    n = len(cols[0])
    cols.append(_pylist(moe_tp, n))
    cols.append(_pylist(moe_ep, n))
    lengths = [len(c) for c in cols]
    if any(length != n for length in lengths):
        raise ValueError(f"step_latency_batch: arrays differ in length {lengths}")
    raise_on_miss = s.on_miss == "error"
    databases: Dict[str, Database] = {}
    memo: Dict[tuple, Optional[float]] = {}
    out: List[Optional[float]] = []
    for row in zip(*cols):
        r_model, r_db, r_phase, r_tp, r_batch, r_isl, r_osl, r_moe_tp, r_moe_ep = row
        if r_model is None or r_db is None or r_phase is None or r_tp is None or r_batch is None or r_isl is None \
                or r_osl is None:
            out.append(None)
            continue
        if row in memo:
            out.append(memo[row])
            continue
        database = databases.get(r_db)
        if database is None:
            database = databases[r_db] = s.tree.resolve(r_db, s.backend, s.version)
        try:
            value = _run(s.tree, database, s.shared_layer, r_model, r_phase, r_tp, r_batch, r_isl, r_osl,
                         r_moe_tp, r_moe_ep)[2].total_ms
        except StepMiss as miss:
            if raise_on_miss:
                raise ValueError(f"{r_model} on {database.name}, {r_phase}: {miss}") from None
            value = None
        memo[row] = value
        out.append(value)
    return pa.array(out, type=pa.float64())
