"""``python -m aicsql.parity``: run a parity scan, print its summary, write its report.

Exit status: 0 when no query DRIFTs or REGRESSes, 1 otherwise, 2 on bad
usage (argparse) -- so a scheduled job or CI step fails on a parity break.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import report as _report
from .runner import DEFAULT_CHUNK, run
from .scans import SCANS


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m aicsql.parity",
        description="Rust path vs Python path of aicsql's estimators, query by query. "
        "Prints counts per status (STRICT_PASS, DRIFT, REGRESSION, EXTRA, MISS_BOTH), the speed "
        "of each path and the worst drifts; exits 1 on any DRIFT or REGRESSION.",
    )
    p.add_argument("--scan", choices=SCANS, default="gemm-models",
                   help="gemm-models: every model GEMM x m ladder x database x quant (default); "
                   "goldens: the spec's GEMM goldens; random: seeded random shapes; "
                   "steps: engine-step configs (step_latency vs py_step_latency); "
                   "serving: agg and disagg points (estimate_agg / estimate_disagg vs their py_ pair, field by field); "
                   "serving-dp: the same at attention dp > 1 for MOE models; "
                   "serving-pp-cp: the same at pipeline parallelism pp 2/4 and, on sglang, context parallelism cp 2/4")
    p.add_argument("--out", metavar="FILE", help="write the per-query report to FILE (.parquet or .csv)")
    p.add_argument("--data", metavar="DIR", action="append",
                   help="data directory (repeatable; default: the aicsql cache, $AICSQL_DATA)")
    p.add_argument("--shared-layer", type=_bool, metavar="true|false",
                   help="aic.shared_layer for the scan (default: both modes for goldens, true otherwise)")
    p.add_argument("--limit", type=_positive, metavar="N",
                   help="at most N queries (per mode; serving: N agg and N disagg points): a quick run")
    p.add_argument("--seed", type=int, default=0, help="seed of the random scan (default 0)")
    p.add_argument("--size", type=_positive, default=100_000, metavar="N",
                   help="queries of the random scan (default 100000)")
    p.add_argument("--chunk-size", type=_positive, default=DEFAULT_CHUNK, metavar="N",
                   help=f"queries per SQL run (default {DEFAULT_CHUNK})")
    p.add_argument("--worst", type=int, default=10, metavar="N", help="DRIFT rows to print (default 10)")
    p.add_argument("--rust", metavar="FUNCTION",
                   help="the scalar function taken as the Rust side (default gemm_latency; step_latency for steps; "
                   "serving: 'AGG,DISAGG', default estimate_agg,estimate_disagg)")
    p.add_argument("--python", metavar="FUNCTION",
                   help="the scalar function taken as the Python side (default py_gemm_latency; py_step_latency for "
                   "steps; serving: 'AGG,DISAGG', default py_estimate_agg,py_estimate_disagg)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def main(argv: Optional[List[str]] = None, *, context=None) -> int:
    """Runs the command line; returns the exit status.

    ``context``: a session to scan in instead of a new ``aicsql.context()``
    (Python callers only -- e.g. a session with an extra function
    registered, named by ``--python``)."""
    args = parser().parse_args(argv)
    if context is None:
        import aicsql

        context = aicsql.context(data=args.data)
    shared_layer = args.shared_layer
    if shared_layer is None and args.scan != "goldens":
        shared_layer = True  # the spec's default
    report = run(
        context,
        args.scan,
        shared_layer=shared_layer,
        limit=args.limit,
        seed=args.seed,
        size=args.size,
        chunk_size=args.chunk_size,
        rust=args.rust,
        python=args.python,
        progress=False if args.no_progress else None,
    )
    if args.out:
        _report.write(report, args.out)
    print(_report.format_summary(report, worst=args.worst))
    if args.out:
        print(f"report: {args.out} ({report.num_rows:,} rows)")
    return _report.exit_status(report)


if __name__ == "__main__":
    sys.exit(main())
