"""Parity scans (`aicsql.parity`, `queries/parity/*.sql`): Rust path vs Python path.

The centrepiece is a drift bisection demo. A test-only faulty variant of the
Python path orders GEMM sites by their sorted (n, k) keys instead of the
spec's first-appearance order -- exactly the mistake behind an upstream
port's +3 % drift (the goldens carry that port's numbers as
``faulty_latency_ms``). A parity scan must call it DRIFT, and
``aicsql.parity.bisect`` must point at the step where it goes wrong: the
4th neighbour, a distance tie broken by site order (docs/spec 11.4).

Expected numbers come from the spec (docs/spec/engine_step.md) and the goldens,
never from the code under test.

Data: the cache rule (``$AICSQL_DATA``, ...). Goldens: ``$AICSQL_GOLDENS``,
else ``<repo>/tests/goldens``.
"""

from __future__ import annotations

import io
import math
import types

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import aicsql
import aicsql.parity as parity
from aicsql import _internal
from aicsql.parity import progress as progress_mod
from aicsql.parity import scans, sqlfiles
from aicsql.parity.__main__ import main
from aicsql.spec import functions as spec_functions
from aicsql.spec import gemm as spec_gemm
from datafusion.user_defined import ScalarUDF, TableFunction

SEED_DB = "h200_sxm/vllm/0.19.0"
SEED_QUANT = "fp8_block"
SEED_N, SEED_K = 1280, 5120
SEED_MS = (1, 4, 32, 416)
# docs/spec 11.4: (1536,4096) and (1024,6144) are both this far from
# (1280,5120); the spec's site order puts (1536,4096) first.
TIE_DISTANCE = 0.41572201881803594
SPEC_SITE = (1536, 4096)
SORTED_SITE = (1024, 6144)

GOLDENS = scans.goldens_dir() / "gemm_goldens.parquet"


# ---- the faulty variant (test only) ------------------------------------------------------------


class _SortedSiteWalk:
    """Stands in for a slice's nested ``[m][n][k]`` dict while `GemmSlice`
    indexes it: its ``items()`` walks the cells site by site in sorted (n, k)
    order, so "first appearance" becomes sorted order. Same cells, same
    values; only the site order changes."""

    def __init__(self, table):
        self._table = table

    def items(self):
        cells = sorted(
            (n, k, m, latency)
            for m, by_n in self._table.items()
            for n, by_k in by_n.items()
            for k, latency in by_k.items()
        )
        for n, k, m, latency in cells:
            yield m, {n: {k: latency}}


class SortedSiteSlice(spec_gemm.GemmSlice):
    """The faulty port: sites in sorted key order instead of first appearance."""

    def __init__(self, system, table):
        super().__init__(system, _SortedSiteWalk(table))
        self.table = table


class SortedSiteTable(spec_gemm.GemmTable):
    def _load_slice(self, dtype):
        spec_slice = super()._load_slice(dtype)
        return SortedSiteSlice(spec_slice.system, spec_slice.table)


_SORTED_TABLES = {}


class SortedResolver(spec_functions._Resolver):
    """The spec's per-call resolver, handing out faulty tables (cached apart
    from the spec's own, which stay untouched)."""

    def table(self, db):
        key = (id(self.settings.tree), db, self.settings.shared_layer)
        if key not in _SORTED_TABLES:
            _SORTED_TABLES[key] = SortedSiteTable(self.settings.tree, db, self.settings.shared_layer)
        return _SORTED_TABLES[key]


def _rebind(function, **names):
    """`function`'s own code with some module-level names rebound: the spec's
    batch and trace entry points, running on `SortedResolver`, without
    copying their bodies or patching the spec module."""
    scope = dict(function.__globals__)
    scope.update(names)
    clone = types.FunctionType(function.__code__, scope, function.__name__, function.__defaults__, function.__closure__)
    clone.__kwdefaults__ = dict(function.__kwdefaults__ or {})
    return clone


sorted_latency_batch = _rebind(spec_functions.gemm_latency_batch, _Resolver=SortedResolver)
sorted_trace_table = _rebind(spec_functions.gemm_trace_table, _Resolver=SortedResolver)


def register_sorted_variant(ctx) -> None:
    """Registers ``py_gemm_latency_sorted`` / ``py_gemm_trace_sorted`` the way
    `aicsql.register` registers the Python path (a settings-aware bridge
    with the Rust function's signature)."""
    dirs = aicsql._data_dirs(None)
    library = _internal.Library(dirs)

    def latency(settings, *arrays):
        return sorted_latency_batch(settings, *arrays, data=dirs)

    def trace(settings, *args):
        return sorted_trace_table(settings, *args, data=dirs)

    ctx.register_udf(ScalarUDF.from_pycapsule(library.python_scalar("py_gemm_latency_sorted", "gemm_latency", latency)))
    ctx.register_udtf(
        TableFunction(
            "py_gemm_trace_sorted", library.python_table_function("py_gemm_trace_sorted", "gemm_trace", trace), ctx
        )
    )


# ---- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx():
    session = aicsql.context()
    register_sorted_variant(session)
    return session


@pytest.fixture(scope="module")
def goldens():
    if not GOLDENS.is_file():
        pytest.fail(f"GEMM goldens not found at {GOLDENS} (set $AICSQL_GOLDENS)")
    return pq.read_table(GOLDENS)


def _seed_queries() -> pa.Table:
    n = len(SEED_MS)
    return pa.table(
        {
            "db": [SEED_DB] * n,
            "quant": [SEED_QUANT] * n,
            "m": pa.array(SEED_MS, pa.int64()),
            "n": pa.array([SEED_N] * n, pa.int64()),
            "k": pa.array([SEED_K] * n, pa.int64()),
        }
    )


def _golden_rows(goldens, m_values):
    """The golden rows of the seed case, by m."""
    out = {}
    for row in goldens.to_pylist():
        if (
            f"{row['system']}/{row['backend']}/{row['version']}" == SEED_DB
            and row["quant"] == SEED_QUANT
            and (row["n"], row["k"]) == (SEED_N, SEED_K)
            and row["m"] in m_values
        ):
            out[row["m"]] = row
    return out


# ---- the drift bisection demo --------------------------------------------------------------------


def test_faulty_variant_drifts_on_the_seed_case(ctx, goldens):
    report = parity.run(ctx, "seed-case", queries=_seed_queries(), shared_layer=False, python="py_gemm_latency_sorted")
    rows = {r["m"]: r for r in report.to_pylist()}
    assert set(rows) == set(SEED_MS)
    expected = _golden_rows(goldens, SEED_MS)
    assert set(expected) == set(SEED_MS), "the goldens should cover the seed case"
    for m, row in rows.items():
        assert row["status"] == "DRIFT", row
        assert row["shared_layer"] is False
        # The Rust path gives the spec's value, the faulty variant the faulty port's.
        assert row["rust_ms"] == expected[m]["latency_ms"]
        assert row["py_ms"] == expected[m]["faulty_latency_ms"]
        assert row["rel_diff"] == abs(row["rust_ms"] - row["py_ms"]) / abs(row["py_ms"])
        assert row["rel_diff"] > 0
    assert parity.exit_status(report) == 1
    assert parity.status_counts(report)["DRIFT"] == len(SEED_MS)


def test_product_pair_passes_the_seed_case(ctx):
    report = parity.run(ctx, "seed-case", queries=_seed_queries(), shared_layer=False)
    assert report.column("status").to_pylist() == ["STRICT_PASS"] * len(SEED_MS)
    assert parity.exit_status(report) == 0


@pytest.mark.parametrize("m", SEED_MS)
def test_bisect_names_the_tie(ctx, m):
    ctx.sql("SET aic.shared_layer = false").collect()
    try:
        found = parity.bisect(ctx, SEED_DB, SEED_QUANT, m, SEED_N, SEED_K, python="py_gemm_trace_sorted")
    finally:
        ctx.sql("SET aic.shared_layer = true").collect()
    assert found.num_rows == 1
    row = found.to_pylist()[0]
    # The first difference is the 4th neighbour: same rank, same distance, other site.
    assert row["rank_rust"] == row["rank_py"] == 4
    assert row["stage_rust"] == row["stage_py"] == "transfer"
    assert row["distance_rust"] == row["distance_py"] == TIE_DISTANCE
    assert (row["site_n_rust"], row["site_k_rust"]) == SPEC_SITE
    assert (row["site_n_py"], row["site_k_py"]) == SORTED_SITE
    assert row["selected_rust"] and row["selected_py"]
    assert "tie" in row["diagnosis"] and "site order" in row["diagnosis"]


def test_bisect_of_identical_traces_is_empty(ctx):
    assert parity.bisect(ctx, SEED_DB, SEED_QUANT, 32, SEED_N, SEED_K).num_rows == 0


def test_faulty_variant_is_the_goldens_faulty_port(ctx, goldens):
    """The variant is not a strawman: on every golden row it gives the
    upstream faulty port's number (``faulty_latency_ms``, own-file mode)."""
    report = parity.run(ctx, "goldens", shared_layer=False, python="py_gemm_latency_sorted", progress=False)
    assert report.column("row_id").to_pylist() == goldens.column("row_id").to_pylist()
    faulty = goldens.column("faulty_latency_ms").to_pylist()
    assert report.column("py_ms").to_pylist() == faulty
    # DRIFT exactly where the faulty port differs from the spec.
    spec = goldens.column("latency_ms").to_pylist()
    differs = [s != f for s, f in zip(spec, faulty)]
    assert [s == "DRIFT" for s in report.column("status").to_pylist()] == differs
    assert any(differs)


# ---- scans ----------------------------------------------------------------------------------------


def test_goldens_scan_passes_both_modes(ctx, goldens):
    report = parity.run(ctx, "goldens", progress=False)
    assert report.num_rows == 2 * goldens.num_rows  # own file, then shared layer
    assert sorted(set(report.column("shared_layer").to_pylist())) == [False, True]
    counts = parity.status_counts(report)
    assert counts["STRICT_PASS"] + counts["MISS_BOTH"] == report.num_rows, counts
    # Both paths equal the spec's own numbers, misses included.
    assert all(report.column("golden_match").to_pylist())
    assert parity.exit_status(report) == 0


def test_gemm_models_quick_scan(ctx):
    report = parity.run(ctx, "gemm-models", limit=3000, progress=False)
    assert report.num_rows == 3000
    counts = parity.status_counts(report)
    assert counts["DRIFT"] == 0 and counts["REGRESSION"] == 0 and counts["EXTRA"] == 0, counts
    assert parity.exit_status(report) == 0
    keys = set(zip(*(report.column(c).to_pylist() for c in ("db", "quant", "m", "n", "k"))))
    assert len(keys) == report.num_rows  # one row per unique query
    meta = parity.summary(report)
    assert meta["queries"] == 3000 and meta["rust_seconds"] > 0 and meta["python_seconds"] > 0


def test_model_gemm_shapes_follow_the_spec(ctx):
    """Qwen3-32B(-FP8) at tp 8 on h200_sxm/vllm/0.19.0, the spec's worked
    example (section 12): its five GEMM shapes are among the queries. And
    the queries are unique, with fp8_static wherever fp8 is."""
    queries = scans.gemm_model_queries(ctx)
    seed = queries.filter(
        pc.and_(
            pc.and_(pc.equal(queries["db"], SEED_DB), pc.equal(queries["quant"], "fp8_block")),
            pc.equal(queries["m"], 1024),
        )
    )
    have = set(zip(seed["n"].to_pylist(), seed["k"].to_pylist()))
    worked_example = {(1280, 5120), (5120, 1024), (6400, 5120), (5120, 3200), (18992, 5120)}
    assert worked_example <= have
    keys = ["db", "quant", "m", "n", "k"]
    assert queries.group_by(keys).aggregate([]).num_rows == queries.num_rows
    quants = {r["values"]: r["counts"] for r in pc.value_counts(queries["quant"]).to_pylist()}
    assert quants["fp8_static"] == quants["fp8"] > 0
    assert pc.min(queries["uses"]).as_py() >= 1


def test_random_scan_is_seeded_and_in_range():
    pairs = [("a/b/1", "bfloat16"), ("a/b/1", "fp8"), ("c/d/2", "nvfp4")]
    one = scans.random_queries(None, size=3000, seed=7, pairs=pairs)
    two = scans.random_queries(None, size=3000, seed=7, pairs=pairs)
    other = scans.random_queries(None, size=3000, seed=8, pairs=pairs)
    assert one.equals(two) and not one.equals(other)
    assert one.num_rows == 3000
    lo, hi = scans.RANDOM_M
    assert lo <= pc.min(one["m"]).as_py() and pc.max(one["m"]).as_py() <= hi
    for c in ("n", "k"):
        lo, hi = scans.RANDOM_NK
        assert lo <= pc.min(one[c]).as_py() and pc.max(one[c]).as_py() <= hi
    # Log-uniform: small shapes are common, not vanishingly rare.
    assert sum(1 for m in one["m"].to_pylist() if m < 1024) > 300
    by_pair = {}
    for db, q in zip(one["db"].to_pylist(), one["quant"].to_pylist()):
        by_pair[(db, q)] = by_pair.get((db, q), 0) + 1
    assert by_pair == {p: 1000 for p in pairs}


# ---- the command line -------------------------------------------------------------------------


def test_cli_exits_1_on_drift(ctx, goldens, capsys):
    """The CLI on the faulty variant: enough golden rows to reach the first
    one where the faulty port differs from the spec."""
    spec = goldens.column("latency_ms").to_pylist()
    faulty = goldens.column("faulty_latency_ms").to_pylist()
    first = next(i for i, (s, f) in enumerate(zip(spec, faulty)) if s != f)
    argv = ["--scan", "goldens", "--shared-layer", "false", "--limit", str(first + 1), "--no-progress"]
    assert main(argv + ["--python", "py_gemm_latency_sorted"], context=ctx) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "DRIFT" in out
    assert main(argv, context=ctx) == 0
    assert "OK: no DRIFT, no REGRESSION" in capsys.readouterr().out


def test_cli_writes_the_report(ctx, tmp_path, capsys):
    argv = ["--scan", "goldens", "--shared-layer", "true", "--limit", "50", "--no-progress", "--out"]
    out = tmp_path / "report.csv"
    assert main(argv + [str(out)], context=ctx) == 0
    text = out.read_text().splitlines()
    assert len(text) == 51 and "status" in text[0] and "golden_match" in text[0]
    parquet = tmp_path / "report.parquet"
    assert main(argv + [str(parquet)], context=ctx) == 0
    written = pq.read_table(parquet)
    assert written.num_rows == 50 and set(written.column("shared_layer").to_pylist()) == {True}
    assert parity.summary(written)["queries"] == 50  # the timing metadata survives the file
    capsys.readouterr()


def test_exit_status_rules():
    def report(statuses):
        return pa.table({"status": pa.array(statuses, pa.utf8())})

    assert parity.exit_status(report(["STRICT_PASS", "MISS_BOTH"])) == 0
    assert parity.exit_status(report(["STRICT_PASS", "EXTRA"])) == 0
    assert parity.exit_status(report(["STRICT_PASS", "DRIFT"])) == 1
    assert parity.exit_status(report(["REGRESSION"])) == 1
    assert parity.exit_status(report([])) == 0


# ---- small parts ----------------------------------------------------------------------------------


def test_sql_statements_and_placeholders():
    text = "-- a comment; with a semicolon\nSELECT 1; -- trailing\nSELECT $db, -- the database\n  $m;\n"
    stmts = sqlfiles.statements(text)
    assert stmts == ["SELECT 1", "SELECT $db, -- the database\n  $m"]
    stmts = ["SELECT 1", "SELECT $db, $m"]
    assert sqlfiles.substitute(stmts[1], {"db": "it's", "m": 3}) == "SELECT 'it''s', 3"
    with pytest.raises(KeyError):
        sqlfiles.substitute("SELECT $n", {})
    renamed = sqlfiles.rename_functions(
        "gemm_trace(a) JOIN py_gemm_trace (b)", {"gemm_trace": "py_gemm_trace_x", "py_gemm_trace": "other"}
    )
    assert renamed == "py_gemm_trace_x(a) JOIN other (b)"
    with pytest.raises(ValueError):
        sqlfiles.rename_functions("gemm_trace(a)", {"gemm_trace": "x; DROP"})


def test_parity_sql_files_have_the_expected_statements():
    assert len(sqlfiles.statements(sqlfiles.load("gemm_parity.sql"))) == 2
    assert len(sqlfiles.statements(sqlfiles.load("gemm_bisect.sql"))) == 1
    assert len(sqlfiles.statements(sqlfiles.load("step_bisect.sql"))) == 1
    assert len(sqlfiles.statements(sqlfiles.load("model_gemm_shapes.sql"))) == 1


def test_gemm_parity_sql_runs_as_users_run_it(ctx):
    """The file end to end, as a user would: register parity_queries, run both statements."""
    queries = pa.table(
        {
            "db": [SEED_DB, SEED_DB],
            "quant": [SEED_QUANT, SEED_QUANT],
            "m": pa.array([32, 416], pa.int64()),
            "n": pa.array([SEED_N, 8], pa.int64()),  # (416, 8, 8): a spec miss in the goldens
            "k": pa.array([SEED_K, 8], pa.int64()),
        }
    )
    ctx.register_record_batches("parity_queries", [queries.to_batches()])
    try:
        view, verdict = sqlfiles.statements(sqlfiles.load("gemm_parity.sql"))
        ctx.sql(view).collect()
        rows = {r["n"]: r for r in ctx.sql(verdict).to_arrow_table().to_pylist()}
    finally:
        ctx.deregister_table("parity_results")
        ctx.deregister_table("parity_queries")
    assert rows[SEED_N]["status"] == "STRICT_PASS" and rows[SEED_N]["rel_diff"] == 0
    assert rows[8]["status"] == "MISS_BOTH" and rows[8]["rel_diff"] is None


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def test_progress_not_a_tty_is_quiet_then_one_line_per_decile(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress_mod.time, "perf_counter", lambda: clock[0])
    stream = _Stream(tty=False)
    bar = progress_mod.Progress(1000, "scan", stream=stream)
    clock[0] = 1.0
    bar.update(500)
    assert stream.getvalue() == ""  # a quick scan leaves no trace
    clock[0] = 3.0
    for done in range(0, 1001, 7):
        bar.update(done)
    bar.update(1000)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert 1 <= len(lines) <= 10
    assert lines[-1].startswith("scan [") and "100.0%" in lines[-1]
    assert "\r" not in stream.getvalue()


def test_progress_tty_redraws_in_place(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress_mod.time, "perf_counter", lambda: clock[0])
    stream = _Stream(tty=True)
    with progress_mod.Progress(10, "scan", stream=stream) as bar:
        for done in range(11):
            clock[0] += 0.2
            bar.update(done)
    text = stream.getvalue()
    assert text.count("\r") == 11 and text.endswith("\n") and text.count("\n") == 1


def test_progress_disabled_writes_nothing():
    stream = _Stream(tty=True)
    with progress_mod.Progress(10, "scan", stream=stream, enabled=False) as bar:
        bar.update(10)
    assert stream.getvalue() == ""


def test_steps_scan_quick_run_has_no_failures():
    """The engine-step scan (step_latency vs py_step_latency) over the first
    configs of step_grid.sql: every config priced alike on both paths."""
    ctx = aicsql.context()
    report = parity.run(ctx, "steps", limit=200, progress=False)
    counts = parity.status_counts(report)
    assert report.num_rows == 200
    assert counts["DRIFT"] == counts["REGRESSION"] == counts["EXTRA"] == 0, counts
    assert counts["STRICT_PASS"] > 0, counts
    assert set(report.column_names) >= {"model", "db", "phase", "tp", "batch", "isl", "osl", "rust_ms", "py_ms", "status"}


# ---- engine-step bisection ---------------------------------------------------------------------

WORKED = ("Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0")


def register_skewed_step(ctx, op_name: str) -> str:
    """``py_engine_step_skewed``: the Python path's engine_step with one op's
    per-application latency moved by one ulp (what a summation-order slip in
    that op's extras looks like), registered through the same bridge."""
    dirs = aicsql._data_dirs(None)
    library = _internal.Library(dirs)

    def rows(settings, *args):
        batch = spec_functions.engine_step_table(settings, *args, data=dirs)
        table = pa.Table.from_batches([batch])
        skewed = [
            math.nextafter(v, math.inf) if name == op_name and v is not None else v
            for name, v in zip(table.column("op_name").to_pylist(), table.column("latency_ms").to_pylist())
        ]
        i = table.schema.get_field_index("latency_ms")
        table = table.set_column(i, table.schema.field(i), pa.array(skewed, pa.float64()))
        return table.to_batches()[0]

    name = "py_engine_step_skewed"
    ctx.register_udtf(TableFunction(name, library.python_table_function(name, "engine_step", rows), ctx))
    return name


@pytest.mark.parametrize("phase", ["context", "generation"])
def test_bisect_step_of_identical_steps_is_empty(ctx, phase):
    assert parity.bisect_step(ctx, *WORKED, phase, 8, 1, 1024, 128).num_rows == 0
    assert parity.bisect_step(ctx, "Qwen/Qwen3-30B-A3B", "h200_sxm/vllm/0.19.0", phase, 4, 8, 4096, 128, 1, 4).num_rows == 0


def test_bisect_step_names_the_first_op_that_differs(ctx):
    skewed = register_skewed_step(ctx, "context_attention")
    (row,) = parity.bisect_step(ctx, *WORKED, "context", 8, 1, 1024, 128, python=skewed).to_pylist()
    assert row["op_name"] == "context_attention" and row["row_kind"] == "op"
    assert row["diagnosis"] == "different latency"
    assert row["latency_ms_py"] == math.nextafter(row["latency_ms_rust"], math.inf)
    assert row["lookup_rust"] == row["lookup_py"]
    assert row["lookup_rust"].startswith("query_context_attention ")


def test_bisect_step_of_a_step_both_paths_miss_is_empty(ctx):
    # With the shared layer off, gb200/trtllm/1.3.0rc23 has no all-reduce
    # table of its own: both sides miss at the same op, so the steps agree;
    # the reasons are worded per path and ignored.
    ctx.sql("SET aic.shared_layer = false").collect()
    try:
        assert ctx.sql(
            f"SELECT step_status('{WORKED[0]}', 'gb200/trtllm/1.3.0rc23', 'context', 2, 8, 1024, 128) AS s"
        ).to_arrow_table().column("s")[0].as_py().startswith("miss:")
        assert parity.bisect_step(ctx, WORKED[0], "gb200/trtllm/1.3.0rc23", "context", 2, 8, 1024, 128).num_rows == 0
    finally:
        ctx.sql("SET aic.shared_layer = true").collect()


# ---- the second known drift: Llama-4-Scout on gb200/vllm/0.24.0 ---------------------------------

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
SCOUT_DB = "gb200/vllm/0.24.0"
# The spec's own numbers (family_step_goldens.parquet): TTFT and TPOT at
# tp 4, moe_tp 4, moe_ep 1, batch 1, isl 1024, osl 128.
SCOUT_TTFT, SCOUT_TPOT = 19.960800166727523, 3.044497539448789


def test_scout_drift_config_is_the_spec_on_both_paths(ctx):
    """The upstream drift report's second entry: every GEMM of this config
    is a site transfer and the proj GEMM has a distance tie at its 4th
    neighbour (docs/spec/families_hybrid_vl_databases.md 1.8). Both paths
    must give the spec's TTFT and TPOT, bit for bit."""
    for function in ("step_latency", "py_step_latency"):
        got = ctx.sql(
            f"SELECT {function}('{SCOUT}', '{SCOUT_DB}', 'context', 4, 1, 1024, 128, 4, 1) AS ttft, "
            f"{function}('{SCOUT}', '{SCOUT_DB}', 'generation', 4, 1, 1024, 128, 4, 1) AS tpot"
        ).to_arrow_table().to_pylist()
        assert got == [{"ttft": SCOUT_TTFT, "tpot": SCOUT_TPOT}], function
    # The tie: site order keeps (6144, 1024); the sorted-site variant would not.
    for function in ("gemm_latency", "py_gemm_latency"):
        got = ctx.sql(f"SELECT {function}('{SCOUT_DB}', 'bfloat16', 1024, 5120, 1280) AS v").to_arrow_table().to_pylist()
        assert got == [{"v": 0.010833282503282209}], function
