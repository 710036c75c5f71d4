"""aicsql.spec.step -- the engine-step estimator of the spec
(docs/spec/engine_step.md sections 1-3, 6, 9, 10): one static context (prefill)
or generation (decode) step of a dense LLAMA-family or classic MoE model,
op by op, on the tables of `aicsql.spec.kernels` and the GEMM path.

* `model`  -- config.json fields, family, checkpoint quant inference (2, 3.1);
* `ops`    -- the op lists and each op's query (6, 8, 10);
* `engine` -- FMHA guards, step assembly, sampling and summation order (3.2, 9);
* `api`    -- `engine_step`, `step_latency`, `step_latency_batch`.
"""

from .api import engine_step, step_latency, step_latency_batch
from .engine import STRIDE, PhaseQuants, StepContext, StepMiss, step_context
from .model import CheckpointQuant, ModelSpec, infer_quant, load_model

__all__ = [
    "STRIDE",
    "CheckpointQuant",
    "ModelSpec",
    "PhaseQuants",
    "StepContext",
    "StepMiss",
    "engine_step",
    "infer_quant",
    "load_model",
    "step_context",
    "step_latency",
    "step_latency_batch",
]
