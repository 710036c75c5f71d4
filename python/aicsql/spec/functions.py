"""Entry points of the Python path: what the Rust bridge (``py_gemm_latency``,
``py_gemm_trace``) calls, and plain-Python conveniences.

The bridge passes the session's ``aic.*`` settings as a dict of strings
(without the ``aic.`` prefix):

``backend``       backend for a database argument that names none ('' = unset)
``version``       version for one that names none; 'latest' = the spec's latest
                  database of that system/backend (marker-only versions
                  excluded; docs/spec/families_hybrid_vl_databases.md 4.4)
``on_miss``       'null' (a spec miss gives NULL) or 'error' (raise)
``shared_layer``  'true' = the spec's default source union, 'false' = own file only
``data``          optional: data directories (else the cache-dir rule); the
                  ``data=`` keyword of the entry points takes precedence
``gemm_quant``, ``moe_quant``, ``kvcache_quant``, ``fmha_quant``, ``comm_quant``
                  optional: the spec's quant overrides for the step and
                  serving estimates ('' = the checkpoint's mode;
                  `aicsql.spec.step.options`); the GEMM functions ignore them
``free_gpu_memory_fraction``, ``max_seq_len``
                  optional: the spec's memory knobs of the aggregated
                  estimate on trtllm ('' = unset; a number in (0, 1], an
                  integer >= 1); everything else ignores them
``nextn``, ``nextn_accepted``
                  optional: MTP speculative decoding ('' = unset; an
                  integer >= 0 or 'auto', a number): the step and serving
                  estimates take the depth, the serving ones the accepted
                  tokens; the searches refuse them, the GEMM functions ignore them

Invalid input (unknown quant mode or database, shape out of range) always
raises ValueError naming the bad value and listing what is valid; NULL in
gives NULL out.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import pyarrow as pa

from .data import Database, DataTree, open_tree
from .gemm import GemmMiss, GemmTable, load_table
from .sol import QuantMode, SystemSpec, gemm_quant, gemm_sol as _gemm_sol
from .step.options import settings_options

__all__ = [
    "MAX_GEMM_DIM",
    "TRACE_SCHEMA",
    "gemm_latency",
    "gemm_latency_batch",
    "gemm_sol",
    "gemm_trace",
    "gemm_trace_table",
]

# Accepted shape domain (same as the Rust path): 0 <= m, 1 <= n, k, all <= 2^40.
MAX_GEMM_DIM = 1 << 40

# The trace's `step` column numbers rows from this value. The Rust
# `gemm_trace` numbers them 1, 2, ...; keep the two paths row-for-row equal.
TRACE_FIRST_STEP = 1

TRACE_SCHEMA = pa.schema(
    [
        pa.field("db", pa.utf8(), nullable=False),
        pa.field("quant", pa.utf8(), nullable=False),
        pa.field("m", pa.int64(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),
        pa.field("k", pa.int64(), nullable=False),
        pa.field("step", pa.int32(), nullable=False),
        pa.field("stage", pa.utf8(), nullable=False),
        pa.field("site_n", pa.int64()),
        pa.field("site_k", pa.int64()),
        pa.field("distance", pa.float64()),
        pa.field("covers_m", pa.bool_()),
        pa.field("rank", pa.int32()),
        pa.field("selected", pa.bool_(), nullable=False),
        pa.field("weight", pa.float64()),
        pa.field("site_latency_ms", pa.float64()),
        pa.field("site_sol_ms", pa.float64()),
        pa.field("util", pa.float64()),
        pa.field("result_ms", pa.float64()),
        pa.field("reason", pa.utf8()),
    ]
)


# ---- settings and arguments ------------------------------------------------------------


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"setting {name} = {value!r} is not a boolean ('true' or 'false')")


class _Settings:
    def __init__(self, settings: Optional[Dict[str, str]], data=None):
        s = {}
        for key, value in (settings or {}).items():
            key = str(key)
            s[key[len("aic.") :] if key.startswith("aic.") else key] = value
        self.backend = str(s.get("backend") or "")
        self.version = str(s.get("version") or "latest")
        self.on_miss = str(s.get("on_miss") or "null").strip().lower()
        if self.on_miss not in ("null", "error"):
            raise ValueError(f"setting on_miss = {self.on_miss!r} is not 'null' or 'error'")
        self.shared_layer = _flag(s.get("shared_layer", "true"), "shared_layer")
        self.data = data if data is not None else (s.get("data") or None)
        self.tree: DataTree = open_tree(self.data)
        # The options of the estimators' batch forms: quant overrides, memory knobs, MTP ('' = unset).
        self.options = settings_options(s)


def check_shape(m: int, n: int, k: int) -> None:
    """ValueError naming the first coordinate outside the accepted domain."""
    if not 0 <= m <= MAX_GEMM_DIM:
        raise ValueError(f"m = {m} is out of range (0 <= m <= 2^40)")
    if not 1 <= n <= MAX_GEMM_DIM:
        raise ValueError(f"n = {n} is out of range (1 <= n <= 2^40)")
    if not 1 <= k <= MAX_GEMM_DIM:
        raise ValueError(f"k = {k} is out of range (1 <= k <= 2^40)")


class _Resolver:
    """Per-call caches: each distinct db / quant string is resolved once."""

    def __init__(self, settings: _Settings):
        self.settings = settings
        self._dbs: Dict[str, Database] = {}
        self._quants: Dict[str, QuantMode] = {}
        self._tables: Dict[Database, GemmTable] = {}

    def quant(self, text: str) -> QuantMode:
        q = self._quants.get(text)
        if q is None:
            q = self._quants[text] = gemm_quant(text)
        return q

    def db(self, text: str) -> Database:
        db = self._dbs.get(text)
        if db is None:
            s = self.settings
            db = self._dbs[text] = s.tree.resolve(text, s.backend, s.version)
        return db

    def table(self, db: Database) -> GemmTable:
        table = self._tables.get(db)
        if table is None:
            table = self._tables[db] = load_table(self.settings.tree, db, self.settings.shared_layer)
        return table


def _pylist(array) -> list:
    if isinstance(array, pa.ChunkedArray):
        return array.to_pylist()
    if isinstance(array, pa.Array):
        return array.to_pylist()
    if isinstance(array, pa.Scalar):
        return [array.as_py()]
    return list(array)


# ---- entry points called by the Rust bridge ----------------------------------------------


def gemm_latency_batch(
    settings: Dict[str, str],
    db: pa.Array,
    quant: pa.Array,
    m: pa.Array,
    n: pa.Array,
    k: pa.Array,
    *,
    data=None,
) -> pa.Array:
    """The spec's GEMM latency (ms) for each row.

    All arrays have the same length (string / large_string / string_view for db
    and quant, int64 for m, n, k; nulls allowed). Returns float64: NULL where
    any input is NULL, or where the spec misses if ``settings['on_miss'] ==
    'null'``; with 'error', a miss raises ValueError with the spec's message,
    which names the query and the reason. ``data``: the data directories
    (default: ``settings['data']``, else the cache-dir rule).
    """
    s = _Settings(settings, data)
    r = _Resolver(s)
    dbs, quants, ms, ns, ks = (_pylist(a) for a in (db, quant, m, n, k))
    if not len(dbs) == len(quants) == len(ms) == len(ns) == len(ks):
        raise ValueError(
            f"gemm_latency_batch: arrays differ in length ({len(dbs)}, {len(quants)}, {len(ms)}, {len(ns)}, {len(ks)})"
        )
    out: List[Optional[float]] = []
    append = out.append
    raise_on_miss = s.on_miss == "error"
    last: Tuple[object, object] = (None, None)
    last_table: Optional[GemmTable] = None
    last_quant: Optional[QuantMode] = None
    for row_db, row_quant, row_m, row_n, row_k in zip(dbs, quants, ms, ns, ks):
        if row_db is None or row_quant is None or row_m is None or row_n is None or row_k is None:
            append(None)
            continue
        if (row_db, row_quant) != last:  # consecutive rows usually share both
            last_quant = r.quant(row_quant)
            last_table = r.table(r.db(row_db))
            last = (row_db, row_quant)
        check_shape(row_m, row_n, row_k)
        try:
            append(last_table.latency(last_quant, row_m, row_n, row_k))
        except GemmMiss as miss:
            if raise_on_miss:
                raise ValueError(last_table.miss_message(last_quant, row_m, row_n, row_k, miss.reason)) from None
            append(None)
    return pa.array(out, type=pa.float64())


def gemm_trace_table(
    settings: Dict[str, str], db: str, quant: str, m: int, n: int, k: int, *, data=None
) -> pa.RecordBatch:
    """How ``gemm_latency`` reaches its value, one row per step (own-site step,
    or every transfer candidate in rank order), then a ``result`` or ``miss``
    row; schema `TRACE_SCHEMA` (same as the Rust ``gemm_trace``). Any NULL
    argument gives no rows. ``data`` as for `gemm_latency_batch`."""
    if db is None or quant is None or m is None or n is None or k is None:
        return pa.RecordBatch.from_pylist([], schema=TRACE_SCHEMA)
    s = _Settings(settings, data)
    r = _Resolver(s)
    q = r.quant(quant)
    database = r.db(db)
    check_shape(m, n, k)
    rows = r.table(database).trace(q, m, n, k)
    full = [
        dict(db=database.name, quant=q.name, m=m, n=n, k=k, step=i + TRACE_FIRST_STEP, **row)
        for i, row in enumerate(rows)
    ]
    return pa.RecordBatch.from_pylist(full, schema=TRACE_SCHEMA)


# ---- conveniences for tests and users ------------------------------------------------------


def _settings_for(shared_layer: bool, backend: str, version: str, on_miss: str = "null") -> Dict[str, str]:
    return {
        "backend": backend,
        "version": version,
        "on_miss": on_miss,
        "shared_layer": "true" if shared_layer else "false",
    }


def gemm_latency(
    db: str,
    quant: str,
    m: int,
    n: int,
    k: int,
    *,
    shared_layer: bool = True,
    data=None,
    backend: str = "",
    version: str = "latest",
    on_miss: str = "null",
) -> Optional[float]:
    """The spec's latency (ms) of one GEMM, or None where the spec misses
    (``on_miss='error'``: raise ValueError with the spec's message)."""
    s = _Settings(_settings_for(shared_layer, backend, version, on_miss), data)
    r = _Resolver(s)
    q = r.quant(quant)
    table = r.table(r.db(db))
    check_shape(m, n, k)
    try:
        return table.latency(q, m, n, k)
    except GemmMiss as miss:
        if s.on_miss == "error":
            raise ValueError(table.miss_message(q, m, n, k, miss.reason)) from None
        return None


def gemm_trace(
    db: str,
    quant: str,
    m: int,
    n: int,
    k: int,
    *,
    shared_layer: bool = True,
    data=None,
    backend: str = "",
    version: str = "latest",
) -> List[dict]:
    """`gemm_trace_table` as a list of row dicts."""
    settings = _settings_for(shared_layer, backend, version)
    return gemm_trace_table(settings, db, quant, m, n, k, data=data).to_pylist()


def gemm_sol(db: str, quant: str, m: int, n: int, k: int, *, data=None, backend: str = "", version: str = "latest") -> float:
    """SOL latency (ms) of one GEMM on the database's system (docs/spec 5.2)."""
    tree = open_tree(data)
    q = gemm_quant(quant)
    database = tree.resolve(db, backend, version)
    check_shape(m, n, k)
    return _gemm_sol(SystemSpec.from_yaml(database.system, tree.system_yaml(database.system)), q, m, n, k)


# ---- the engine step (aicsql.spec.step; docs/spec/engine_step.md) ------------------------------
# Entry points of the engine-step estimator, next to the GEMM ones: the Rust
# bridge calls `step_latency_batch` with the same settings dict.

from .step.api import engine_step, engine_step_table, step_latency, step_latency_batch  # noqa: E402

__all__ += ["engine_step", "engine_step_table", "step_latency", "step_latency_batch"]
