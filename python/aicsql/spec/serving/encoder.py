"""The vision encoder of a serving estimate (docs/spec/options.md 4.3 - 4.7;
the spec's ``BaseBackend._run_encoder_phase`` and
``_get_encoder_component_memory_for_runtime``): Qwen3-VL with images.

What an estimate asks for (`EncoderWork`): ``num_images`` images of
``post_merge`` LLM tokens and ``pre_merge`` ViT patches each per request, for
``batch`` requests at once. Under encoder data parallelism (the default) the
images are spread over the worker's tp ranks and the busiest rank, holding
``ceil(batch * num_images / tp)`` of them, sets the pace; a sharded encoder
runs them all on every rank.

Latency (`Encoder.latency`)
    every encoder op once, in list order, at that rank's images as the batch
    and, per image, the merged tokens for the projector ops and the
    embedding all-gather, the patches for the rest (the attention: one
    sequence of ``pre_merge`` patches per image): ``x = images * s``. A
    latency correction (the disaggregated prefill worker's 1.1) scales each
    op's value before the values are summed, starting from int 0 (the
    spec's ``sum`` over its per-op dict). Not run by decode workers, nor by
    the steps of the aggregated estimate (only once per batch, in front).

Memory (`Encoder.memory`)
    the encoder's weights (a whole replica under encoder data parallelism)
    plus ``2 * patches * hidden * 3`` bytes of ViT activations for the
    busiest rank's patches and ``2 * merged tokens * out_hidden * instances``
    for the projected embeddings of the whole batch (every rank holds them),
    floored at 32 MiB; in GiB, the memory model adds it to the worker's after
    everything else (`aicsql.spec.serving.memory.memory_usage`).

The LLM then runs ``isl + post_merge * num_images`` tokens per request: the
callers pass that effective length to every step and memory call, and report
the text ``isl``.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

from ..step.engine import StepContext
from ..step.model import VisionConfig
from ..step.ops import Call, Op
from ..step.options import NO_IMAGES, ImageOptions
from ..step.vision import NO_IMAGE_TOKENS, ImageTokens, encoder_ops, image_tokens

__all__ = ["Encoder", "EncoderWork", "ENCODER_ACTIVATION_FLOOR"]

ENCODER_ACTIVATION_FLOOR = 32 * 1024 * 1024  # bytes
_ONE_GIB = 1 << 30


class EncoderWork(NamedTuple):
    """The images of one request and how the encoder splits them."""

    tokens: ImageTokens  # per image
    num_images: int  # per request
    dp: int  # ranks the images are spread over (1 = every rank runs them all)

    @property
    def active(self) -> bool:
        """Whether there is an encoder phase at all (images with tokens)."""
        return bool(self.tokens) and self.num_images > 0

    @property
    def tokens_per_request(self) -> int:
        """Image tokens in front of each request's text (0 without images)."""
        return self.tokens.post_merge * self.num_images if self.active else 0

    def images_on_busiest_rank(self, batch: int) -> int:
        """``ceil(batch * num_images / dp)``: the images of the rank that sets the pace."""
        return -(-batch * self.num_images // self.dp)


class Encoder:
    """A worker's vision encoder: its ops at the worker's tp and the images
    the estimate asks for. Built with the worker, images or not, so the
    spec's sharding refusal (``enable_encoder_dp = False`` with a tp that
    does not divide the ViT) applies to text-only estimates too. A model
    without a vision config has no ops: latency 0, no memory, no image
    tokens, whatever the image options (the spec ignores them silently)."""

    def __init__(self, ctx: StepContext, tp: int, images: ImageOptions = NO_IMAGES):
        self.ctx = ctx
        vision: Optional[VisionConfig] = ctx.model.vision
        self.vision = vision
        self.ops: List[Op] = encoder_ops(vision, tp, images.encoder_dp) if vision is not None else []
        tokens = image_tokens(vision, images.height, images.width) if self.ops else NO_IMAGE_TOKENS
        self.work = EncoderWork(tokens, images.num_images, tp if images.encoder_dp else 1)
        weights = 0  # the spec's sum() of get_weights() over the encoder ops
        for op in self.ops:
            weights += op.weights()
        self.weights = weights

    @property
    def tokens_per_request(self) -> int:
        return self.work.tokens_per_request

    def latency(self, batch: int, correction: float = 1.0):
        """The encoder phase of `batch` requests (ms; int 0 without images);
        StepMiss on a miss."""
        work = self.work
        if not work.active:
            return 0
        images = work.images_on_busiest_rank(batch)
        post, pre = work.tokens
        on_patches = Call(images * pre, images, pre, 0)
        on_merged = Call(images * post, images, post, 0)
        # The spec sums a per-name dict after scaling each entry; the names are
        # unique, so scaling and adding op by op is the same sequence of operations.
        total = 0
        for op in self.ops:
            merged = "encoder_projector" in op.name or "all_gather" in op.name
            value = self.ctx.evaluate(op, on_merged if merged else on_patches).total
            total += value * correction if correction != 1.0 else value
        return total

    def memory(self, batch: int) -> Optional[Dict[str, float]]:
        """The encoder's memory on one rank with `batch` requests in flight
        (GiB, the memory model's keys), or None without images."""
        work = self.work
        if not work.active:
            return None
        vision = self.vision
        images = batch * work.num_images
        patches = work.images_on_busiest_rank(batch) * work.tokens.pre_merge
        merged = images * work.tokens.post_merge
        weights = self.weights
        activations = 0.0
        if patches > 0:
            activations = 2 * patches * vision.hidden_size * 3
            activations += 2 * merged * vision.out_hidden_size * vision.projector_instances
            activations = max(activations, ENCODER_ACTIVATION_FLOOR)
        return {
            "total": (weights + activations) / _ONE_GIB,
            "weights": weights / _ONE_GIB,
            "activations": activations / _ONE_GIB,
            "kvcache": 0.0,
            "nccl": 0.0,
            "others": 0.0,
        }

