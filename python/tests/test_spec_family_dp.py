"""Attention data parallelism (dp > 1) for the HYBRIDMOE (Llama-4, MiMo-V2-Flash)
and DEEPSEEK / KIMIK25 families on the Python path, against the spec's
``serving_family_dp_goldens.parquet`` (31 points of aiconfigurator v0.11.0's
``cli_estimate``; docs/spec/families_dp_cp.md 9.1), pure Python, no SQL.

* non-error points: aggregated every field equal to the float bit,
  disaggregated every field equal at the spec's 3 decimals (the comparison
  of test_spec_serving.py);
* the spec's trtllm ``AssertionError`` (attention tp > 1 with dp > 1, on an
  aggregated point and on either disaggregated side) is a ValueError carrying
  the spec's message; its OOM is a struct whose ``reason`` is the spec's
  message, word for word.

Plus the one number the goldens show only in aggregate -- how much the
trtllm SM 100 all-gather moves per family (HYBRIDMOE builds its dispatches
without a quant mode, so it gathers the full volume even for a quantized
checkpoint) -- and the search space: every dp > 1 layout of these families
now resolves, so the search prices it instead of skipping it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.search.space import agg_lists, disagg_lists, enumerate_parallel
from aicsql.spec.serving import estimate_agg, estimate_disagg
from aicsql.spec.serving.estimate import resolve_layout
from aicsql.spec.step import engine_step
from aicsql.spec.step.engine import step_context

from _support import have_data, require

# The golden comparison and the label builder of the other serving goldens.
from test_spec_serving import AGG_KEYS, AGG_SKIP, DISAGG_KEYS, DISAGG_SKIP, _check_oom, _compare, _pp_call, _report

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "serving_family_dp_goldens.parquet"
HAVE_DATA = have_data(open_tree)
needs_goldens = require(GOLDENS.is_file() and HAVE_DATA, f"family dp goldens ({GOLDENS}) or the perf data are missing")
needs_data = require(HAVE_DATA, "the perf data are missing")

TRTLLM_TP_DP = "trtllm does not support TP>1 and DP>1 for attn simultaneously"


def _dp_sides(point) -> set:
    a = json.loads(point["args"])
    return {a.get(k) for k in ("attention_dp_size", "prefill_attention_dp_size", "decode_attention_dp_size")}


@needs_goldens
def test_family_dp_goldens():
    """Every point: 27 priced equal to the spec, 3 trtllm assertions raised, 1 OOM."""
    points = pq.read_table(GOLDENS).to_pylist()
    assert len(points) == 31
    counts = {"agg": {}, "disagg": {}}
    failures, asserted, ooms = [], [], []
    for point in points:
        call = _pp_call(point)
        fn = estimate_agg if point["mode"] == "agg" else estimate_disagg
        error = point["error"]
        if error is not None and error.startswith("AssertionError: "):
            assert error.split(": ", 1)[1] == TRTLLM_TP_DP, (point["point_id"], error)
            with pytest.raises(ValueError, match=TRTLLM_TP_DP):
                fn(**call)
            asserted.append(point["point_id"])
            continue
        if error is not None:
            _check_oom(point, fn, call)
            ooms.append(point["point_id"])
            continue
        got = fn(**call, on_miss="error")
        if point["mode"] == "agg":
            _compare(point, got, AGG_KEYS, AGG_SKIP, counts["agg"], failures)
            assert got["warning"] == point["kv_cache_warning"], point["point_id"]
        else:
            _compare(point, got, DISAGG_KEYS, DISAGG_SKIP, counts["disagg"], failures)
    for mode in ("agg", "disagg"):
        _report(f"family dp goldens, {mode}", counts[mode])
    print(f"  trtllm tp x dp assertions: {asserted}; OOM: {ooms}")
    assert not failures, "\n".join(failures[:20])
    n_agg = sum(p["mode"] == "agg" and p["error"] is None for p in points)
    n_disagg = sum(p["mode"] == "disagg" and p["error"] is None for p in points)
    assert (n_agg, n_disagg) == (12, 15)
    for field in ("ttft_ms", "tpot_ms", "tokens_per_s_per_gpu", "memory_gib", "parallel", "dp"):
        assert counts["agg"][field] == [n_agg, 0], field
    for field in ("ttft_ms", "tpot_ms", "tokens_per_s_per_gpu", "prefill_memory_gib", "decode_memory_gib",
                  "decode_parallel", "decode_dp"):  # fmt: skip
        assert counts["disagg"][field] == [n_disagg, 0], field
    assert asserted == [9, 23, 30] and ooms == [26]
    # dp > 1 for real, on every family
    assert {p["model"] for p in points} == {"meta-llama/Llama-4-Scout-17B-16E-Instruct", "deepseek-ai/DeepSeek-V3",
                                             "nvidia/Kimi-K2.5-NVFP4"}  # fmt: skip
    assert set().union(*(_dp_sides(p) for p in points)) >= {2, 4, 8}


def _dispatch_rows(model: str, db: str, dp: int, batch: int = 2, isl: int = 128):
    step = engine_step(model, db, "context", 1, batch, isl, 1, 1, dp, dp=dp)
    return [r for r in step["rows"] if r["row_kind"] == "op" and "dispatch" in r["op_name"]]


@needs_data
@pytest.mark.parametrize(
    "model, hidden, dp, quant, gathered",
    [("meta-llama/Llama-4-Scout-17B-16E-Instruct", 5120, 2, "None", 1.0),  # no quant mode: the full volume
     ("deepseek-ai/DeepSeek-V3", 7168, 8, "fp8_block", 0.5),  # volume / 2
     ("nvidia/Kimi-K2.5-NVFP4", 7168, 4, "nvfp4", 0.28125)],  # volume / 4 + volume / 32 of scales
)  # fmt: skip
def test_trtllm_sm100_gather_volume_per_family(model, hidden, dp, quant, gathered):
    """b200 (SM 100), tp 1, moe_ep = dp: the all-gather before the experts moves
    ``gathered * volume * dp`` elements, the reduce-scatter after them the full
    ``volume * dp`` (families_dp_cp.md 4.1, 7.2)."""
    rows = _dispatch_rows(model, "b200_sxm/trtllm/1.3.0rc20", dp)
    volume = 2 * 128 * hidden
    assert rows and all(r["quant"] == quant for r in rows)
    for r in rows:
        args = json.loads(r["lookup_args"])["args"]
        if r["op_name"].endswith("_pre_dispatch"):
            assert args == ["half", dp, "all_gather", gathered * volume * dp], r["op_name"]
        else:
            assert args == ["half", dp, "reduce_scatter", volume * dp], r["op_name"]


@needs_data
@pytest.mark.parametrize(
    "model, db",
    [("meta-llama/Llama-4-Scout-17B-16E-Instruct", "b200_sxm/sglang/0.5.14"),
     ("deepseek-ai/DeepSeek-V3", "h200_sxm/trtllm/1.3.0rc20"),
     ("nvidia/Kimi-K2.5-NVFP4", "gb200/vllm/0.24.0")],
)  # fmt: skip
def test_the_search_space_resolves_every_dp_layout(model, db):
    """The search (`aicsql.spec.search`) prices every layout of the spec's
    space through `resolve_layout`, and skips one that raises as the spec
    skips a configuration whose model raises: no dp > 1 layout of these
    families may raise any more (before, they were dropped without a word).
    The only layouts left are the ones the spec itself refuses, sglang's cp
    with attention tp or dp."""
    tree = open_tree()
    ctx = step_context(tree, model, tree.resolve(db, "", "latest"), True)
    backend, system = ctx.db.backend, ctx.db.system
    p_lists, d_lists = disagg_lists(True, backend, system, system, 8)
    tuples = set()
    for lists in (agg_lists(True, backend, system, 8), p_lists, d_lists):
        tuples.update(enumerate_parallel(lists, True, backend))
    assert any(dp > 1 for _, _, dp, _, _, _ in tuples)
    refused = []
    for tp, pp, dp, moe_tp, moe_ep, cp in sorted(tuples):
        try:
            layout = resolve_layout(ctx, tp, moe_tp, moe_ep, dp, pp, cp)
        except ValueError as e:
            refused.append(((tp, dp, cp), str(e)))
            continue
        assert (layout.dp, layout.par.moe_tp * layout.par.moe_ep) == (dp, tp * dp * cp)
    for (tp, dp, cp), message in refused:
        assert cp > 1 and (tp > 1 or dp > 1), message
        assert message.startswith("sglang CP requires tp_size=1 and attention_dp_size=1"), message
