"""The model description and its checkpoint quantisation (docs/spec sections 2 and 3.1).

A model is named like the SDK names it (``Qwen/Qwen3-32B-FP8``) and read from
``model_configs/<org>--<name>_config.json`` in the best-ranked data root that
has it (the same root ranking as the perf data: the packaged
``aiconfigurator-core`` beats ``aiconfigurator``). Multimodal wrappers keep
the text model under ``text_config``; its fields are read from there when
the top level lacks them.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..data import DataTree
from ..sol import GEMM_QUANTS

__all__ = [
    "LLAMA",
    "MOE",
    "HYBRIDMOE",
    "ARCHITECTURES",
    "CheckpointQuant",
    "ModelSpec",
    "load_model",
    "model_config_path",
]

LLAMA = "LLAMA"
MOE = "MOE"
HYBRIDMOE = "HYBRIDMOE"

# Spec section 2: architecture -> family.
ARCHITECTURES: Dict[str, str] = {
    "LlamaForCausalLM": LLAMA,
    "Qwen2ForCausalLM": LLAMA,
    "Qwen3ForCausalLM": LLAMA,
    "MiMoForCausalLM": LLAMA,
    "MixtralForCausalLM": MOE,
    "Qwen2MoeForCausalLM": MOE,
    "Qwen3MoeForCausalLM": MOE,
    "GptOssForCausalLM": MOE,
    "MiniMaxM2ForCausalLM": MOE,
    "Llama4ForConditionalGeneration": HYBRIDMOE,
}
QK_NORM_ARCHITECTURES = frozenset({"Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM"})

# MoE workload distribution per family (docs/spec 10.2, 10.4).
DISTRIBUTION = {MOE: "power_law_1.2", HYBRIDMOE: "power_law_1.01"}

# The checkpoint quant algos the spec infers modes from (3.1).
_KNOWN_ALGOS = ("fp8", "fp8_block", "nvfp4")


class CheckpointQuant(NamedTuple):
    """Quant modes inferred from the checkpoint, before the backend guards (3.1).

    ``fmha`` is the *inferred* FMHA mode; the guards of 3.2 act on it."""

    gemm: str
    moe: str
    kv: str
    fmha: str
    comm: str = "half"


class ModelSpec(NamedTuple):
    """The fields of section 2, plus where they came from."""

    name: str
    architecture: str
    family: str
    num_layers: int  # L
    hidden: int  # h
    heads: int  # H
    kv_heads: int  # Hkv
    head_dim: int  # d
    inter: int  # I
    vocab: int  # V
    topk: int
    experts: int  # E
    moe_inter: int  # I_moe
    use_qk_norm: bool
    distribution: Optional[str]
    quant: CheckpointQuant
    config_path: str

    @property
    def is_moe(self) -> bool:
        return self.family in (MOE, HYBRIDMOE)

    def heads_per_gpu(self, tp: int) -> Tuple[int, int]:
        """(n, n_kv): ``H // tp`` and ``ceil(Hkv / tp)`` (so n_kv >= 1 even when tp > Hkv)."""
        return self.heads // tp, (self.kv_heads + tp - 1) // tp


def _config_name(model: str) -> str:
    return model.replace("/", "--")


def _candidate_dirs(tree: DataTree) -> List[str]:
    """``model_configs`` of every mounted root, best root first."""
    return [os.path.join(root.dir, "model_configs") for root in tree.roots]


def model_config_path(tree: DataTree, model: str) -> Tuple[str, Optional[str]]:
    """(config.json path, hf_quant_config.json path or None) of a model; ValueError when unknown."""
    if not isinstance(model, str) or not model or "/" not in model:
        raise ValueError(f"unknown model {model!r}: expected '<org>/<name>' (e.g. 'Qwen/Qwen3-32B')")
    name = _config_name(model)
    for d in _candidate_dirs(tree):
        path = os.path.join(d, f"{name}_config.json")
        if os.path.isfile(path):
            hf_quant = os.path.join(d, f"{name}_hf_quant_config.json")
            return path, hf_quant if os.path.isfile(hf_quant) else None
    raise ValueError(
        f"unknown model {model!r}: no model_configs/{name}_config.json in the mounted data "
        f"({', '.join(_candidate_dirs(tree)) or 'no data roots'})"
    )


def _kv_algo(value) -> Optional[str]:
    """A checkpoint's kv-cache algo as a mode name ('fp8', 'bfloat16', 'int8') or None."""
    if value is None:
        return None
    if isinstance(value, dict):  # compressed-tensors style {'num_bits': 8, 'type': 'float'}
        bits, kind = value.get("num_bits"), str(value.get("type", "")).lower()
        if bits == 8:
            return "fp8" if kind == "float" else "int8"
        raise ValueError(f"unsupported kv cache quantisation {value!r}")
    text = str(value).lower()
    if text in ("fp8", "bfloat16", "int8"):
        return text
    raise ValueError(f"unsupported kv cache quantisation {value!r}")


def _dynamic_activations(qc: dict) -> bool:
    """`activation_scheme: dynamic`, or a config group with dynamic input activations."""
    if str(qc.get("activation_scheme", "")).lower() == "dynamic":
        return True
    for group in (qc.get("config_groups") or {}).values():
        if isinstance(group, dict):
            acts = group.get("input_activations")
            if isinstance(acts, dict) and acts.get("dynamic") is True:
                return True
    return False


def infer_quant(config: dict, hf_quant: Optional[dict]) -> CheckpointQuant:
    """Spec 3.1: the quant modes a checkpoint implies (before the FMHA guards)."""
    qc = config.get("quantization_config")
    if not qc and hf_quant:
        qc = hf_quant.get("quantization")
    qc = qc or {}
    names = [str(qc[k]).lower() for k in ("quant_method", "quant_algo") if qc.get(k)]
    known = [n for n in names if n in _KNOWN_ALGOS]
    if names and not known:
        raise ValueError(f"unsupported checkpoint quantisation {names} (supported: fp8, fp8 block, nvfp4)")
    algo = known[0] if known else None
    if algo == "fp8" and qc.get("weight_block_size"):
        algo = "fp8_block"
    kv_algo = _kv_algo(qc.get("kv_cache_quant_algo", qc.get("kv_cache_scheme")))

    gemm, moe, kv, fmha = "bfloat16", "bfloat16", "bfloat16", "bfloat16"
    if algo == "fp8_block":
        gemm, moe = "fp8_block", "fp8_block"
    elif algo == "fp8":
        gemm, moe = ("fp8" if _dynamic_activations(qc) else "fp8_static"), "fp8"
    elif algo == "nvfp4":
        gemm, moe = "nvfp4", "nvfp4"
    if algo in _KNOWN_ALGOS or kv_algo == "fp8":
        fmha, kv = "fp8", "fp8"  # kv forced to fp8 even if the checkpoint said bfloat16
    elif kv_algo is not None:
        kv = kv_algo
    return CheckpointQuant(gemm=gemm, moe=moe, kv=kv, fmha=fmha)


def _field(cfg: dict, *keys, default=None):
    """The first of `keys` that is set (not None)."""
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return default


def parse_model(name: str, config: dict, hf_quant: Optional[dict], path: str) -> ModelSpec:
    """Section 2's fields from a config.json document."""
    cfg = dict(config)
    text = config.get("text_config")
    if isinstance(text, dict):
        for k, v in text.items():
            cfg.setdefault(k, v)
    archs = cfg.get("architectures") or []
    arch = archs[0] if archs else None
    family = ARCHITECTURES.get(arch)
    if family is None:
        raise ValueError(
            f"unsupported architecture {arch!r} of model {name!r}; supported: {', '.join(ARCHITECTURES)}"
        )
    try:
        L = int(cfg["num_hidden_layers"])
        h = int(cfg["hidden_size"])
        H = int(cfg["num_attention_heads"])
        V = int(cfg["vocab_size"])
    except KeyError as e:
        raise ValueError(f"{path}: {e.args[0]} is missing") from None
    d = _field(cfg, "head_dim", "attention_head_dim")
    if d is None:
        d = h // H
    inter = _field(cfg, "intermediate_size", default=0)
    return ModelSpec(
        name=name,
        architecture=arch,
        family=family,
        num_layers=L,
        hidden=h,
        heads=H,
        kv_heads=int(_field(cfg, "num_key_value_heads", default=0)),
        head_dim=int(d),
        inter=int(inter),
        vocab=V,
        topk=int(_field(cfg, "num_experts_per_tok", "top_k_experts", default=0)),
        experts=int(cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts") or 0),
        moe_inter=int(_field(cfg, "moe_intermediate_size", default=inter)),
        use_qk_norm=arch in QK_NORM_ARCHITECTURES,
        distribution=DISTRIBUTION.get(family),
        quant=infer_quant(config, hf_quant),
        config_path=path,
    )


_MODELS: Dict[Tuple[int, str], ModelSpec] = {}
_MODELS_LOCK = threading.Lock()


def load_model(tree: DataTree, model: str) -> ModelSpec:
    """The model `model` ('org/name'), read once per data tree; ValueError if unknown/unsupported."""
    key = (id(tree), model)
    with _MODELS_LOCK:
        spec = _MODELS.get(key)
    if spec is None:
        path, hf_path = model_config_path(tree, model)
        with open(path, "r", encoding="utf-8") as f:
            config = json.load(f)
        hf_quant = None
        if hf_path is not None:
            with open(hf_path, "r", encoding="utf-8") as f:
                hf_quant = json.load(f)
        spec = parse_model(model, config, hf_quant, path)
        with _MODELS_LOCK:
            spec = _MODELS.setdefault(key, spec)
    return spec


def check_gemm_quant(spec: ModelSpec) -> None:
    """The GEMM modes this port computes (fp8_static needs the compute-scale
    subtraction of 8.1, which is not restated here)."""
    if spec.quant.gemm == "fp8_static":
        raise ValueError(
            f"unsupported: model {spec.name!r} is an fp8_static checkpoint; its GEMMs subtract the "
            "compute_scale / scale_matrix tables (docs/spec 8.1), which aicsql.spec does not implement"
        )
    if spec.quant.gemm not in GEMM_QUANTS:
        raise ValueError(f"unsupported GEMM quant mode {spec.quant.gemm!r} of model {spec.name!r}")
