"""The model description (docs/spec/engine_step.md 2;
families_mla_gptoss_fp8static.md 1; families_hybrid_vl_databases.md 1.1, 2;
families_qwen35_gemma4.md 1.1, 3.1; families_nemotron.md 1.1, 2.1).

A model is named like the SDK names it (``Qwen/Qwen3-32B-FP8``) and read from
``model_configs/<org>--<name>_config.json`` (plus an optional
``_hf_quant_config.json``) in the best-ranked data root that has it.

Parsing follows the spec's ``_parse_hf_config_json``: for the multimodal
wrappers every LLM field is read from ``text_config`` (the top-level
architecture kept); the family comes from the complete architecture map of
families_mla 1.1. Families this port prices: LLAMA, MOE (GPT-OSS included),
QWEN3VL, QWEN3VL_MOE, DEEPSEEK, KIMIK25, HYBRIDMOE, QWEN35, GEMMA4MIX,
NEMOTRONH, NEMOTRONNAS, DEEPSEEKV4 (families_dsv4 1.1: a `DeepSeekV4Config`)
and DEEPSEEKV32 (families_dsa 1.2: a `DSAConfig`).
The spec's other families are refused naming the architecture and family
(`check_family`).

Per-family extras: DEEPSEEK / KIMIK25 read ``v_head_dim``, ``kv_lora_rank``,
``qk_rope_head_dim`` (``v_head_dim`` is the vllm attention head size, the
other two size the latent KV cache of the serving memory model);
HYBRIDMOE builds a `HybridConfig` (families_hybrid 1.1, including the MiMo
pattern read with 1 = global); QWEN35 a `Qwen35Config` and GEMMA4MIX a
`Gemma4Config` (families_qwen35_gemma4 1.1, 3.1: layer types and the GDN /
per-attention-type geometry); NEMOTRONH a `NemotronHConfig` (families_nemotron
1.1: the layer pattern, the Mamba-2 dims, the shared-expert and latent
widths) and NEMOTRONNAS its consecutive-identical block groups
(`NasBlockGroup`, families_nemotron 2.1); QWEN3VL / QWEN3VL_MOE a `VisionConfig`
from the top-level ``vision_config`` (families_hybrid 2 item 1: the vision
encoder the serving estimates price for images, docs/spec/options.md 4);
Qwen3 / MiniMax-M2 text models get q/k-norm,
nothing else does (Qwen3-VL and Llama-4 included, although their checkpoints
have it).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..data import DataTree
from .checkpoint import MULTIMODAL_TEXT_CONFIG, CheckpointQuant, infer_quant, inferred_kv, quant_config

__all__ = [
    "ARCHITECTURES",
    "DEEPSEEK",
    "DEEPSEEKV4",
    "DEEPSEEKV32",
    "GEMMA4MIX",
    "HYBRIDMOE",
    "KIMIK25",
    "LEFT_FOR_LATER",
    "LLAMA",
    "MOE",
    "NEMOTRONH",
    "NEMOTRONNAS",
    "QWEN3VL",
    "QWEN3VL_MOE",
    "QWEN35",
    "CheckpointQuant",
    "DeepSeekV4Config",
    "DSAConfig",
    "Gemma4Config",
    "HybridConfig",
    "ModelSpec",
    "NasBlockGroup",
    "NemotronHConfig",
    "Qwen35Config",
    "VisionConfig",
    "check_family",
    "infer_quant",
    "load_model",
    "model_config_path",
]

LLAMA = "LLAMA"
MOE = "MOE"
HYBRIDMOE = "HYBRIDMOE"
QWEN3VL = "QWEN3VL"
QWEN3VL_MOE = "QWEN3VL_MOE"
DEEPSEEK = "DEEPSEEK"
KIMIK25 = "KIMIK25"
QWEN35 = "QWEN35"
GEMMA4MIX = "GEMMA4MIX"
NEMOTRONH = "NEMOTRONH"
NEMOTRONNAS = "NEMOTRONNAS"
DEEPSEEKV4 = "DEEPSEEKV4"
DEEPSEEKV32 = "DEEPSEEKV32"

# families_mla 1.1: the spec's complete architecture -> family map, in its order.
ARCHITECTURES: Dict[str, str] = {
    "LlamaForCausalLM": LLAMA,
    "Qwen2ForCausalLM": LLAMA,
    "Qwen3ForCausalLM": LLAMA,
    "MiMoForCausalLM": LLAMA,
    "Qwen3VLForConditionalGeneration": QWEN3VL,
    "Qwen3VLMoeForConditionalGeneration": QWEN3VL_MOE,
    "DeepSeekForCausalLM": DEEPSEEK,
    "DeepseekV3ForCausalLM": DEEPSEEK,
    "DeepseekV32ForCausalLM": "DEEPSEEKV32",
    "GlmMoeDsaForCausalLM": "DEEPSEEKV32",
    "DeepseekV4ForCausalLM": "DEEPSEEKV4",
    "KimiK25ForConditionalGeneration": KIMIK25,
    "NemotronForCausalLM": NEMOTRONNAS,
    "DeciLMForCausalLM": NEMOTRONNAS,
    "NemotronHForCausalLM": NEMOTRONH,
    "MixtralForCausalLM": MOE,
    "GptOssForCausalLM": MOE,
    "Qwen2MoeForCausalLM": MOE,
    "Qwen3MoeForCausalLM": MOE,
    "MiniMaxM2ForCausalLM": MOE,
    "MiniMaxM3ForCausalLM": "MINIMAXM3",
    "MiniMaxM3SparseForConditionalGeneration": "MINIMAXM3",
    "MiMoV2FlashForCausalLM": HYBRIDMOE,
    "Llama4ForConditionalGeneration": HYBRIDMOE,
    "Qwen3_5ForConditionalGeneration": QWEN35,
    "Qwen3_5MoeForConditionalGeneration": QWEN35,
    "Gemma4ForConditionalGeneration": GEMMA4MIX,
}
# Families of the spec this port does not price yet (their goldens are wave 2).
LEFT_FOR_LATER = frozenset({"MINIMAXM3"})
QK_NORM_ARCHITECTURES = frozenset({"Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM"})
_MLA_ARCHITECTURES = frozenset({"DeepSeekForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"})
# Families that are always MoE (families_mla 1.1, the priced ones; GEMMA4MIX
# even for dense variants). QWEN35 is MoE iff it has experts, NEMOTRONH iff its
# layer pattern has an 'E' (`ModelSpec.is_moe`); NEMOTRONNAS is dense.
MOE_FAMILIES = frozenset({MOE, DEEPSEEK, KIMIK25, HYBRIDMOE, QWEN3VL_MOE, GEMMA4MIX})
# MoE workload distribution: "power_law" + "_<alpha>" (families_hybrid 6.1 item 10;
# families_qwen35_gemma4 1.2, 3.2).
_POWER_LAW_ALPHA = {MOE: "1.2", QWEN3VL_MOE: "1.2", HYBRIDMOE: "1.01", DEEPSEEK: "1.01", KIMIK25: "1.01",
                    QWEN35: "1.2", GEMMA4MIX: "1.01", NEMOTRONH: "1.01"}  # fmt: skip
# DEEPSEEKV4 (families_dsv4 1.3): always MoE, "power_law_1.01".
MOE_FAMILIES = MOE_FAMILIES | {DEEPSEEKV4}
_POWER_LAW_ALPHA[DEEPSEEKV4] = "1.01"
# DEEPSEEKV32 (families_dsa 3): always MoE, "power_law_1.01".
MOE_FAMILIES = MOE_FAMILIES | {DEEPSEEKV32}
_POWER_LAW_ALPHA[DEEPSEEKV32] = "1.01"


class HybridConfig(NamedTuple):
    """``HybridMoEConfig`` (families_hybrid 1.1): per-layer patterns and the SWA overrides (0 = model value)."""

    attn_layer_pattern: Tuple[int, ...]  # 1 = global (full) attention, 0 = SWA / local
    moe_layer_freq: Tuple[int, ...]  # 1 = MoE FFN, 0 = dense
    swa_num_kv_heads: int = 0
    swa_head_dim: int = 0
    swa_v_head_dim: int = 0
    global_v_head_dim: int = 0
    sliding_window_size: int = 0
    dense_inter_size: int = 0


class Qwen35Config(NamedTuple):
    """``Qwen35Config`` (families_qwen35_gemma4 1.1): the layer types and the GDN geometry."""

    layer_types: Tuple[str, ...]  # "linear_attention" (GDN) / "full_attention"; other values are not counted
    linear_num_key_heads: int  # nk
    linear_key_head_dim: int  # hk
    linear_num_value_heads: int  # nv
    linear_value_head_dim: int  # hv
    linear_conv_kernel_dim: int  # d_conv
    shared_expert_inter_size: int = 0  # S (MoE variant; 0 = no shared expert)

    def layer_counts(self) -> Tuple[int, int]:
        """(GDN layers, full-attention layers)."""
        return self.layer_types.count("linear_attention"), self.layer_types.count("full_attention")


class Gemma4Config(NamedTuple):
    """``Gemma4MixConfig`` (families_qwen35_gemma4 3.1): layer types and the per-type attention geometry."""

    layer_types: Tuple[str, ...]  # "sliding_attention" / "full_attention" (validated)
    swa_num_kv_heads: int
    swa_head_dim: int
    global_num_kv_heads: int
    global_head_dim: int
    sliding_window_size: int = 0
    attention_k_eq_v: bool = False
    # max_position_embeddings (the model's context length): the KV max-token
    # search returns it when the cache saturates (families_qwen35_gemma4 9.3)
    context_length: int = 0

    def layer_counts(self) -> Tuple[int, int]:
        """(SWA layers, global layers)."""
        return self.layer_types.count("sliding_attention"), self.layer_types.count("full_attention")

    def kv_heads_per_gpu(self, tp: int) -> Tuple[int, int]:
        """(SWA, global) KV heads on one GPU: ``ceil(Hkv / tp)`` of each type."""
        return (self.swa_num_kv_heads + tp - 1) // tp, (self.global_num_kv_heads + tp - 1) // tp


class NemotronHConfig(NamedTuple):
    """``NemotronHConfig`` (families_nemotron 1.1): the layer pattern and the
    model-level Mamba-2 / MoE widths (the Mamba kernels read them unsharded)."""

    pattern: str  # one character per layer: M (Mamba-2), * (attention), E (MoE), - (dense MLP)
    mamba_heads: int  # mamba_num_heads
    mamba_head_dim: int
    d_state: int  # ssm_state_size
    d_conv: int  # conv_kernel
    n_groups: int
    chunk_size: int  # a lookup key only
    shared_inter: Optional[int] = 0  # moe_shared_expert_intermediate_size (I_sh); a present null stays None
    latent: int = 0  # moe_latent_size (0 = no latent MoE)

    def layer_counts(self) -> Tuple[int, int, int, int]:
        """(Mamba, attention, MoE, dense-MLP) layers; other characters are not counted."""
        p = self.pattern
        return p.count("M"), p.count("*"), p.count("E"), p.count("-")


class NasBlockGroup(NamedTuple):
    """A run of consecutive identical NemotronNAS blocks (families_nemotron 2.1):
    the block key ``(n_heads_in_group, attn_no_op, ffn_mult, ffn_no_op)`` as
    the checkpoint writes it, and how many blocks share it."""

    n_heads_in_group: Optional[int]  # None when the block's attention has none
    attn_no_op: bool
    ffn_mult: float
    ffn_no_op: bool
    count: int

    @property
    def key(self) -> tuple:
        return self.n_heads_in_group, self.attn_no_op, self.ffn_mult, self.ffn_no_op


class DeepSeekV4Config(NamedTuple):
    """``DeepSeekV4Config`` (families_dsv4 1.1): the compressed-attention and
    mHC geometry; ``compress_ratios`` the first ``L`` entries (each 0, 4 or 128);
    ``expert_fp4`` whether the checkpoint says ``expert_dtype == "fp4"`` (1.2)."""

    q_lora_rank: int
    o_lora_rank: int
    o_groups: int
    head_dim: int
    qk_rope_head_dim: int
    index_head_dim: int
    index_n_heads: int
    index_topk: int
    sliding_window: int
    compress_ratios: Tuple[int, ...]
    hc_mult: int
    hc_sinkhorn_iters: int
    expert_fp4: bool = False


class DSAConfig(NamedTuple):
    """DEEPSEEKV32's extras (families_dsa 1.2, 1.3, 2.2): the latent / indexer
    widths of the KV cache, the sglang full-layer fraction ``w`` (GLM-5.2:
    21/78; 1.0 without ``index_topk_freq``), and whether a GLM checkpoint's
    exclusion globs keep the DSA projections / the shared experts at bfloat16
    (plain substring tests for ``self_attn`` / ``shared_expert``)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    index_head_dim: int
    index_n_heads: int
    index_topk: int
    sglang_full_fraction: float = 1.0
    attention_unquantized: bool = False
    shared_experts_unquantized: bool = False


class VisionConfig(NamedTuple):
    """Qwen3-VL's vision encoder (the spec's ``VisionEncoderConfig``,
    families_hybrid 2 item 1): a ViT of ``depth`` blocks, then a PatchMerger
    projector of two GEMMs (``merged -> merged -> out_hidden_size`` with
    ``merged = hidden_size * spatial_merge_size ** 2``), run once plus once
    per deepstack layer. Its RoPE is a separate elementwise op (the spec's
    ``partial_rotary_factor = 0.5`` only switches it on)."""

    depth: int
    hidden_size: int
    num_heads: int
    intermediate_size: int
    patch_size: int
    temporal_patch_size: int
    spatial_merge_size: int
    out_hidden_size: int
    deepstack_visual_indexes: Tuple[int, ...] = ()

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def merged_width(self) -> int:
        """The projector's input width: ``spatial_merge_size ** 2`` patches side by side."""
        return self.hidden_size * self.spatial_merge_size**2

    @property
    def projector_instances(self) -> int:
        """The main merger plus one per deepstack layer."""
        return 1 + len(self.deepstack_visual_indexes)


class ModelSpec(NamedTuple):
    """The parsed fields, plus where they came from."""

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
    v_head_dim: int = 0  # DEEPSEEK / KIMIK25 (families_mla 3.1: the vllm attention head size)
    hybrid: Optional[HybridConfig] = None  # HYBRIDMOE
    weight_block_size: int = 128  # quantization_config.weight_block_size[0] (the fp8_block MoE check)
    # DEEPSEEK / KIMIK25: the MLA latent KV geometry (0 = not in the config; the
    # KV cache size then takes DeepSeek-V3's 512 and 64, see StepContext.kv_elements_per_token)
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qwen35: Optional[Qwen35Config] = None  # QWEN35
    gemma4: Optional[Gemma4Config] = None  # GEMMA4MIX
    nemotron_h: Optional[NemotronHConfig] = None  # NEMOTRONH
    # NEMOTRONNAS: the block groups in layer order; None without block configs
    # (and always for NemotronForCausalLM): both op lists are then empty.
    nas_groups: Optional[Tuple[NasBlockGroup, ...]] = None
    dsv4: Optional[DeepSeekV4Config] = None  # DEEPSEEKV4
    dsa: Optional[DSAConfig] = None  # DEEPSEEKV32
    # The KV-cache mode the checkpoint inference sets itself (None: none, and
    # ``quant.kv`` is the bfloat16 fallback); docs/spec/options.md 1.2 step 4.
    checkpoint_kv: Optional[str] = None
    # num_nextn_predict_layers of the (text) config, 0 when absent: what
    # nextn='auto' resolves to (docs/spec/options.md 2.2 item 1)
    nextn_layers: int = 0
    # QWEN3VL / QWEN3VL_MOE with a vision_config: the encoder of the image path
    vision: Optional[VisionConfig] = None

    @property
    def is_moe(self) -> bool:
        """Whether the MoE layout (moe_tp, moe_ep) applies: the MoE families,
        QWEN35 when it has experts and NEMOTRONH when its pattern has MoE
        layers (the spec's ``check_is_moe``)."""
        if self.family == QWEN35:
            return self.experts > 0
        if self.family == NEMOTRONH:
            return self.nemotron_h is not None and "E" in self.nemotron_h.pattern
        return self.family in MOE_FAMILIES

    @property
    def gemma4_dense(self) -> bool:
        """A dense Gemma 4 variant (``not topk or not E``): no routed experts, moe_ep must be 1."""
        return self.family == GEMMA4MIX and (not self.topk or not self.experts)

    def heads_per_gpu(self, tp: int) -> Tuple[int, int]:
        """(n, n_kv): ``H // tp`` and ``ceil(Hkv / tp)`` (so n_kv >= 1 even when tp > Hkv)."""
        return self.heads // tp, (self.kv_heads + tp - 1) // tp

    def kv_elements_per_token(self, tp: int) -> int:
        """KV cache elements per token on one GPU over all layers (the spec's
        ``get_kvcache_elements_per_token``): the MLA latent ``L * (kv_lora_rank
        + qk_rope_head_dim)`` (DeepSeek-V3 defaults 512 and 64 when the config
        has none) for DEEPSEEK / KIMIK25, GEMMA4MIX's ``2 * (swa layers *
        ceil(swa Hkv / tp) * swa d + global layers * ceil(global Hkv / tp) *
        global d)``, else ``ceil(Hkv / tp) * d * L * 2``."""
        if self.family in (DEEPSEEK, KIMIK25):
            return self.num_layers * ((self.kv_lora_rank or 512) + (self.qk_rope_head_dim or 64))
        if self.family == DEEPSEEKV32 and self.dsa is not None:  # the spec's MLA branch; the serving KV size
            # is families_dsa 8 (aicsql.spec.kernels.dsa.kv_bytes_per_token), not elements * kv bytes
            return self.num_layers * ((self.dsa.kv_lora_rank or 512) + (self.dsa.qk_rope_head_dim or 64))
        if self.family == GEMMA4MIX and self.gemma4 is not None:
            # families_qwen35_gemma4 9.1: per layer type, no window cap (the serving
            # memory model sizes a sequence with aicsql.spec.serving.kvcache instead)
            g = self.gemma4
            swa, glob = g.layer_counts()
            swa_nkv, glob_nkv = g.kv_heads_per_gpu(tp)
            return 2 * (swa * swa_nkv * g.swa_head_dim + glob * glob_nkv * g.global_head_dim)
        return (self.kv_heads + tp - 1) // tp * self.head_dim * self.num_layers * 2

    def cp_kv_elements_per_layer_token(self, tp: int, kv_bytes: int, comm_bytes: int = 2) -> float:
        """The context-parallel KV all-gather's elements per token (one layer):
        ``get_kvcache_bytes_per_sequence(1) / num_layers / comm_bytes``, i.e.
        ``1 * kv_bytes * elements_per_token / L / 2`` in that order (a float)."""
        return 1 * kv_bytes * self.kv_elements_per_token(tp) / self.num_layers / comm_bytes


def check_family(name: str, architecture: str, family: str) -> None:
    """ValueError for a family of the spec this port does not price yet."""
    if family in LEFT_FOR_LATER:
        raise ValueError(
            f"unsupported: model {name!r} ({architecture}, family {family}); the {family} family is left for "
            "later in aicsql.spec"
        )


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


def _hybrid_config(arch: str, cfg: dict, layers: int) -> HybridConfig:
    """families_hybrid 1.1: MiMo's patterns verbatim (1 read as *global*), Llama-4's from i % 2 and the MoE step."""
    if arch == "MiMoV2FlashForCausalLM":
        freq = cfg.get("moe_layer_freq", [])
        moe = tuple(freq) if isinstance(freq, list) else tuple([freq] * layers)
        attn = tuple(cfg.get("hybrid_layer_pattern", []))
        if len(attn) != layers or len(moe) != layers:
            raise ValueError(
                f"Hybrid pattern length mismatch for {arch}: expected {layers} entries, got attn={len(attn)} "
                f"moe={len(moe)}"
            )
        if any(v not in (0, 1) for v in attn + moe):
            raise ValueError(f"Hybrid patterns for {arch} must contain only 0/1 values")
        return HybridConfig(attn, moe, cfg.get("swa_num_key_value_heads", 0), cfg.get("swa_head_dim", 0),
                            cfg.get("swa_v_head_dim", 0), cfg.get("v_head_dim", 0), cfg.get("sliding_window_size", 0),
                            0)  # fmt: skip
    step = cfg.get("interleave_moe_layer_step", 1)
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        raise ValueError(f"interleave_moe_layer_step must be a positive integer, got {step}")
    return HybridConfig(
        tuple(i % 2 for i in range(layers)),
        tuple(1 if (i + 1) % step == 0 else 0 for i in range(layers)),
        sliding_window_size=cfg.get("attention_chunk_size", 0),
        dense_inter_size=cfg.get("intermediate_size_mlp", 0),
    )


def _int_field(cfg: dict, key: str, path: str) -> int:
    """A required integer field (the spec's ``config[key]``: a missing key is an error)."""
    try:
        value = cfg[key]
    except KeyError:
        raise ValueError(f"{path}: {key} is missing") from None
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
        raise ValueError(f"{path}: {key} = {value!r} is not an integer")
    return int(value)


def _qwen35_config(cfg: dict, layers: int, path: str) -> Qwen35Config:
    """families_qwen35_gemma4 1.1: ``layer_types`` must have one entry per layer (values unchecked)."""
    layer_types = cfg.get("layer_types") or []
    if len(layer_types) != layers:
        raise ValueError(f"Qwen3.5 layer_types length {len(layer_types)} != num_hidden_layers {layers}")
    return Qwen35Config(
        tuple(layer_types),
        *(_int_field(cfg, key, path) for key in ("linear_num_key_heads", "linear_key_head_dim",
                                                  "linear_num_value_heads", "linear_value_head_dim",
                                                  "linear_conv_kernel_dim")),
        shared_expert_inter_size=int(cfg.get("shared_expert_intermediate_size", 0) or 0),
    )  # fmt: skip


_GEMMA4_LAYER_TYPES = ("sliding_attention", "full_attention")


def _gemma4_config(cfg: dict, layers: int, path: str) -> Gemma4Config:
    """families_qwen35_gemma4 3.1: validated layer types; the global geometry falls back to the SWA one."""
    layer_types = cfg.get("layer_types") or []
    if len(layer_types) != layers:
        raise ValueError(f"Gemma 4 layer_types length {len(layer_types)} != num_hidden_layers {layers}")
    if any(t not in _GEMMA4_LAYER_TYPES for t in layer_types):
        raise ValueError("Gemma 4 layer_types must contain only 'sliding_attention' or 'full_attention'")
    swa_kv = _int_field(cfg, "num_key_value_heads", path)
    swa_hd = _int_field(cfg, "head_dim", path)
    glob_kv = cfg.get("num_global_key_value_heads")
    glob_hd = cfg.get("global_head_dim")
    return Gemma4Config(
        tuple(layer_types),
        swa_kv,
        swa_hd,
        swa_kv if glob_kv is None else int(glob_kv),
        swa_hd if glob_hd is None else int(glob_hd),
        int(cfg.get("sliding_window", 0) or 0),
        bool(cfg.get("attention_k_eq_v", False)),
        int(cfg.get("max_position_embeddings") or 0),
    )


# families_nemotron 1.1: ``layers_block_type`` entries -> pattern characters.
_NEMOTRON_H_BLOCK_TYPES = {"mamba": "M", "moe": "E", "attention": "*", "mlp": "-", "dense": "-", "ffn": "-",
                           "M": "M", "E": "E", "*": "*", "-": "-"}  # fmt: skip


def _nemotron_h_config(cfg: dict, path: str) -> NemotronHConfig:
    """families_nemotron 1.1: ``hybrid_override_pattern`` if it is a string,
    else the mapped ``layers_block_type`` list (an unknown entry is an error;
    unknown pattern characters are kept and never counted); the Mamba-2 dims
    are required."""
    pattern = cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str):
        blocks = cfg.get("layers_block_type")
        if not isinstance(blocks, list):
            raise ValueError(f"{path}: NemotronH config must define 'hybrid_override_pattern' or "
                             "'layers_block_type'.")  # fmt: skip
        chars = []
        for block in blocks:
            char = _NEMOTRON_H_BLOCK_TYPES.get(block) if isinstance(block, str) else None
            if char is None:
                raise ValueError(f"Unsupported NemotronH layer block type '{block}'. Supported values: "
                                 f"{', '.join(sorted(_NEMOTRON_H_BLOCK_TYPES))}")  # fmt: skip
            chars.append(char)
        pattern = "".join(chars)
    shared = cfg.get("moe_shared_expert_intermediate_size", 0)
    return NemotronHConfig(
        pattern,
        *(_int_field(cfg, key, path) for key in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size",
                                                  "conv_kernel", "n_groups", "chunk_size")),
        shared_inter=None if shared is None else int(shared),
        latent=int(cfg.get("moe_latent_size") or 0),
    )  # fmt: skip


def _nas_groups(arch: str, cfg: dict) -> Optional[Tuple[NasBlockGroup, ...]]:
    """families_nemotron 2.1: consecutive blocks with equal keys (Python ``==``:
    ``1 == 1.0``) merged into one group; None without ``block_configs`` (and
    always for ``NemotronForCausalLM``)."""
    if arch != "DeciLMForCausalLM":
        return None
    groups: List[NasBlockGroup] = []
    for block in cfg.get("block_configs") or []:
        attention = block.get("attention", {})
        ffn = block.get("ffn", {})
        key = (attention.get("n_heads_in_group"), attention.get("no_op", False), ffn.get("ffn_mult", 3.5),
               ffn.get("no_op", False))  # fmt: skip
        if groups and groups[-1].key == key:
            groups[-1] = groups[-1]._replace(count=groups[-1].count + 1)
        else:
            groups.append(NasBlockGroup(*key, count=1))
    return tuple(groups) or None


_DSV4_RATIOS = (0, 4, 128)


def _dsv4_config(cfg: dict, layers: int, path: str) -> DeepSeekV4Config:
    """families_dsv4 1.1: required fields; ``compress_ratios`` at least ``L``
    long (its first ``L`` entries kept), each 0, 4 or 128."""
    if "compress_ratios" not in cfg:
        raise ValueError(f"{path}: compress_ratios is missing")
    ratios = tuple(cfg["compress_ratios"])
    if len(ratios) < layers:
        raise ValueError(
            f"DeepSeek-V4 compress_ratios length {len(ratios)} is smaller than num_hidden_layers {layers}"
        )
    ratios = ratios[:layers]
    unknown = set(ratios) - set(_DSV4_RATIOS)
    if unknown:
        raise ValueError(f"Unsupported DeepSeek-V4 compress_ratios: {sorted(unknown)}")
    fields = [_int_field(cfg, key, path) for key in ("q_lora_rank", "o_lora_rank", "o_groups", "head_dim",
                                                      "qk_rope_head_dim", "index_head_dim", "index_n_heads",
                                                      "index_topk", "sliding_window")]  # fmt: skip
    for key in ("compress_rope_theta", "num_hash_layers", "hc_eps", "n_shared_experts"):  # read, unused
        if key not in cfg:
            raise ValueError(f"{path}: {key} is missing")
    return DeepSeekV4Config(*fields, tuple(int(r) for r in ratios), _int_field(cfg, "hc_mult", path),
                            _int_field(cfg, "hc_sinkhorn_iters", path),
                            str(cfg.get("expert_dtype", "") or "").lower() == "fp4")  # fmt: skip


def _dsv4_quant(q: CheckpointQuant, cfg: dict) -> CheckpointQuant:
    """families_dsv4 1.2 rules 1 and 2: FP4 experts -> moe ``w4a8_mxfp4_mxfp8``; kv always fp8."""
    moe = "w4a8_mxfp4_mxfp8" if str(cfg.get("expert_dtype", "") or "").lower() == "fp4" else q.moe
    return q._replace(moe=moe, kv="fp8")


def _dsa_full_fraction(cfg: dict, layers: int) -> float:
    """families_dsa 1.3: the fraction of layers that run the DSA indexer (sglang)."""
    freq = int(cfg.get("index_topk_freq", 1) or 1)
    pattern = cfg.get("index_topk_pattern")
    offset = cfg.get("index_skip_topk_offset")
    if freq <= 1 and not pattern:
        return 1.0

    def skips(lid: int) -> bool:
        if pattern is not None:
            return lid < len(pattern) and pattern[lid] == "S"
        if offset is not None:
            return max(lid - offset + 1, 0) % freq != 0
        return max(lid - 1, 0) % freq != 0

    full = sum(1 for lid in range(int(layers)) if not skips(lid))
    return full / int(layers) if layers else 1.0


def _dsa_config(arch: str, cfg: dict, hf_quant: Optional[dict], layers: int, path: str) -> DSAConfig:
    """families_dsa 1.2 (the eight DSA fields are required), 1.3, 2.2."""
    fields = [_int_field(cfg, key, path) for key in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                                      "qk_rope_head_dim", "v_head_dim", "index_head_dim",
                                                      "index_n_heads", "index_topk")]  # fmt: skip
    qc = cfg.get("quantization_config")
    qc = qc if isinstance(qc, dict) else {}
    hq = (hf_quant or {}).get("quantization") if isinstance(hf_quant, dict) else None
    hq = hq if isinstance(hq, dict) else {}
    globs = [*(qc.get("modules_to_not_convert") or []), *(qc.get("exclude_modules") or []), *(qc.get("ignore") or []),
             *(hq.get("exclude_modules") or []), *(hq.get("ignore") or [])]  # fmt: skip
    glm = arch == "GlmMoeDsaForCausalLM"
    return DSAConfig(
        *fields,
        sglang_full_fraction=_dsa_full_fraction(cfg, layers),
        attention_unquantized=glm and any("self_attn" in str(g) for g in globs),
        shared_experts_unquantized=glm and any("shared_expert" in str(g) for g in globs),
    )


def _vision_config(vision: dict, path: str) -> VisionConfig:
    """The spec's ``VisionEncoderConfig`` fields (every one required, as the
    spec indexes them; ``deepstack_visual_indexes`` defaults to none)."""
    if not isinstance(vision, dict):
        raise ValueError(f"{path}: expected 'vision_config' to be a dict, got {type(vision).__name__}")
    fields = [_int_field(vision, key, f"{path}: vision_config") for key in VisionConfig._fields[:-1]]
    return VisionConfig(*fields, tuple(vision.get("deepstack_visual_indexes") or ()))


def parse_model(name: str, config: dict, hf_quant: Optional[dict], path: str) -> ModelSpec:
    """The fields of a config.json document (see module doc)."""
    archs = config.get("architectures") or []
    arch = archs[0] if archs else None
    cfg = config
    vision = config.get("vision_config")  # top level, read before the text config is unwrapped
    if arch in MULTIMODAL_TEXT_CONFIG and "text_config" in config:
        text = config["text_config"]
        if not isinstance(text, dict):
            raise ValueError(f"{path}: expected 'text_config' to be a dict for architecture {arch}, "
                             f"got {type(text).__name__}")  # fmt: skip
        cfg = {**text, "architectures": [arch]}
    family = ARCHITECTURES.get(arch)
    if family is None:
        raise ValueError(
            f"unsupported architecture {arch!r} of model {name!r}; supported: {', '.join(ARCHITECTURES)}"
        )
    check_family(name, arch, family)
    try:
        L = cfg.get("num_hidden_layers")
        if L is None:
            blocks, pattern = cfg.get("layers_block_type"), cfg.get("hybrid_override_pattern")
            L = len(blocks) if isinstance(blocks, list) else len(pattern) if isinstance(pattern, str) else None
        if L is None:
            raise ValueError(f"{path}: the model config defines neither num_hidden_layers nor a layer pattern")
        h = int(cfg["hidden_size"])
        H = int(cfg["num_attention_heads"])
        V = int(cfg["vocab_size"])
    except KeyError as e:
        raise ValueError(f"{path}: {e.args[0]} is missing") from None
    d = cfg.get("head_dim") or cfg.get("attention_head_dim") or (h // H if H > 0 else 0)
    inter = cfg.get("intermediate_size") or 0
    topk = cfg.get("num_experts_per_tok")
    if topk is None:
        topk = cfg.get("top_k_experts")
    block = (quant_config(config, hf_quant).get("weight_block_size") or [128, 128])[0]
    alpha = _POWER_LAW_ALPHA.get(family)
    return ModelSpec(
        name=name,
        architecture=arch,
        family=family,
        num_layers=int(L),
        hidden=h,
        heads=H,
        kv_heads=int(cfg.get("num_key_value_heads") or 0),
        head_dim=int(d),
        inter=int(inter),
        vocab=V,
        topk=int(topk or 0),
        experts=int(cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts", 0) or 0),
        moe_inter=int(cfg.get("moe_intermediate_size", 0) or cfg.get("intermediate_size", 0) or 0),
        use_qk_norm=arch in QK_NORM_ARCHITECTURES,
        distribution=f"power_law_{alpha}" if alpha else None,
        quant=(_dsv4_quant(infer_quant(config, hf_quant), cfg) if family == DEEPSEEKV4
               else infer_quant(config, hf_quant)),  # fmt: skip
        config_path=path,
        v_head_dim=int(cfg.get("v_head_dim", 0) or 0) if arch in _MLA_ARCHITECTURES else 0,
        hybrid=_hybrid_config(arch, cfg, int(L)) if family == HYBRIDMOE else None,
        weight_block_size=block,
        kv_lora_rank=int(cfg.get("kv_lora_rank", 0) or 0) if arch in _MLA_ARCHITECTURES else 0,
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim", 0) or 0) if arch in _MLA_ARCHITECTURES else 0,
        qwen35=_qwen35_config(cfg, int(L), path) if family == QWEN35 else None,
        gemma4=_gemma4_config(cfg, int(L), path) if family == GEMMA4MIX else None,
        nemotron_h=_nemotron_h_config(cfg, path) if family == NEMOTRONH else None,
        nas_groups=_nas_groups(arch, cfg) if family == NEMOTRONNAS else None,
        dsv4=_dsv4_config(cfg, int(L), path) if family == DEEPSEEKV4 else None,
        dsa=_dsa_config(arch, cfg, hf_quant, int(L), path) if family == DEEPSEEKV32 else None,
        checkpoint_kv="fp8" if family == DEEPSEEKV4 else inferred_kv(config, hf_quant),
        nextn_layers=int(cfg.get("num_nextn_predict_layers") or 0),
        vision=_vision_config(vision, path) if family in (QWEN3VL, QWEN3VL_MOE) and vision else None,
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
