"""Reading a support-matrix report: counts, each path's time, the entries
that are not bit-identical, the verdict.

The verdict (:func:`exit_status`) holds the project's bar, not upstream's:
every covered entry BIT_IDENTICAL. An entry neither path finds a candidate
for, for the same kind of reason (NO_CANDIDATE), is not covered: the spec
prices nothing there. It is counted and listed, never hidden. Upstream's own scan fails only on DRIFT and
REGRESSION and passes anything within its tolerances; the summary shows
upstream's statuses beside ours, so a tolerance-only pass is visible as
what it is -- a difference the tolerance hid.
"""

from __future__ import annotations

from typing import Dict

import pyarrow as pa
import pyarrow.compute as pc

from .matrix import NOT_COVERED, STATUSES, UPSTREAM_STATUSES
from .report import _meta, _table

__all__ = ["status_counts", "upstream_counts", "summary", "format_summary", "exit_status", "differing", "not_covered"]


def _counts(report: pa.Table, column: str, statuses) -> Dict[str, int]:
    counts = {s: 0 for s in statuses}
    for row in pc.value_counts(report.column(column)).to_pylist():
        counts[row["values"]] = row["counts"]
    return counts


def status_counts(report: pa.Table) -> Dict[str, int]:
    """Entries per status, every status present, in `matrix.STATUSES` order."""
    return _counts(report, "status", STATUSES)


def upstream_counts(report: pa.Table) -> Dict[str, int]:
    """Entries per status as upstream's scan would grade them."""
    return _counts(report, "upstream_status", UPSTREAM_STATUSES)


def exit_status(report: pa.Table) -> int:
    """0 when every covered entry is BIT_IDENTICAL and there is at least
    one (NO_CANDIDATE entries are not covered), else 1."""
    counts = status_counts(report)
    uncovered = sum(counts[s] for s in NOT_COVERED)
    ok = counts["BIT_IDENTICAL"] > 0 and counts["BIT_IDENTICAL"] + uncovered == report.num_rows
    return 0 if ok else 1


def not_covered(report: pa.Table) -> pa.Table:
    """The NO_CANDIDATE entries: neither path finds a candidate, for the same
    kind of reason (``detail`` says which, with the Python path's words)."""
    return report.filter(pc.is_in(report.column("status"), pa.array(NOT_COVERED)))


def differing(report: pa.Table, n: int = 10) -> pa.Table:
    """The first ``n`` covered entries that are not BIT_IDENTICAL, worst
    grade first (ERROR, REGRESSION, DRIFT, ENVELOPE_PASS, STRICT_PASS), then
    by rel_diff."""
    rows = report.filter(pc.invert(pc.is_in(report.column("status"), pa.array(("BIT_IDENTICAL",) + NOT_COVERED))))
    order = {s: i for i, s in enumerate(reversed(STATUSES))}
    rank = pa.array([order[s] for s in rows.column("status").to_pylist()], pa.int64())
    rows = rows.append_column("_rank", rank)
    return rows.sort_by([("_rank", "ascending"), ("rel_diff", "descending")]).drop_columns(["_rank"]).slice(0, n)


def summary(report: pa.Table) -> Dict[str, object]:
    """The numbers of a report: entries, counts (ours and upstream's), the
    seconds each path spent (summed over the entries, resumed runs
    included) and the wall time of the runs that wrote it."""
    meta = _meta(report)
    out: Dict[str, object] = {
        "scan": meta.get("scan"),
        "entries": report.num_rows,
        "status": status_counts(report),
        "upstream_status": upstream_counts(report),
        "wall_seconds": float(meta.get("wall_seconds", "nan")),
    }
    for path, column in (("rust", "rust_seconds"), ("python", "py_seconds")):
        out[f"{path}_function"] = meta.get(f"{path}_function")
        out[f"{path}_seconds"] = (pc.sum(report.column(column)).as_py() or 0.0) if report.num_rows else 0.0
    by_mode = {}
    for mode in ("agg", "disagg"):
        part = report.filter(pc.equal(report.column("mode"), mode))
        by_mode[mode] = part.num_rows
    out["by_mode"] = by_mode
    return out


def format_summary(report: pa.Table, worst: int = 10) -> str:
    """What a person reads after a scan."""
    s = summary(report)
    lines = [
        f"parity support-matrix: {s['entries']:,} entries (agg {s['by_mode']['agg']:,}, disagg "
        f"{s['by_mode']['disagg']:,}), wall {s['wall_seconds']:.1f} s",
        "",
    ]
    ours, theirs = s["status"], s["upstream_status"]
    rows = []
    for status in STATUSES:
        up = theirs.get(status)  # upstream has no BIT_IDENTICAL: its STRICT_PASS counts those too
        rows.append([status, f"{ours[status]:,}", "" if up is None else f"{up:,}"])
    lines.append(_table(["status", "entries", "upstream's grade"], rows))
    lines.append("")
    n = max(s["entries"], 1)
    lines.append(
        _table(
            ["path", "functions", "seconds", "per entry"],
            [[p, s[f"{p}_function"], f"{s[f'{p}_seconds']:.2f}", f"{s[f'{p}_seconds'] / n:.3f}"]
             for p in ("rust", "python")],
        )
    )
    bad = differing(report, worst)
    if bad.num_rows:
        lines.append("")
        lines.append(f"{bad.num_rows} of the entries that are not BIT_IDENTICAL (worst first):")
        cols = ["entry", "status", "upstream_status", "worst_column", "rust_value", "py_value", "rel_diff",
                "first_diff_pos"]
        lines.append(_table(cols, [[r[c] for c in cols] for r in bad.select(cols).to_pylist()]))
        for r in bad.select(["entry", "detail"]).to_pylist():
            lines.append(f"  {r['entry']}: {r['detail']}")
    uncovered = not_covered(report)
    if uncovered.num_rows:
        kinds: Dict[str, int] = {}
        for detail in uncovered.column("detail").to_pylist():
            kind = detail.split("(", 1)[1].split(")", 1)[0] if "(" in detail else detail
            kinds[kind] = kinds.get(kind, 0) + 1
        lines.append("")
        lines.append(f"{uncovered.num_rows:,} entries not covered -- no candidate on either path, for the same kind "
                     "of reason: " + ", ".join(f"{n:,} {k}" for k, n in sorted(kinds.items(), key=lambda x: -x[1])))
    lines.append("")
    if exit_status(report) == 0:
        lines.append("OK: every covered entry BIT_IDENTICAL")
    elif not report.num_rows:
        lines.append("FAIL: no entry scanned")
    elif not ours["BIT_IDENTICAL"] and uncovered.num_rows == report.num_rows:
        lines.append("FAIL: no covered entry (neither path finds a candidate for any entry scanned)")
    else:
        failing = [f"{ours[x]:,} {x}" for x in STATUSES if x != "BIT_IDENTICAL" and x not in NOT_COVERED and ours[x]]
        lines.append("FAIL: " + ", ".join(failing) + " (walk one down with aicsql.parity.bisect_search(ctx, entry))")
    return "\n".join(lines)
