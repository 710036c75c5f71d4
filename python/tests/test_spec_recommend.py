"""``cli recommend`` on the Python path against the spec's own runs
(``tests/goldens/search/<case>/`` with a load target in ``args``,
docs/spec/experiments.md 4): the budget answered, the last budget's
candidates, fronts and load-match best configs (``replicas_needed``,
``total_gpus_needed``), ``best_throughputs`` (1 / GPUs) and ``chosen_exp``;
and ``search_recommend`` equal on both paths."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.search.api import run_recommend

from _support import have_data, require

REPO = Path(__file__).resolve().parents[2]
SEARCH = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "search"


def _is_recommend(p: Path) -> bool:
    a = json.loads((p / "meta.json").read_text())["args"]
    return a.get("target_request_rate") is not None or a.get("target_concurrency") is not None


CASES = sorted(p.name for p in SEARCH.iterdir() if (p / "meta.json").is_file() and _is_recommend(p)) \
    if SEARCH.is_dir() else []  # fmt: skip
HAVE = bool(CASES) and have_data(open_tree)
needs_data = require(HAVE, f"recommend goldens ({SEARCH}) or the perf data are missing")


def _meta(case: str) -> dict:
    return json.loads((SEARCH / case / "meta.json").read_text())


def _same(a, b) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


@needs_data
@pytest.mark.parametrize("case", CASES)
def test_recommend_frames_equal_the_specs(case):
    meta = _meta(case)
    a = meta["args"]
    if a["backend"] == "auto":
        _check_every_backend(case, meta)
        return
    rec = run_recommend(a["model"], f"{a['system']}/{a['backend']}/{a['version']}",
                        target_request_rate=a.get("target_request_rate"),
                        target_concurrency=a.get("target_concurrency"), isl=a["isl"], osl=a["osl"],
                        prefix=a["prefix"], ttft_ms=a["ttft"], tpot_ms=a["tpot"], top_n=a["top_n"])  # fmt: skip
    assert rec.budgets == meta["budgets_tried"]  # the escalation: the same budgets, in order
    if (meta["error"] or "").startswith("NoFeasibleConfigError"):
        # no config at the last budget: the spec raises, the Python path reports each experiment's reason
        assert rec.result.chosen_exp == "none" and not any(r.ok for r in rec.result.modes.values())
        return
    assert rec.budgets[-1] == meta["total_gpus_used"]
    failures = []
    for mode, r in rec.result.modes.items():
        for frame in ("candidates", "pareto_fronts", "best_configs"):
            path = SEARCH / case / f"{mode}.{frame}.parquet"
            golden = pq.read_table(path).to_pylist() if path.exists() else []
            rows = getattr(r, frame)
            if len(golden) != len(rows):
                failures.append(f"{mode}.{frame}: {len(golden)} rows, python {len(rows)}")
            for i, (g, p) in enumerate(zip(golden, rows)):
                if list(g) != list(p):
                    failures.append(f"{mode}.{frame} row {i}: columns {sorted(set(g) ^ set(p))}")
                failures += [f"{mode}.{frame} row {i} {c}: {g[c]!r} vs {p.get(c)!r}" for c in g if not _same(g[c], p.get(c))]
    assert not failures, "\n".join(failures[:20])
    assert rec.result.best_throughputs == meta["best_throughputs"]
    assert rec.result.chosen_exp == meta["chosen_exp"]


def _check_every_backend(case: str, meta: dict) -> None:
    """``--backend auto``: every experiment's load-match frames and the picks merged by tokens/s/gpu."""
    a = meta["args"]
    rec = run_recommend(a["model"], f"{a['system']}/auto", target_request_rate=a.get("target_request_rate"),
                        target_concurrency=a.get("target_concurrency"), isl=a["isl"], osl=a["osl"],
                        prefix=a["prefix"], ttft_ms=a["ttft"], tpot_ms=a["tpot"], top_n=a["top_n"])  # fmt: skip
    assert rec.budgets == meta["budgets_tried"]
    res = rec.result
    assert [e.name for e in res.experiments] == meta["experiments"]
    frames = [(f"{e.name}.{f}", getattr(e.result, f)) for e in res.experiments
              for f in ("candidates", "pareto_fronts", "best_configs")]  # fmt: skip
    frames += [(f"{m}.best_configs", p.best_configs) for m, p in res.merged.items()]
    frames += [(f"{m}.pareto_fronts", p.pareto_fronts or []) for m, p in res.merged.items()]
    failures = []
    for name, rows in frames:
        path = SEARCH / case / f"{name}.parquet"
        golden = pq.read_table(path).to_pylist() if path.exists() else []
        if len(golden) != len(rows):
            failures.append(f"{name}: {len(golden)} rows, python {len(rows)}")
        for i, (g, p) in enumerate(zip(golden, rows)):
            if list(g) != list(p):
                failures.append(f"{name} row {i}: columns {sorted(set(g) ^ set(p))}")
            failures += [f"{name} row {i} {c}: {g[c]!r} vs {p.get(c)!r}" for c in g if not _same(g[c], p.get(c))]
    assert not failures, "\n".join(failures[:20])
    assert {m: p.best_throughput for m, p in res.merged.items()} == meta["best_throughputs"]
    assert res.chosen_exp == meta["chosen_exp"]


@needs_data
def test_search_recommend_is_equal_on_both_paths():
    import aicsql

    ctx = aicsql.context()
    for target, chosen in (("40", "agg"), ("NULL, 200", "disagg")):
        call = f"('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.24.0', 1024, 256, 0, 1000, 30, {target})"
        rust = ctx.sql(f"SELECT * FROM search_recommend{call}").to_arrow_table().to_pylist()
        python = ctx.sql(f"SELECT * FROM py_search_recommend{call}").to_arrow_table().to_pylist()
        assert rust == python and len(rust) == 7
        assert [(r["mode"], r["total_gpus_needed"]) for r in rust if r["chosen"]] == [(chosen, 2)]
    for fn in ("search_recommend", "py_search_recommend"):
        with pytest.raises(Exception, match="exactly one of target_request_rate and target_concurrency"):
            ctx.sql(f"SELECT * FROM {fn}('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.24.0', 1024, 256, 0, "
                    "1000, 30, 40, 200)").collect()


@needs_data
def test_search_recommend_names_every_backend_on_both_paths():
    import aicsql

    ctx = aicsql.context()
    call = "('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/auto', 1024, 256, 0, 1000, 30, 40)"
    rust = ctx.sql(f"SELECT * FROM search_recommend{call}").to_arrow_table().to_pylist()
    python = ctx.sql(f"SELECT * FROM py_search_recommend{call}").to_arrow_table().to_pylist()
    assert rust == python
    assert list(dict.fromkeys(r["experiment"] for r in rust)) == _meta("llama31_8b_h200_auto_recommend_rate")["experiments"]
    # the merged agg winner (tokens/s/gpu 6,656.131, vllm's 2-GPU rank 1)
    assert [(r["experiment"], r["rank"], r["tokens_per_s_per_gpu"]) for r in rust if r["chosen"]] == \
        [("agg_vllm", 1, 6656.131)]  # fmt: skip
