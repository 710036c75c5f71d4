"""The op lists of a step, per model family, in the SDK's order (the order is
observable: per-op values are summed in it, docs/spec 9.3).

| family | builder | spec |
|---|---|---|
| LLAMA, QWEN3VL | `llama` | docs/spec 6; families_hybrid 2 |
| MOE (GPT-OSS included), QWEN3VL_MOE | `moe` | docs/spec 10.2; families_mla 4; families_hybrid 2 |
| DEEPSEEK, KIMIK25 | `deepseek` | families_mla 3 |
| HYBRIDMOE | `hybrid_moe` | families_hybrid 1.4, 1.5 |
| QWEN35 | `qwen35` | families_qwen35_gemma4 1.3 - 1.7 |
| GEMMA4MIX | `gemma4` | families_qwen35_gemma4 3.3 - 3.7 |
| NEMOTRONH | `nemotron_h` | families_nemotron 1.3 - 1.6 |
| NEMOTRONNAS | `nemotron_nas` | families_nemotron 2.3 - 2.6 |
| DEEPSEEKV4 | `deepseek_v4` | families_dsv4 1.4 - 2.4 |
| DEEPSEEKV32 | `dsv32` | families_dsa 3, 4 |

A builder takes the model, the phase ('context' | 'generation'), the
parallel layout, the phase's quant modes and the backend, and gives the
counts at MTP depth ``nextn = 0``: generation counts carry the factor 1.0
(they are floats) -- except NEMOTRONNAS's, which have no MTP factor at all
(ints; the family refuses ``nextn > 0``). At ``nextn > 0``
`StepContext.layout` multiplies the generation counts by the MTP factor
(`Op.scaled`, docs/spec/options.md 2.3).
"""

from __future__ import annotations

from typing import List

from ..model import (
    DEEPSEEK,
    DEEPSEEKV4,
    DEEPSEEKV32,
    GEMMA4MIX,
    HYBRIDMOE,
    KIMIK25,
    LLAMA,
    MOE,
    NEMOTRONH,
    NEMOTRONNAS,
    QWEN3VL,
    QWEN3VL_MOE,
    QWEN35,
    ModelSpec,
)
from ..ops import Op, Parallel, PhaseQuants
from . import deepseek, gemma4, hybrid_moe, llama, moe, nemotron_h, nemotron_nas, qwen35
from . import deepseek_v4
from . import dsv32

__all__ = ["build_ops"]

_BUILDERS = {
    LLAMA: llama.build,
    QWEN3VL: llama.build,
    MOE: moe.build,
    QWEN3VL_MOE: moe.build,
    DEEPSEEK: deepseek.build,
    KIMIK25: deepseek.build,
    HYBRIDMOE: hybrid_moe.build,
    QWEN35: qwen35.build,
    GEMMA4MIX: gemma4.build,
    NEMOTRONH: nemotron_h.build,
    NEMOTRONNAS: nemotron_nas.build,
    DEEPSEEKV4: deepseek_v4.build,
    DEEPSEEKV32: dsv32.build,
}


def build_ops(model: ModelSpec, phase: str, par: Parallel, q: PhaseQuants, backend: str) -> List[Op]:
    """The model's op list for `phase`; ValueError for a family without a builder."""
    try:
        builder = _BUILDERS[model.family]
    except KeyError:
        raise ValueError(f"unsupported model family {model.family} ({model.architecture}) of {model.name!r}") from None
    return builder(model, phase, par, q, backend)
