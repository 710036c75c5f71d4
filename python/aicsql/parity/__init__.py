"""Parity scans: the Rust path against the Python path, query by query.

aicsql has two implementations of aiconfigurator's GEMM estimator: the Rust
one behind ``gemm_latency`` / ``gemm_trace`` (the product) and the
pure-Python restatement of the spec behind ``py_gemm_latency`` /
``py_gemm_trace``. Parity between them is bit-identical or it is a bug.
The engine step has the same pair (``step_latency`` / ``engine_step`` and
``py_step_latency`` / ``py_engine_step``), and so do the serving estimates
(``estimate_agg`` / ``estimate_disagg`` and ``py_estimate_agg`` /
``py_estimate_disagg``: ``--scan serving``, compared field by field). This package runs the SQL in
``queries/parity/`` over large query sets and
collects one report::

    import aicsql, aicsql.parity
    ctx = aicsql.context()
    report = aicsql.parity.run(ctx, scan="gemm-models")      # pyarrow.Table
    print(aicsql.parity.format_summary(report))
    aicsql.parity.bisect(ctx, "h200_sxm/vllm/0.19.0", "fp8_block", 32, 1280, 5120)
    aicsql.parity.bisect_step(ctx, "Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0", "context", 8, 1, 1024, 128)

or from the command line: ``python -m aicsql.parity --scan gemm-models
--out report.parquet`` (exit status 1 on any DRIFT or REGRESSION).

The deployment search has the pair too (``search_agg`` / ``search_disagg``
and ``py_search_agg`` / ``py_search_disagg``): ``--scan support-matrix``
runs both on every covered PASS entry of the support matrix at the entry's
own arguments and grades each entry as upstream grades its port
(:mod:`.matrix`; BIT_IDENTICAL on top of upstream's STRICT_PASS,
ENVELOPE_PASS, DRIFT, REGRESSION, ERROR), resumably; ``bisect_search``
walks an entry whose frames differ down to the row, the estimate, the
step, the op and the GEMM lookup::

    report = aicsql.parity.matrix.run(ctx, subset="ci")
    print(aicsql.parity.format_summary(report))
    print(aicsql.parity.bisect_search(ctx, "meta-llama/Meta-Llama-3.1-8B|h200_sxm|vllm|0.19.0|agg"))

Statuses per query: STRICT_PASS (both answered, same bits), DRIFT (both
answered, different bits; ``rel_diff`` says by how much), REGRESSION (only
the Python path answered), EXTRA (only the Rust path answered), MISS_BOTH
(neither: the spec misses). A serving point is a struct: a reason (miss or
OOM) on one side only is REGRESSION (Rust) or EXTRA (Python), any field
that differs is DRIFT, and the report names the worst ``field``.
"""

from __future__ import annotations

from . import matrix
from .report import exit_status, format_summary, status_counts, summary, worst_drifts, write
from .runner import STATUSES, bisect, bisect_step, evaluate, run
from .scans import SCANS
from .search_bisect import SearchBisection, bisect_search

__all__ = [
    "SCANS",
    "STATUSES",
    "run",
    "evaluate",
    "bisect",
    "bisect_step",
    "bisect_search",
    "SearchBisection",
    "matrix",
    "summary",
    "format_summary",
    "status_counts",
    "worst_drifts",
    "exit_status",
    "write",
]
