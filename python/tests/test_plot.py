"""aicsql.plot: the three plots of docs/plots.md drawn from the ready-made
queries of queries/plot/ on the real data, checked on the data they draw."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import aicsql
from aicsql import plot

from _support import require

REPO = Path(__file__).resolve().parents[2]
QUERIES = REPO / "queries" / "plot"
# The worked example's TTFT and TPOT (ms): what the step bars must add up to.
TTFT_MS = 24.74004986586315
TPOT_MS = 7.121815664339327



def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


needs_matplotlib = require(
    have_matplotlib(),
    "matplotlib is not installed: pip install 'aicsql[plot]' (scripts/test installs it)",
)


@pytest.fixture(scope="module")
def results():
    """The three queries' rows, run once."""
    ctx = aicsql.context()
    kinds = ("pareto", "gemm", "step")
    return {kind: ctx.sql((QUERIES / f"{kind}.sql").read_text()).to_arrow_table() for kind in kinds}


def draw(kind, rows, tmp_path):
    """Draw to an .svg and a .png; both must be written."""
    p = getattr(plot, kind)(rows, out=tmp_path / f"{kind}.svg")
    p.save(tmp_path / f"{kind}.png")
    for ext in ("svg", "png"):
        assert (tmp_path / f"{kind}.{ext}").stat().st_size > 1000
    assert (tmp_path / f"{kind}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / f"{kind}.svg").read_bytes()[:1000]
    assert p.kind == kind and p.axes.figure is p.figure
    return p


@needs_matplotlib
def test_pareto(results, tmp_path):
    p = draw("pareto", results["pareto"], tmp_path)
    assert {name: len(pts) for name, pts in p.series.items()} == {"agg": 341, "disagg": 24}
    assert {name: len(pts) for name, pts in p.frontier.items()} == {"agg": 41, "disagg": 15}
    for pts in p.frontier.values():
        assert pts == sorted(pts)
    assert {name: [text.split()[0] for text, _, _ in labels] for name, labels in p.labels.items()} == {
        "agg": ["#1", "#2", "#3"],
        "disagg": ["#1", "#2"],
    }
    assert p.labels["agg"][0][0] == "#1 tp1pp1dp1etp1ep1"
    assert p.vlines == [1000 / 50.0]
    assert p.axes.get_xlabel() == "tokens/s/user" and p.axes.get_ylabel() == "tokens/s/gpu_cluster"


@needs_matplotlib
def test_gemm(results, tmp_path):
    p = draw("gemm", results["gemm"], tmp_path)
    assert p.styles == {
        "estimate (1280, 5120)": "line",
        "measured (1024, 5120)": "points",
        "measured (1536, 4096)": "points",
        "measured (1536, 5120)": "points",
        "measured (1536, 6144)": "points",
    }
    sizes = {name: 15 if style == "line" else 74 for name, style in p.styles.items()}
    assert {name: len(pts) for name, pts in p.series.items()} == sizes
    line = p.series["estimate (1280, 5120)"]
    assert [m for m, _ in line] == [2**i for i in range(15)]
    assert p.axes.get_xscale() == "log" and p.axes.get_yscale() == "log"


@needs_matplotlib
def test_step(results, tmp_path):
    p = draw("step", results["step"], tmp_path)
    assert list(p.series) == ["context (TTFT)", "generation (TPOT)"]
    assert sum(ms for _, ms in p.series["context (TTFT)"]) == pytest.approx(TTFT_MS, abs=1e-9)
    assert sum(ms for _, ms in p.series["generation (TPOT)"]) == pytest.approx(TPOT_MS, abs=1e-9)
    assert p.axes.get_ylabel() == "ms"
    # One legend entry per op name, and one colour per op name across the bars.
    ops = [op for op, _ in p.series["context (TTFT)"]]
    assert [t.get_text() for t in p.axes.get_legend().get_texts()] == ops[::-1]
    segments = [op for segs in p.series.values() for op, _ in segs]
    assert len(p.axes.patches) == len(segments)  # drawn bottom to top, bar by bar
    colours = {}
    for op, patch in zip(segments, p.axes.patches):
        colours.setdefault(op, set()).add(patch.get_facecolor())
    assert all(len(c) == 1 for c in colours.values())
    assert len({c for cs in colours.values() for c in cs}) == len(colours) == len(ops)


@needs_matplotlib
def test_accuracy(tmp_path):
    """queries/accuracy/silicon_refs.sql's table, drawn by queries/plot/accuracy.sql:
    the 31 points the spec prices of its 35 measurements, TTFT and TPOT."""
    from aicsql.parity.sqlfiles import statements

    ctx = aicsql.context()
    for sql in statements((REPO / "queries" / "accuracy" / "silicon_refs.sql").read_text()):
        ctx.sql(sql).collect()
    rows = ctx.sql((QUERIES / "accuracy.sql").read_text()).to_arrow_table()
    p = draw("accuracy", rows, tmp_path)
    assert {name: len(pts) for name, pts in p.series.items()} == {"TTFT": 31, "TPOT": 31}
    assert any(x == pytest.approx(2530.0745766125, abs=1e-9) for x, _ in p.series["TTFT"])
    assert p.axes.get_xscale() == "log" and p.axes.get_yscale() == "log"
    assert p.axes.get_xlabel() == "measured (ms)" and p.axes.get_ylabel() == "estimated (ms)"
    misses = pa.table({"silicon_ttft_ms": [10.0], "predicted_ttft_ms": pa.array([None], pa.float64()),
                       "silicon_tpot_ms": [2.0], "predicted_tpot_ms": pa.array([None], pa.float64())})  # fmt: skip
    with pytest.raises(ValueError, match=r"^accuracy: no row with a positive measured and estimated value"):
        plot.accuracy(misses)
    with pytest.raises(ValueError, match=r"^accuracy: missing required column 'predicted_tpot_ms'"):
        plot.accuracy(rows.drop_columns(["predicted_tpot_ms"]))


@needs_matplotlib
@pytest.mark.parametrize(
    "kind, drop",
    [("pareto", "tokens_per_s_per_gpu_cluster"), ("gemm", "latency_ms"), ("step", "op_name")],
)
def test_missing_required_column_is_named(results, kind, drop):
    rows = results[kind].drop_columns([drop])
    with pytest.raises(ValueError, match=rf"^{kind}: missing required column '{drop}'"):
        getattr(plot, kind)(rows)


@needs_matplotlib
def test_inputs_and_optional_columns(results):
    """A DataFrame, record batches and a bare table draw the same; optional
    columns may be absent."""
    step = results["step"]
    want = plot.step(step).series
    assert plot.step(step.to_batches()).series == want
    assert plot.step(step.to_batches()[0]).series == want
    assert plot.step(aicsql.context().sql((QUERIES / "step.sql").read_text())).series == want

    bare = results["pareto"].select(["tokens_per_s_per_user", "tokens_per_s_per_gpu_cluster"])
    p = plot.pareto(bare)
    assert list(p.series) == ["all"] and len(p.series["all"]) == 365
    assert p.frontier == {} and p.labels == {} and p.vlines == []

    points = plot.gemm(pa.table({"series": ["a", "a"], "m": [4, 2], "latency_ms": [0.2, 0.1]}))
    assert points.styles == {"a": "points"} and points.series == {"a": [(4, 0.2), (2, 0.1)]}
    with pytest.raises(ValueError, match="'m' must be > 0"):
        plot.gemm(pa.table({"series": ["a"], "m": [0], "latency_ms": [0.1]}))


@needs_matplotlib
def test_draws_into_given_axes(results):
    from matplotlib.figure import Figure

    fig = Figure()
    left, right = fig.subplots(1, 2)
    p = plot.step(results["step"], ax=right)
    assert p.axes is right and p.figure is fig and not left.patches


def test_matplotlib_is_optional(monkeypatch):
    """`import aicsql` (and aicsql.plot) does not load matplotlib; drawing without it says what to install."""
    code = "import sys, aicsql; aicsql.plot.pareto; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'aicsql\[plot\]'"):
        plot.step(pa.table({"bar": ["a"], "op_name": ["x"], "latency_ms": [1.0]}))
