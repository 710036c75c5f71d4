"""aicsql.spec -- the Python path: a small, readable, pure-Python restatement of
the spec (aiconfigurator v0.11.0's GEMM estimator, see docs/spec/engine_step.md
sections 3, 4, 5.2, 7.2, 8.1 and 11), written independently of the Rust path
so that the two can check each other bit for bit.

Entry points (see `functions`): `gemm_latency_batch` and `gemm_trace_table`
(called by the Rust bridge with the session's settings), `gemm_latency`,
`gemm_trace` and `gemm_sol` (plain Python).

The engine step (sections 1-3, 5-11; subpackages `step` and `kernels`):
`step_latency_batch` (for the Rust bridge), `step_latency` and
`engine_step` (the op-by-op breakdown).

The serving estimates (subpackage `serving`): `estimate_agg`,
`estimate_disagg`, `estimate_memory` and their ``*_batch`` forms for the
bridge (``py_estimate_agg``, ...).

The deployment search of ``cli default`` (subpackage `search`,
docs/spec/search.md): `run_search` (the spec's frames), `search_agg`,
`search_disagg`, `search_default` (pyarrow Tables) and their ``*_table``
forms for the bridge.
"""

from .data import Database, DataTree, data_dirs, open_tree
from .functions import (
    MAX_GEMM_DIM,
    TRACE_SCHEMA,
    gemm_latency,
    gemm_latency_batch,
    gemm_sol,
    gemm_trace,
    gemm_trace_table,
    engine_step,
    step_latency,
    step_latency_batch,
)
from .gemm import GemmMiss, GemmSlice, GemmTable, gemm_sources, load_table
from .pep440 import Version
from .serving import (
    estimate_agg,
    estimate_agg_batch,
    estimate_disagg,
    estimate_disagg_batch,
    estimate_memory,
    estimate_memory_batch,
)
from .sol import GEMM_QUANTS, QuantMode, SystemSpec, gemm_quant
from .search import run_search, search_agg, search_default, search_disagg

__all__ = [
    "Database",
    "DataTree",
    "GEMM_QUANTS",
    "GemmMiss",
    "GemmSlice",
    "GemmTable",
    "MAX_GEMM_DIM",
    "QuantMode",
    "SystemSpec",
    "TRACE_SCHEMA",
    "Version",
    "data_dirs",
    "engine_step",
    "estimate_agg",
    "estimate_agg_batch",
    "estimate_disagg",
    "estimate_disagg_batch",
    "estimate_memory",
    "estimate_memory_batch",
    "gemm_latency",
    "gemm_latency_batch",
    "gemm_quant",
    "gemm_sol",
    "gemm_sources",
    "gemm_trace",
    "gemm_trace_table",
    "load_table",
    "open_tree",
    "run_search",
    "search_agg",
    "search_default",
    "search_disagg",
    "step_latency",
    "step_latency_batch",
]
