"""The quant modes a checkpoint implies, before the backend guards
(docs/spec/families_mla_gptoss_fp8static.md 2.1-2.3, which replace
engine_step.md 3.1 in full).

1. The raw config: ``hf_quant_config.json`` (if shipped) is attached, and
   when ``config.json`` has no ``quantization_config`` one is synthesised from
   its ``quantization`` section; a multimodal wrapper whose top level has no
   ``quantization_config`` takes its ``text_config``'s.
2. Fields (2.1): ``quant_algo`` (normalised: lower-cased, ``w4a16_mxfp4`` ->
   ``mxfp4``, ``mixed-precision`` -> ``mixed_precision``; ``fp8`` with a
   non-empty ``weight_block_size`` -> ``fp8_block``), ``kv_cache_algo``
   (``fp8|e4m3|e5m2`` -> fp8, ``fp16|bf16|...`` -> bfloat16, else a dict
   ``kv_cache_scheme``), ``quant_dynamic`` (activation scheme, else the
   config groups' ``dynamic`` flags, else unknown).
3. Modes (2.2): fp8 -> gemm fp8_static unless activations are known to be
   dynamic, moe fp8; fp8_block, nvfp4 as themselves; mxfp4 -> gemm bf16, moe
   w4a16_mxfp4; compressed-tensors per 2.3; ModelOpt mixed precision per
   layer target; anything else is refused. kv from the kv algo. If a quant
   algo is present and it is fp8 / fp8_block / nvfp4, or the kv algo is fp8:
   fmha fp8 and kv forced to fp8.
4. Unset modes default to bfloat16 (comm: half).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Set, Tuple

__all__ = ["CheckpointQuant", "infer_quant", "inferred_kv", "MULTIMODAL_TEXT_CONFIG"]

# Architectures whose LLM parameters live under text_config (families_mla 1.2).
MULTIMODAL_TEXT_CONFIG = frozenset({
    "KimiK25ForConditionalGeneration", "Llama4ForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Gemma4ForConditionalGeneration", "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
})  # fmt: skip

_ALGO_ALIASES = {"w4a16_mxfp4": "mxfp4", "mixed-precision": "mixed_precision", "mixedprecision": "mixed_precision"}


class CheckpointQuant(NamedTuple):
    """Quant modes inferred from the checkpoint, before the guards of 3.2.

    ``fmha`` is the *inferred* FMHA mode (bfloat16 when nothing implies fp8);
    the guards act on it."""

    gemm: str
    moe: str
    kv: str
    fmha: str
    comm: str = "half"


def _lower(value) -> Optional[str]:
    if value is None:
        return None
    text = str(value).strip().lower()
    return text or None


def _normalise_algo(value) -> Optional[str]:
    algo = _lower(value)
    return None if algo is None else _ALGO_ALIASES.get(algo, algo)


def _normalise_kv(value) -> Optional[str]:
    algo = _lower(value)
    if algo in ("fp8", "e4m3", "e5m2"):
        return "fp8"
    if algo in ("fp16", "float16", "bf16", "bfloat16"):
        return "bfloat16"
    return algo


def quant_config(config: dict, hf_quant: Optional[dict]) -> dict:
    """The ``quantization_config`` the spec infers from (step 1 of the module doc)."""
    qc = config.get("quantization_config")
    if "quantization_config" not in config and hf_quant:
        section = hf_quant.get("quantization")
        if isinstance(section, dict):
            algo = section.get("quant_algo") or section.get("quantization_algo")
            kv = section.get("kv_cache_quant_algo")
            synthesised = {}
            if algo:
                synthesised["quant_method"] = str(algo).lower()
            if kv:
                synthesised["kv_cache_quant_method"] = str(kv).lower()
            if synthesised:
                return synthesised
    if "quantization_config" not in config:
        archs = config.get("architectures") or [None]
        nested = config.get("text_config")
        if archs[0] in MULTIMODAL_TEXT_CONFIG and isinstance(nested, dict) and "quantization_config" in nested:
            qc = nested["quantization_config"]
    return qc if isinstance(qc, dict) else {}


def _quant_dynamic(qc: dict) -> Optional[bool]:
    scheme = _lower(qc.get("activation_scheme"))
    if scheme == "dynamic":
        return True
    if scheme == "static":
        return False
    groups = qc.get("config_groups")
    if isinstance(groups, dict):
        found = []
        for group in groups.values():
            if not isinstance(group, dict):
                continue
            for key in ("input_activations", "weights"):
                item = group.get(key)
                if isinstance(item, dict) and "dynamic" in item:
                    found.append(bool(item.get("dynamic")))
        if found:
            return any(found)
    return None


def _fields(qc: dict, hf_quant: Optional[dict]) -> Tuple[Optional[str], Optional[str], Optional[bool]]:
    """(quant_algo, kv_cache_algo, quant_dynamic) of 2.1."""
    hq = (hf_quant or {}).get("quantization")
    hq = hq if isinstance(hq, dict) else {}
    algo = _normalise_algo(hq.get("quant_algo") or qc.get("quant_algo") or qc.get("quant_method")
                           or qc.get("quantization_method"))  # fmt: skip
    kv = _normalise_kv(hq.get("kv_cache_quant_algo") or qc.get("kv_cache_quant_algo")
                       or qc.get("kv_cache_quant_method") or qc.get("kv_cache_dtype"))  # fmt: skip
    if kv is None and isinstance(qc.get("kv_cache_scheme"), dict):
        scheme = qc["kv_cache_scheme"]
        kind, bits = str(scheme.get("type", "")).lower(), scheme.get("num_bits")
        if "fp8" in kind:
            kv = "fp8"
        elif kind == "float" and isinstance(bits, int) and not isinstance(bits, bool):
            kv = "fp8" if bits <= 8 else "bfloat16" if bits >= 16 else None
    if algo == "fp8" and (qc.get("weight_block_size") or []):
        algo = "fp8_block"
    return algo, kv, _quant_dynamic(qc)


def _ignore_categories(pattern) -> Set[str]:
    """The layer categories a compressed-tensors ignore pattern covers (2.3)."""
    p = str(pattern).lower()
    out = set()
    if any(k in p for k in ("self_attn", "q_proj", "k_proj", "v_proj", "o_proj")):
        out.add("attention")
    if "shared_expert" in p:
        out.add("shared_experts")
    elif "expert" in p:
        out.add("routing_experts")
    if "lm_head" in p:
        out.add("lm_head")
    if "mlp" in p and "_proj" in p and "expert" not in p:
        out.add("dense_mlp")
    return out


def _compressed_tensors(qc: dict) -> Tuple[Optional[str], Set[str]]:
    """(base algo, ignored categories) of a compressed-tensors config (2.3)."""
    base = None
    for group in (qc.get("config_groups") or {}).values():
        weights = (group or {}).get("weights") or {}
        bits, kind = weights.get("num_bits"), str(weights.get("type", "")).lower()
        if isinstance(bits, int):
            if bits == 4 and "int" in kind:
                base = "int4_wo"
            elif bits == 8 and "int" in kind:
                base = "int8_wo"
            elif bits == 8 and "float" in kind:
                block = str(weights.get("strategy", "")).lower() == "block" or weights.get("block_structure")
                base = "fp8_block" if block else "fp8"
        if base:
            break
    if base is None:
        return None, set()
    ignored: Set[str] = set()
    for pattern in qc.get("ignore") or []:
        ignored |= _ignore_categories(pattern)
    return base, ignored


def _mixed_precision(qc: dict, hf_quant: Optional[dict], dynamic: Optional[bool]) -> Tuple[Optional[str], Optional[str]]:
    """(gemm, moe) of a ModelOpt mixed-precision checkpoint (2.2): the per-layer
    algos of routed-expert targets decide moe, all other targets gemm."""
    aliases = {"e4m3": "fp8", "e5m2": "fp8", "fp4": "nvfp4"}
    gemm_algos: Set[str] = set()
    moe_algos: Set[str] = set()

    def add(target, algo) -> None:
        algo = _lower(algo)
        if algo is None:
            return
        algo = aliases.get(algo, algo)
        name = str(target).lower()
        routed = "shared_expert" not in name and (".experts." in name or "routing_expert" in name)
        (moe_algos if routed else gemm_algos).add(algo)

    def add_layers(layers) -> None:
        if isinstance(layers, dict):
            for target, meta in layers.items():
                algo = meta.get("quant_algo") or meta.get("quantization_algo") or meta.get("quant_method") \
                    if isinstance(meta, dict) else meta
                add(target, algo)

    hq = (hf_quant or {}).get("quantization")
    if isinstance(hq, dict):
        add_layers(hq.get("quantized_layers"))
    add_layers(qc.get("quantized_layers"))
    for group in (qc.get("config_groups") or {}).values() if isinstance(qc.get("config_groups"), dict) else ():
        if not isinstance(group, dict) or not isinstance(group.get("weights"), dict):
            continue
        w = group["weights"]
        algo = _lower(w.get("quant_algo") or w.get("quantization_algo") or w.get("quant_method"))
        algo = aliases.get(algo, algo) if algo else None
        if algo is None and isinstance(w.get("num_bits"), int) and "float" in str(w.get("type", "")).lower():
            algo = {8: "fp8", 4: "nvfp4"}.get(w["num_bits"])
        if algo is not None:
            for target in group.get("targets") or []:
                add(target, algo)
    gemm = ("fp8_static" if dynamic is not True else "fp8") if "fp8" in gemm_algos else \
        "nvfp4" if "nvfp4" in gemm_algos else None  # fmt: skip
    moe = "nvfp4" if "nvfp4" in moe_algos else "fp8" if "fp8" in moe_algos else None
    return gemm, moe


def infer_quant(config: dict, hf_quant: Optional[dict]) -> CheckpointQuant:
    """The checkpoint's modes (module doc); ValueError for an algorithm the spec refuses."""
    qc = quant_config(config, hf_quant)
    algo, kv_algo, dynamic = _fields(qc, hf_quant)
    gemm = moe = kv = fmha = None
    if algo == "fp8":
        gemm, moe = ("fp8" if dynamic is True else "fp8_static"), "fp8"
    elif algo in ("fp8_block", "nvfp4"):
        gemm = moe = algo
    elif algo == "mixed_precision":
        gemm, moe = _mixed_precision(qc, hf_quant, dynamic)
    elif algo == "mxfp4":
        gemm, moe = "bfloat16", "w4a16_mxfp4"
    elif algo == "compressed-tensors":
        base, ignored = _compressed_tensors(qc)
        if base:
            gemm = base if "attention" not in ignored else None
            moe = base if "routing_experts" not in ignored else None
    elif algo is not None:
        raise ValueError(f"Unsupported quant algorithm: {algo}")
    if kv_algo in ("fp8", "bfloat16"):
        kv = kv_algo
    elif kv_algo is not None:
        raise ValueError(f"Unsupported kv cache algorithm: {kv_algo}")
    if algo is not None and (algo in ("fp8", "fp8_block", "nvfp4") or kv_algo == "fp8"):
        fmha = "fp8"
        if kv_algo != "fp8":
            kv = "fp8"
    return CheckpointQuant(gemm=gemm or "bfloat16", moe=moe or "bfloat16", kv=kv or "bfloat16",
                           fmha=fmha or "bfloat16")  # fmt: skip


def inferred_kv(config: dict, hf_quant: Optional[dict]) -> Optional[str]:
    """The KV-cache mode the checkpoint inference sets itself, None when it
    sets none (`infer_quant`'s ``kv`` is then the bfloat16 fallback): the kv
    algo's fp8 / bfloat16, or fp8 when a quant algo implies fp8 attention.
    The data-driven FMHA check of an explicit fmha mode reads every kv slice
    when neither this nor an explicit kv mode exists (docs/spec/options.md 1.2
    step 4)."""
    algo, kv_algo, _ = _fields(quant_config(config, hf_quant), hf_quant)
    if algo is not None and (algo in ("fp8", "fp8_block", "nvfp4") or kv_algo == "fp8"):
        return "fp8"
    return kv_algo if kv_algo in ("fp8", "bfloat16") else None
