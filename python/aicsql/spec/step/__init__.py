"""aicsql.spec.step -- the engine-step estimator of the spec
(docs/spec/engine_step.md sections 1-3, 6, 9, 10; families_mla_gptoss_fp8static.md;
families_hybrid_vl_databases.md 1, 2; families_qwen35_gemma4.md 1, 3;
families_nemotron.md 1, 2): one static context (prefill) or generation
(decode) step, op by op, on the tables of `aicsql.spec.kernels` and the GEMM
path. Families: LLAMA, MOE (GPT-OSS included), QWEN3VL / QWEN3VL_MOE (text
path), HYBRIDMOE (Llama-4, MiMo-V2-Flash), DEEPSEEK and KIMIK25 (MLA), QWEN35
(Qwen3.5: gated-delta-net and full-attention layers), GEMMA4MIX (Gemma 4:
sliding-window and global attention, shared MLP plus routed experts),
NEMOTRONH (Nemotron-3 / Nemotron-H: Mamba-2, attention, MoE and MLP layers)
and NEMOTRONNAS (Llama-3.3-Nemotron-Super: heterogeneous NAS blocks), with
fp8_static checkpoints in any of them.

* `model`      -- config.json fields, the architecture -> family map;
* `checkpoint` -- the quant modes a checkpoint implies;
* `options`    -- the spec's user-facing options (``options`` of the Python API, docs/spec/options.md);
* `ops`, `mla_ops`, `composite` -- the ops and each op's query;
* `families`   -- the op lists per family;
* `vision`     -- Qwen3-VL's vision encoder: image token counts and its op list (docs/spec/options.md 4);
* `engine`     -- FMHA guards, step assembly, sampling and summation order (3.2, 9);
* `api`        -- `engine_step`, `step_latency`, `step_latency_batch`, `engine_step_table`.
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
