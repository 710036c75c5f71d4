"""Running parity scans and bisecting a drift.

A scan evaluates both paths on every query of a query table, in chunks:

1. register the chunk as ``parity_queries``;
2. ``SELECT <rust>(db, quant, m, n, k)`` over it, timed;
3. ``SELECT <python>(db, quant, m, n, k)`` over it, timed -- a separate
   query, so each path's time is its own and queries/s compare fairly;
4. register the chunk with both columns as ``parity_results`` and run the
   verdict statement of ``queries/parity/gemm_parity.sql`` over it.

Step 4 runs the file's second statement unchanged; steps 2-3 stand in for
its first one (the ``parity_results`` view), split in two so that each
path is timed apart. The serving scan does this twice, ``estimate_agg``
over its aggregated points and ``estimate_disagg`` over its disaggregated
ones (``serving_agg_parity.sql``, ``serving_disagg_parity.sql``: struct
columns ``rust`` / ``py`` compared field by field), and concatenates the
two reports. Chunks let a progress bar move and keep each SQL run
small; both paths cache their tables per process, so chunking costs
nothing else.
"""

from __future__ import annotations

import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from . import scans, sqlfiles
from .progress import Progress

__all__ = ["run", "evaluate", "bisect", "bisect_step", "STATUSES", "DEFAULT_CHUNK"]

STATUSES = ("STRICT_PASS", "DRIFT", "REGRESSION", "EXTRA", "MISS_BOTH")
DEFAULT_CHUNK = 20_000
_BATCH = 8192  # rows per record batch: lets DataFusion spread a chunk over its partitions

# The column that numbers a scan's rows while it runs (dropped from the report).
ROW_ID = "_parity_row"

# Keys of the report's schema metadata.
META = "aicsql.parity."


# ---- session helpers -----------------------------------------------------------------------


def _setting(ctx, name: str) -> Optional[str]:
    rows = ctx.sql(f"SELECT value FROM information_schema.df_settings WHERE name = '{name}'").to_arrow_table().to_pylist()
    return rows[0]["value"] if rows else None


def _set(ctx, name: str, value: str) -> None:
    try:
        ctx.sql(f"SET {name} = '{value}'").collect()
    except Exception as e:  # the session lacks the aic settings namespace
        raise ValueError(
            f"cannot SET {name}: build the session with aicsql.context() or aicsql.session_config() ({e})"
        ) from None


class _Settings:
    """Sets aic.* settings for the duration of a scan, then puts the old values back."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.saved: Dict[str, Optional[str]] = {}

    def set(self, name: str, value: str) -> None:
        if name not in self.saved:
            self.saved[name] = _setting(self.ctx, name)
        _set(self.ctx, name, value)

    def restore(self) -> None:
        for name, value in self.saved.items():
            if value is not None:
                _set(self.ctx, name, value)


def _register(ctx, name: str, table: pa.Table) -> None:
    ctx.deregister_table(name)
    # A table without rows still registers its columns (DataFusion needs one batch for the schema).
    batches = table.to_batches(max_chunksize=_BATCH) or [pa.RecordBatch.from_pylist([], schema=table.schema)]
    ctx.register_record_batches(name, [batches])


def _plain_strings(table: pa.Table) -> pa.Table:
    """string_view columns (DataFusion's default for computed strings) as
    plain utf8: several pyarrow kernels and CSV writers lack view support."""
    for i, field in enumerate(table.schema):
        if field.type == pa.string_view() or field.type == pa.large_string():
            table = table.set_column(i, field.name, table.column(i).cast(pa.utf8()))
    return table


def _flag(value: Union[bool, str]) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"shared_layer = {value!r} is not true or false")


# ---- evaluation ------------------------------------------------------------------------------


class Kind:
    """What a scan compares: the default function pair, their arguments (the
    query table's columns), the parity file whose second statement is the
    verdict, and the result columns the verdict reads (with their type when
    there are no rows)."""

    def __init__(self, rust: str, python: str, args: str, sql_file: str, columns: Tuple[str, str] = ("rust_ms", "py_ms"),
                 result_type: Optional[pa.DataType] = None):  # fmt: skip
        self.rust, self.python, self.args, self.sql_file = rust, python, args, sql_file
        self.columns = columns
        self.result_type = result_type if result_type is not None else pa.float64()


GEMM = Kind("gemm_latency", "py_gemm_latency", "db, quant, m, n, k", "gemm_parity.sql")
STEPS = Kind("step_latency", "py_step_latency", "model, db, phase, tp, batch, isl, osl, moe_tp, moe_ep", "step_parity.sql")


def _serving_kinds(layout: str = "tp") -> Dict[str, Kind]:
    """The serving scan's two kinds; ``layout``: the grid column passed as
    the ``parallel`` argument ('tp', or 'parallel' -- the spec's label -- for
    the serving-dp grid)."""
    from aicsql.spec.serving import AGG_SCHEMA, DISAGG_SCHEMA

    return {
        "agg": Kind("estimate_agg", "py_estimate_agg",
                    f"model, db, {layout}, batch, isl, osl, prefix, CAST(NULL AS BIGINT), moe_tp, moe_ep",
                    "serving_agg_parity.sql", ("rust", "py"), AGG_SCHEMA),
        "disagg": Kind("estimate_disagg", "py_estimate_disagg",
                       f"model, db, {layout}, prefill_batch, prefill_workers, {layout}, decode_batch, decode_workers, "
                       "isl, osl, prefix, moe_tp, moe_ep, moe_tp, moe_ep",
                       "serving_disagg_parity.sql", ("rust", "py"), DISAGG_SCHEMA),
    }  # fmt: skip


def _options_kinds() -> Dict[str, Kind]:
    """The options scan's two kinds: every argument of the golden point,
    its own layout per side and its ``options`` STRUCT."""
    from aicsql.spec.serving import AGG_SCHEMA, DISAGG_SCHEMA

    return {
        "agg": Kind("estimate_agg", "py_estimate_agg",
                    "model, db, tp, batch, isl, osl, prefix, ctx_tokens, moe_tp, moe_ep, options",
                    "serving_agg_parity.sql", ("rust", "py"), AGG_SCHEMA),
        "disagg": Kind("estimate_disagg", "py_estimate_disagg",
                       "model, db, prefill_tp, prefill_batch, prefill_workers, decode_tp, decode_batch, decode_workers, "
                       "isl, osl, prefix, prefill_moe_tp, prefill_moe_ep, decode_moe_tp, decode_moe_ep, options",
                       "serving_disagg_parity.sql", ("rust", "py"), DISAGG_SCHEMA),
    }  # fmt: skip


def _verdict_sql(sql_file: str = GEMM.sql_file) -> str:
    stmts = sqlfiles.statements(sqlfiles.load(sql_file))
    if len(stmts) != 2 or "parity_results" not in stmts[1]:
        raise ValueError(f"{sql_file} must hold two statements: the parity_results view, then the verdict over it")
    return stmts[1]


def _column(result: pa.Table, name: str, expected: pa.Array) -> pa.ChunkedArray:
    """`name` of a single-path result, in the chunk's row order (DataFusion
    may return rows of several partitions in any order: align on the row id)."""
    result = result.sort_by(ROW_ID)
    if not result.column(ROW_ID).equals(pa.chunked_array([expected])):
        raise RuntimeError("a path returned a different set of rows than it was given")
    return result.column(name)


def evaluate(
    ctx,
    queries: pa.Table,
    *,
    rust: Optional[str] = None,
    python: Optional[str] = None,
    chunk_size: int = DEFAULT_CHUNK,
    progress: Optional[Progress] = None,
    offset: int = 0,
    kind: Kind = GEMM,
) -> Tuple[pa.Table, float, float]:
    """Both paths and the verdict for every row of ``queries`` (the columns
    ``kind.args`` names -- ``db, quant, m, n, k`` for GEMMs -- and any
    others), under the session's current settings. Returns (report rows in query order, seconds of the Rust
    column, seconds of the Python column). ``progress`` is advanced by the
    rows done, starting at ``offset``."""
    rust = rust or kind.rust
    python = python or kind.python
    sqlfiles.check_identifier(rust)
    sqlfiles.check_identifier(python)
    rust_col, py_col = kind.columns
    verdict = _verdict_sql(kind.sql_file)
    if ROW_ID in queries.column_names:
        raise ValueError(f"the queries table may not have a column named {ROW_ID!r}")
    queries = queries.append_column(ROW_ID, pa.array(range(queries.num_rows), pa.int64()))
    parts: List[pa.Table] = []
    rust_s = python_s = 0.0
    for start in range(0, queries.num_rows, chunk_size):
        chunk = queries.slice(start, chunk_size)
        row_ids = chunk.column(ROW_ID).combine_chunks()
        _register(ctx, "parity_queries", chunk)
        columns = {}
        for label, function, column in (("Rust", rust, rust_col), ("Python", python, py_col)):
            t0 = time.perf_counter()
            try:
                result = ctx.sql(
                    f"SELECT {ROW_ID}, {function}({kind.args}) AS {column} FROM parity_queries"
                ).to_arrow_table()
            except Exception as e:
                first = chunk.slice(0, 1).to_pylist()[0]
                where = ", ".join(f"{k}={first.get(k)!r}" for k in (a.strip() for a in kind.args.split(",")))
                raise RuntimeError(
                    f"the {label} path ({function}) failed on rows {start}..{start + chunk.num_rows - 1} "
                    f"(from {where}): {e}"
                ) from e
            elapsed = time.perf_counter() - t0
            if label == "Rust":
                rust_s += elapsed
            else:
                python_s += elapsed
            columns[column] = _column(result, column, row_ids)
        results = chunk.append_column(rust_col, columns[rust_col]).append_column(py_col, columns[py_col])
        _register(ctx, "parity_results", results)
        parts.append(ctx.sql(verdict).to_arrow_table().sort_by(ROW_ID))
        if progress is not None:
            progress.update(offset + start + chunk.num_rows)
    ctx.deregister_table("parity_queries")
    ctx.deregister_table("parity_results")
    if parts:
        report = pa.concat_tables([_plain_strings(p) for p in parts])
    else:  # no queries: the verdict's columns, no rows
        empty = queries.append_column(rust_col, pa.array([], kind.result_type)).append_column(
            py_col, pa.array([], kind.result_type)
        )
        _register(ctx, "parity_results", empty)
        report = _plain_strings(ctx.sql(verdict).to_arrow_table())
        ctx.deregister_table("parity_results")
    return report.drop_columns([ROW_ID]), rust_s, python_s


def _golden_match(report: pa.Table) -> pa.Table:
    """Adds ``golden_match``: both paths equal the spec's golden value bit for
    bit, or all three are NULL (the spec misses)."""
    golden = report.column("golden_ms").to_pylist()
    rust = report.column("rust_ms").to_pylist()
    py = report.column("py_ms").to_pylist()
    match = [g == r == p if g is not None else (r is None and p is None) for g, r, p in zip(golden, rust, py)]
    return report.append_column("golden_match", pa.array(match, pa.bool_()))


def run(
    ctx,
    scan: str = "gemm-models",
    *,
    queries: Optional[pa.Table] = None,
    shared_layer: Union[None, bool, str, Sequence[Union[bool, str]]] = None,
    limit: Optional[int] = None,
    seed: int = 0,
    size: int = 100_000,
    chunk_size: int = DEFAULT_CHUNK,
    rust: Optional[str] = None,
    python: Optional[str] = None,
    progress: Optional[bool] = None,
) -> pa.Table:
    """Runs a parity scan and returns its report: one row per query with
    ``scan, shared_layer``, the query's columns, ``rust_ms, py_ms, status,
    rel_diff`` (and ``golden_ms, golden_match`` for the goldens).

    ``scan``: 'gemm-models', 'goldens', 'random', 'steps' (engine-step
    configs, compared with step_latency / py_step_latency) or 'serving'
    (estimate_agg / py_estimate_agg over the aggregated points, then
    estimate_disagg / py_estimate_disagg over the disaggregated ones, field
    by field: the report says which ``field`` drifts worst, with
    ``rust_value, py_value, rel_diff`` and each side's reason) or
    'serving-dp' (the same at attention dp > 1, MOE models) or
    'serving-pp-cp' (the same at pp 2 / 4 and, on sglang, cp 2 / 4) or
    'serving-options' (the spec's options goldens, each point with its
    options STRUCT) or
    'support-matrix' (the deployment searches of the support matrix's
    entries: `aicsql.parity.matrix.run`, which has the options of that
    scan); see :mod:`.scans`. Or pass your own ``queries`` table (``db, quant, m, n, k``,
    ...), then ``scan`` only labels the report.
    ``shared_layer``: the ``aic.shared_layer`` mode(s) to run in. Default:
    both for the goldens (they carry the spec's value for each), the
    session's current mode otherwise. The session's settings are restored
    afterwards; ``aic.on_miss`` is 'null' during the scan (a miss is a
    status, not an error).
    ``limit``: at most N queries (per mode; the serving scan: the first N
    aggregated and the first N disaggregated points). ``seed``, ``size``: the
    random scan. ``rust``, ``python``: the scalar functions compared (default
    the product pair of the scan's kind; a test registers a faulty Python
    variant and names it here; the serving scan takes
    'agg_function,disagg_function', a single name replacing the agg one).
    ``progress``: None = automatic (see :class:`Progress`), False = silent.

    Timing goes into the schema metadata (``aicsql.parity.*``): the seconds
    spent in each path's column (including first-use table loads), building
    the queries, and wall time; :func:`aicsql.parity.summary` reads them.
    """
    wall0 = time.perf_counter()
    if queries is None and scan not in scans.SCANS:
        raise ValueError(f"unknown scan {scan!r}; valid: {', '.join(scans.SCANS)}")
    if scan == "support-matrix" and queries is None:
        from . import matrix  # the search scan has its own runner (entries, resumable report)

        if shared_layer is not None:
            raise ValueError("the support-matrix scan runs under the session's aic.shared_layer; SET it instead")
        return matrix.run(ctx, limit=limit, rust=rust, python=python, progress=progress)
    if scan in ("serving", "serving-dp", "serving-pp-cp", "serving-options") and queries is None:
        # (kind, rust, python) per part: aggregated points, then disaggregated ones.
        if scan == "serving-options":
            serving = _options_kinds()
        else:
            serving = _serving_kinds("tp" if scan == "serving" else "parallel")
        rust_names, python_names = _pair(rust), _pair(python)
        kinds = [(serving[m], rust_names[i] or serving[m].rust, python_names[i] or serving[m].python)
                 for i, m in enumerate(("agg", "disagg"))]  # fmt: skip
    else:
        kind = STEPS if scan == "steps" else GEMM
        kinds = [(kind, rust or kind.rust, python or kind.python)]
    settings = _Settings(ctx)
    try:
        settings.set("aic.on_miss", "null")
        if shared_layer is None:
            modes = [False, True] if (queries is None and scan == "goldens") else [_flag(_setting(ctx, "aic.shared_layer") or "true")]
        elif isinstance(shared_layer, (bool, str)):
            modes = [_flag(shared_layer)]
        else:
            modes = [_flag(v) for v in shared_layer]

        label = f"parity {scan}"
        if progress is not False and (progress or sys.stderr.isatty()):
            # Building gemm-models takes seconds before the bar can know its total.
            print(f"{label}: building the queries ...", file=sys.stderr, flush=True)
        build_s = 0.0
        plans: List[Tuple[bool, Kind, str, str, pa.Table]] = []
        built: Optional[List[pa.Table]] = None  # the scans that do not depend on the mode: built once
        for mode in modes:
            t0 = time.perf_counter()
            if queries is not None:
                tables = [queries if limit is None else queries.slice(0, limit)]
            elif scan == "goldens":
                tables = [scans.goldens_queries(mode, limit)]
            elif built is not None:
                tables = built
            elif scan == "gemm-models":
                tables = [scans.gemm_model_queries(ctx, limit)]
            elif scan == "steps":
                tables = [scans.step_queries(ctx, limit)]
            elif scan == "serving":
                tables = list(scans.serving_queries(ctx, limit))
            elif scan == "serving-dp":
                tables = list(scans.serving_dp_queries(ctx, limit))
            elif scan == "serving-pp-cp":
                tables = list(scans.serving_pp_cp_queries(ctx, limit))
            elif scan == "serving-options":
                tables = list(scans.serving_options_queries(ctx, limit))
            else:
                tables = [scans.random_queries(ctx, size=size, seed=seed, limit=limit)]
            built = tables
            build_s += time.perf_counter() - t0
            for (kind, rust_fn, python_fn), table in zip(kinds, tables):
                plans.append((mode, kind, rust_fn, python_fn, _plain_strings(table)))

        total = sum(p[4].num_rows for p in plans)
        rust_s = python_s = 0.0
        parts = []
        with Progress(total, label, enabled=progress) as bar:
            done = 0
            for mode, kind, rust_fn, python_fn, table in plans:
                settings.set("aic.shared_layer", "true" if mode else "false")
                report, r_s, p_s = evaluate(
                    ctx, table, rust=rust_fn, python=python_fn, chunk_size=chunk_size, progress=bar, offset=done,
                    kind=kind,
                )  # fmt: skip
                done += table.num_rows
                rust_s += r_s
                python_s += p_s
                n = report.num_rows
                report = report.add_column(0, "shared_layer", pa.array([mode] * n, pa.bool_()))
                report = report.add_column(0, "scan", pa.array([scan] * n, pa.utf8()))
                if "golden_ms" in report.column_names:
                    report = _golden_match(report)
                parts.append(report)
    finally:
        settings.restore()

    rust = ",".join(dict.fromkeys(k[1] for k in kinds))
    python = ",".join(dict.fromkeys(k[2] for k in kinds))
    report = pa.concat_tables(parts)
    metadata = {
        "scan": scan,
        "shared_layer": ",".join("true" if m else "false" for m in modes),
        "queries": str(report.num_rows),
        "rust_function": rust,
        "python_function": python,
        "rust_seconds": repr(rust_s),
        "python_seconds": repr(python_s),
        "build_seconds": repr(build_s),
        "wall_seconds": repr(time.perf_counter() - wall0),
    }
    return report.replace_schema_metadata({META + k: v for k, v in metadata.items()})


def _pair(names: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """``--rust`` / ``--python`` of the serving scan: 'agg_function,disagg_function'
    (either may be empty: the default); a single name replaces the agg one."""
    if not names:
        return None, None
    parts = [p.strip() or None for p in names.split(",")]
    if len(parts) > 2:
        raise ValueError(f"{names!r}: the serving scan takes 'agg_function,disagg_function'")
    return parts[0], parts[1] if len(parts) == 2 else None


# ---- bisection -------------------------------------------------------------------------------


def bisect(
    ctx,
    db: str,
    quant: str,
    m: int,
    n: int,
    k: int,
    rust: str = "gemm_trace",
    python: str = "py_gemm_trace",
) -> pa.Table:
    """The first step where the two paths' traces of one query differ, both
    sides side by side, with a ``diagnosis`` (``queries/parity/gemm_bisect.sql``).
    No row: the traces are identical. ``rust``, ``python``: the trace table
    functions compared. Runs under the session's current settings."""
    (sql,) = sqlfiles.statements(sqlfiles.load("gemm_bisect.sql"))
    sql = sqlfiles.rename_functions(sql, {"gemm_trace": rust, "py_gemm_trace": python})
    sql = sqlfiles.substitute(sql, {"db": str(db), "quant": str(quant), "m": int(m), "n": int(n), "k": int(k)})
    return _plain_strings(ctx.sql(sql).to_arrow_table())


def bisect_step(
    ctx,
    model: str,
    db: str,
    phase: str,
    tp: int,
    batch: int,
    isl: int,
    osl: int,
    moe_tp: Optional[int] = None,
    moe_ep: Optional[int] = None,
    rust: str = "engine_step",
    python: str = "py_engine_step",
    *,
    dp: Optional[int] = None,
    pp: Optional[int] = None,
    cp: Optional[int] = None,
) -> pa.Table:
    """The first row (op, in step order) where the two paths' breakdowns of
    one engine step differ, both sides side by side, with a ``diagnosis``
    (``queries/parity/step_bisect.sql``). No row: the steps are identical.
    ``rust``, ``python``: the table functions compared. ``dp``, ``pp``,
    ``cp``: attention data, pipeline and context parallelism (None: 1), as
    ``engine_step`` takes them. Runs under the session's current settings."""
    (sql,) = sqlfiles.statements(sqlfiles.load("step_bisect.sql"))
    if all(v is None for v in (dp, pp, cp)):
        sql = sql.replace(", $dp, $pp, $cp)", ")")  # the 9-argument form
        if moe_tp is None and moe_ep is None:
            sql = sql.replace(", $moe_tp, $moe_ep)", ")")  # the 7-argument form: a MoE model infers nothing
    sql = sqlfiles.rename_functions(sql, {"engine_step": rust, "py_engine_step": python})
    params = {"model": str(model), "db": str(db), "phase": str(phase), "tp": int(tp), "batch": int(batch),
              "isl": int(isl), "osl": int(osl), "moe_tp": moe_tp, "moe_ep": moe_ep,
              "dp": dp, "pp": pp, "cp": cp}  # fmt: skip
    return _plain_strings(ctx.sql(sqlfiles.substitute(sql, params)).to_arrow_table())
