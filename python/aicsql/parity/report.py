"""Reading a parity report: counts, speeds, the worst drifts, the verdict.

A support-matrix report (``--scan support-matrix``: it has an
``upstream_status`` column) has statuses and a bar of its own; the public
functions here hand it to :mod:`.matrix_report`.

The verdict (:func:`exit_status`) fails a scan on any DRIFT (both paths
answered, the bits differ) or REGRESSION (the Rust path misses where the
spec answers): those put a wrong or a missing number in front of a user.
EXTRA (Rust answers where the spec misses) is counted and called out in the
summary, but does not fail the scan.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .runner import META, STATUSES

__all__ = ["status_counts", "summary", "format_summary", "exit_status", "worst_drifts", "write"]

FAILING = ("DRIFT", "REGRESSION")


def _is_matrix(report: pa.Table) -> bool:
    return "upstream_status" in report.column_names


def status_counts(report: pa.Table) -> Dict[str, int]:
    """Rows per status, every status present (0 when absent), in STATUSES order."""
    if _is_matrix(report):
        from . import matrix_report

        return matrix_report.status_counts(report)
    counts = {s: 0 for s in STATUSES}
    for row in pc.value_counts(report.column("status")).to_pylist():
        counts[row["values"]] = row["counts"]
    return counts


def exit_status(report: pa.Table) -> int:
    """1 if the report has any DRIFT or REGRESSION row, else 0 (a
    support-matrix report: 1 unless every covered entry is BIT_IDENTICAL,
    NO_CANDIDATE entries being not covered)."""
    if _is_matrix(report):
        from . import matrix_report

        return matrix_report.exit_status(report)
    counts = status_counts(report)
    return 1 if any(counts[s] for s in FAILING) else 0


def worst_drifts(report: pa.Table, n: int = 10) -> pa.Table:
    """The ``n`` DRIFT rows with the largest ``rel_diff``."""
    drifts = report.filter(pc.equal(report.column("status"), "DRIFT"))
    return drifts.sort_by([("rel_diff", "descending")]).slice(0, n)


def _meta(report: pa.Table) -> Dict[str, str]:
    raw = report.schema.metadata or {}
    out = {}
    for key, value in raw.items():
        key = key.decode() if isinstance(key, bytes) else key
        if key.startswith(META):
            out[key[len(META):]] = value.decode() if isinstance(value, bytes) else value
    return out


def summary(report: pa.Table) -> Dict[str, object]:
    """The numbers of a report as a dict: queries, counts per status, seconds
    and queries/s of each path (each path's column timed on its own),
    build and wall seconds, golden matches when the report has them."""
    if _is_matrix(report):
        from . import matrix_report

        return matrix_report.summary(report)
    meta = _meta(report)
    rows = report.num_rows
    out: Dict[str, object] = {
        "scan": meta.get("scan"),
        "shared_layer": meta.get("shared_layer"),
        "queries": rows,
        "status": status_counts(report),
    }
    for path in ("rust", "python"):
        seconds = float(meta.get(f"{path}_seconds", "nan"))
        out[f"{path}_function"] = meta.get(f"{path}_function")
        out[f"{path}_seconds"] = seconds
        out[f"{path}_qps"] = rows / seconds if seconds > 0 else float("nan")
    out["build_seconds"] = float(meta.get("build_seconds", "nan"))
    out["wall_seconds"] = float(meta.get("wall_seconds", "nan"))
    if "golden_match" in report.column_names:
        out["golden_mismatches"] = rows - pc.sum(report.column("golden_match").cast(pa.int64())).as_py()
    return out


def _fmt(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _table(headers: Sequence[str], rows: List[Sequence]) -> str:
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |", line]
    for r in cells:
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
    out.append(line)
    return "\n".join(out)


def format_summary(report: pa.Table, worst: int = 10) -> str:
    """The summary a person reads after a scan: status counts, each path's
    speed, the worst drifts, the verdict."""
    if _is_matrix(report):
        from . import matrix_report

        return matrix_report.format_summary(report, worst)
    s = summary(report)
    lines = [
        f"parity scan {s['scan']}: {s['queries']:,} queries, aic.shared_layer = {s['shared_layer']}, "
        f"wall {s['wall_seconds']:.1f} s (building the queries {s['build_seconds']:.1f} s)",
        "",
    ]
    counts = s["status"]
    lines.append(_table(["status", "count"], [[k, f"{v:,}"] for k, v in counts.items()]))
    lines.append("")
    lines.append(
        _table(
            ["path", "function", "seconds", "queries/s"],
            [
                [path, s[f"{path}_function"], f"{s[f'{path}_seconds']:.2f}", f"{s[f'{path}_qps']:,.0f}"]
                for path in ("rust", "python")
            ],
        )
    )
    if "golden_mismatches" in s:
        lines.append("")
        lines.append(f"golden values: {s['queries'] - s['golden_mismatches']:,} rows where both paths equal the spec's golden bit for bit "
                     f"(or all miss), {s['golden_mismatches']:,} where not")
    drifts = worst_drifts(report, worst)
    if drifts.num_rows:
        lines.append("")
        lines.append(f"worst {drifts.num_rows} DRIFT rows (by rel_diff):")
        # The query's own columns (GEMM: db, quant, m, n, k; steps: model, db, phase, ...;
        # serving: point, mode, model, db, tp, ..., then the worst field and its values).
        values = [c for c in ("field", "rust_ms", "py_ms", "rust_value", "py_value") if c in drifts.column_names]
        skip = {"scan", "status", "rel_diff", "golden_ms", "golden_match", "rust_reason", "py_reason",
                "fields_differing", *values}  # fmt: skip
        query_cols = [c for c in drifts.column_names if c not in skip]
        if "field" in values:  # serving: agg rows have no disagg columns and the other way round
            query_cols = [c for c in query_cols if drifts.column(c).null_count < drifts.num_rows]
        cols = query_cols + values + ["rel_diff"]
        lines.append(_table(cols, [[r[c] for c in cols] for r in drifts.select(cols).to_pylist()]))
    lines.append("")
    failing = [f"{counts[x]:,} {x}" for x in FAILING if counts[x]]
    if failing:
        lines.append("FAIL: " + ", ".join(failing) + " (bisect a row with aicsql.parity.bisect)")
    else:
        note = f" ({counts['EXTRA']:,} EXTRA: the Rust path answers where the spec misses)" if counts["EXTRA"] else ""
        lines.append("OK: no DRIFT, no REGRESSION" + note)
    return "\n".join(lines)


def write(report: pa.Table, path: str) -> None:
    """Writes the report as Parquet (``.parquet``) or CSV (``.csv``)."""
    lower = str(path).lower()
    if lower.endswith(".parquet"):
        import pyarrow.parquet as pq

        pq.write_table(report, path)
    elif lower.endswith(".csv"):
        import pyarrow.csv as pcsv

        pcsv.write_csv(report, path)
    else:
        raise ValueError(f"--out {path!r}: the report is written as .parquet or .csv")
