"""Qwen3-VL's vision encoder on the Python path (docs/spec/options.md 4.3,
4.5; families_hybrid_vl_databases.md 2, 3.6): how many tokens an image
becomes, and the encoder's op list.

Token counts
    An image of ``H x W`` pixels is cut into ``patch x patch`` patches, the
    ViT runs over all of them (``pre = (H // P) * (W // P)`` per image), and
    the merger fuses ``M x M`` neighbours into one LLM token (``post = (H //
    (P*M)) * (W // (P*M))``). No image when H or W is 0, or when either
    count is 0 (an image smaller than one merged patch). A request then
    carries ``post * num_images`` image tokens in front of its text: the
    LLM's effective input length ``isl + post * num_images``.

Encoder ops
    ``depth`` ViT blocks (add-norm, QKV GEMM, attention, output GEMM,
    all-reduce, add-norm, FFN up, activation, FFN down, all-reduce, then the
    RoPE application as its own elementwise op) and the two-GEMM merger, run
    ``1 + len(deepstack)`` times. Everything is bfloat16 whatever the LLM's
    quant modes. Two layouts, as the spec's ``build_encoder_ops``:

    * encoder data parallelism (the default; vLLM's ``mm_encoder_tp_mode =
      "data"``, SGLang's ``--mm-enable-dp-encoder``): every tp rank holds the
      whole encoder (ops built at width 1, the all-reduces free) and takes
      its share of the images; with tp > 1 the merged embeddings are then
      all-gathered (one NCCL all-gather of ``out_hidden * instances * tp``
      elements per merged token);
    * sharded (``enable_encoder_dp = False``): the heads and the FFN split
      over tp like the LLM's, which needs tp to divide both (the spec's
      ValueError when it builds the model, a text-only estimate included).

The spec builds these ops whenever the checkpoint has a vision config, images
or not; only the serving estimates run them (`aicsql.spec.serving.encoder`).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from .engine import DeploymentRefused
from .model import VisionConfig
from .ops import GEMM, NCCL, CustomAllReduce, ElementWise, EncoderAttention, Op

__all__ = ["ImageTokens", "NO_IMAGE_TOKENS", "image_tokens", "encoder_ops", "VIT_QUANT"]

VIT_QUANT = "bfloat16"  # the ViT's GEMMs and attention, whatever the LLM runs in


class ImageTokens(NamedTuple):
    """Per image: the tokens the LLM sees (after the merge) and the patches
    the ViT runs over (before it)."""

    post_merge: int
    pre_merge: int

    def __bool__(self) -> bool:
        return self.post_merge > 0


NO_IMAGE_TOKENS = ImageTokens(0, 0)


def image_tokens(vision: Optional[VisionConfig], height: int, width: int) -> ImageTokens:
    """The token counts of one ``height x width`` image (the spec's
    ``_encoder_pre_merge_per_visual``); `NO_IMAGE_TOKENS` without a vision
    encoder, without image dimensions, or for an image under one merged patch."""
    if vision is None or not (height > 0 and width > 0):
        return NO_IMAGE_TOKENS
    merged_patch = vision.patch_size * vision.spatial_merge_size
    post = (height // merged_patch) * (width // merged_patch)
    pre = (height // vision.patch_size) * (width // vision.patch_size)
    if post <= 0 or pre <= 0:
        return NO_IMAGE_TOKENS
    return ImageTokens(post, pre)


def _check_sharding(vision: VisionConfig, tp: int) -> None:
    """A sharded encoder needs tp to divide its heads and FFN width (the spec's texts)."""
    if vision.num_heads % tp != 0:
        raise DeploymentRefused(f"ViT num_heads ({vision.num_heads}) must be divisible by tp_size ({tp})")
    if vision.intermediate_size % tp != 0:
        raise DeploymentRefused(
            f"ViT intermediate_size ({vision.intermediate_size}) must be divisible by tp_size ({tp})"
        )


def _vit_blocks(vision: VisionConfig, width: int) -> List[Op]:
    """The ``depth`` transformer blocks at sharding width `width` (1 = whole)."""
    depth, h, heads, inter, d = (vision.depth, vision.hidden_size, vision.num_heads, vision.intermediate_size,
                                 vision.head_dim)  # fmt: skip
    # the spec's RoPE op: 6 * heads * head_dim values in and out per patch (the
    # 2-axis vision RoPE rotates the full head of Q and K, partial factor or not)
    rope_width = 6 * (heads // width) * d
    return [
        ElementWise("encoder_add_norm_1", depth, 2 * h, 2 * h),
        GEMM("encoder_qkv_gemm", depth, 3 * heads * d // width, h, VIT_QUANT),
        EncoderAttention("encoder_attention", depth, heads // width, d, VIT_QUANT),
        GEMM("encoder_proj_gemm", depth, h, heads * d // width, VIT_QUANT, low_precision_input=True),
        CustomAllReduce("encoder_ar_1", depth, h, width),
        ElementWise("encoder_add_norm_2", depth, 2 * h, 2 * h),
        GEMM("encoder_ffn1_gemm", depth, inter // width, h, VIT_QUANT),
        ElementWise("encoder_act", depth, inter // width, inter // width),
        GEMM("encoder_ffn2_gemm", depth, h, inter // width, VIT_QUANT, low_precision_input=True),
        CustomAllReduce("encoder_ar_2", depth, h, width),
        ElementWise("encoder_rope_apply", depth, rope_width, rope_width),
    ]


def _merger(vision: VisionConfig, width: int) -> List[Op]:
    """The PatchMerger, once per projector instance: a row-parallel GEMM
    (output sharded) and its activation, a column-parallel GEMM (input
    sharded), then the all-reduce of its output."""
    instances, merged, out = vision.projector_instances, vision.merged_width, vision.out_hidden_size
    return [
        GEMM("encoder_projector_fc0_gemm", instances, merged // width, merged, VIT_QUANT),
        ElementWise("encoder_projector_fc0_act", instances, merged // width, merged // width),
        GEMM("encoder_projector_fc1_gemm", instances, out, merged // width, VIT_QUANT),
        CustomAllReduce("encoder_projector_ar", instances, out, width),
    ]


def encoder_ops(vision: VisionConfig, tp: int, encoder_dp: bool = True) -> List[Op]:
    """The encoder's op list in the spec's order for a worker of `tp` GPUs
    (module doc); `DeploymentRefused` when a sharded encoder does not divide."""
    if not encoder_dp:
        if tp > 1:
            _check_sharding(vision, tp)
        return _vit_blocks(vision, tp) + _merger(vision, tp)
    ops = _vit_blocks(vision, 1) + _merger(vision, 1)
    if tp > 1:
        per_token = vision.out_hidden_size * vision.projector_instances * tp
        ops.append(NCCL("encoder_dp_all_gather", 1, "all_gather", per_token, tp))
    return ops
