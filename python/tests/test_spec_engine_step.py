"""The Python path's engine step (`aicsql.spec.step`) against the spec's
engine-step goldens, bit for bit.

Goldens: ``$AICSQL_GOLDENS``, else ``<repo>/tests/goldens``.
Data: the cache rule (``$AICSQL_DATA``, ``$XDG_CACHE_HOME/aicsql``, ``~/.cache/aicsql``).
Missing data or goldens FAIL these tests (a skip would pass with the feature absent).
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import sys
import time
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _support import have_data, require

try:
    import aicsql.spec  # noqa: F401
except ImportError:
    # `aicsql/__init__.py` loads the compiled Rust extension; the Python path is
    # pure Python and is tested without it: mount `aicsql` as a bare package.
    _package = types.ModuleType("aicsql")
    _package.__path__ = [str(Path(__file__).resolve().parents[1] / "aicsql")]
    sys.modules["aicsql"] = _package
    import aicsql.spec  # noqa: F401

from aicsql.spec import data_dirs, engine_step, open_tree, step_latency, step_latency_batch
from aicsql.spec.data import Database
from aicsql.spec.kernels import Grid, GridMiss, StepSystem, table_sources
from aicsql.spec.kernels.attention import GenerationAttentionTable
from aicsql.spec.step import infer_quant

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens")
STEP_GOLDENS = GOLDENS / "engine_step_goldens.parquet"
DATA_SOURCES = GOLDENS / "engine_step_data_sources.json"

EXAMPLE = ("Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0", 8, 1, 1024, 128)
EXAMPLE_TTFT = 24.74004986586315
EXAMPLE_TPOT = 7.121815664339327
EXAMPLE_GENERATION_LATENCY = 904.4705893710945

VALUE_COLUMNS = ("latency_ms", "total_ms", "weighted_total_ms")
LABEL_COLUMNS = ("op_name", "op_kind", "count", "quant", "lookup_table", "lookup_args", "interp_path")


needs_data = require(have_data(open_tree), f"no perf data under {data_dirs()} (run the fetch step)")
needs_goldens = require(STEP_GOLDENS.is_file(), f"no engine-step goldens at {STEP_GOLDENS}")


def settings(on_miss: str = "null", shared_layer: bool = True) -> dict:
    return {"backend": "", "version": "latest", "on_miss": on_miss, "shared_layer": "true" if shared_layer else "false"}


def _int_or_none(v):
    return None if v is None else int(v)


def _config_args(r: dict) -> tuple:
    """(model, db, tp, batch, isl, osl, moe_tp, moe_ep) of a golden row."""
    return (
        r["model"],
        f"{r['system']}/{r['backend']}/{r['version']}",
        r["tp"],
        r["batch"],
        r["isl"],
        r["osl"],
        _int_or_none(r["moe_tp"]),
        _int_or_none(r["moe_ep"]),
    )


def _classify(got, want, counts: collections.Counter, where, wrong: list) -> None:
    """bit-identical / within 1e-12 relative / mismatched."""
    if got is None and want is None:
        return
    if got is not None and want is not None and got == want and math.copysign(1.0, got) == math.copysign(1.0, want):
        counts["bit_identical"] += 1
    elif got is not None and want is not None and abs(got - want) <= 1e-12 * abs(want):
        counts["within_1e-12"] += 1
    else:
        counts["mismatched"] += 1
        wrong.append((where, got, want))


@pytest.fixture(scope="module")
def golden_groups():
    rows = pq.read_table(STEP_GOLDENS).to_pylist()
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault((r["config_id"], r["phase"]), []).append(r)
    return groups


# ---- (1) every golden row ---------------------------------------------------------------


@needs_data
@needs_goldens
def test_every_golden_row(golden_groups):
    counts = collections.Counter()
    wrong: list = []
    labels_wrong: list = []
    configs = 0
    t0 = time.perf_counter()
    for (config_id, phase), rows in golden_groups.items():
        if any(r["error"] is not None for r in rows):
            continue  # error goldens: test_error_goldens
        model, db, tp, batch, isl, osl, moe_tp, moe_ep = _config_args(rows[0])
        result = engine_step(model, db, phase, tp, batch, isl, osl, moe_tp, moe_ep)
        configs += 1
        mine = {(m["row_kind"], m["gen_step_index"], m["op_index"]): m for m in result["rows"]}
        assert len(mine) == len(rows), (config_id, phase, len(mine), len(rows))
        for g in rows:
            key = (g["row_kind"], _int_or_none(g["gen_step_index"]), g["op_index"])
            m = mine.get(key)
            assert m is not None, (config_id, phase, key)
            where = (config_id, phase, g["op_name"], g["gen_s"])
            for col in VALUE_COLUMNS:
                _classify(m[col], g[col], counts, where + (col,), wrong)
            if g["row_kind"] == "op":
                for col in LABEL_COLUMNS:
                    got = float(m[col]) if col == "count" else m[col]
                    if got != g[col]:
                        labels_wrong.append((where, col, got, g[col]))
            if g["row_kind"] == "gen_step_total":
                assert m["gen_s"] == g["gen_s"] and m["gen_repeat"] == g["gen_repeat"], where
            if g["row_kind"] == "step_total":
                col = "ttft_ms" if phase == "context" else "tpot_ms"
                _classify(result["total_ms"], g[col], counts, where + (col,), wrong)
                _classify(m[col], g[col], counts, where + (col + " (row)",), wrong)
                want_quants = {c: g[c + "_quant"] for c in ("gemm", "moe", "fmha", "comm")}
                want_quants["kvcache"] = g["kvcache_quant"]
                assert {k: result["quants"][k] for k in want_quants} == want_quants, where
    elapsed = time.perf_counter() - t0
    total = sum(counts.values())
    print(
        f"\nengine-step goldens: {configs} config-phases, {total} values: "
        f"{counts['bit_identical']} bit-identical, {counts['within_1e-12']} within 1e-12 relative, "
        f"{counts['mismatched']} mismatched ({elapsed:.2f} s)"
    )
    assert configs == 130
    assert not wrong, f"{len(wrong)} values differ, first: {wrong[:5]}"
    assert not labels_wrong, f"{len(labels_wrong)} labels differ, first: {labels_wrong[:5]}"
    assert counts["bit_identical"] + counts["within_1e-12"] == total
    assert counts["bit_identical"] == total  # the aim: every value bit for bit


@needs_data
@needs_goldens
def test_error_goldens(golden_groups):
    """Configurations the spec fails on must fail here with the same missing lookup."""
    checked = 0
    for (config_id, phase), rows in golden_groups.items():
        errors = [r for r in rows if r["error"] is not None]
        if not errors:
            continue
        model, db, tp, batch, isl, osl, moe_tp, moe_ep = _config_args(rows[0])
        with pytest.raises(ValueError) as e:
            engine_step(model, db, phase, tp, batch, isl, osl, moe_tp, moe_ep)
        message = str(e.value)
        for r in errors:
            if r["lookup_table"]:
                assert r["lookup_table"] in message, (config_id, message)
            if r["op_name"] and not r["op_name"].startswith("__"):
                assert r["op_name"] in message, (config_id, message)
        got = step_latency_batch(
            settings("null"), *[pa.array([v]) for v in (model, db, phase, tp, batch, isl, osl)],
            pa.array([moe_tp], pa.int64()), pa.array([moe_ep], pa.int64()),
        )
        assert got.to_pylist() == [None]
        checked += 1
    print(f"\nerror goldens checked: {checked}")


# ---- (2) the worked example (docs/spec 12) ---------------------------------------------------------


@needs_data
def test_worked_example():
    model, db, tp, batch, isl, osl = EXAMPLE
    ctx = engine_step(model, db, "context", tp, batch, isl, osl)
    gen = engine_step(model, db, "generation", tp, batch, isl, osl)
    assert ctx["total_ms"] == EXAMPLE_TTFT
    assert gen["total_ms"] == EXAMPLE_TPOT
    assert gen["phase_latency_ms"] == EXAMPLE_GENERATION_LATENCY
    assert step_latency(model, db, "context", tp, batch, isl, osl) == EXAMPLE_TTFT
    assert step_latency(model, db, "generation", tp, batch, isl, osl) == EXAMPLE_TPOT
    assert ctx["quants"] == {"gemm": "fp8_block", "moe": "fp8_block", "kvcache": "fp8", "fmha": "bfloat16",
                             "comm": "half"}
    ops = {r["op_name"]: r for r in ctx["rows"] if r["row_kind"] == "op"}
    assert [r["op_name"] for r in ctx["rows"]][:3] == ["context_embedding", "context_add_norm_1", "context_qkv_gemm"]
    assert round(ops["context_qkv_gemm"]["latency_ms"], 9) == 0.029277369
    assert ops["context_qkv_gemm"]["interp_path"] == "site_transfer"
    assert round(ops["context_attention"]["latency_ms"], 9) == 0.062772107
    assert ops["context_logits_gemm"]["lookup_args"] == '{"args": [1, 18992, 5120, "bfloat16"], "kwargs": {}}'
    assert round(ops["context_ar_1"]["latency_ms"], 9) == 0.058259921
    steps = [r for r in gen["rows"] if r["row_kind"] == "gen_step_total"]
    assert [(r["gen_s"], r["gen_repeat"]) for r in steps] == [(1025, 32), (1057, 32), (1089, 32), (1121, 31)]
    assert [round(r["total_ms"], 9) for r in steps] == [7.117992227, 7.120530694, 7.123103360, 7.125759626]
    assert GenerationAttentionTable.sample_points(1025) == [922, 973, 1024, 1075, 1127]
    attention = [r for r in gen["rows"] if r["op_name"] == "generation_attention"]
    assert round(attention[0]["latency_ms"], 9) == 0.010964021
    assert attention[0]["interp_path"] == "exact_hit,grid_interpolation"
    # Summation order (9.3): per-op accumulators, not per-step totals.
    per_step = 0.0
    for r in steps:
        per_step += r["weighted_total_ms"]
    assert abs(per_step - EXAMPLE_GENERATION_LATENCY) < 1e-9


# ---- (3) error paths ---------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize(
    "args,pattern",
    [
        (("Foo/NoSuchModel", "h200_sxm/vllm/0.19.0", "context", 8, 1, 1024, 128), "unknown model 'Foo/NoSuchModel'"),
        (("stepfun-ai/Step-3.7-Flash", "h200_sxm/vllm/0.19.0", "context", 8, 1, 1024, 128),
         "unsupported architecture 'Step3p7FlashForCausalLM'"),
        (("MiniMaxAI/MiniMax-M3", "h200_sxm/sglang/0.5.14", "context", 8, 1, 1024, 128, 1, 8),
         "(MiniMaxM3ForCausalLM, family MINIMAXM3); the MINIMAXM3 family is left for later"),
        (("Qwen/Qwen3-32B", "h200_sxm/vllm/0.19.0", "context", 3, 1, 1024, 128), "tp = 3 does not divide the 64"),
        (("Qwen/Qwen3-32B", "h200_sxm/vllm/0.19.0", "prefill", 8, 1, 1024, 128), "unknown phase 'prefill'"),
        (("Qwen/Qwen3-32B", "h200_sxm/vllm/0.0.1", "context", 8, 1, 1024, 128),
         "unknown database h200_sxm/vllm/0.0.1"),
        (("Qwen/Qwen3-32B", "nosystem/vllm/0.19.0", "context", 8, 1, 1024, 128), "unknown system 'nosystem'"),
        (("Qwen/Qwen3-32B", "h200_sxm/vllm/0.19.0", "context", 8, 0, 1024, 128), "batch = 0"),
        (("Qwen/Qwen3-30B-A3B", "h200_sxm/vllm/0.19.0", "context", 4, 1, 1024, 128), "give moe_tp and/or moe_ep"),
        (("Qwen/Qwen3-30B-A3B", "h200_sxm/vllm/0.19.0", "context", 4, 1, 1024, 128, 2, 4),
         "moe_tp * moe_ep = 2 * 4 != tp = 4"),
        (("Qwen/Qwen3-30B-A3B", "h200_sxm/vllm/0.19.0", "context", 4, 1, 1024, 128, None, 3),
         "moe_ep = 3 does not divide"),
        (("Qwen/Qwen3-30B-A3B", "h200_sxm/vllm/0.19.0", "context", 4, 1, 1024, 128, 2, 2),
         "vllm does not support moe_tp > 1 and moe_ep > 1"),
        (("deepseek-ai/DeepSeek-V3", "h200_sxm/sglang/0.5.14", "context", 8, 1, 1024, 128, 1, 16),
         "moe_tp * moe_ep = 1 * 16 != tp = 8"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_input(args, pattern):
    for call in (step_latency, engine_step):
        with pytest.raises(ValueError) as e:
            call(*args)
        assert pattern in str(e.value), str(e.value)
    # Bad input raises in the batch entry point too, whatever on_miss says.
    arrays = [pa.array([v]) for v in args[:7]]
    moe = [pa.array([v], pa.int64()) for v in (list(args[7:]) + [None, None])[:2]]
    with pytest.raises(ValueError) as e:
        step_latency_batch(settings("null"), *arrays, *moe)
    assert pattern in str(e.value), str(e.value)


@needs_data
def test_miss_llama4_first_moe_lookup():
    """Llama-4 on h200 vllm 0.19.0: the spec fails at its first MoE lookup (10.4)."""
    args = ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "h200_sxm/vllm/0.19.0", "context", 4, 2, 1024, 128)
    with pytest.raises(ValueError) as e:
        step_latency(*args, 1, 4)
    message = str(e.value)
    # The first MoE op of the HYBRIDMOE list is the global group's (families_hybrid 1.4).
    assert message.startswith("context_global_moe: ") and "query_moe(num_tokens=2048, hidden_size=5120" in message
    assert 'workload_distribution="power_law_1.01"' in message and "topk=1, num_experts=16" in message
    arrays = [pa.array([v]) for v in args] + [pa.array([1]), pa.array([4])]
    assert step_latency_batch(settings("null"), *arrays).to_pylist() == [None]
    with pytest.raises(ValueError, match="context_global_moe: .*query_moe"):
        step_latency_batch(settings("error"), *arrays)


# ---- (4) the batch entry point -----------------------------------------------------------------


@needs_data
def test_batch_equals_row_by_row():
    grid = []
    for model, db, tps, moe in (
        ("Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0", (1, 2, 4, 8), (None, None)),
        ("meta-llama/Meta-Llama-3.1-8B", "h200_sxm/vllm/0.19.0", (1, 2), (None, None)),
        ("Qwen/Qwen3-32B", "h200_sxm/sglang/0.5.10", (2,), (None, None)),
        ("Qwen/Qwen3-30B-A3B", "h200_sxm/vllm/0.19.0", (4,), (1, None)),
    ):
        for phase in ("context", "generation"):
            for tp in tps:
                for batch, isl, osl in ((1, 1024, 128), (4, 700, 40), (16, 3000, 2)):
                    grid.append((model, db, phase, tp, batch, isl, osl) + moe)
    grid.append(grid[0])  # a repeated configuration
    columns = list(zip(*grid))
    arrays = [pa.array(c) for c in columns[:7]] + [pa.array(c, pa.int64()) for c in columns[7:]]
    t0 = time.perf_counter()
    got = step_latency_batch(settings("error"), *arrays).to_pylist()
    batch_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    want = [step_latency(*row) for row in grid]
    single_s = time.perf_counter() - t0
    assert got == want
    assert all(isinstance(v, float) and v > 0 for v in got)
    print(
        f"\nstep_latency_batch: {len(grid)} configs in {batch_s * 1e3:.1f} ms "
        f"({batch_s / len(grid) * 1e3:.3f} ms/config); step_latency row by row: "
        f"{single_s / len(grid) * 1e3:.3f} ms/config"
    )


@needs_data
def test_batch_nulls_and_settings():
    model, db, tp, batch, isl, osl = EXAMPLE
    arrays = [
        pa.array([model, None, model, model]),
        pa.array(["h200_sxm/vllm/0.19.0", db, "h200_sxm", "h200_sxm/vllm"]),
        pa.array(["context", "context", "context", None]),
        pa.array([tp, tp, tp, tp]),
        pa.array([batch, batch, batch, batch]),
        pa.array([isl, isl, isl, isl]),
        pa.array([osl, osl, osl, osl]),
    ]
    got = step_latency_batch(
        {"backend": "vllm", "version": "0.19.0", "on_miss": "null", "shared_layer": "true"}, *arrays
    ).to_pylist()
    assert got == [EXAMPLE_TTFT, None, EXAMPLE_TTFT, None]
    assert step_latency_batch(settings(), *[a.slice(0, 0) for a in arrays]).type == pa.float64()


@needs_data
def test_throughput_after_load():
    """configs/s of step_latency once the tables are loaded (reported, not asserted)."""
    model, db = "Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0"
    step_latency(model, db, "context", 8, 1, 1024, 128)
    step_latency(model, db, "generation", 8, 1, 1024, 128)
    for phase in ("context", "generation"):
        configs = [(tp, b, isl) for tp in (1, 2, 4, 8) for b in (1, 3, 8, 16) for isl in range(512, 8192, 512)]
        t0 = time.perf_counter()
        for tp, b, isl in configs:
            step_latency(model, db, phase, tp, b, isl, 128)
        dt = time.perf_counter() - t0
        print(f"\nstep_latency {phase}: {len(configs)} distinct configs, {len(configs) / dt:.0f} configs/s")


# ---- (5) pieces of the spec on their own -------------------------------------------------------


@needs_data
@needs_goldens
def test_sources_match_the_goldens_data():
    """The union of every golden database is the spec's list (4.2), byte-identical files."""
    doc = json.loads(DATA_SOURCES.read_text())
    tree = open_tree()
    checked = 0
    for db_name, tables in doc["databases"].items():
        db = Database(*db_name.split("/"))
        for table, expected in tables.items():
            got = table_sources(tree, db, table, shared_layer=True)
            assert [f.version for f in got] == [e["version"] for e in expected], (db_name, table)
            for f, e in zip(got, expected):
                assert hashlib.sha256(Path(f.path).read_bytes()).hexdigest() == e["sha256"], (db_name, table, f.path)
                checked += 1
    assert checked > 0


def _system() -> StepSystem:
    doc = {
        "gpu": {"mem_bw": 1000, "mem_bw_empirical_scaling_factor": 1, "mem_empirical_constant_latency": 0,
                "bfloat16_tc_flops": 1000},
        "node": {"num_gpus_per_node": 8, "intra_node_bw": 100, "inter_node_bw": 10},
    }
    return StepSystem("test", doc)


def test_grid_blends_and_ragged_correction():
    sol = lambda c: float(c[0] * c[1])  # noqa: E731
    root = {1: {10: 4.0, 30: 16.0}, 3: {10: 9.0}}
    g = Grid(root, ("a", "b"), sol, sqrt_axis=1)
    # sqrt space on the transform axis: (2 + (4-2)*0.5)^2 = 9
    assert g.lookup((1, 20)) == (9.0, "grid_interpolation")
    assert g.lookup((1, 10)) == (4.0, "exact_hit")
    # a = 2 brackets 1 and 3; at b = 20 only a = 1 survives (3 has only b = 10 -> out of range):
    # its value 9.0 times SOL(2, 20) / SOL(1, 20) = 2
    assert g.lookup((2, 20)) == (18.0, "grid_interpolation")
    # raw blend off the transform axis: a = 2 at b = 10: 4 + (9-4)*0.5
    assert g.lookup((2, 10)) == (6.5, "grid_interpolation")


def test_grid_hold_tie_breaks():
    sol = lambda c: float(c[0] + c[1])  # noqa: E731
    # Outer axis: keys inserted 30 then 10; c = 20 is a tie -> the first inserted (30) wins.
    root = {30: {1: 31.0, 3: 33.0}, 10: {1: 1.0, 3: 2.0}}
    g = Grid(root, ("a", "b"), sol)
    value, path = g.lookup((20, 5))  # b = 5 beyond the last key -> hold
    assert path == "grid_util_hold"
    assert value == (20 + 5) / ((30 + 3) / 33.0)
    # Inner axis inside the range but the outer out of range: nearest key, ties -> smaller key.
    value, _ = g.lookup((40, 2))
    assert value == (40 + 2) / ((30 + 1) / 31.0)
    with pytest.raises(GridMiss):
        Grid({1: {1: 0.0}}, ("a", "b"), sol).lookup((1, 5))  # no positive util to hold


def test_sol_formulas_use_integer_true_division():
    s = _system()
    assert s.mem_op(500) == (500 / (1000 * 1) + 0) * 1000
    assert s.custom_allreduce_sol(1, 10) == 0
    assert s.custom_allreduce_sol(4, 10) == 2 * 10 * 2 / 4 * 3 / 100 * 1000
    assert s.bw(16) == 10


def test_quant_inference():
    fp8_block = {"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                         "weight_block_size": [128, 128]}}
    assert tuple(infer_quant(fp8_block, None)) == ("fp8_block", "fp8_block", "fp8", "fp8", "half")
    dynamic = {"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    assert tuple(infer_quant(dynamic, None))[:4] == ("fp8", "fp8", "fp8", "fp8")
    static = {"quantization_config": {"quant_algo": "FP8", "kv_cache_scheme": "FP8"}}
    assert infer_quant(static, None).gemm == "fp8_static"
    nvfp4 = {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "bfloat16"}}
    assert tuple(infer_quant({}, nvfp4))[:4] == ("nvfp4", "nvfp4", "fp8", "fp8")  # kv forced to fp8
    assert tuple(infer_quant({}, None)) == ("bfloat16", "bfloat16", "bfloat16", "bfloat16", "half")
    # fmha fp8 needs a quant algo (families_mla 2.2): an fp8 kv cache alone keeps bfloat16 FMHA.
    kv_only = {"quantization": {"kv_cache_quant_algo": "FP8"}}
    assert tuple(infer_quant({}, kv_only))[:4] == ("bfloat16", "bfloat16", "fp8", "bfloat16")
    assert tuple(infer_quant({"quantization_config": {"quant_method": "mxfp4"}}, None))[:4] == (
        "bfloat16", "w4a16_mxfp4", "bfloat16", "bfloat16")  # fmt: skip
    with pytest.raises(ValueError, match="Unsupported quant algorithm: awq"):
        infer_quant({"quantization_config": {"quant_method": "AWQ"}}, None)
