"""The support-matrix scan (``--scan support-matrix``) and ``bisect_search``.

Three kinds of test:

* the grading itself, on hand-made differences between two frames: the
  expected status of each follows from upstream's rules
  (tools/support_matrix/support_matrix.py and scan_rust_parity.py at
  v0.11.0, restated in queries/parity/search_verdict.sql), never from the
  code under test -- including upstream's surprises (a different row count
  or different configurations pass as STRICT_PASS when the frontier
  envelope holds; ENVELOPE_PASS never looks at the envelope);
* a drift planted in a test-only variant of the Python path -- GEMM
  distance ties broken by the sites' (n, k) instead of the spec's site
  order, the mistake of upstream's own Rust port (its GEMM site-transfer drift,
  +3.06 % on h200_sxm/vllm/0.19.0 fp8_block n=1280 k=5120)
  -- which the scan must grade not BIT_IDENTICAL and ``bisect_search`` must
  walk down to the GEMM lookup and the tie;
* the CI subset end to end through the command line: every entry
  BIT_IDENTICAL, so 0 DRIFT and 0 REGRESSION.

Data: the cache rule (``$AICSQL_DATA``, ...).
"""

from __future__ import annotations

import math
import re
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import aicsql
import aicsql.parity as parity
from aicsql.parity import matrix, matrix_report, search_bisect, smoke
from aicsql.parity.__main__ import main
from aicsql.spec import gemm as spec_gemm
from aicsql.spec import kernels as spec_kernels
from aicsql.spec.serving import estimate as spec_estimate
from aicsql.spec.step import engine as spec_engine

# Quick entries (a second or two each on both paths).
AGG = "Qwen/Qwen3-0.6B|a100_sxm|trtllm|1.0.0|agg"
DISAGG = "Qwen/Qwen3-0.6B|h200_sxm|sglang|0.5.16|disagg"
# Upstream's first drift: tp 8 puts Qwen3-32B's qkv GEMM at (m, 1280, 5120),
# fp8_block, a site transfer whose 4th neighbour ties at this distance
# between (1536, 4096) -- first in site order, the spec's pick -- and
# (1024, 6144), first in (n, k) order (docs/spec/engine_step.md 11.4).
TIE_ENTRIES = ("Qwen/Qwen3-32B-FP8|h200_sxm|vllm|0.24.0|agg", "Qwen/Qwen3-32B-FP8|h200_sxm|vllm|0.24.0|disagg")
TIE_DISTANCE = 0.41572201881803594
SPEC_SITE, SORTED_SITE = (1536, 4096), (1024, 6144)


@pytest.fixture(scope="module")
def ctx():
    return aicsql.context()


@pytest.fixture(scope="module")
def entries(ctx):
    return {r["entry"]: r for r in matrix.entries(ctx).to_pylist()}


def _pattern(*keys):
    return ["^" + re.escape(k) + "$" for k in keys]


# ---- the entries ------------------------------------------------------------------------------


def test_entries_carry_the_commands_arguments(entries):
    """Upstream's size tiers (support_matrix.py: _SMALL, _MEDIUM) as the
    entries' commands spell them, --top-n 1 included."""
    small = entries["meta-llama/Meta-Llama-3.1-8B|h200_sxm|vllm|0.24.0|agg"]
    assert {k: small[k] for k in ("model", "db", "mode", "total_gpus", "isl", "osl", "prefix", "ttft_ms", "tpot_ms",
                                  "top_n", "strict_sla")} == {  # fmt: skip
        "model": "meta-llama/Meta-Llama-3.1-8B", "db": "h200_sxm/vllm/0.24.0", "mode": "agg", "total_gpus": 4,
        "isl": 256, "osl": 256, "prefix": 128, "ttft_ms": 1500.0, "tpot_ms": 50.0, "top_n": 1, "strict_sla": False,
    }  # fmt: skip
    medium = entries[TIE_ENTRIES[1]]
    assert (medium["total_gpus"], medium["ttft_ms"], medium["tpot_ms"], medium["mode"]) == (32, 2000.0, 50.0, "disagg")
    assert all(k == "|".join([r["model"], *r["db"].split("/"), r["mode"]]) for k, r in entries.items())


def test_entries_are_pass_entries_whose_model_the_step_prices(ctx, entries):
    statuses = ctx.sql(
        "SELECT concat_ws('|', hugging_face_id, system, backend, version, mode) AS entry, status "
        "FROM aic.meta.support_matrix"
    ).to_arrow_table().to_pylist()
    status = {r["entry"]: r["status"] for r in statuses}
    assert {status[k] for k in entries} == {"PASS"}
    priced = ctx.sql("SELECT DISTINCT model FROM aic.meta.model_gemms").to_arrow_table().column("model").to_pylist()
    priced = set(priced)
    assert {r["model"] for r in entries.values()} <= priced
    unpriced = {k for k, s in status.items() if s == "PASS" and k.split("|")[0] not in priced}
    assert unpriced and not unpriced & set(entries)  # the matrix has such entries; the scan leaves them out


def test_select(ctx):
    table = matrix.entries(ctx)
    small = matrix.select(table, max_gpus=4, modes=["disagg"])
    assert small.num_rows > 0
    assert set(small.column("total_gpus").to_pylist()) == {4} and set(small.column("mode").to_pylist()) == {"disagg"}
    ci = matrix.select(table, subset="ci")
    assert sorted(ci.column("entry").to_pylist()) == sorted(smoke.CI)
    both = matrix.select(table, patterns=_pattern(AGG, DISAGG))
    assert both.column("entry").to_pylist() == sorted([AGG, DISAGG])
    with pytest.raises(ValueError, match="matches no covered PASS entry"):
        matrix.select(table, patterns=["no such model"])
    with pytest.raises(ValueError, match="unknown subset"):
        matrix.select(table, subset="nightly")


# ---- the grading, on planted differences ---------------------------------------------------------


@pytest.fixture(scope="module")
def frames(ctx, entries):
    """The Rust path's frames of the two quick entries: the material the
    grading tests edit into a 'Python' frame."""
    out = {}
    for key in (AGG, DISAGG):
        rust = "search_" + entries[key]["mode"]
        frame, error, _ = matrix.search_frames(ctx, entries[key], rust=rust, python=rust)["rust"]
        assert error is None, error
        out[key] = frame
    return out


def _grade(ctx, entries, key, rust, py, rust_error=None, py_error=None):
    e = entries[key]
    found = {"rust": (rust, rust_error, 0.0), "py": (py, py_error, 0.0)}
    (row,) = matrix.grade(ctx, e, found, functions=matrix.FUNCTIONS[e["mode"]]).to_pylist()
    return row


def _edit(table: pa.Table, column: str, fn, rows=None) -> pa.Table:
    """`table` with fn(value) in `column` (at the given row positions, default every row)."""
    values = table.column(column).to_pylist()
    values = [fn(v) if rows is None or i in rows else v for i, v in enumerate(values)]
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _interior_row(table: pa.Table) -> int:
    """A row that holds none of the frontier envelope's extremes (max
    tokens/s/user, min tpot, min request latency): removing or changing it
    leaves the envelope as it is."""
    extremes = {
        pc.index(table["tokens_per_s_per_user"], pc.max(table["tokens_per_s_per_user"])).as_py(),
        pc.index(table["tpot_ms"], pc.min(table["tpot_ms"])).as_py(),
        pc.index(table["request_latency_ms"], pc.min(table["request_latency_ms"])).as_py(),
    }
    return next(i for i in range(table.num_rows) if i not in extremes)


def test_identical_frames_are_bit_identical(ctx, entries, frames):
    for key in (AGG, DISAGG):
        row = _grade(ctx, entries, key, frames[key], frames[key])
        assert (row["status"], row["upstream_status"]) == ("BIT_IDENTICAL", "STRICT_PASS"), row
        assert row["rust_rows"] == row["py_rows"] == frames[key].num_rows
        assert row["first_diff_pos"] is None and row["rel_diff"] == 0.0 and row["detail"] is None


@pytest.mark.parametrize(
    "scale, offset, status",
    [
        (1.005, 0.0, "STRICT_PASS"),  # |d| = 0.5 % of rust: within 1e-3 + 1 %
        (1.5, 0.0, "ENVELOPE_PASS"),  # beyond 1 %, within upstream's re-run at 1 + 100 %
        (3.0, 10.0, "DRIFT"),  # |d| = 2 |rust| + 10: beyond 1 + 100 %
    ],
)
def test_an_approximate_column_is_graded_by_upstreams_tolerances(ctx, entries, frames, scale, offset, status):
    rust = frames[AGG]
    i = _interior_row(rust)
    py = _edit(rust, "ttft_ms", lambda v: v * scale + offset, rows={i})
    row = _grade(ctx, entries, AGG, rust, py)
    assert (row["status"], row["upstream_status"]) == (status, status), row
    assert row["identity_equal"] is True
    assert row["first_diff_pos"] == i and row["first_diff_column"] == "ttft_ms"
    r = rust["ttft_ms"][i].as_py()
    p = r * scale + offset
    assert row["worst_column"] == "ttft_ms"
    assert float(row["rust_value"]) == r and float(row["py_value"]) == p
    assert row["rel_diff"] == pytest.approx(abs(p - r) / max(abs(p), abs(r), 1e-3), rel=1e-12)


def test_envelope_pass_never_looks_at_the_envelope(ctx, entries, frames):
    """Upstream quirk: with the same configurations, ENVELOPE_PASS only asks
    for |d| <= 1 + 100 % -- every tokens/s/user 10 % higher moves the
    envelope's max(tokens/s/user) by 10 %, beyond its 5 %, and still passes."""
    rust = frames[AGG]
    py = _edit(rust, "tokens_per_s_per_user", lambda v: v * 1.1)
    row = _grade(ctx, entries, AGG, rust, py)
    assert row["status"] == "ENVELOPE_PASS", row
    assert row["envelope_rel_diff"] == pytest.approx(0.1 / 1.1, rel=1e-9)


def test_a_different_row_count_falls_back_to_the_envelope(ctx, entries, frames):
    """Upstream quirk: a different row count is not a failure when the
    frontier envelope holds -- its strict check falls back to the envelope
    and reports no mismatch, so the entry is STRICT_PASS."""
    rust = frames[AGG]
    i = _interior_row(rust)
    py = pa.concat_tables([rust.slice(0, i), rust.slice(i + 1)])
    row = _grade(ctx, entries, AGG, rust, py)
    assert (row["status"], row["upstream_status"]) == ("STRICT_PASS", "STRICT_PASS"), row
    assert (row["rust_rows"], row["py_rows"]) == (rust.num_rows, rust.num_rows - 1)
    assert row["identity_equal"] is None and row["envelope_rel_diff"] == 0.0
    assert row["detail"].startswith("row counts differ")
    # The same missing row, and the envelope moved by 20 %: DRIFT.
    slower = _edit(py, "tpot_ms", lambda v: v * 1.2)
    row = _grade(ctx, entries, AGG, rust, slower)
    assert row["status"] == "DRIFT" and row["worst_column"] == "min(tpot_ms)", row
    assert row["rel_diff"] == pytest.approx(0.2 / 1.2, rel=1e-9)


def test_different_configurations_fall_back_to_the_envelope(ctx, entries, frames):
    rust = frames[DISAGG]
    i = _interior_row(rust)
    py = _edit(rust, "decode_bs", lambda v: v + 1, rows={i})
    row = _grade(ctx, entries, DISAGG, rust, py)
    assert (row["status"], row["upstream_status"]) == ("STRICT_PASS", "STRICT_PASS"), row
    assert row["identity_equal"] is False and row["first_diff_column"] == "decode_bs"
    assert row["detail"].startswith("different configurations") and row["detail"].endswith("within 5 %")
    py = _edit(py, "request_latency_ms", lambda v: v * 0.5)
    row = _grade(ctx, entries, DISAGG, rust, py)
    assert row["status"] == "DRIFT" and row["worst_column"] == "min(request_latency_ms)", row


def test_order_and_extra_columns_count_only_for_bit_identical(ctx, entries, frames):
    rust = frames[AGG]
    reversed_rows = rust.take(pa.array(range(rust.num_rows - 1, -1, -1)))
    row = _grade(ctx, entries, AGG, rust, reversed_rows)  # the same rows in another order
    assert (row["status"], row["identity_equal"], row["first_diff_pos"]) == ("STRICT_PASS", True, 0), row
    # The frontier mark is not a column of the spec's candidates frame.
    flipped = _edit(rust, "pareto", lambda v: not v, rows={3})
    row = _grade(ctx, entries, AGG, rust, flipped)
    assert (row["status"], row["first_diff_pos"], row["first_diff_column"]) == ("STRICT_PASS", 3, "pareto"), row
    # One ulp is one ulp too many for BIT_IDENTICAL, nothing for upstream.
    ulp = _edit(rust, "tokens_per_s_per_gpu_cluster", lambda v: math.nextafter(v, math.inf), rows={0})
    row = _grade(ctx, entries, AGG, rust, ulp)
    assert (row["status"], row["worst_column"]) == ("STRICT_PASS", "tokens_per_s_per_gpu_cluster"), row


def test_failures_are_error_or_regression(ctx, entries, frames):
    rust = frames[AGG]
    empty = rust.slice(0, 0)
    cases = [
        (rust, None, None, "boom", "ERROR"),  # the Python path fails
        (rust, empty, None, None, "ERROR"),  # the Python path finds nothing
        (None, rust, "boom", None, "REGRESSION"),  # the Rust path fails
        (empty, rust, None, None, "REGRESSION"),  # the Rust path finds nothing
        (None, None, "boom", "boom", "ERROR"),  # both fail: upstream asks about Python first
    ]
    for r, p, r_err, p_err, status in cases:
        row = _grade(ctx, entries, AGG, r, p, rust_error=r_err, py_error=p_err)
        assert (row["status"], row["upstream_status"]) == (status, status), (r_err, p_err, row)
        assert row["rel_diff"] is None and row["worst_column"] is None
    row = _grade(ctx, entries, AGG, rust, None, py_error="py_search_agg: no candidate")
    assert row["detail"] == "the Python path failed: py_search_agg: no candidate"


# What each path says when its search finds nothing (crates/udfs/src/search_args.rs and the search
# sweeps; aicsql/spec/search/sweep.py and api.py), one per kind of reason and mode.
RUST_REFUSALS = {
    "raised": ("search_agg: no candidate for M on D: no layout priced a point: sglang context parallelism needs tp 1 "
               "and attention dp 1 (CP and attention TP/DP exclude each other), got tp 4, dp 1, cp 2",
               "search_disagg: no candidate for M on D: no prefill worker priced: perf data not available for op "
               "'context_moe'"),
    "memory": ("search_agg: no candidate for M on D: the model does not fit in GPU memory at any parallel config",
               "search_disagg: no candidate for M on D: no decode worker fits in GPU memory at any parallel config"),
    "limits": ("search_agg: no candidate for M on D: no config meets the TTFT limit of 1 ms at any TPOT of the sweep",
               "search_disagg: no candidate for M on D: no disaggregated deployment meets the TTFT limit of 1 ms"),
}
PY_REFUSALS = {
    "raised": ("py_search_agg: ValueError: RuntimeError: sweep_agg: no results for any parallel configuration. Last "
               "exception: sglang CP requires tp_size=1",
               "py_search_disagg: ValueError: RuntimeError: sweep_disagg/prefill: no results for any parallel config. "
               "Last exception: context_moe: perf data not available"),
    "memory": ("py_search_agg: ValueError: InsufficientMemoryError: sweep_agg: no results — model does not fit in GPU "
               "memory for any parallel config.",
               "py_search_disagg: ValueError: InsufficientMemoryError: sweep_disagg/decode: no results — model does "
               "not fit in GPU memory for any parallel config."),
    "limits": ("py_search_agg: ValueError: NoFeasibleConfigError: sweep_agg: no parallel configuration met TTFT/TPOT "
               "or request-latency constraints.",
               "py_search_disagg: ValueError: no disaggregated deployment meets the TTFT and any TPOT"),
}


def test_no_candidate_on_either_path_for_the_same_reason_is_not_covered(ctx, entries, frames):
    for kind in RUST_REFUSALS:
        for key, i in ((AGG, 0), (DISAGG, 1)):
            row = _grade(ctx, entries, key, None, None, rust_error=RUST_REFUSALS[kind][i], py_error=PY_REFUSALS[kind][i])
            assert (row["status"], row["upstream_status"]) == ("NO_CANDIDATE", "ERROR"), (kind, key, row)
            assert row["detail"].startswith("no candidate on either path (") and PY_REFUSALS[kind][i] in row["detail"]
            assert row["rel_diff"] is None and row["worst_column"] is None
    # Any disagreement on why stays upstream's ERROR: another kind of reason, a Python failure that is not the
    # search's refusal, a reason the Rust path has no word for, a Rust failure that is not a refusal.
    kv = "py_search_agg: ValueError: KVCacheCapacityError: sweep_agg: no results — requested batch_size exceeds KV"
    for rust_error, py_error in ((RUST_REFUSALS["memory"][0], PY_REFUSALS["raised"][0]),
                                 (RUST_REFUSALS["limits"][0], PY_REFUSALS["memory"][0]),
                                 (RUST_REFUSALS["raised"][0], "py_search_agg: ZeroDivisionError: division by zero"),
                                 (RUST_REFUSALS["memory"][0], kv),
                                 ("search_agg: Arrow error: out of memory", PY_REFUSALS["memory"][0])):  # fmt: skip
        row = _grade(ctx, entries, AGG, None, None, rust_error=rust_error, py_error=py_error)
        assert row["status"] == "ERROR", (rust_error, py_error, row)
        assert row["detail"].startswith("the Python path failed: ")
    # One path refusing is never NO_CANDIDATE.
    rust = frames[AGG]
    row = _grade(ctx, entries, AGG, rust, None, py_error=PY_REFUSALS["memory"][0])
    assert row["status"] == "ERROR", row
    row = _grade(ctx, entries, AGG, None, rust, rust_error=RUST_REFUSALS["memory"][0])
    assert row["status"] == "REGRESSION", row


def test_not_covered_entries_pass_the_bar_only_beside_bit_identical_ones(ctx, entries, frames):
    same = _grade(ctx, entries, AGG, frames[AGG], frames[AGG])
    refused = _grade(ctx, entries, DISAGG, None, None, rust_error=RUST_REFUSALS["memory"][1],
                     py_error=PY_REFUSALS["memory"][1])  # fmt: skip
    both = pa.Table.from_pylist([same, refused])
    assert parity.exit_status(both) == 0
    printed = parity.format_summary(both)
    assert "1 entries not covered -- no candidate on either path" in printed and "1 the model fits in no layout" in printed
    assert printed.rstrip().endswith("OK: every covered entry BIT_IDENTICAL"), printed
    assert matrix_report.differing(both).num_rows == 0 and matrix_report.not_covered(both).num_rows == 1
    only_refused = pa.Table.from_pylist([refused])
    assert parity.exit_status(only_refused) == 1
    assert "FAIL: no covered entry" in parity.format_summary(only_refused)


# Entries neither path prices on the published data, each for another kind of reason.
REFUSED_ENTRIES = (
    "Qwen/Qwen3-235B-A22B|l40s|sglang|0.5.14|agg",  # every layout raised: sglang cp needs tp = dp = 1
    "Qwen/Qwen3-235B-A22B|l40s|sglang|0.5.14|disagg",
    "Qwen/Qwen3-235B-A22B|l40s|vllm|0.24.0|agg",  # 235B in 48 GB GPUs: fits in no layout
)


def test_entries_neither_path_prices_are_no_candidate_with_the_specs_last_exception(ctx):
    report = matrix.run(ctx, patterns=_pattern(*REFUSED_ENTRIES), progress=False)
    assert report.column("entry").to_pylist() == sorted(REFUSED_ENTRIES)
    assert report.column("status").to_pylist() == ["NO_CANDIDATE"] * 3, report.to_pylist()
    rows = {r["entry"]: r for r in report.to_pylist()}
    # The spec names the last layout that raised; so does the Rust path (the
    # same layout, in its own words).
    for key in REFUSED_ENTRIES[:2]:
        r = rows[key]
        assert "Got tp_size=4, attention_dp_size=1, cp_size=2" in r["py_error"], r["py_error"]
        assert r["rust_error"].endswith("got tp 4, dp 1, cp 2"), r["rust_error"]
    assert "does not fit in GPU memory" in rows[REFUSED_ENTRIES[2]]["rust_error"]


# ---- the planted drift --------------------------------------------------------------------------


def plant_sorted_ties(monkeypatch) -> None:
    """The test-only variant of the Python path: GEMM sites at the same
    distance ranked by their (n, k) instead of by site order (the spec keeps
    first appearance in the table, docs/spec/engine_step.md 11.4). The
    spec's caches of tables, kernels, step contexts and steps are swapped
    for empty ones so the variant neither reuses the spec's nor leaves its
    own behind (monkeypatch restores both)."""
    within, ranked = spec_gemm.GemmSlice.within_reach, spec_gemm.GemmSlice.ranked_sites

    def by_site_key(self, pairs):
        return sorted(pairs, key=lambda p: (p[0], self.site_n[p[1]], self.site_k[p[1]]))

    monkeypatch.setattr(spec_gemm.GemmSlice, "within_reach", lambda self, n, k: by_site_key(self, within(self, n, k)))
    monkeypatch.setattr(spec_gemm.GemmSlice, "ranked_sites", lambda self, n, k: by_site_key(self, ranked(self, n, k)))
    for module, cache in ((spec_gemm, "_TABLES"), (spec_kernels, "_KERNELS"), (spec_engine, "_CONTEXTS"),
                          (spec_estimate, "_STEPS")):  # fmt: skip
        monkeypatch.setattr(module, cache, {})


def test_planted_tie_is_graded_and_bisected_to_the_gemm_lookup(ctx, monkeypatch):
    product = matrix.run(ctx, patterns=_pattern(*TIE_ENTRIES), progress=False)
    assert product.column("status").to_pylist() == ["BIT_IDENTICAL"] * 2

    plant_sorted_ties(monkeypatch)
    report = matrix.run(ctx, patterns=_pattern(*TIE_ENTRIES), progress=False)
    assert report.column("entry").to_pylist() == sorted(TIE_ENTRIES)
    for row in report.to_pylist():
        # Whatever upstream's tolerance makes of it, it is not bit-identical.
        assert row["status"] != "BIT_IDENTICAL", row
        assert row["upstream_status"] in matrix.UPSTREAM_STATUSES
        assert row["first_diff_pos"] is not None and row["first_diff_column"] is not None
    assert parity.exit_status(report) == 1

    for i, key in enumerate(report.column("entry").to_pylist()):
        found = parity.bisect_search(ctx, i, report=report)  # by its row number in the report
        assert found.entry["entry"] == key
        assert found.level == "lookup", str(found)
        assert found.row["pos"] == report["first_diff_pos"][i].as_py()
        assert found.estimate["rust"] != found.estimate["py"]
        assert found.step["step"] in ("mix", "generation-only", "prefill", "decode")
        assert found.step["rust_ms"] != found.step["py_ms"]
        assert found.op["op_name"].endswith("qkv_gemm") and found.op["diagnosis"] == "different latency"
        g = found.lookup
        assert (g["quant"], g["n"], g["k"]) == ("fp8_block", 1280, 5120)
        assert g["diagnosis"] == "tie: same distance, different site order"
        assert g["rank_rust"] == g["rank_py"] == 4
        assert g["distance_rust"] == g["distance_py"] == TIE_DISTANCE
        assert (g["site_n_rust"], g["site_k_rust"]) == SPEC_SITE
        assert (g["site_n_py"], g["site_k_py"]) == SORTED_SITE
        text = str(found)
        assert "tie: same distance, different site order" in text and "query_gemm" in text


def test_bisect_search_takes_a_support_matrix_row_or_a_key(ctx, monkeypatch):
    (raw,) = ctx.sql(
        "SELECT * FROM aic.meta.support_matrix WHERE concat_ws('|', hugging_face_id, system, backend, version, mode) "
        f"= '{TIE_ENTRIES[1]}'"
    ).to_arrow_table().to_pylist()
    assert parity.bisect_search(ctx, raw).level == "identical"
    plant_sorted_ties(monkeypatch)
    by_row, by_key = parity.bisect_search(ctx, raw), parity.bisect_search(ctx, TIE_ENTRIES[1])
    assert by_row.level == by_key.level == "lookup"
    assert by_row.lookup["m"] == by_key.lookup["m"]


def test_bisect_search_of_identical_frames_stops_at_once(ctx, entries):
    found = parity.bisect_search(ctx, entries[AGG])
    assert found.level == "identical" and found.row is None
    with pytest.raises(ValueError, match="not a covered PASS entry"):
        parity.bisect_search(ctx, "no/such|model|x|y|agg")
    with pytest.raises(ValueError, match="needs the report"):
        parity.bisect_search(ctx, 0)


def test_steps_of_an_aggregated_point_follow_the_serving_schedule():
    """docs: the serving spec's run_agg (aicsql.spec.serving.estimate): b = 1
    mixes no decode token and decodes osl - 1 steps of one token; the cached
    prefix leaves isl - prefix new tokens to the context passes."""
    e = {"mode": "agg", "db": "h200_sxm/vllm/0.24.0", "isl": 256, "osl": 256, "prefix": 128}
    c = {"bs": 1, "ctx_tokens": 256, "tp": 2, "moe_tp": None, "moe_ep": None, "dp": 1, "pp": 1, "cp": 1}
    steps = search_bisect.steps_of(e, c)
    assert [(s["step"], s["phase"], s["batch"], s["isl"], s["osl"]) for s in steps] == [
        ("mix", "context", 1, 128, 1),  # 256 tokens, 128 of them cached: floor(256 / 256) prefixes
        ("mix", "context", 1, 128, 1),
        ("generation-only", "generation", 1, 256 + 128, 2),
    ]
    # Enough mixed steps to cover osl: no decode-only step.
    c = dict(c, bs=512, ctx_tokens=256)  # ceil(256 * 512 / 256) = 512 mixed steps >= osl
    assert "generation-only" not in [s["step"] for s in search_bisect.steps_of(e, c)]


def test_gemm_query_reads_the_lookup_engine_step_reports():
    assert search_bisect.gemm_query('query_gemm {"args": [1020, 1280, 5120, "fp8_block"], "kwargs": {}}') == (
        1020, 1280, 5120, "fp8_block")  # fmt: skip
    assert search_bisect.gemm_query('query_nccl {"args": [1, 2], "kwargs": {}}') is None
    assert search_bisect.gemm_query(None) is None


# ---- the report file: resumable, atomic -------------------------------------------------------------


def test_report_resumes_and_survives_an_interruption(ctx, tmp_path, monkeypatch):
    out = tmp_path / "scan.parquet"
    pattern = _pattern(AGG, DISAGG)
    first = matrix.run(ctx, patterns=pattern, limit=1, out=out, progress=False)
    assert first.column("entry").to_pylist() == [AGG]
    assert pq.read_table(out).column("entry").to_pylist() == [AGG]

    resumed = matrix.run(ctx, patterns=pattern, out=out, progress=False)
    assert resumed.column("entry").to_pylist() == [AGG, DISAGG]
    assert resumed.slice(0, 1).drop_columns(["rust_seconds", "py_seconds"]).equals(
        first.drop_columns(["rust_seconds", "py_seconds"]))  # fmt: skip
    assert set(resumed.column("status").to_pylist()) == {"BIT_IDENTICAL"}

    def no_search(*args, **kwargs):
        raise AssertionError("a finished report was searched again")

    with monkeypatch.context() as m:
        m.setattr(matrix, "search_frames", no_search)
        again = matrix.run(ctx, patterns=pattern, out=out, progress=False)
    assert again.num_rows == 2 and parity.summary(again)["entries"] == 2

    # Interrupted after its first entry, a fresh run keeps that one on disk.
    grade = matrix.grade
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return grade(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(matrix, "grade", interrupted)
        with pytest.raises(KeyboardInterrupt):
            matrix.run(ctx, patterns=pattern, out=out, fresh=True, checkpoint=100, progress=False)
    assert pq.read_table(out).column("entry").to_pylist() == [AGG]
    assert not [p for p in tmp_path.iterdir() if p.name != out.name]  # no temporary file left behind
    done = matrix.run(ctx, patterns=pattern, out=out, progress=False)
    assert done.column("entry").to_pylist() == [AGG, DISAGG]

    # A stop requested during an entry (the command line's Ctrl-C / SIGTERM) lets it finish, then stops.
    def stop_during(*args, **kwargs):
        matrix.request_stop()
        return grade(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(matrix, "grade", stop_during)
        with pytest.raises(KeyboardInterrupt):
            matrix.run(ctx, patterns=pattern, out=out, fresh=True, checkpoint=100, progress=False)
    assert pq.read_table(out).column("entry").to_pylist() == [AGG]


def test_another_reports_file_is_not_overwritten(ctx, tmp_path):
    out = tmp_path / "gemm.parquet"
    pq.write_table(pa.table({"status": ["STRICT_PASS"]}), out)
    with pytest.raises(ValueError, match="not a support-matrix parity report"):
        matrix.run(ctx, patterns=_pattern(AGG), out=out, progress=False)


# ---- the CI subset, as CI runs it ------------------------------------------------------------------


def test_ci_subset_is_bit_identical(ctx, tmp_path, capsys):
    out = tmp_path / "ci.parquet"
    t0 = time.perf_counter()
    status = main(["--scan", "support-matrix", "--subset", "ci", "--out", str(out), "--no-progress"], context=ctx)
    seconds = time.perf_counter() - t0
    printed = capsys.readouterr().out
    report = pq.read_table(out)
    assert sorted(report.column("entry").to_pylist()) == sorted(smoke.CI)
    counts = parity.status_counts(report)
    assert counts["DRIFT"] == counts["REGRESSION"] == 0, printed
    assert counts["BIT_IDENTICAL"] == len(smoke.CI), printed
    assert set(report.column("upstream_status").to_pylist()) == {"STRICT_PASS"}
    assert status == 0 and "OK: every covered entry BIT_IDENTICAL" in printed
    s = parity.summary(report)
    assert s["rust_seconds"] > 0 and s["python_seconds"] > 0 and s["wall_seconds"] <= seconds
    # Every mode and backend of the subset appears (what the subset is for).
    assert set(report.column("mode").to_pylist()) == {"agg", "disagg"}
    assert {db.split("/")[1] for db in report.column("db").to_pylist()} == {"vllm", "sglang", "trtllm"}


def test_cli_refuses_search_options_on_other_scans(capsys):
    with pytest.raises(SystemExit):
        main(["--scan", "goldens", "--max-gpus", "8"])
    assert "--max-gpus applies to --scan support-matrix only" in capsys.readouterr().err


def test_sql_placeholders_take_floats():
    """The search arguments ttft_ms / tpot_ms are doubles: substituted as the
    shortest text that reads back as the same double."""
    from aicsql.parity import sqlfiles

    assert sqlfiles.substitute("SELECT $a, $b", {"a": 1500.0, "b": 0.1 + 0.2}) == "SELECT 1500.0, 0.30000000000000004"
    with pytest.raises(ValueError):
        sqlfiles.substitute("SELECT $a", {"a": math.inf})


def test_search_sql_files_have_the_statements_the_scan_runs():
    from aicsql.parity import sqlfiles

    assert len(sqlfiles.statements(sqlfiles.load("support_matrix_entries.sql"))) == 1
    for mode in ("agg", "disagg"):
        stmts = sqlfiles.statements(sqlfiles.load(f"search_{mode}_parity.sql"))
        assert len(stmts) == 4 and "parity_search_cells" in stmts[3]
    pairs, verdict = sqlfiles.statements(sqlfiles.load("search_verdict.sql"))
    assert "parity_search_pairs" in pairs and "upstream_status" in verdict
