"""The serving estimates on the Python path (`aicsql.spec.serving`) against
the spec's serving goldens (``serving_point_goldens.parquet``: 83 points of
aiconfigurator v0.11.0's ``cli_estimate``), pure Python, no SQL.

* aggregated points: every numeric field of the spec's result dict (``raw``)
  equal to the float bit, except ``power_w`` / ``power_coverage`` (no power
  data here); strings equal;
* disaggregated points: every field equal (the spec's 3-decimal numbers);
* error points: a struct with a ``reason`` (misses, OOM, the refused fp8_block split).

Plus the SQL side (`py_estimate_agg` = `estimate_agg` on a few points, the
leaf-expression pushdown guard, a small serving parity scan) when the
compiled module has the Rust functions.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.serving import (
    AGG_SCHEMA,
    DISAGG_SCHEMA,
    estimate_agg,
    estimate_agg_batch,
    estimate_disagg,
    estimate_disagg_batch,
    estimate_memory,
    numpy_round3,
    parse_parallel,
)

from _support import have_data, require

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "serving_point_goldens.parquet"
# The spec's cli_estimate at pipeline parallelism (pp 2 / 4), the same schema.
PP_GOLDENS = GOLDENS.with_name("serving_pp_goldens.parquet")
HAVE = GOLDENS.is_file() and have_data(open_tree)
needs_data = require(HAVE, f"serving goldens ({GOLDENS}) or the perf data are missing")

# raw key of the spec's result dict -> estimate_agg field
AGG_KEYS = {
    "ttft": "ttft_ms", "tpot": "tpot_ms", "request_latency": "request_latency_ms", "tokens/s": "tokens_per_s",
    "tokens/s/gpu": "tokens_per_s_per_gpu", "tokens/s/user": "tokens_per_s_per_user", "seq/s": "seq_per_s",
    "seq/s/gpu": "seq_per_s_per_gpu", "request_rate": "request_rate", "concurrency": "concurrency", "bs": "bs",
    "global_bs": "global_bs", "num_total_gpus": "num_total_gpus", "isl": "isl", "osl": "osl", "prefix": "prefix",
    "ctx_tokens": "ctx_tokens", "num_ctx_reqs": "num_ctx_reqs", "num_gen_reqs": "num_gen_reqs",
    "num_tokens": "num_tokens", "gen_tokens": "gen_tokens", "balance_score": "balance_score", "memory": "memory_gib",
    "parallel": "parallel", "tp": "tp", "pp": "pp", "dp": "dp", "moe_tp": "moe_tp", "moe_ep": "moe_ep", "cp": "cp",
    "gemm": "gemm", "kvcache": "kvcache", "fmha": "fmha", "moe": "moe", "comm": "comm",
    "encoder_latency": "encoder_latency_ms", "encoder_memory": "encoder_memory_gib", "system": "system",
    "backend": "backend", "version": "version",
}  # fmt: skip
AGG_SKIP = {"power_w", "power_coverage", "model"}

DISAGG_KEYS = {
    "ttft": "ttft_ms", "tpot": "tpot_ms", "request_latency": "request_latency_ms", "tokens/s": "tokens_per_s",
    "tokens/s/gpu": "tokens_per_s_per_gpu", "tokens/s/user": "tokens_per_s_per_user", "seq/s": "seq_per_s",
    "seq/s/gpu": "seq_per_s_per_gpu", "request_rate": "request_rate", "concurrency": "concurrency",
    "num_total_gpus": "num_total_gpus", "isl": "isl", "osl": "osl", "prefix": "prefix",
}  # fmt: skip
for _side, _p in (("prefill_", "(p)"), ("decode_", "(d)")):
    for _raw, _field in (("parallel", "parallel"), ("tp", "tp"), ("pp", "pp"), ("dp", "dp"), ("moe_tp", "moe_tp"),
                         ("moe_ep", "moe_ep"), ("bs", "bs"), ("global_bs", "global_bs"), ("workers", "workers"),
                         ("seq/s/worker", "seq_per_s_per_worker"), ("memory", "memory_gib"), ("gemm", "gemm"),
                         ("kvcache", "kvcache"), ("fmha", "fmha"), ("moe", "moe")):  # fmt: skip
        DISAGG_KEYS[_p + _raw] = _side + _field
    DISAGG_KEYS[_p + "comm"] = "comm"
    DISAGG_KEYS[_p + "system"] = "system"
    DISAGG_KEYS[_p + "backend"] = "backend"
    DISAGG_KEYS[_p + "version"] = "version"
# Fields of the spec's dict estimate_disagg does not carry: the encoder
# worker (none here), cp, power and the model name.
DISAGG_SKIP = {"(e)memory", "(e)parallel", "(e)pp", "(e)tp", "(e)workers", "(p)cp", "encoder_latency", "power_w",
               "power_coverage", "model"}  # fmt: skip


def _points():
    return pq.read_table(GOLDENS).to_pylist() if HAVE else []


def _agg_call(point):
    a = json.loads(point["args"])
    return dict(model=point["model"], db=point["db"], parallel=a["tp_size"], batch=a["batch_size"], isl=a["isl"],
                osl=a["osl"], prefix=a.get("prefix"), ctx_tokens=a.get("ctx_tokens"), moe_tp=a.get("moe_tp_size"),
                moe_ep=a.get("moe_ep_size"))  # fmt: skip


def _disagg_call(point):
    a = json.loads(point["args"])
    return dict(model=point["model"], db=point["db"], prefill_parallel=a["prefill_tp_size"],
                prefill_batch=a["prefill_batch_size"], prefill_workers=a["prefill_num_workers"],
                decode_parallel=a["decode_tp_size"], decode_batch=a["decode_batch_size"],
                decode_workers=a["decode_num_workers"], isl=a["isl"], osl=a["osl"], prefix=a.get("prefix"),
                prefill_moe_tp=a.get("prefill_moe_tp_size"), prefill_moe_ep=a.get("prefill_moe_ep_size"),
                decode_moe_tp=a.get("decode_moe_tp_size"), decode_moe_ep=a.get("decode_moe_ep_size"))  # fmt: skip


def _same(golden, got) -> bool:
    """Equal to the bit for numbers (ints compare as floats, as the struct stores them)."""
    if golden is None or got is None:
        return golden is None and got is None
    if isinstance(golden, str) or isinstance(got, str):
        return golden == got
    if isinstance(golden, bool) or isinstance(got, bool):
        return golden == got
    g, v = float(golden), float(got)
    return g == v and math.copysign(1.0, g) == math.copysign(1.0, v)


def _compare(point, got, keys, skip, counts, failures):
    raw = json.loads(point["raw"])
    for key, golden in raw.items():
        if key in skip:
            continue
        assert key in keys, f"point {point['point_id']}: raw key {key!r} is not mapped to a struct field"
        field = keys[key]
        ok = _same(golden, got.get(field))
        counts.setdefault(field, [0, 0])[0 if ok else 1] += 1
        if not ok:
            failures.append(f"point {point['point_id']} {point['mode']} {point['model']} {point['db']} {point['args']}: "
                            f"{key} spec {golden!r} python {got.get(field)!r}")  # fmt: skip


def _check_oom(point, fn, call):
    """A golden point the spec fails with its OOM RuntimeError: the reason is
    the spec's message word for word, every other field NULL, and
    ``on_miss="error"`` raises it."""
    kind, message = point["error"].split(": ", 1)
    assert kind == "RuntimeError" and message.startswith("OOM: "), (point["point_id"], point["error"])
    got = fn(**call)
    assert got["reason"] == message, (point["point_id"], got["reason"])
    assert all(v is None for k, v in got.items() if k != "reason"), point["point_id"]
    with pytest.raises(ValueError, match="^OOM: "):
        fn(**call, on_miss="error")


def _report(title, counts):
    print(f"\n{title}: field -> (equal, different)")
    for field, (ok, bad) in counts.items():
        print(f"  {field:28s} {ok:3d} {bad:3d}")


@needs_data
def test_agg_goldens_bit_for_bit():
    points = [p for p in _points() if p["mode"] == "agg" and p["error"] is None]
    assert len(points) == 45
    counts, failures = {}, []
    for point in points:
        got = estimate_agg(**_agg_call(point))
        assert got["reason"] is None, (point["point_id"], got["reason"])
        _compare(point, got, AGG_KEYS, AGG_SKIP, counts, failures)
    _report(f"agg goldens ({len(points)} points)", counts)
    assert not failures, "\n".join(failures[:20])
    # every numeric field of the dict was checked on every point
    assert counts["ttft_ms"] == [45, 0] and counts["memory_gib"] == [45, 0] and counts["num_tokens"] == [45, 0]


@needs_data
def test_disagg_goldens_bit_for_bit():
    points = [p for p in _points() if p["mode"] == "disagg"]
    assert len(points) == 34
    counts, failures = {}, []
    for point in points:
        assert point["error"] is None
        got = estimate_disagg(**_disagg_call(point))
        assert got["reason"] is None, (point["point_id"], got["reason"])
        _compare(point, got, DISAGG_KEYS, DISAGG_SKIP, counts, failures)
    _report(f"disagg goldens ({len(points)} points)", counts)
    assert not failures, "\n".join(failures[:20])
    assert counts["ttft_ms"] == [34, 0] and counts["decode_memory_gib"] == [34, 0]


@needs_data
def test_error_goldens_raise_or_give_a_reason():
    points = [p for p in _points() if p["error"] is not None]
    assert len(points) == 4
    outcomes = []
    for point in points:
        kind = point["error"].split(":", 1)[0]
        try:
            got = estimate_agg(**_agg_call(point))
        except ValueError as e:
            outcomes.append((point["point_id"], kind, "raised", str(e)))
            assert kind == "ValueError", point["error"]
            assert point["error"].split(": ", 1)[1] in str(e)
            continue
        assert got["reason"] is not None and got["ttft_ms"] is None, (point["point_id"], got)
        assert all(v is None for k, v in got.items() if k != "reason")
        outcomes.append((point["point_id"], kind, "reason", got["reason"]))
        if kind in ("RuntimeError", "ValueError"):  # OOM and the refused block split: the spec's words
            assert got["reason"] == point["error"].split(": ", 1)[1]
        else:  # a perf-data miss names the same lookup
            assert kind == "PerfDataNotAvailableError"
            assert "moe" in got["reason"]
    print("\nerror goldens:", *outcomes, sep="\n  ")
    # No error golden raises: the one ValueError is a deployment the spec
    # refuses (the fp8_block MoE split), a reason like a miss, so grids answer.
    assert sorted(o[2] for o in outcomes) == ["reason", "reason", "reason", "reason"]


@needs_data
def test_on_miss_error_raises_the_reason():
    oom = next(p for p in _points() if (p["error"] or "").startswith("RuntimeError"))
    with pytest.raises(ValueError, match="OOM: the model"):
        estimate_agg(**_agg_call(oom), on_miss="error")


@needs_data
def test_batch_entry_points_match_the_plain_functions():
    points = _points()
    agg = [p for p in points if p["mode"] == "agg" and not (p["error"] or "").startswith("ValueError")][:12]
    calls = [_agg_call(p) for p in agg]
    names = ["model", "db", "parallel", "batch", "isl", "osl", "prefix", "ctx_tokens", "moe_tp", "moe_ep"]
    arrays = [pa.array([c[n] for c in calls], pa.utf8() if n in ("model", "db") else pa.int64()) for n in names]
    # a NULL required argument gives a NULL struct
    arrays = [pa.concat_arrays([a, pa.array([None], a.type)]) for a in arrays]
    out = estimate_agg_batch({"on_miss": "null"}, *arrays)
    assert out.type == AGG_SCHEMA and len(out) == len(calls) + 1
    got = out.to_pylist()
    assert got[-1] is None
    for call, row in zip(calls, got):
        assert row == estimate_agg(**call)
    # parallel as the spec's label (a string array), 6 arguments
    dense = [c for c in calls if c["moe_tp"] is None and c["moe_ep"] is None and not c["prefix"] and c["ctx_tokens"] is None]
    assert len(dense) >= 3
    six = [pa.array([c[n] for c in dense], pa.utf8() if n in ("model", "db") else pa.int64()) for n in names[:6]]
    six[2] = pa.array([f"tp{c['parallel']}pp1dp1etpNoneepNone" for c in dense])
    assert estimate_agg_batch({}, *six).to_pylist() == [estimate_agg(**c) for c in dense]

    disagg = [p for p in points if p["mode"] == "disagg"][:6]
    dcalls = [_disagg_call(p) for p in disagg]
    dnames = ["model", "db", "prefill_parallel", "prefill_batch", "prefill_workers", "decode_parallel",
              "decode_batch", "decode_workers", "isl", "osl", "prefix", "prefill_moe_tp", "prefill_moe_ep",
              "decode_moe_tp", "decode_moe_ep"]  # fmt: skip
    darrays = [pa.array([c[n] for c in dcalls], pa.utf8() if n in ("model", "db") else pa.int64()) for n in dnames]
    dout = estimate_disagg_batch({}, *darrays)
    assert dout.type == DISAGG_SCHEMA
    for call, row in zip(dcalls, dout.to_pylist()):
        assert row == estimate_disagg(**call)


@needs_data
def test_memory_reports_an_oom_as_not_fitting():
    oom = next(p for p in _points() if (p["error"] or "").startswith("RuntimeError"))
    m = estimate_memory(**_agg_call(oom))
    assert m["fits"] is False and m["reason"] is None and m["total_gib"] >= m["capacity_gib"]
    ok = next(p for p in _points() if p["mode"] == "agg" and p["error"] is None)
    m = estimate_memory(**_agg_call(ok))
    assert m["fits"] is True and m["total_gib"] == json.loads(ok["raw"])["memory"]
    parts = m["weights_gib"], m["activations_gib"], m["kvcache_gib"], m["nccl_gib"], m["others_gib"]
    assert all(p >= 0 for p in parts)


def test_numpy_round3_is_numpy_not_python():
    # The stored 792.2965 is a hair above the decimal tie, so Python's round()
    # goes up; numpy's product 792.2965 * 1000.0 rounds to exactly 792296.5 and
    # rint takes the even neighbour.
    assert 792.2965 * 1000.0 == 792296.5
    assert numpy_round3(792.2965) == 792.296 and round(792.2965, 3) == 792.297
    assert numpy_round3(0.0005) == 0.0 and numpy_round3(0.0015) == 0.002  # ties to even at x * 1000
    assert numpy_round3(2.5e-4) == 0.0 and numpy_round3(-0.0001) == 0.0 and math.copysign(1, numpy_round3(-0.0001)) < 0
    assert numpy_round3(7) == 7 and isinstance(numpy_round3(7), int)


def test_parallel_labels():
    # (tp, moe_tp, moe_ep, dp, pp, cp)
    assert parse_parallel(8) == (8, None, None, 1, 1, 1)
    assert parse_parallel("tp8pp1dp1etpNoneepNone") == (8, None, None, 1, 1, 1)
    assert parse_parallel("tp4pp1dp1etp1ep4cp1") == (4, 1, 4, 1, 1, 1)
    assert parse_parallel("tp4pp1dp1etp1ep4", 1, 4) == (4, 1, 4, 1, 1, 1)
    assert parse_parallel(4, 1, None) == (4, 1, None, 1, 1, 1)
    assert parse_parallel("tp2pp1dp4etp1ep8") == (2, 1, 8, 4, 1, 1)  # attention dp: tp * dp = moe_tp * moe_ep
    assert parse_parallel("tp4pp2dp1etp1ep4") == (4, 1, 4, 1, 2, 1)  # pipeline parallelism
    assert parse_parallel("tp1pp1dp1etp1ep2cp2") == (1, 1, 2, 1, 1, 2)  # context parallelism, as the search prints it
    p = parse_parallel("tp1pp2dp1etp2ep2cp4")
    assert (p.tp, p.pp, p.dp, p.cp, p.moe_tp, p.moe_ep) == (1, 2, 1, 4, 2, 2)
    for bad, match in (("tp4pp0dp1etp1ep4", "pp = 0"), ("tp4pp1dp1etp1ep4cp0", "cp = 0"), ("4x", "neither")):
        with pytest.raises(ValueError, match=match):
            parse_parallel(bad)
    with pytest.raises(ValueError, match="contradicts"):
        parse_parallel("tp4pp1dp1etp1ep4", 2, None)
    with pytest.raises(ValueError, match="contradicts"):
        parse_parallel("tp4pp1dp1etpNoneepNone", None, 4)


@needs_data
def test_invalid_input_raises():
    model, db = "meta-llama/Meta-Llama-3.1-8B", "gb200/sglang/0.5.14"
    with pytest.raises(ValueError, match="batch"):
        estimate_agg(model, db, 8, 0, 1024, 128)
    with pytest.raises(ValueError, match="pp = 0"):
        estimate_agg(model, db, "tp8pp0dp1etpNoneepNone", 4, 1024, 128)
    with pytest.raises(ValueError, match="sglang CP requires tp_size=1"):
        estimate_agg(model, db, "tp8pp1dp1etpNoneepNonecp2", 4, 1024, 128)
    with pytest.raises(ValueError, match="isl must be greater than 0 after removing prefix, but got 0"):
        estimate_agg(model, db, 8, 4, 256, 128, 256)
    with pytest.raises(ValueError, match="isl must be greater than 0 after removing prefix"):
        estimate_disagg(model, db, 8, 1, 1, 8, 16, 1, 256, 128, 300)


# ---- pipeline parallelism: the spec's pp goldens -----------------------------------------------


def _pp_label(a: dict, side: str = "") -> str:
    """The parallel label of a pp golden's arguments (a disagg side's own
    value, else the shared one -- cli_estimate's defaulting; moe None = not given)."""

    def get(key, default=None):
        value = a.get(side + key)
        if value is None and side:
            value = a.get(key)
        return default if value is None else value

    def width(v):
        return "None" if v is None else str(int(v))

    return (f"tp{int(get('tp_size'))}pp{int(get('pp_size', 1))}dp{int(get('attention_dp_size', 1))}"
            f"etp{width(get('moe_tp_size'))}ep{width(get('moe_ep_size'))}")  # fmt: skip


def _pp_call(point) -> dict:
    a = json.loads(point["args"])
    if point["mode"] == "agg":
        return dict(model=point["model"], db=point["db"], parallel=_pp_label(a), batch=a["batch_size"],
                    isl=a["isl"], osl=a["osl"], prefix=a.get("prefix"), ctx_tokens=a.get("ctx_tokens"))  # fmt: skip
    return dict(model=point["model"], db=point["db"], prefill_parallel=_pp_label(a, "prefill_"),
                prefill_batch=a["prefill_batch_size"], prefill_workers=a["prefill_num_workers"],
                decode_parallel=_pp_label(a, "decode_"), decode_batch=a["decode_batch_size"],
                decode_workers=a["decode_num_workers"], isl=a["isl"], osl=a["osl"], prefix=a.get("prefix"))  # fmt: skip


@pytest.mark.skipif(not PP_GOLDENS.is_file(), reason=f"the spec's pp goldens are not there ({PP_GOLDENS})")
@needs_data
def test_pp_goldens_bit_for_bit():
    """Every point of serving_pp_goldens.parquet: agg to the float bit, disagg at the spec's
    3 decimals (every field, as above), the OOM point the spec's message, the KV warning."""
    points = pq.read_table(PP_GOLDENS).to_pylist()
    counts = {"agg": {}, "disagg": {}}
    failures, errors, warnings = [], [], 0
    for point in points:
        call = _pp_call(point)
        fn = estimate_agg if point["mode"] == "agg" else estimate_disagg
        if point["error"] is not None:
            kind, message = point["error"].split(": ", 1)
            got = fn(**call)
            assert got["ttft_ms"] is None and got["reason"] is not None, (point["point_id"], got)
            assert kind == "RuntimeError" and got["reason"] == message, (point["point_id"], got["reason"])
            errors.append(point["point_id"])
            continue
        got = fn(**call, on_miss="error")
        if point["mode"] == "agg":
            _compare(point, got, AGG_KEYS, AGG_SKIP, counts["agg"], failures)
            assert got["warning"] == point["kv_cache_warning"], point["point_id"]
            warnings += got["warning"] is not None
        else:
            _compare(point, got, DISAGG_KEYS, DISAGG_SKIP, counts["disagg"], failures)
    for mode in ("agg", "disagg"):
        _report(f"pp goldens, {mode}", counts[mode])
    print(f"  error points: {errors}; KV-cache warnings: {warnings}")
    assert not failures, "\n".join(failures[:20])
    n_agg = sum(p["mode"] == "agg" and p["error"] is None for p in points)
    n_disagg = sum(p["mode"] == "disagg" for p in points)
    assert counts["agg"]["ttft_ms"] == [n_agg, 0] and counts["agg"]["memory_gib"] == [n_agg, 0]
    assert counts["disagg"]["ttft_ms"] == [n_disagg, 0] and counts["disagg"]["decode_memory_gib"] == [n_disagg, 0]
    pps = set()
    for p in points:
        a = json.loads(p["args"])
        pps |= {a.get(k) for k in ("pp_size", "prefill_pp_size", "decode_pp_size")}
    assert {2, 4} <= pps  # pipeline parallelism for real


# ---- SQL: the Python path registered next to the Rust one ---------------------------------------


def _sql_context():
    import aicsql

    return aicsql.context()


def _lit(v) -> str:
    if v is None:
        return "CAST(NULL AS BIGINT)"
    return f"'{v}'" if isinstance(v, str) else str(int(v))


@needs_data
def test_sql_py_estimates_equal_the_rust_estimates():
    ctx = _sql_context()
    points = _points()
    agg = [p for p in points if p["mode"] == "agg" and not (p["error"] or "").startswith("ValueError")][:8]
    disagg = [p for p in points if p["mode"] == "disagg"][:4]
    checked = 0
    for point in agg:
        c = _agg_call(point)
        args = ", ".join(_lit(c[n]) for n in ("model", "db", "parallel", "batch", "isl", "osl", "prefix", "ctx_tokens",
                                              "moe_tp", "moe_ep"))  # fmt: skip
        for fn in ("estimate_agg", "estimate_memory"):
            row = ctx.sql(f"SELECT {fn}({args}) AS r, py_{fn}({args}) AS p, {fn}({args}) = py_{fn}({args}) AS same"
                          ).to_arrow_table().to_pylist()[0]  # fmt: skip
            assert row["r"] == row["p"], (point["point_id"], fn)
            assert row["p"] == (estimate_agg(**c) if fn == "estimate_agg" else estimate_memory(**c))
            checked += 1
    for point in disagg:
        c = _disagg_call(point)
        args = ", ".join(_lit(c[n]) for n in ("model", "db", "prefill_parallel", "prefill_batch", "prefill_workers",
                                              "decode_parallel", "decode_batch", "decode_workers", "isl", "osl",
                                              "prefix", "prefill_moe_tp", "prefill_moe_ep", "decode_moe_tp",
                                              "decode_moe_ep"))  # fmt: skip
        row = ctx.sql(f"SELECT estimate_disagg({args}) AS r, py_estimate_disagg({args}) AS p").to_arrow_table().to_pylist()[0]
        assert row["r"] == row["p"] == estimate_disagg(**c), point["point_id"]
        checked += 1
    # the label form of parallel, 6 arguments
    row = ctx.sql(
        "SELECT estimate_agg('meta-llama/Meta-Llama-3.1-8B', 'gb200/sglang/0.5.14', 'tp8pp1dp1etpNoneepNone', 4, 1024, 128) AS r, "
        "py_estimate_agg('meta-llama/Meta-Llama-3.1-8B', 'gb200/sglang/0.5.14', 'tp8pp1dp1etpNoneepNone', 4, 1024, 128) AS p"
    ).to_arrow_table().to_pylist()[0]
    assert row["r"] == row["p"] and row["p"]["ttft_ms"] == 12.858923445384333
    print(f"\nSQL: {checked} points equal on both paths")


@needs_data
@pytest.mark.parametrize("fn", ["estimate_agg", "py_estimate_agg"])
def test_filtered_rows_are_not_priced(fn):
    """A filtered-out row (batch 0, which would raise) is not evaluated: the
    session turns DataFusion's leaf-expression pushdown off."""
    ctx = _sql_context()
    setting = ctx.sql("SELECT value FROM information_schema.df_settings "
                      "WHERE name = 'datafusion.optimizer.enable_leaf_expression_pushdown'").to_arrow_table().to_pylist()  # fmt: skip
    assert setting == [{"value": "false"}]
    got = ctx.sql(
        f"SELECT count(e['ttft_ms']) AS n FROM (SELECT {fn}('meta-llama/Meta-Llama-3.1-8B','gb200/sglang/0.5.14', 8, b, "
        "1024, 128) AS e FROM (VALUES (0),(4)) AS t(b) WHERE b > 0)"
    ).to_arrow_table().to_pylist()
    assert got == [{"n": 1}]


@needs_data
def test_sql_misses_and_oom_are_a_reason_or_an_error():
    ctx = _sql_context()
    oom = next(p for p in _points() if (p["error"] or "").startswith("RuntimeError"))
    c = _agg_call(oom)
    args = ", ".join(_lit(c[n]) for n in ("model", "db", "parallel", "batch", "isl", "osl"))
    row = ctx.sql(f"SELECT py_estimate_agg({args}) AS p, estimate_agg({args}) AS r").to_arrow_table().to_pylist()[0]
    assert row["p"]["reason"] == row["r"]["reason"] == oom["error"].split(": ", 1)[1]
    ctx.sql("SET aic.on_miss = 'error'").collect()
    with pytest.raises(Exception, match="OOM"):
        ctx.sql(f"SELECT py_estimate_agg({args})").collect()


@needs_data
def test_serving_scan_quick_run_has_no_failures(capsys):
    from aicsql import parity
    from aicsql.parity.__main__ import main

    ctx = _sql_context()
    report = parity.run(ctx, "serving", limit=40, progress=False)
    counts = parity.status_counts(report)
    print("\nserving scan, 40 + 40 points:", counts)
    assert report.num_rows == 80
    assert counts["DRIFT"] == 0 and counts["REGRESSION"] == 0 and counts["EXTRA"] == 0
    assert counts["STRICT_PASS"] > 0
    modes = set(report.column("mode").to_pylist())
    assert modes == {"agg", "disagg"}
    assert parity.exit_status(report) == 0
    # the command line on the same session
    assert main(["--scan", "serving", "--limit", "5", "--no-progress"], context=ctx) == 0
    assert "OK: no DRIFT, no REGRESSION" in capsys.readouterr().out


@needs_data
def test_serving_scan_names_the_drifting_field(capsys):
    import aicsql
    from aicsql import parity
    from aicsql.parity.__main__ import main
    from aicsql.spec import serving
    from datafusion.user_defined import ScalarUDF

    ctx = _sql_context()
    from aicsql import _internal

    library = _internal.Library(aicsql._data_dirs(None))

    def faulty(settings, *arrays):  # TPOT one ulp off on every answered point
        out = serving.estimate_agg_batch(settings, *arrays).to_pylist()
        for row in out:
            if row is not None and row["tpot_ms"] is not None:
                row["tpot_ms"] = math.nextafter(row["tpot_ms"], math.inf)
        return pa.array(out, AGG_SCHEMA)

    ctx.register_udf(ScalarUDF.from_pycapsule(library.python_scalar("py_estimate_agg_faulty", "estimate_agg", faulty)))
    report = parity.run(ctx, "serving", limit=10, python="py_estimate_agg_faulty", progress=False)
    drifts = [r for r in report.to_pylist() if r["status"] == "DRIFT"]
    assert drifts and all(r["mode"] == "agg" and r["field"] == "tpot_ms" and r["fields_differing"] == 1 for r in drifts)
    assert all(r["py_value"] == math.nextafter(r["rust_value"], math.inf) for r in drifts)
    assert main(["--scan", "serving", "--limit", "10", "--no-progress", "--python", "py_estimate_agg_faulty"],
                context=ctx) == 1  # fmt: skip
    out = capsys.readouterr().out
    assert "DRIFT" in out and "tpot_ms" in out


@needs_data
@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_serving_parity_sql_runs_as_users_run_it(mode):
    """serving_grid.sql and serving_<mode>_parity.sql by hand: register the
    points as parity_queries, run both statements."""
    import pyarrow.compute as pc
    from aicsql.parity import sqlfiles

    ctx = _sql_context()
    ctx.sql("SET aic.on_miss = 'null'").collect()
    (grid_sql,) = sqlfiles.statements(sqlfiles.load("serving_grid.sql"))
    grid = ctx.sql(grid_sql).to_arrow_table()
    points = grid.filter(pc.equal(grid.column("mode"), mode)).slice(0, 12)
    ctx.register_record_batches("parity_queries", [points.to_batches()])
    try:
        table, verdict = sqlfiles.statements(sqlfiles.load(f"serving_{mode}_parity.sql"))
        ctx.sql(table).collect()
        rows = ctx.sql(verdict).to_arrow_table().to_pylist()
    finally:
        ctx.deregister_table("parity_results")
        ctx.deregister_table("parity_queries")
    assert len(rows) == 12 and {r["status"] for r in rows} <= {"STRICT_PASS", "MISS_BOTH"}
    for r in rows:
        if r["status"] == "STRICT_PASS":
            assert r["rel_diff"] == 0.0 and r["fields_differing"] == 0 and r["field"] is None
        else:
            assert r["rust_reason"] and r["py_reason"] and r["rel_diff"] is None


@needs_data
def test_serving_dp_scan_grid_runs_on_the_python_path():
    """The serving-dp grid (attention dp > 1, MOE models) with the Python path on both sides:
    every point prices (a status, never an error) and the layout reaches the struct."""
    from aicsql import parity

    ctx = _sql_context()
    report = parity.run(ctx, "serving-dp", limit=60, rust="py_estimate_agg,py_estimate_disagg", progress=False)
    counts = parity.status_counts(report)
    print("\nserving-dp scan (Python on both sides), 60 + 60 points:", counts)
    assert report.num_rows == 120 and counts["DRIFT"] == 0 and counts["REGRESSION"] == 0 and counts["EXTRA"] == 0
    assert counts["STRICT_PASS"] > 0
    rows = report.to_pylist()
    assert {r["dp"] for r in rows} == {2, 4} and all(r["parallel"] == f"tp{r['tp']}pp1dp{r['dp']}etp1ep{r['moe_ep']}"
                                                     for r in rows)  # fmt: skip


@needs_data
def test_serving_dp_scan_against_the_rust_path(capsys):
    """The serving-dp scan proper: Rust and Python paths at attention dp 2 / 4."""
    from aicsql import parity
    from aicsql.parity.__main__ import main

    ctx = _sql_context()
    report = parity.run(ctx, "serving-dp", limit=200, progress=False)
    counts = parity.status_counts(report)
    print("\nserving-dp scan, 200 + 200 points:", counts)
    assert counts["DRIFT"] == 0 and counts["REGRESSION"] == 0 and counts["EXTRA"] == 0 and counts["STRICT_PASS"] > 0
    assert main(["--scan", "serving-dp", "--limit", "5", "--no-progress"], context=ctx) == 0
    assert "OK: no DRIFT, no REGRESSION" in capsys.readouterr().out


@needs_data
def test_serving_pp_cp_scan_against_the_rust_path():
    """The serving-pp-cp scan: Rust and Python paths at pp 2 / 4 and (sglang) cp 2 / 4,
    the layout reaching both structs as the spec's label."""
    from aicsql import parity

    ctx = _sql_context()
    report = parity.run(ctx, "serving-pp-cp", limit=600, progress=False)
    counts = parity.status_counts(report)
    print("\nserving-pp-cp scan, 600 + 600 points:", counts)
    assert counts["DRIFT"] == 0 and counts["REGRESSION"] == 0 and counts["EXTRA"] == 0 and counts["STRICT_PASS"] > 0
    rows = report.to_pylist()
    priced = [r for r in rows if r["status"] == "STRICT_PASS"]
    assert {r["pp"] for r in priced} >= {2, 4} and {r["cp"] for r in priced} >= {1, 2, 4}, counts
    for r in rows:
        suffix = f"cp{r['cp']}" if r["cp"] > 1 else ""
        assert r["parallel"].startswith(f"tp{r['tp']}pp{r['pp']}dp1etp") and r["parallel"].endswith(suffix)


MLA_GOLDENS = GOLDENS.with_name("serving_mla_agg_goldens.parquet")


@needs_data
def test_mla_agg_goldens_bit_for_bit():
    """DEEPSEEK / KIMIK25 aggregated (serving_mla_agg_goldens.parquet, computed by
    the spec): their attention is inside the MLA block, which the mixed step's
    by-name lookup reads as 0.0 (a defaultdict); every field to the float bit."""
    points = pq.read_table(MLA_GOLDENS).to_pylist()
    assert len(points) >= 4
    counts, failures = {}, []
    for point in points:
        got = estimate_agg(**_pp_call(point), on_miss="error")
        _compare(point, got, AGG_KEYS, AGG_SKIP, counts, failures)
    _report("mla agg goldens", counts)
    assert not failures, "\n".join(failures[:20])
    assert counts["ttft_ms"] == [len(points), 0] and counts["tpot_ms"] == [len(points), 0]
