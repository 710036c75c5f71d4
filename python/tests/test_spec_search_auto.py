"""``cli default --backend auto`` on the Python path against the spec's own
runs (``tests/goldens/search/<case>/`` with ``args.backend == 'auto'``,
docs/spec/experiments.md 2): every experiment's candidates, front and best
configs (``<name>.*.parquet``), the picks merged per serving mode
(``agg.*`` / ``disagg.*``, with their ``backend`` column), the merged best
throughputs and ``chosen_exp`` equal the spec's, value for value and column
for column; and ``py_search_default`` names each experiment."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.search.api import run_experiments

from _support import have_data, require

REPO = Path(__file__).resolve().parents[2]
SEARCH = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "search"
def _auto_search(p: Path) -> bool:
    a = json.loads((p / "meta.json").read_text())["args"]
    return a["backend"] == "auto" and a.get("target_request_rate") is None and a.get("target_concurrency") is None


# (the `cli recommend --backend auto` cases are test_spec_recommend.py's)
CASES = sorted(p.name for p in SEARCH.iterdir() if (p / "meta.json").is_file() and _auto_search(p)) \
    if SEARCH.is_dir() else []  # fmt: skip
HAVE = bool(CASES) and have_data(open_tree)
needs_data = require(HAVE, f"--backend auto goldens ({SEARCH}) or the perf data are missing")


def _meta(case: str) -> dict:
    return json.loads((SEARCH / case / "meta.json").read_text())


def _golden(case: str, name: str) -> list:
    path = SEARCH / case / name
    return pq.read_table(path).to_pylist() if path.exists() else []  # no file: the spec's frame was None


def _equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and type(a is None) is type(b is None)


def _differences(golden: list, rows: list) -> list:
    out = [("rows", len(golden), len(rows))] if len(golden) != len(rows) else []
    for i, (g, r) in enumerate(zip(golden, rows)):
        if list(g) != list(r):
            out.append((i, "columns", sorted(set(g) ^ set(r))))
        out += [(i, c, g[c], r.get(c)) for c in g if not _equal(g[c], r.get(c))]
    return out


def test_the_auto_goldens_are_present():
    if not SEARCH.is_dir():
        pytest.skip(f"no search goldens at {SEARCH}")
    assert CASES == ["llama31_8b_h200_auto_1gpu", "llama31_8b_h200_auto_2gpu"]


@needs_data
@pytest.mark.parametrize("case", CASES)
def test_every_experiment_and_the_merged_picks_equal_the_specs(case):
    meta = _meta(case)
    a = meta["args"]
    res = run_experiments(a["model"], f"{a['system']}/auto", a["gpus"], a["isl"], a["osl"], a["prefix"], a["ttft"],
                          a["tpot"], top_n=a["top_n"])  # fmt: skip
    assert [e.name for e in res.experiments] == meta["experiments"]
    failures = []
    for e in res.experiments:
        assert e.result.ok == (meta["outcomes"][e.name] is None), e.name
        for frame in ("candidates", "pareto_fronts", "best_configs"):
            diff = _differences(_golden(case, f"{e.name}.{frame}.parquet"), getattr(e.result, frame))
            failures += [f"{e.name}.{frame}: {d}" for d in diff[:5]]
    assert res.merged is not None  # more than two experiments: merged per mode
    for mode, picks in res.merged.items():
        failures += [f"{mode}.best_configs: {d}" for d in
                     _differences(_golden(case, f"{mode}.best_configs.parquet"), picks.best_configs)[:5]]
        failures += [f"{mode}.pareto_fronts: {d}" for d in
                     _differences(_golden(case, f"{mode}.pareto_fronts.parquet"), picks.pareto_fronts or [])[:5]]
        assert picks.best_throughput == meta["best_throughputs"][mode]
    assert not failures, "\n".join(failures)
    assert res.chosen_exp == meta["chosen_exp"]
    # the chosen configuration's experiment: the one the chosen mode's merged rank 1 came from
    rank1 = res.merged[res.chosen_exp].best_configs[0]
    assert res.experiments[res.chosen].backend == rank1["backend"]


@needs_data
def test_search_default_names_every_experiment_on_both_paths():
    import aicsql

    ctx = aicsql.context()
    call = "('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/auto', 2, 1024, 256, 0, 1000, 30)"
    cols = "db, mode, experiment, chosen, candidates, best_tokens_per_s_per_gpu_cluster, parallel, decode_parallel"
    rust = ctx.sql(f"SELECT {cols} FROM search_default{call}").to_arrow_table().to_pylist()
    python = ctx.sql(f"SELECT {cols} FROM py_search_default{call}").to_arrow_table().to_pylist()
    assert rust == python
    assert [r["experiment"] for r in rust] == _meta("llama31_8b_h200_auto_2gpu")["experiments"]
    assert [r["experiment"] for r in rust if r["chosen"]] == ["agg_vllm"]
    assert [r["db"] for r in rust][::2] == ["h200_sxm/trtllm/1.3.0rc23", "h200_sxm/sglang/0.5.16", "h200_sxm/vllm/0.24.0"]


@needs_data
def test_search_agg_and_disagg_flag_the_merged_picks_on_both_paths():
    import aicsql

    ctx = aicsql.context()
    case = "llama31_8b_h200_auto_2gpu"
    call = "('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/auto', 2, 1024, 256, 0, 1000, 30)"
    for mode in ("agg", "disagg"):
        rust = ctx.sql(f"SELECT * FROM search_{mode}{call}").to_arrow_table().to_pylist()
        python = ctx.sql(f"SELECT * FROM py_search_{mode}{call}").to_arrow_table().to_pylist()
        assert rust == python
        # every experiment's candidates, in the spec's experiment order
        names = [n for n in _meta(case)["experiments"] if n.startswith(mode + "_")]
        assert len(rust) == sum(len(_golden(case, f"{n}.candidates.parquet")) for n in names)
        # the flags are the spec's merged picks: the merged best configs in rank order, the merged front's size
        best = sorted((r for r in rust if r["best_rank"] is not None), key=lambda r: r["best_rank"])
        merged = _golden(case, f"{mode}.best_configs.parquet")
        assert [(r["backend"], r["tokens_per_s_per_gpu_cluster"]) for r in best] == \
            [(g["backend"], g["tokens/s/gpu_cluster"]) for g in merged]  # fmt: skip
        assert sum(r["pareto"] for r in rust) == len(_golden(case, f"{mode}.pareto_fronts.parquet"))
