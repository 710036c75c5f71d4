"""``cli default`` on the Python path (`aicsql.spec.search`) against the spec's frames.

``tests/goldens/search/<case>/`` hold what aiconfigurator v0.11.0's ``cli
default`` returned for four cases (meta.json: the arguments, chosen_exp,
best_throughputs, row counts; ``{agg,disagg}.{candidates,pareto_fronts,
best_configs}.parquet`` with the spec's column names). `run_search` /
`search_default` run the whole search -- search space, sweep_agg,
sweep_disagg, Pareto front, best configs, chosen mode -- pricing every point
with `aicsql.spec.serving`, and every frame must equal the golden one row
for row, in order, on every column (exact float equality: the frames carry
the spec's numpy rounding; ``tokens/s/gpu_cluster`` is unrounded on both
sides). The decode workers' ``(d)fmha`` is compared too: the search reports
the checkpoint's FMHA label for the decode role ('fp8' for Qwen3-32B-FP8 on
vllm, where ``estimate_disagg`` says 'bfloat16', see test_spec_search.py),
as the spec's Task does.

The Llama disagg Pareto frame stores ``tokens/s/gpu_cluster`` as text (the
float's repr): it is parsed before the comparison.

The frame operations are checked on their own too: numpy 1.26's generic
introsort argsort (vectors computed with numpy 1.26.4, AVX-512 dispatch
disabled -- ties and the heap-sort fallback), pandas' descending trick, the
worked examples of docs/spec/search.md.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.search import (
    AGG_TABLE_SCHEMA,
    COLUMNS_AGG,
    COLUMNS_DISAGG,
    DEFAULT_TABLE_SCHEMA,
    DISAGG_TABLE_SCHEMA,
    run_search,
    search_agg,
    search_agg_table,
    search_default,
    search_default_table,
    search_disagg,
)
from aicsql.spec.search import sorts, space
from aicsql.spec.search.sweep import match_workers

from _support import have_data, require

REPO = Path(__file__).resolve().parents[2]
SEARCH = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "search"
# The `--backend auto` cases (their experiments' frames and the merged picks) are test_spec_search_auto.py's,
# the `cli recommend` ones (a load target) test_spec_recommend.py's.
def _plain_case(path: Path) -> bool:
    a = json.loads((path / "meta.json").read_text())["args"]
    return a["backend"] != "auto" and a.get("target_request_rate") is None and a.get("target_concurrency") is None


CASES = sorted(p.name for p in SEARCH.iterdir() if (p / "meta.json").is_file() and _plain_case(p)) \
    if SEARCH.is_dir() else []  # fmt: skip
HAVE = bool(CASES) and have_data(open_tree)
needs_data = require(HAVE, f"search goldens ({SEARCH}) or the perf data are missing")
FRAMES = ("candidates", "pareto_fronts", "best_configs")
CLUSTER = "tokens/s/gpu_cluster"


#: The options of a case's meta.json args that the estimates (and run_search's ``options``) take.
ESTIMATE_OPTION_KEYS = ("nextn", "nextn_accepted", "max_seq_len", "free_gpu_memory_fraction",
                        "image_height", "image_width", "num_images", "enable_encoder_dp", "decode_system")

def _meta(case: str) -> dict:
    return json.loads((SEARCH / case / "meta.json").read_text())


def _args(case: str) -> tuple:
    a = _meta(case)["args"]
    return (a["model"], f"{a['system']}/{a['backend']}/{a['version']}", a["gpus"], a["isl"], a["osl"], a["prefix"],
            a["ttft"], a["tpot"])  # fmt: skip


def _options(case: str):
    """The case's ``cli_default`` options (meta.json args: MTP's ``nextn`` /
    ``nextn_accepted``, TRT-LLM's ``max_seq_len`` / ``free_gpu_memory_fraction``, the image
    options), None without any."""
    args = _meta(case)["args"]
    options = {k: args[k] for k in ESTIMATE_OPTION_KEYS if args.get(k) is not None}
    return options or None


def _latency(case: str):
    """The case's ``request_latency`` target (ms; meta.json args), None without one."""
    return _meta(case)["args"].get("request_latency")


def _chunked(case: str) -> bool:
    """The case's ``enable_chunked_prefill`` (the CLI's flag; meta.json args)."""
    return bool(_meta(case)["args"].get("enable_chunked_prefill", False))


def _golden(case: str, mode: str, frame: str) -> list:
    return pq.read_table(SEARCH / case / f"{mode}.{frame}.parquet").to_pylist()


_RESULTS: dict = {}


def _result(case: str):
    """`run_search` of the case, once per test session (with its time)."""
    if case not in _RESULTS:
        t0 = time.perf_counter()
        res = run_search(*_args(case), top_n=_meta(case)["args"]["top_n"], options=_options(case),
                         enable_chunked_prefill=_chunked(case), request_latency_ms=_latency(case))  # fmt: skip
        _RESULTS[case] = (res, time.perf_counter() - t0)
    return _RESULTS[case]


def _value(v):
    """A golden value: the cluster column stored as text (a float's repr) is parsed."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _equal(golden, got) -> bool:
    """Exact equality, same kind (text, number, NULL); ints and integral floats compare as numbers."""
    if golden is None or got is None:
        return golden is None and got is None
    if isinstance(golden, str) or isinstance(got, str):
        return isinstance(golden, str) and isinstance(got, str) and golden == got
    if isinstance(golden, bool) or isinstance(got, bool):
        return golden is got
    if isinstance(golden, float) and math.isnan(golden):
        return isinstance(got, float) and math.isnan(got)
    return float(golden) == float(got)


def _differences(golden_rows: list, rows: list) -> list:
    """(row, column, golden, python) of every differing value, and a row-count difference."""
    out = []
    if len(golden_rows) != len(rows):
        out.append(("rows", None, len(golden_rows), len(rows)))
    for i, (g, r) in enumerate(zip(golden_rows, rows)):
        if set(g) != set(r):
            out.append((i, "columns", sorted(set(g) ^ set(r)), None))
        for col, gv in g.items():
            if col in r and not _equal(_value(gv), r[col]):
                out.append((i, col, gv, r[col]))
    return out


@needs_data
@pytest.mark.parametrize("case", CASES)
def test_search_default_frames_equal_the_goldens(case):
    res, seconds = _result(case)
    meta = _meta(case)
    lines, failures = [f"\n{case}: run_search {seconds:.1f} s"], []
    for mode in ("agg", "disagg"):
        m = res.modes[mode]
        assert m.ok, f"{case} {mode}: {m.reason}"
        for frame in FRAMES:
            golden = _golden(case, mode, frame)
            rows = getattr(m, frame)
            diff = _differences(golden, rows)
            lines.append(f"  {mode}.{frame}: golden {len(golden)} rows, python {len(rows)} rows, "
                         f"{len(diff)} differences")  # fmt: skip
            failures += [f"{mode}.{frame} row {i} {col}: golden {g!r} python {p!r}" for i, col, g, p in diff[:10]]
            assert len(rows) == meta[frame][mode]
            columns = (COLUMNS_AGG if mode == "agg" else COLUMNS_DISAGG) + ([CLUSTER] if frame != "candidates" else [])
            assert all(list(r) == columns for r in rows)  # the spec's columns, in its order
    print("\n".join(lines))
    assert not failures, "\n".join(failures)
    assert res.chosen_exp == meta["chosen_exp"]
    assert res.best_throughputs == meta["best_throughputs"]
    assert list(res.best_throughputs) == ["agg", "disagg"]


@needs_data
@pytest.mark.parametrize("case", CASES)
def test_search_default_table(case):
    meta = _meta(case)
    t0 = time.perf_counter()
    table = search_default(*_args(case), top_n=meta["args"]["top_n"], options=_options(case),
                           enable_chunked_prefill=_chunked(case), request_latency_ms=_latency(case))  # fmt: skip
    print(f"\n{case}: search_default {time.perf_counter() - t0:.1f} s")
    assert table.schema == DEFAULT_TABLE_SCHEMA
    rows = {r["mode"]: r for r in table.to_pylist()}
    assert list(rows) == ["agg", "disagg"]
    for mode, r in rows.items():
        best = _golden(case, mode, "best_configs")[0]
        assert r["chosen"] == (mode == meta["chosen_exp"])
        assert r["best_tokens_per_s_per_gpu_cluster"] == meta["best_throughputs"][mode]
        assert r["candidates"] == meta["candidates"][mode]
        assert r["reason"] is None
        assert (r["ttft_ms"], r["tpot_ms"], r["tokens_per_s_per_user"], r["num_total_gpus"]) == (
            best["ttft"], best["tpot"], best["tokens/s/user"], best["num_total_gpus"])
        if mode == "agg":
            assert r["parallel"] == best["parallel"] and r["decode_parallel"] is None
        else:
            assert (r["prefill_parallel"], r["prefill_workers"], r["decode_parallel"], r["decode_workers"]) == (
                best["(p)parallel"], best["(p)workers"], best["(d)parallel"], best["(d)workers"])
            assert r["parallel"] is None


# SQL column of the tables -> the spec's column
AGG_SQL = {
    "ttft_ms": "ttft", "tpot_ms": "tpot", "request_latency_ms": "request_latency", "seq_per_s": "seq/s",
    "seq_per_s_per_gpu": "seq/s/gpu", "tokens_per_s": "tokens/s", "tokens_per_s_per_gpu": "tokens/s/gpu",
    "tokens_per_s_per_user": "tokens/s/user", "memory_gib": "memory", "encoder_latency_ms": "encoder_latency",
    "encoder_memory_gib": "encoder_memory",
}  # fmt: skip


def _spec_column(name: str, mode: str) -> str:
    if mode == "agg":
        return AGG_SQL.get(name, name)
    for side, tag in (("prefill_", "(p)"), ("decode_", "(d)")):
        if name.startswith(side):
            rest = name[len(side):]
            return tag + {"seq_per_s_per_worker": "seq/s/worker", "memory_gib": "memory"}.get(rest, rest)
    return {"comm": "(p)comm", "system": "(p)system", "backend": "(p)backend", "version": "(p)version",
            "encoder_memory_gib": "(e)memory"}.get(name, AGG_SQL.get(name, name))


def _identity(row: dict, mode: str) -> tuple:
    if mode == "agg":
        return row["parallel"], row["bs"], row["ctx_tokens"]
    return row["(p)parallel"], row["(p)bs"], row["(d)parallel"], row["(d)bs"]


@needs_data
@pytest.mark.parametrize("mode", ["agg", "disagg"])
@pytest.mark.parametrize("case", CASES)
def test_search_mode_tables(case, mode):
    """`search_agg` / `search_disagg`: the candidates with SQL names, the
    Pareto flags and the best ranks of the golden frames."""
    meta = _meta(case)
    fn = search_agg if mode == "agg" else search_disagg
    table = fn(*_args(case), top_n=meta["args"]["top_n"], options=_options(case), enable_chunked_prefill=_chunked(case),
               request_latency_ms=_latency(case))
    assert table.schema == (AGG_TABLE_SCHEMA if mode == "agg" else DISAGG_TABLE_SCHEMA)
    rows = table.to_pylist()
    golden = _golden(case, mode, "candidates")
    assert len(rows) == len(golden)
    bad = []
    for i, (r, g) in enumerate(zip(rows, golden)):
        for name, v in r.items():
            if name in ("pareto", "best_rank"):
                continue
            if name == "tokens_per_s_per_gpu_cluster":
                continue
            if name == "db":
                tag = "(p)" if mode == "disagg" else ""
                want = f"{g[tag + 'system']}/{g[tag + 'backend']}/{g[tag + 'version']}"
                if v != want:
                    bad.append(f"row {i} db: golden {want!r} python {v!r}")
                continue
            col = _spec_column(name, mode)
            expect = 1 if col == "(d)cp" else g[col]
            if not _equal(expect, v):
                bad.append(f"row {i} {name}: golden {expect!r} python {v!r}")
    assert not bad, "\n".join(bad[:20])
    # the cluster rate of the front rows is the golden one (on every row: the same formula)
    keys = [_identity(g, mode) for g in golden]
    front = {_identity(g, mode): _value(g[CLUSTER]) for g in _golden(case, mode, "pareto_fronts")}
    best = [_identity(g, mode) for g in _golden(case, mode, "best_configs")]
    assert {k for k, r in zip(keys, rows) if r["pareto"]} == set(front)
    assert all(r["tokens_per_s_per_gpu_cluster"] == front[k] for k, r in zip(keys, rows) if k in front)
    ranked = sorted((r["best_rank"], k) for k, r in zip(keys, rows) if r["best_rank"] is not None)
    assert [k for _rank, k in ranked] == best
    assert [rank for rank, _k in ranked] == list(range(1, len(best) + 1))


@needs_data
def test_search_space_and_skips_of_the_sglang_case():
    """search.md 1.6 and 2.7 / 3.2: 65 agg / prefill layouts (26 refused by the
    model construction, every cp > 1 one with tp > 1 or dp > 1), 30 decode
    layouts; the row counts of the sweeps."""
    case = "qwen3_30b_a3b_gb200_sglang_8gpu"
    res, _ = _result(case)
    lists = space.agg_lists(True, "sglang", "gb200", 8)
    agg = space.enumerate_parallel(lists, True, "sglang")
    assert len(agg) == 65 and space.tuple_counts(agg) == {1: 30, 2: 20, 4: 11, 8: 4}
    assert agg[:5] == [
        (1, 1, 1, 1, 1, 1), (1, 1, 1, 1, 2, 2), (1, 1, 1, 1, 4, 4), (1, 1, 1, 1, 8, 8), (1, 1, 1, 2, 1, 2)]
    p_lists, d_lists = space.disagg_lists(True, "sglang", "gb200", "gb200", 8)
    assert space.enumerate_parallel(p_lists, True, "sglang") == agg
    decode = space.enumerate_parallel(d_lists, True, "sglang")
    assert len(decode) == 30 and decode[:3] == [(1, 1, 1, 1, 1, 1), (1, 1, 2, 1, 2, 1), (1, 1, 2, 2, 1, 1)]
    assert decode[-1] == (8, 1, 1, 8, 1, 1)
    agg_mode, disagg_mode = res.modes["agg"], res.modes["disagg"]
    assert len(agg_mode.skipped) == 26
    assert all("cp" in label and "sglang CP requires tp_size=1" in msg for label, msg in agg_mode.skipped)
    assert agg_mode.stats == {"layouts": 65, "layouts_kept": 39, "calls_with_rows": 2801, "rows_before_dedupe": 27784,
                              "priced": agg_mode.stats["priced"]}  # fmt: skip
    assert disagg_mode.stats == {"prefill_rows": 39, "decode_rows": 2674, "t_with_result": 73,
                                 "rows_before_dedupe": 364}  # fmt: skip
    assert len(disagg_mode.skipped) == 26  # the prefill side's refused cp layouts
    assert sum(r["cp"] > 1 for r in agg_mode.candidates) == 608
    assert sorted({r["num_total_gpus"] for r in disagg_mode.candidates}) == [5, 7, 8]


@needs_data
@pytest.mark.parametrize("case,agg,disagg", [
    ("llama31_8b_h200_vllm_4gpu", (216, 2160, 1575), (3, 288, 72, 142)),
    ("qwen3_32b_fp8_h200_vllm_8gpu", (258, 2557, 2100), (4, 384, 67, 187)),
])  # fmt: skip
def test_sweep_counts_of_the_dense_cases(case, agg, disagg):
    """search.md 2.2, 2.7, 3.2, 3.6: calls with rows, rows before the dedupe,
    525 priced points per layout; worker rows, TPOT values with a result."""
    res, _ = _result(case)
    s = res.modes["agg"].stats
    assert (s["calls_with_rows"], s["rows_before_dedupe"], s["priced"]) == agg
    d = res.modes["disagg"].stats
    assert (d["prefill_rows"], d["decode_rows"], d["t_with_result"], d["rows_before_dedupe"]) == disagg
    assert not res.modes["agg"].skipped and not res.modes["disagg"].skipped


@needs_data
def test_decode_fmha_label_is_the_checkpoints():
    """search.md 3.2: the Qwen3-32B-FP8 vllm decode rows say fp8, the agg and prefill rows bfloat16."""
    res, _ = _result("qwen3_32b_fp8_h200_vllm_8gpu")
    assert {r["(d)fmha"] for r in res.modes["disagg"].candidates} == {"fp8"}
    assert {r["(p)fmha"] for r in res.modes["disagg"].candidates} == {"bfloat16"}
    assert {r["fmha"] for r in res.modes["agg"].candidates} == {"bfloat16"}


@needs_data
def test_tied_rows_follow_the_introsort():
    """search.md 6.1: the tied Llama disagg rows (8,913.658 tokens/s/gpu) in
    the golden order 192, 160, 124 -- a stable sort gives 124, 160, 192."""
    res, _ = _result("llama31_8b_h200_vllm_4gpu")
    rows = res.modes["disagg"].candidates
    tied = [r["(d)bs"] for r in rows if r["tokens/s/gpu"] == 8913.658]
    assert tied == [192, 160, 124]
    assert [rows[i]["(d)bs"] for i in (11, 12, 13)] == [192, 160, 124]


@needs_data
def test_strict_sla_and_fallback_on_llama():
    """strict_sla: every Llama candidate has tpot <= 50, so nothing changes;
    under a TPOT target no candidate meets, every row is a candidate (flagged)
    and the per-layout bests are sorted by tpot ascending (search.md 5.1)."""
    args = list(_args("llama31_8b_h200_vllm_4gpu"))
    base, _ = _result("llama31_8b_h200_vllm_4gpu")
    strict = run_search(*args, strict_sla=True)
    for mode in ("agg", "disagg"):
        for frame in FRAMES:
            assert getattr(strict.modes[mode], frame) == getattr(base.modes[mode], frame)
    args[7] = 1.0
    tight = run_search(*args)
    for mode, key in (("agg", "parallel"), ("disagg", "(d)parallel")):
        m = tight.modes[mode]
        assert m.candidates == base.modes[mode].candidates and m.pareto_fronts == base.modes[mode].pareto_fronts
        tpots = [r["tpot"] for r in m.best_configs]
        assert tpots == sorted(tpots) and len({r[key] for r in m.best_configs}) == len(m.best_configs)
        # every layout's row is its largest cluster rate (the cluster rate equals tokens/s/gpu here)
        for r in m.best_configs:
            assert r[CLUSTER] == max(c["tokens/s/gpu"] for c in m.candidates if c[key] == r[key])
        assert len(m.best_configs) == min(5, len({c[key] for c in m.candidates}))


@needs_data
def test_bridge_forms_and_arguments():
    """The ``*_table`` forms: the eight SQL arguments, aic.top_n / aic.strict_sla
    from the settings, a NULL argument gives no rows; one GPU: no disagg experiment."""
    args = _args("llama31_8b_h200_vllm_4gpu")
    batch = search_default_table({"aic.on_miss": "null"}, *args)
    assert batch.schema == DEFAULT_TABLE_SCHEMA and batch.num_rows == 2
    ranks = search_agg_table({"aic.top_n": "2"}, *args).column("best_rank").to_pylist()
    assert sorted(r for r in ranks if r is not None) == [1, 2]
    assert search_agg_table({}, args[0], None, *args[2:]).num_rows == 0
    with pytest.raises(ValueError, match="takes 8 arguments, got 3"):
        search_agg_table({}, *args[:3])
    with pytest.raises(ValueError, match="prefix = 300 must be"):
        search_agg(*args[:5], 300, *args[6:])
    one = search_default(args[0], args[1], 1, *args[3:]).to_pylist()
    assert [r["mode"] for r in one] == ["agg"] and one[0]["chosen"] and one[0]["parallel"] == "tp1pp1dp1etp1ep1"
    with pytest.raises(ValueError, match="at least 2 GPUs"):
        search_disagg(args[0], args[1], 1, *args[3:])


# ---- the frame operations --------------------------------------------------------------------

# numpy 1.26.4 ``argsort(kind="quicksort")`` of these float64 arrays with the
# AVX-512 dispatch disabled (NPY_DISABLE_CPU_FEATURES): the generic introsort.
# HEAP_TIES is McIlroy's adversary against the introsort, halved to make
# ties: it exhausts the depth budget (the heap-sort fallback runs).
TIES = [
    3, 4, 3, 3, 4, 4, 1, 1, 4, 3, 4, 1, 0, 3, 2, 1, 0, 4, 0, 4, 3, 3, 4, 1, 4, 0, 4, 0, 0, 0, 1, 1, 4, 0, 3,
    2, 3, 4, 1, 4, 1, 2, 3, 0, 0, 3, 2, 3, 4, 0, 2, 2, 1, 4, 2, 0, 0, 4, 0, 3,
]
TIES_ARGSORT = [
    29, 56, 55, 25, 43, 44, 18, 33, 58, 49, 28, 16, 12, 27, 15, 11, 40, 7, 6, 30, 52, 31, 38, 23, 35, 14, 46,
    50, 51, 54, 41, 42, 47, 36, 45, 0, 59, 2, 3, 21, 20, 13, 34, 9, 57, 1, 53, 4, 5, 8, 32, 17, 19, 22, 24,
    39, 26, 37, 48, 10,
]
HEAP_TIES = [
    0, 25, 1, 25, 2, 24, 3, 24, 4, 23, 5, 23, 6, 22, 7, 22, 8, 21, 9, 21, 10, 11, 30, 28, 29, 28, 27, 27, 26,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 20, 19, 19, 18, 18, 17, 17, 16, 16, 15, 15, 14, 14, 13, 13, 12, 12,
    26, 11,
]
HEAP_TIES_ARGSORT = [
    0, 29, 2, 30, 4, 31, 6, 32, 8, 33, 10, 34, 12, 35, 14, 36, 16, 37, 18, 38, 20, 39, 21, 59, 56, 57, 55, 54,
    52, 53, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 19, 17, 13, 15, 11, 9, 7, 5, 3, 1, 28, 58, 27, 26,
    25, 23, 24, 22,
]


def test_introsort_matches_numpy_on_ties():
    v = [float(x) for x in TIES]
    assert sorts.argsort_quick(v) == TIES_ARGSORT
    assert TIES_ARGSORT != sorted(range(len(v)), key=v.__getitem__)  # not what a stable sort gives


def test_introsort_heapsort_fallback_matches_numpy(monkeypatch):
    calls = []
    heapsort = sorts._heapsort
    monkeypatch.setattr(sorts, "_heapsort", lambda *a: (calls.append(a[3]), heapsort(*a))[1])
    v = [float(x) for x in HEAP_TIES]
    assert sorts.argsort_quick(v) == HEAP_TIES_ARGSORT
    assert calls, "the depth budget was not exhausted"
    assert HEAP_TIES_ARGSORT != sorted(range(len(v)), key=v.__getitem__)


def test_pandas_descending_trick_and_stable_sorts():
    # descending: reverse, argsort ascending, map back, reverse
    v = [float(x) for x in TIES]
    rev = v[::-1]
    expect = [len(v) - 1 - k for k in sorts.argsort_quick(rev)][::-1]
    assert sorts.sort_indexer(v, ascending=False) == expect
    assert [v[i] for i in expect] == sorted(v, reverse=True)
    # NaN last, in original order, both directions
    w = [2.0, math.nan, 1.0, math.nan, 3.0]
    assert sorts.sort_indexer(w) == [2, 0, 4, 1, 3]
    assert sorts.sort_indexer(w, ascending=False) == [4, 0, 2, 1, 3]
    rows = [{"a": 1.0, "b": 2}, {"a": 2.0, "b": 1}, {"a": 1.0, "b": 1}, {"a": 2.0, "b": 1}]
    assert sorts.stable_indexer(rows, [("a", False), ("b", True)]) == [1, 3, 2, 0]
    assert [k for k, _ in sorts.group_keys([{"p": "tp2"}, {"p": "tp16"}, {"p": "tp1"}], "p")] == ["tp1", "tp16", "tp2"]


def test_search_lists():
    """search.md 1.4, 2.2, 3.1, 1.5."""
    assert len(space.TPOT_SWEEP) == 75 and space.TPOT_SWEEP[18:21] == [19, 20, 25] and space.TPOT_SWEEP[-1] == 295
    assert len([b for b in space.AGG_BATCH_SCHEDULE if b <= 512]) == 44
    assert len(space.DECODE_BATCH_SCHEDULE) == 96
    assert space.agg_ctx_tokens(256) == [256] + list(range(512, 8193, 512))
    assert space.agg_ctx_tokens(4000) == [4000, 8000]
    assert space.deployment_sizes(4) == [1, 2, 4] and space.deployment_sizes(8) == [1, 2, 4, 8]
    assert space.deployment_sizes(200)[-1] == 128 and 24 in space.deployment_sizes(32)


def test_match_workers_worked_example():
    """search.md 3.4: Llama tp1 prefill 154.751 seq/s and tp1 decode bs 504 93.042
    seq/s, 1-GPU workers: (1, 1) and (2, 2) tie exactly; the smaller one is kept."""
    sizes = frozenset(space.deployment_sizes(4))
    assert match_workers(154.751, 1, 93.042, 1, sizes) == (1, 1)
    v11 = min(154.751 * 1 * 0.9, 93.042 * 1 * 0.92) / 2
    v22 = min(154.751 * 2 * 0.9, 93.042 * 2 * 0.92) / 4
    assert v11 == v22
    assert match_workers(1.0, 3, 1.0, 3, sizes) == (-1, -1)  # 6 GPUs is not a deployment size


def test_request_latency_pairs():
    """docs/spec/experiments.md 3.2: the examples worked out there."""
    from aicsql.spec.search.space import search_limits

    pairs = search_limits(256, 2000.0, 2000.0)
    assert [t for t, _ in pairs] == [200.0, 300, 400, 500, 600, 800, 1000, 1200, 1400, 1600]
    assert all(tpot == (2000.0 - t) / 255 for t, tpot in pairs)
    assert len(search_limits(1000, 2000.0, 10_000.0)) == 13
    with_user = [t for t, _ in search_limits(256, 1700.0, 2000.0)]
    assert len(with_user) == 11 and 1700.0 in with_user and 1600 in with_user
    for off in (None, 0, -5.0):
        limits = search_limits(256, 1000.0, off)
        assert len(limits) == 75 and all(t == 1000.0 for t, _ in limits)
    with pytest.raises(ValueError, match=r"^a request-latency target needs osl > 1, got osl = 1$"):
        search_limits(1, 1000.0, 2000.0)
    for bad in ("2000", float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match=r"^request_latency_ms = .* must be a finite number of ms"):
            run_search("meta-llama/Meta-Llama-3.1-8B", "h200_sxm/vllm/0.19.0", 2, 1024, 256, request_latency_ms=bad)
