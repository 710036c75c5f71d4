"""Context parallelism (cp > 1, sglang) for the HYBRIDMOE (Llama-4-Scout,
MiMo-V2-Flash) and DEEPSEEK / KIMIK25 families on the Python path, against the
spec's ``serving_family_cp_goldens.parquet`` (26 points; the spec's
``cli_estimate`` path with ``ModelConfig.cp_size`` set, see
scripts/spec_cp_points.py and docs/spec/families_dp_cp.md sections 3 and 6),
pure Python, no SQL.

* non-error points: aggregated every field equal to the float bit,
  disaggregated every field equal at the spec's 3 decimals (the comparison
  of test_spec_serving.py), the prefill side's ``(p)cp`` included -- the raw
  result has no ``(d)cp`` key, though decode-side cp (points 24, 25) is priced;
* the spec's sglang refusal of cp with attention tp or dp (``ValueError``) is a
  ValueError carrying the spec's message; its OOM is a struct whose
  ``reason`` is the spec's message, word for word, every other field NULL.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.serving import estimate_agg, estimate_disagg

from _support import have_data, require

# The golden comparison of the other serving goldens.
from test_spec_serving import AGG_KEYS, AGG_SKIP, DISAGG_KEYS, DISAGG_SKIP, _check_oom, _compare, _report

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "serving_family_cp_goldens.parquet"
HAVE_DATA = have_data(open_tree)
needs_goldens = require(GOLDENS.is_file() and HAVE_DATA, f"family cp goldens ({GOLDENS}) or the perf data are missing")

# The prefill side's cp is in the spec's disagg dict (``(p)cp``), the decode side's is not.
CP_DISAGG_KEYS = {**DISAGG_KEYS, "(p)cp": "prefill_cp"}
CP_DISAGG_SKIP = DISAGG_SKIP - {"(p)cp"}
SGLANG_CP = "sglang CP requires tp_size=1 and attention_dp_size=1 when cp_size>1"


def _label(a: dict, side: str = "") -> str:
    """The parallel label of a point's arguments, cp included (``cp{cp}`` when cp > 1)."""
    tp, dp, cp = a[side + "tp_size"], a.get(side + "attention_dp_size", 1), a.get(side + "cp_size", 1)
    label = f"tp{tp}pp{a.get(side + 'pp_size', 1)}dp{dp}etp{a[side + 'moe_tp_size']}ep{a[side + 'moe_ep_size']}"
    return label + (f"cp{cp}" if cp > 1 else "")


def _call(point) -> dict:
    a = json.loads(point["args"])
    if point["mode"] == "agg":
        return dict(model=point["model"], db=point["db"], parallel=_label(a), batch=a["batch_size"],
                    isl=a["isl"], osl=a["osl"], prefix=a.get("prefix"), ctx_tokens=a.get("ctx_tokens"))  # fmt: skip
    return dict(model=point["model"], db=point["db"], prefill_parallel=_label(a, "prefill_"),
                prefill_batch=a["prefill_batch_size"], prefill_workers=a["prefill_num_workers"],
                decode_parallel=_label(a, "decode_"), decode_batch=a["decode_batch_size"],
                decode_workers=a["decode_num_workers"], isl=a["isl"], osl=a["osl"], prefix=a.get("prefix"))  # fmt: skip


def _cp_sides(point) -> set:
    a = json.loads(point["args"])
    return {a.get(k) for k in ("cp_size", "prefill_cp_size", "decode_cp_size")} - {None}


@needs_goldens
def test_family_cp_goldens():
    """Every point: 22 priced equal to the spec, 2 sglang cp refusals raised, 2 OOM."""
    points = pq.read_table(GOLDENS).to_pylist()
    assert len(points) == 26
    counts = {"agg": {}, "disagg": {}}
    failures, refused, ooms = [], [], []
    for point in points:
        call = _call(point)
        fn = estimate_agg if point["mode"] == "agg" else estimate_disagg
        error = point["error"]
        if error is not None and error.startswith("ValueError: "):
            message = error.split(": ", 1)[1]
            assert message.startswith(SGLANG_CP), (point["point_id"], error)
            with pytest.raises(ValueError) as raised:
                fn(**call)
            assert str(raised.value) == message, (point["point_id"], str(raised.value))
            refused.append(point["point_id"])
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
            _compare(point, got, CP_DISAGG_KEYS, CP_DISAGG_SKIP, counts["disagg"], failures)
            # the decode side's cp, which the spec's dict does not carry, is the one asked for
            assert got["decode_cp"] == json.loads(point["args"])["decode_cp_size"], point["point_id"]
    for mode in ("agg", "disagg"):
        _report(f"family cp goldens, {mode}", counts[mode])
    print(f"  sglang cp refusals: {refused}; OOM: {ooms}")
    assert not failures, "\n".join(failures[:20])
    n_agg = sum(p["mode"] == "agg" and p["error"] is None for p in points)
    n_disagg = sum(p["mode"] == "disagg" and p["error"] is None for p in points)
    assert (n_agg, n_disagg) == (12, 10)
    for field in ("ttft_ms", "tpot_ms", "tokens_per_s_per_gpu", "memory_gib", "parallel", "cp", "num_total_gpus"):
        assert counts["agg"][field] == [n_agg, 0], field
    for field in ("ttft_ms", "tpot_ms", "tokens_per_s_per_gpu", "prefill_memory_gib", "decode_memory_gib",
                  "prefill_parallel", "decode_parallel", "prefill_cp", "num_total_gpus"):  # fmt: skip
        assert counts["disagg"][field] == [n_disagg, 0], field
    assert refused == [6, 23] and ooms == [11, 20]
    # cp > 1 for real, on every family, on both disagg sides
    assert {p["model"] for p in points} == {"meta-llama/Llama-4-Scout-17B-16E-Instruct", "XiaomiMiMo/MiMo-V2-Flash",
                                             "deepseek-ai/DeepSeek-V3", "nvidia/Kimi-K2.5-NVFP4"}  # fmt: skip
    assert set().union(*(_cp_sides(p) for p in points)) >= {2, 4, 8}
    assert [p["point_id"] for p in points if json.loads(p["args"]).get("decode_cp_size", 1) > 1] == [24, 25]
