"""Plots of query results: the four pictures of ``docs/plots.md``.

Each function takes the rows of a query, reads the columns the plot needs
by name (others are ignored), draws them with matplotlib and returns a
:class:`Plot`, which holds the figure, its axes and the data as drawn::

    import aicsql
    from aicsql import plot

    ctx = aicsql.context()
    p = plot.pareto(ctx.sql(open("queries/plot/pareto.sql").read()), out="pareto.svg")
    p.series["agg"]        # [(tokens/s/user, tokens/s/gpu_cluster), ...]

``df`` is a datafusion-python ``DataFrame``, a ``pyarrow.Table``, a
``pyarrow.RecordBatch`` or a list of them, a ``RecordBatchReader``, a
pandas ``DataFrame`` (if pandas is installed), or anything exporting the
Arrow C stream interface. ``ax`` draws into an existing matplotlib Axes
(otherwise a new Figure, not registered with pyplot); ``out`` saves the
figure, in the format of the file's extension (``.svg``, ``.png``, ...).

matplotlib is an optional dependency (``pip install 'aicsql[plot]'``):
importing this module does not import it; calling a plot function without
it raises ImportError.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

__all__ = ["Plot", "pareto", "gemm", "step", "accuracy"]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Plot:
    """A drawn plot and the data on it.

    ``series`` maps each series, in first-appearance order, to what was
    drawn for it:

    - ``pareto``: ``mode`` (``"all"`` without a ``mode`` column) to its
      points ``(tokens_per_s_per_user, tokens_per_s_per_gpu_cluster)``, in
      row order;
    - ``gemm``: ``series`` to its points ``(m, latency_ms)``, sorted by m for
      a ``line``, in row order for ``points``;
    - ``step``: ``bar`` to its segments ``(op_name, latency_ms)``, bottom to
      top (the bar's height is their sum);
    - ``accuracy``: ``TTFT`` and ``TPOT`` to their points
      ``(measured_ms, estimated_ms)``, in row order.

    The kind-specific rest is empty where it does not apply: ``frontier``
    (pareto: each series' ``pareto`` points, sorted by x, as joined by its
    line), ``labels`` (pareto: each series' best configs
    ``(text, x, y)`` by rank, the text ``'#rank parallel'``), ``vlines``
    (pareto: the x of each TPOT-limit line) and ``styles`` (gemm: each
    series' style, ``line`` or ``points``).
    """

    kind: str
    figure: Any
    axes: Any
    series: Dict[str, List[Tuple[Any, float]]]
    frontier: Dict[str, List[Tuple[float, float]]] = field(default_factory=dict)
    labels: Dict[str, List[Tuple[str, float, float]]] = field(default_factory=dict)
    vlines: List[float] = field(default_factory=list)
    styles: Dict[str, str] = field(default_factory=dict)

    def save(self, path: PathLike, **savefig) -> Path:
        """Write the figure to ``path`` (format from the extension); returns the path."""
        path = Path(path)
        self.figure.savefig(path, **{"bbox_inches": "tight", **savefig})
        return path

    def _repr_png_(self) -> bytes:  # shown by Jupyter
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()


def pareto(df, ax=None, out: Optional[PathLike] = None) -> Plot:
    """The frontier of a search: tokens/s/user (x) against tokens/s/gpu_cluster (y).

    One scatter series per ``mode``; the ``pareto`` points of each joined
    by a line in x order; the rows with a ``best_rank`` starred and labelled
    ``'#rank parallel'``; a vertical line at x = 1000 / ``tpot_limit_ms``.
    """
    t = _Rows("pareto", df)
    xs = t.required("tokens_per_s_per_user")
    ys = t.required("tokens_per_s_per_gpu_cluster")
    modes = t.optional("mode")
    on_front = t.optional("pareto")
    ranks = t.optional("best_rank")
    parallel = t.optional("parallel")
    limits = t.optional("tpot_limit_ms")

    series: Dict[str, List[Tuple[float, float]]] = {}
    frontier: Dict[str, List[Tuple[float, float]]] = {}
    best: Dict[str, List[Tuple[int, str, float, float]]] = {}
    for i in range(t.num_rows):
        x, y = xs[i], ys[i]
        if x is None or y is None:
            continue
        name = "all" if modes is None else _name(modes[i])
        series.setdefault(name, []).append((x, y))
        if on_front is not None and on_front[i]:
            frontier.setdefault(name, []).append((x, y))
        rank = None if ranks is None else _rank(ranks[i])
        if rank is not None:
            text = f"#{rank}" if parallel is None or parallel[i] is None else f"#{rank} {parallel[i]}"
            best.setdefault(name, []).append((rank, text, x, y))
    frontier = {name: sorted(pts) for name, pts in frontier.items()}
    labels = {name: [(text, x, y) for _, text, x, y in sorted(rows, key=lambda r: r[0])] for name, rows in best.items()}
    vlines = sorted({1000.0 / v for v in limits if v is not None and v > 0}) if limits is not None else []

    figure, ax = _axes(ax, (8, 6))
    for c, (name, pts) in enumerate(series.items()):
        colour = f"C{c}"
        ax.scatter(*zip(*pts), s=14, alpha=0.45, color=colour, label=name)
        if name in frontier:
            ax.plot(*zip(*frontier[name]), color=colour, linewidth=1.6)
        for text, x, y in labels.get(name, []):
            ax.scatter([x], [y], marker="*", s=160, color=colour, edgecolors="black", linewidths=0.7, zorder=3)
            ax.annotate(text, (x, y), xytext=(6, 6), textcoords="offset points", fontsize=8)
    for x in vlines:
        ax.axvline(x, color="grey", linestyle="--", linewidth=1, label=f"TPOT limit ({1000.0 / x:g} ms)")
    ax.set_xlabel("tokens/s/user")
    ax.set_ylabel("tokens/s/gpu_cluster")
    ax.grid(True, alpha=0.3)
    if modes is not None or vlines:
        ax.legend()
    return _done(Plot("pareto", figure, ax, series, frontier=frontier, labels=labels, vlines=vlines), out)


def gemm(df, ax=None, out: Optional[PathLike] = None) -> Plot:
    """A GEMM curve: ``latency_ms`` against ``m``, log-log, one series per ``series``.

    A series whose ``style`` is ``line`` is joined in m order; ``points``
    (the default) is a scatter.
    """
    t = _Rows("gemm", df)
    names = t.required("series")
    ms = t.required("m")
    lat = t.required("latency_ms")
    style_col = t.optional("style")

    series: Dict[str, List[Tuple[float, float]]] = {}
    styles: Dict[str, str] = {}
    for i in range(t.num_rows):
        if names[i] is None or ms[i] is None or lat[i] is None:
            continue
        for col, v in (("m", ms[i]), ("latency_ms", lat[i])):
            if not v > 0:
                raise ValueError(f"gemm: column '{col}' must be > 0 (log scale); row {i} has {v}")
        name = _name(names[i])
        style = "points" if style_col is None or style_col[i] is None else style_col[i]
        if style not in ("line", "points"):
            raise ValueError(f"gemm: column 'style' must be 'line' or 'points'; row {i} has {style!r}")
        if styles.setdefault(name, style) != style:
            raise ValueError(f"gemm: series {name!r} has both styles 'line' and 'points' in column 'style'")
        series.setdefault(name, []).append((ms[i], lat[i]))
    series = {name: sorted(pts) if styles[name] == "line" else pts for name, pts in series.items()}

    figure, ax = _axes(ax, (8, 6))
    for c, (name, pts) in enumerate(series.items()):
        if styles[name] == "line":
            ax.plot(*zip(*pts), color=f"C{c}", marker="o", markersize=3, linewidth=1.6, label=name, zorder=3)
        else:
            ax.scatter(*zip(*pts), color=f"C{c}", s=14, alpha=0.7, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("m")
    ax.set_ylabel("latency (ms)")
    ax.grid(True, which="both", alpha=0.3)
    if series:
        ax.legend()
    return _done(Plot("gemm", figure, ax, series, styles=styles), out)


def step(df, ax=None, out: Optional[PathLike] = None) -> Plot:
    """An engine step per op: one stacked bar per ``bar`` (first-appearance
    order), one segment per row in row order, coloured by ``op_name`` (one
    colour and one legend entry per op name across bars); y in ms."""
    t = _Rows("step", df)
    bars = t.required("bar")
    ops = t.required("op_name")
    lat = t.required("latency_ms")

    series: Dict[str, List[Tuple[str, float]]] = {}
    for i in range(t.num_rows):
        if bars[i] is None or ops[i] is None or lat[i] is None:
            continue
        if lat[i] < 0 or math.isnan(lat[i]):
            raise ValueError(f"step: column 'latency_ms' must be >= 0; row {i} has {lat[i]}")
        series.setdefault(_name(bars[i]), []).append((_name(ops[i]), lat[i]))
    op_names = list(dict.fromkeys(op for segs in series.values() for op, _ in segs))

    figure, ax = _axes(ax, (max(4.0, 1.6 * len(series) + 3.5), 6))
    colours = _palette(len(op_names))
    colour = dict(zip(op_names, colours))
    drawn = set()
    for b, (name, segs) in enumerate(series.items()):
        bottom = 0.0
        for op, ms in segs:
            label = op if op not in drawn else "_nolegend_"
            drawn.add(op)
            ax.bar(b, ms, bottom=bottom, width=0.6, color=colour[op], edgecolor="white", linewidth=0.5, label=label)
            bottom += ms
        ax.annotate(f"{bottom:.3g} ms", (b, bottom), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=9)
    ax.set_xticks(range(len(series)))
    ax.set_xticklabels(list(series))
    ax.set_ylabel("ms")
    totals = [sum(ms for _, ms in segs) for segs in series.values()]
    if totals and max(totals) > 0:  # room for the totals (a zero-height top segment pins autoscaling)
        ax.set_ylim(0, 1.08 * max(totals))
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if op_names:
        # Top of the stack first, as the segments read.
        handles, names = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], names[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return _done(Plot("step", figure, ax, series), out)


#: The metrics of an accuracy plot: (series, measured column, estimated column).
ACCURACY_METRICS = (("TTFT", "silicon_ttft_ms", "predicted_ttft_ms"), ("TPOT", "silicon_tpot_ms", "predicted_tpot_ms"))


def accuracy(df, ax=None, out: Optional[PathLike] = None) -> Plot:
    """Estimated against measured TTFT and TPOT, log-log (the columns of
    ``queries/accuracy/silicon_refs.sql``'s table ``silicon_accuracy``):
    one scatter per metric, the diagonal where the estimate equals the
    measurement and the lines of a factor of two either side. A row without
    an estimate (a miss) is not drawn; ValueError if no row has one.
    """
    t = _Rows("accuracy", df)
    series: Dict[str, List[Tuple[float, float]]] = {}
    for name, measured_col, estimated_col in ACCURACY_METRICS:
        measured, estimated = t.required(measured_col), t.required(estimated_col)
        series[name] = [(x, y) for x, y in zip(measured, estimated)
                        if x is not None and y is not None and x > 0 and y > 0
                        and math.isfinite(x) and math.isfinite(y)]  # fmt: skip
    values = [v for pts in series.values() for p in pts for v in p]
    if not values:
        raise ValueError("accuracy: no row with a positive measured and estimated value (every point a miss?)")

    figure, ax = _axes(ax, (7, 6.5))
    lo, hi = min(values) / 1.5, max(values) * 1.5
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="estimate = measurement")
    for factor in (0.5, 2.0):
        ax.plot([lo, hi], [lo * factor, hi * factor], color="grey", linewidth=0.8, linestyle=":")
    for c, (name, pts) in enumerate(series.items()):
        if pts:
            ax.scatter(*zip(*pts), s=22, color=f"C{c}", label=f"{name} ({len(pts)})", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("estimated (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    return _done(Plot("accuracy", figure, ax, series), out)


# ---------------------------------------------------------------- helpers


class _Rows:
    """The columns of a query result, by name, as Python lists."""

    def __init__(self, kind: str, df):
        self.kind = kind
        self.table = _to_table(df, kind)
        self.num_rows = self.table.num_rows

    def optional(self, name: str) -> Optional[list]:
        idx = self.table.schema.get_all_field_indices(name)
        return self.table.column(idx[0]).to_pylist() if idx else None

    def required(self, name: str) -> list:
        col = self.optional(name)
        if col is None:
            have = ", ".join(self.table.column_names) or "none"
            raise ValueError(f"{self.kind}: missing required column '{name}' (columns: {have}); see docs/plots.md")
        return col


def _to_table(df, kind: str) -> pa.Table:
    if isinstance(df, pa.Table):
        return df
    if isinstance(df, pa.RecordBatch):
        return pa.Table.from_batches([df])
    if isinstance(df, pa.RecordBatchReader):
        return df.read_all()
    if isinstance(df, (list, tuple)) and all(isinstance(b, pa.RecordBatch) for b in df):
        return pa.Table.from_batches(df) if df else pa.table({})
    if hasattr(df, "to_arrow_table"):  # datafusion.DataFrame
        return df.to_arrow_table()
    if type(df).__module__.split(".")[0] == "pandas":
        return pa.Table.from_pandas(df, preserve_index=False)
    if hasattr(df, "__arrow_c_stream__"):  # polars, nanoarrow, ...
        return pa.table(df)
    raise TypeError(
        f"{kind}: cannot read rows from a {type(df).__module__}.{type(df).__qualname__}; pass a datafusion "
        "DataFrame, a pyarrow Table or RecordBatch(es), or a pandas DataFrame"
    )


def _rank(v):
    # pandas carries a nullable BIGINT as float64: 1.0 is rank 1.
    if isinstance(v, float):
        return None if math.isnan(v) else int(v) if v.is_integer() else v
    return v


def _name(v) -> str:
    return "NULL" if v is None else str(v)


def _mpl():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(
            "aicsql.plot draws with matplotlib, which is not installed: pip install 'aicsql[plot]'"
        ) from e
    return Figure


def _axes(ax, size: Tuple[float, float]):
    Figure = _mpl()
    if ax is not None:
        return ax.figure, ax
    # A bare Figure, not pyplot's: no GUI backend, no global figure list.
    figure = Figure(figsize=size, layout="constrained")
    return figure, figure.add_subplot()


def _palette(n: int) -> Sequence:
    if n <= 10:
        return [f"C{i}" for i in range(n)]
    from matplotlib import colormaps

    # tab20's dark shades, then its light ones: neighbours stay distinct.
    cmap = colormaps["tab20"]
    order = list(range(0, 20, 2)) + list(range(1, 20, 2))
    return [cmap(order[i % 20]) for i in range(n)]


def _done(plot: Plot, out: Optional[PathLike]) -> Plot:
    if out is not None:
        plot.save(out)
    return plot
