"""aicsql.spec.serving -- the serving estimates of the spec on the Python
path: aggregated (in-flight batching), disaggregated (prefill / decode
workers with rate matching) and the memory model, over the engine step of
`aicsql.spec.step` (aiconfigurator v0.11.0's ``run_agg``, ``run_static``,
``run_disagg`` and ``_get_memory_usage``; the CLI's ``cli_estimate``).

* `backends` -- the per-backend hooks (scheduling, queueing, memory coefficients);
* `memory`   -- the memory model, the OOM and KV-budget checks;
* `estimate` -- the mixed / decode-only steps, the aggregated and the
  disaggregated estimate;
* `speculative` -- MTP's acceptance projection of the results;
* `encoder`  -- the vision encoder's phase and memory (Qwen3-VL with images);
* `rounding` -- numpy's 3-decimal rounding of the spec's frames;
* `api`      -- `estimate_agg`, `estimate_disagg`, `estimate_memory` and their
  batch forms for the Rust bridge (``py_estimate_agg``, ...).
"""

from .api import (
    AGG_SCHEMA,
    DISAGG_SCHEMA,
    MEMORY_SCHEMA,
    estimate_agg,
    estimate_agg_batch,
    estimate_disagg,
    estimate_disagg_batch,
    estimate_memory,
    estimate_memory_batch,
    parse_parallel,
)
from .estimate import ServingMiss
from .rounding import numpy_round3

__all__ = [
    "AGG_SCHEMA",
    "DISAGG_SCHEMA",
    "MEMORY_SCHEMA",
    "ServingMiss",
    "estimate_agg",
    "estimate_agg_batch",
    "estimate_disagg",
    "estimate_disagg_batch",
    "estimate_memory",
    "estimate_memory_batch",
    "numpy_round3",
    "parse_parallel",
]
