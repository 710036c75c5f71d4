"""``python -m aicsql.parity``: run a parity scan, print its summary, write its report.

Exit status: 0 when no query DRIFTs or REGRESSes (``--scan
support-matrix``: when every entry is BIT_IDENTICAL), 1 otherwise, 2 on bad
usage (argparse), 130 when stopped by Ctrl-C or SIGTERM (the
support-matrix scan finishes the entry at hand and writes its ``--out``
report; run the same command again to resume)
-- so a scheduled job or CI step fails on a parity break.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import List, Optional

from . import matrix
from . import report as _report
from .runner import DEFAULT_CHUNK, run
from .scans import SCANS
from .smoke import SUBSETS

# Options of the support-matrix scan only (argparse dest -> flag).
_MATRIX_ONLY = {"subset": "--subset", "entries": "--entries", "max_gpus": "--max-gpus", "mode": "--mode",
                "fresh": "--fresh", "checkpoint": "--checkpoint"}  # fmt: skip


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
                   "serving-pp-cp: the same at pipeline parallelism pp 2/4 and, on sglang, context parallelism cp 2/4; "
                   "serving-options: the spec's options goldens (quant overrides, KV knobs, MTP, images), each point "
                   "with its options STRUCT; "
                   "support-matrix: search_agg / search_disagg vs py_search_* on every covered PASS entry of "
                   "aic.meta.support_matrix at the entry's own arguments, graded as upstream grades its port "
                   "(BIT_IDENTICAL on top); resumable with --out")
    p.add_argument("--out", metavar="FILE", help="write the per-query report to FILE (.parquet or .csv)")
    p.add_argument("--data", metavar="DIR", action="append",
                   help="data directory (repeatable; default: the aicsql cache, $AICSQL_DATA)")
    p.add_argument("--shared-layer", type=_bool, metavar="true|false",
                   help="aic.shared_layer for the scan (default: both modes for goldens, the session's -- the spec's "
                   "true -- for support-matrix, true otherwise)")
    p.add_argument("--limit", type=_positive, metavar="N",
                   help="at most N queries (per mode; serving: N agg and N disagg points; support-matrix: N entries "
                   "not yet in the --out report): a quick run")
    p.add_argument("--seed", type=int, default=0, help="seed of the random scan (default 0)")
    p.add_argument("--size", type=_positive, default=100_000, metavar="N",
                   help="queries of the random scan (default 100000)")
    p.add_argument("--chunk-size", type=_positive, default=DEFAULT_CHUNK, metavar="N",
                   help=f"queries per SQL run (default {DEFAULT_CHUNK})")
    p.add_argument("--worst", type=int, default=10, metavar="N",
                   help="DRIFT rows to print (default 10; support-matrix: entries that are not BIT_IDENTICAL)")
    p.add_argument("--rust", metavar="FUNCTION",
                   help="the scalar function taken as the Rust side (default gemm_latency; step_latency for steps; "
                   "serving: 'AGG,DISAGG', default estimate_agg,estimate_disagg; support-matrix: the table functions "
                   "'AGG,DISAGG', default search_agg,search_disagg)")
    p.add_argument("--python", metavar="FUNCTION",
                   help="the scalar function taken as the Python side (default py_gemm_latency; py_step_latency for "
                   "steps; serving: 'AGG,DISAGG', default py_estimate_agg,py_estimate_disagg; support-matrix: "
                   "default py_search_agg,py_search_disagg)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    m = p.add_argument_group("support-matrix scan")
    m.add_argument("--subset", choices=sorted(SUBSETS),
                   help="a fixed subset: ci = the smoke entries CI runs (aicsql/parity/smoke.py)")
    m.add_argument("--entries", action="append", metavar="REGEX",
                   help="entries whose key (model|system|backend|version|mode) matches REGEX (repeatable: any of them)")
    m.add_argument("--max-gpus", type=_positive, metavar="N",
                   help="entries whose GPU budget (--total-gpus) is at most N")
    m.add_argument("--mode", action="append", choices=("agg", "disagg"), help="entries of this mode (repeatable)")
    m.add_argument("--fresh", action="store_true", help="start over instead of resuming the --out report")
    m.add_argument("--checkpoint", type=_positive, default=matrix.DEFAULT_CHECKPOINT, metavar="N",
                   help=f"write the --out report every N entries (default {matrix.DEFAULT_CHECKPOINT})")
    return p


def main(argv: Optional[List[str]] = None, *, context=None) -> int:
    """Runs the command line; returns the exit status.

    ``context``: a session to scan in instead of a new ``aicsql.context()``
    (Python callers only -- e.g. a session with an extra function
    registered, named by ``--python``)."""
    p = parser()
    args = p.parse_args(argv)
    if args.scan != matrix.SCAN:
        for dest, flag in _MATRIX_ONLY.items():
            if getattr(args, dest) not in (None, False, matrix.DEFAULT_CHECKPOINT):
                p.error(f"{flag} applies to --scan {matrix.SCAN} only")
    elif args.out and not str(args.out).lower().endswith(".parquet"):
        p.error("--scan support-matrix writes its (resumable) report as .parquet")
    if context is None:
        import aicsql

        context = aicsql.context(data=args.data)
    if args.scan == matrix.SCAN:
        return _matrix(context, args)
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


def _stop(signum, frame):
    """Ctrl-C (SIGINT) or SIGTERM (how a background job is stopped): the
    first one lets the entry at hand finish, then the scan writes its
    report and ends; a second one stops at once (the report keeps the
    entries of the last checkpoint)."""
    if matrix._STOP.is_set():
        raise KeyboardInterrupt
    matrix.request_stop()
    print(f"\nparity {matrix.SCAN}: stopping after the entry at hand (again to stop at once)", file=sys.stderr,
          flush=True)  # fmt: skip


def _matrix(context, args) -> int:
    if args.shared_layer is not None:  # else the session's (the spec's default: true)
        context.sql(f"SET aic.shared_layer = {'true' if args.shared_layer else 'false'}").collect()
    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        report = matrix.run(
            context,
            subset=args.subset,
            patterns=args.entries,
            max_gpus=args.max_gpus,
            modes=args.mode,
            limit=args.limit,
            out=args.out,
            fresh=args.fresh,
            checkpoint=args.checkpoint,
            rust=args.rust,
            python=args.python,
            progress=False if args.no_progress else None,
        )
    except KeyboardInterrupt:
        return 130
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    print(_report.format_summary(report, worst=args.worst))
    if args.out:
        print(f"report: {args.out} ({report.num_rows:,} entries)")
    return _report.exit_status(report)


if __name__ == "__main__":
    sys.exit(main())
