#!/usr/bin/env python3
"""Compute the silicon-accuracy goldens with the spec (aiconfigurator v0.11.0).

Runs the spec's own accuracy tool, ``tools/accuracy_tracking/run_silicon.py``
(``predict_ref``), on every row of its ``silicon_refs.csv`` (35 end-to-end
measurements) against the perf-data tree aicsql reads, and writes one parquet
row per reference: the tool's output columns as it writes them (text, its
6-decimal formatting) plus the estimate's raw values as doubles, so a test
can compare bit for bit:

    id, status, err (the tool's, cut at 200 characters), error (the full
    ``<ExceptionType>: <message>`` when the estimate raised),
    predicted_ttft_ms, predicted_tpot_ms, silicon_ttft_ms, silicon_tpot_ms,
    ttft_rel_err, tpot_rel_err, predicted_with_version (text, as the tool
    writes them), ttft, tpot (doubles; null when not OK), attempts (the
    backend versions tried, JSON list: the measured one, then None when the
    tool fell back to the latest data).

Setup and the spec's environment: see scripts/spec_points.py (the same
virtualenv, source tree and merged data tree). Run:

    nice -n 10 /work/specenv/bin/python scripts/spec_silicon.py out.parquet

Options: ``--systems`` (default /work/specdata/systems), ``--spec-src``
(default /work/specsrc), ``--refs`` (default: the tool's own CSV in the spec
source). About 1 minute on this machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_points import load_spec  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--systems", default="/work/specdata/systems")
    parser.add_argument("--spec-src", default="/work/specsrc")
    parser.add_argument("--refs", default=None)
    args = parser.parse_args()

    load_spec(args.spec_src, args.systems)
    sys.path.insert(0, args.spec_src)  # `tools.` as the tool imports it
    import aiconfigurator.cli.api as api
    from tools.accuracy_tracking import run_silicon

    refs_path = args.refs or os.path.join(args.spec_src, "tools", "accuracy_tracking", "silicon_refs.csv")
    with open(refs_path, newline="") as f:
        refs = list(csv.DictReader(f))

    # Record every call the tool makes and its outcome (the tool keeps only
    # 6-decimal text and the first 200 characters of an error).
    calls: list = []
    original = api.cli_estimate

    def recording(**kwargs):
        entry = {"version": kwargs.get("backend_version"), "result": None, "error": None}
        calls.append(entry)
        try:
            entry["result"] = original(**kwargs)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
            raise
        return entry["result"]

    api.cli_estimate = recording
    rows = []
    started = time.perf_counter()
    for ref in refs:
        calls.clear()
        out = run_silicon.predict_ref(ref)
        last = calls[-1] if calls else {"result": None, "error": None}
        result = last["result"]
        row = {k: out[k] for k in run_silicon.SILICON_FIELDS}
        row["error"] = last["error"]
        row["ttft"] = None if result is None else float(result.ttft)
        row["tpot"] = None if result is None else float(result.tpot)
        row["attempts"] = json.dumps([c["version"] for c in calls])
        rows.append(row)
        print(f"{ref['id'][:70]:70s} {out['status']:28s} {out['predicted_with_version']}", file=sys.stderr)
    api.cli_estimate = original

    import pyarrow as pa
    import pyarrow.parquet as pq

    text = pa.large_string()
    fields = [(k, text) for k in run_silicon.SILICON_FIELDS] + [
        ("error", text),
        ("ttft", pa.float64()),
        ("tpot", pa.float64()),
        ("attempts", text),
    ]
    schema = pa.schema(fields)
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, args.out)
    statuses: dict = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    print(f"{len(rows)} refs {statuses} -> {args.out} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
