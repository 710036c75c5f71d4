"""The query sets a parity scan runs: each builder returns a pyarrow Table
with at least ``db, quant, m, n, k`` (plus columns that explain the row).

``gemm-models``
    every GEMM of every model at tp 1/2/4/8 on a ladder of m, on every
    database and quant mode (``queries/parity/model_gemm_shapes.sql``), one
    row per unique query.
``goldens``
    the spec's own GEMM goldens (``gemm_goldens.parquet``): each row carries
    the spec's value, so the report can say whether both paths equal it.
``random``
    seeded random shapes over every (database, quant mode): m in [0, 2^22],
    n and k in [1, 2^18].
``steps``
    engine-step configs (``queries/parity/step_grid.sql``): every model of
    a family aicsql prices (LLAMA, MOE, DEEPSEEK, KIMIK25, HYBRIDMOE,
    QWEN3VL, QWEN3VL_MOE, QWEN35, GEMMA4MIX, NEMOTRONH, NEMOTRONNAS,
    DEEPSEEKV32, DEEPSEEKV4) x the h200_sxm and gb200 databases with the
    tables its family reads x tp 1/2/4/8 x batch 1/8/64 x isl
    128/1024/4096/16384 x osl 2/128 x both phases; compared with
    ``step_latency`` / ``py_step_latency``.
``serving``
    serving points (``queries/parity/serving_grid.sql``): every LLAMA and
    MOE model of the steps grid x the h200_sxm and gb200 databases with the
    tables its family reads x tp 1/2/4/8 x workloads (isl, osl, prefix) =
    (1024, 128, 0), (4000, 1000, 0), (256, 256, 128), as aggregated points
    (batch 1/16/128) and disaggregated ones (the same tp on both sides,
    prefill batch 1, decode batch 16/128, one worker each); MoE models at
    moe_tp = 1, moe_ep = tp. Compared with ``estimate_agg`` /
    ``py_estimate_agg`` and ``estimate_disagg`` / ``py_estimate_disagg``
    field by field (``serving_agg_parity.sql``, ``serving_disagg_parity.sql``).
``serving-dp``
    the serving points at attention dp > 1 (``queries/parity/serving_dp_grid.sql``):
    every MOE model x the same databases x (tp, dp) = (1, 2), (1, 4),
    (2, 2), (2, 4) at moe_tp = 1, moe_ep = tp * dp (trtllm: tp 1 only) x the
    same workloads and batches, priced at the spec's label
    (``tp2pp1dp4etp1ep8``); compared like ``serving``. Opt-in: a Rust path
    without attention dp refuses these points (an error, not a status).
``serving-pp-cp``
    the serving points at pipeline parallelism (pp 2 / 4, tp 1 / 2, every
    backend) and context parallelism (cp 2 / 4 at tp = dp = 1, sglang):
    every LLAMA and MOE model x the same databases, workloads and batches
    (``queries/parity/serving_pp_cp_grid.sql``), priced at the spec's label
    (``tp2pp4dp1etp1ep2``, ``tp1pp1dp1etp1ep4cp4``); compared like ``serving``.
``serving-options``
    the spec's options goldens (``serving_options_goldens.parquet``), every
    point whose arguments are well-formed (``queries/parity/serving_options_grid.sql``):
    quant overrides, TRT-LLM's KV-cache knobs, MTP and images, alone and
    combined, agg and disagg, each point's options as the ``options``
    STRUCT both paths take; compared like ``serving`` (the refused
    deployments: a reason on both sides).
``support-matrix``
    the deployment searches of every covered PASS entry of the support
    matrix (``queries/parity/support_matrix_entries.sql``), graded per
    entry; run by :mod:`.matrix`, not by the query-table runner.
"""

from __future__ import annotations

import os
import random as _random
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from . import sqlfiles

__all__ = [
    "SCANS",
    "goldens_dir",
    "gemm_model_queries",
    "goldens_queries",
    "random_queries",
    "step_queries",
    "serving_queries",
    "serving_dp_queries",
    "serving_pp_cp_queries",
    "db_quants",
]

SCANS = ("gemm-models", "goldens", "random", "steps", "serving", "serving-dp", "serving-pp-cp", "serving-options",
         "support-matrix")

# Ranges of the random scan (inclusive).
RANDOM_M = (0, 1 << 22)
RANDOM_NK = (1, 1 << 18)


def _limit_sql(sql: str, limit: Optional[int]) -> str:
    """`sql` keeping its first `limit` rows. The LIMIT is appended to the
    statement itself: wrapped around it as a subquery, DataFusion is free to
    drop the inner ORDER BY, and "the first N" would be any N."""
    return sql if limit is None else f"{sql}\nLIMIT {int(limit)}"


# ---- gemm-models ------------------------------------------------------------------------


def gemm_model_queries(ctx, limit: Optional[int] = None) -> pa.Table:
    """The queries of ``model_gemm_shapes.sql`` (already unique and ordered by
    db, quant, n, k, m); ``limit`` keeps the first N of them, which touches
    few databases and so makes a quick run."""
    (sql,) = sqlfiles.statements(sqlfiles.load("model_gemm_shapes.sql"))
    return ctx.sql(_limit_sql(sql, limit)).to_arrow_table()


# ---- goldens ------------------------------------------------------------------------------


def goldens_dir() -> Path:
    """``$AICSQL_GOLDENS``, else the repository's own copy, ``<repository>/tests/goldens``
    (the same rule as the golden tests)."""
    if os.environ.get("AICSQL_GOLDENS"):
        return Path(os.environ["AICSQL_GOLDENS"])
    return Path(__file__).resolve().parents[3] / "tests" / "goldens"


def goldens_queries(shared_layer: bool, limit: Optional[int] = None, path: Optional[Path] = None) -> pa.Table:
    """The GEMM goldens as queries, with the spec's value for the given
    shared-layer mode as ``golden_ms`` (the goldens give both: ``latency_ms``
    prices with the database's own file -- ``aic.shared_layer = false`` --,
    ``latency_ms_shared`` with the spec's default union)."""
    path = Path(path) if path is not None else goldens_dir() / "gemm_goldens.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"GEMM goldens not found at {path}; set $AICSQL_GOLDENS to the goldens directory")
    golden = "latency_ms_shared" if shared_layer else "latency_ms"
    t = pq.read_table(path, columns=["row_id", "system", "backend", "version", "quant", "m", "n", "k", "class", golden])
    if limit is not None:
        t = t.slice(0, limit)
    db = [f"{s}/{b}/{v}" for s, b, v in zip(*(t.column(c).to_pylist() for c in ("system", "backend", "version")))]
    return pa.table(
        {
            "db": pa.array(db, pa.utf8()),
            "quant": t.column("quant"),
            "m": t.column("m"),
            "n": t.column("n"),
            "k": t.column("k"),
            "row_id": t.column("row_id"),
            "golden_class": t.column("class"),
            "golden_ms": t.column(golden),
        }
    )


# ---- random -------------------------------------------------------------------------------


def db_quants(ctx) -> List[Tuple[str, str]]:
    """Every (database, quant mode) whose slice the database's own GEMM file
    carries, sorted. The quant -> slice rule is the spec's own
    (``QuantMode.table_slice``: each mode reads its slice, fp8_static reads
    fp8), the same rule ``model_gemm_shapes.sql`` writes out."""
    from aicsql.spec.sol import GEMM_QUANTS

    rows = ctx.sql(
        """
        SELECT DISTINCT d.db, g.gemm_dtype
        FROM aic.meta.databases d
        JOIN (SELECT DISTINCT system, backend, version, gemm_dtype FROM aic.perf.gemm) g
          ON g.system = d.system AND g.backend = d.backend AND g.version = d.version
        WHERE d."table" = 'gemm'
        """
    ).to_arrow_table().to_pylist()
    slices: Dict[str, set] = {}
    for row in rows:
        slices.setdefault(row["db"], set()).add(row["gemm_dtype"])
    return sorted((db, q.name) for db, have in slices.items() for q in GEMM_QUANTS.values() if q.table_slice in have)


def _log_uniform(rnd: _random.Random, lo: int, hi: int) -> int:
    """An integer in [lo, hi], every power-of-two range [2^e, 2^(e+1)) equally
    likely (and 0 as likely as one such range when lo = 0): the tables are
    dense at small sizes and sparse at large ones, so a uniform draw would
    almost never ask for m < 1000."""
    top = hi.bit_length() - 1
    first = -1 if lo == 0 else lo.bit_length() - 1
    e = rnd.randint(first, top)
    if e < 0:
        return 0
    return rnd.randint(max(lo, 1 << e), min(hi, (2 << e) - 1))


def random_queries(
    ctx, size: int = 100_000, seed: int = 0, pairs: Optional[Sequence[Tuple[str, str]]] = None, limit: Optional[int] = None
) -> pa.Table:
    """``size`` distinct random queries, spread evenly over every (database,
    quant mode) (`db_quants`), reproducible from ``seed``: m in [0, 2^22], n
    and k in [1, 2^18], each drawn log-uniformly (see `_log_uniform`)."""
    pairs = list(pairs) if pairs is not None else db_quants(ctx)
    if limit is not None:
        size = min(size, limit)
    rnd = _random.Random(seed)
    cols: Dict[str, list] = {"db": [], "quant": [], "m": [], "n": [], "k": []}
    for i, (db, quant) in enumerate(pairs):
        want = size // len(pairs) + (1 if i < size % len(pairs) else 0)
        seen = set()
        attempts = 0
        while len(seen) < want and attempts < 100 * want:
            attempts += 1
            shape = (_log_uniform(rnd, *RANDOM_M), _log_uniform(rnd, *RANDOM_NK), _log_uniform(rnd, *RANDOM_NK))
            if shape in seen:
                continue
            seen.add(shape)
            m, n, k = shape
            for name, value in (("db", db), ("quant", quant), ("m", m), ("n", n), ("k", k)):
                cols[name].append(value)
    return pa.table(
        {
            "db": pa.array(cols["db"], pa.utf8()),
            "quant": pa.array(cols["quant"], pa.utf8()),
            "m": pa.array(cols["m"], pa.int64()),
            "n": pa.array(cols["n"], pa.int64()),
            "k": pa.array(cols["k"], pa.int64()),
        }
    )


# ---- steps ---------------------------------------------------------------------------------


def step_queries(ctx, limit: Optional[int] = None) -> pa.Table:
    """The configs of ``step_grid.sql`` (ordered by model, db, phase, tp,
    batch, isl, osl); ``limit`` keeps the first N."""
    (sql,) = sqlfiles.statements(sqlfiles.load("step_grid.sql"))
    return ctx.sql(_limit_sql(sql, limit)).to_arrow_table()


# ---- serving ---------------------------------------------------------------------------------


def serving_queries(ctx, limit: Optional[int] = None, grid: str = "serving_grid.sql") -> Tuple[pa.Table, pa.Table]:
    """The points of ``serving_grid.sql`` (or `grid`), split into (aggregated,
    disaggregated), each in grid order; ``limit`` keeps the first N of each."""
    import pyarrow.compute as pc

    (sql,) = sqlfiles.statements(sqlfiles.load(grid))
    grid = ctx.sql(sql).to_arrow_table()
    parts = []
    for mode in ("agg", "disagg"):
        part = grid.filter(pc.equal(grid.column("mode").cast(pa.string()), mode))
        parts.append(part if limit is None else part.slice(0, limit))
    return parts[0], parts[1]


def serving_dp_queries(ctx, limit: Optional[int] = None) -> Tuple[pa.Table, pa.Table]:
    """The points of ``serving_dp_grid.sql`` (attention dp > 1), as `serving_queries`."""
    return serving_queries(ctx, limit, "serving_dp_grid.sql")


def serving_options_queries(ctx, limit: Optional[int] = None,
                            path: Optional[Path] = None) -> Tuple[pa.Table, pa.Table]:  # fmt: skip
    """The points of ``serving_options_grid.sql`` over the options goldens
    (``path``, default the goldens directory's), as `serving_queries`."""
    path = path or goldens_dir() / "serving_options_goldens.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"the options goldens are not at {path}; set $AICSQL_GOLDENS")
    ctx.register_parquet("serving_options_goldens", str(path))
    try:
        return serving_queries(ctx, limit, "serving_options_grid.sql")
    finally:
        ctx.deregister_table("serving_options_goldens")


def serving_pp_cp_queries(ctx, limit: Optional[int] = None) -> Tuple[pa.Table, pa.Table]:
    """The points of ``serving_pp_cp_grid.sql`` (pipeline parallelism pp 2 / 4
    on every backend, context parallelism cp 2 / 4 on sglang), as `serving_queries`."""
    return serving_queries(ctx, limit, "serving_pp_cp_grid.sql")
