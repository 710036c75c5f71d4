"""Aggregated (IFB) and disaggregated serving estimates over the engine step
(aiconfigurator v0.11.0: ``BaseBackend.run_agg``, ``_get_mix_step_latency``,
``_get_genonly_step_latency``, ``run_static``; ``DisaggInferenceSession.run_disagg``;
``picking._build_disagg_summary_dict``; ``cli/api.py``'s ``_run_agg_estimate``
and ``_run_disagg_estimate``), restated with the spec's evaluation order and
number types.

Number types. The spec computes its step counts with ``np.ceil`` /
``np.floor`` (numpy float64) and mixes them with Python ints; here they are
Python floats of the same value, so every operation sees the same operands.
The mixed step's first pass runs at a float prefix (``prefix *
floor(ctx_tokens / isl)``) and the second at a float batch size
(``ceil(ctx_tokens / isl)``), exactly as the spec passes them to the ops.

Aggregated estimate (``run_agg``, one (batch, ctx_tokens) point)
    ``steps = ceil(isl * b / ctx_tokens)``; ``b > 1``: ``steps`` mixed steps
    with the backend's decode tokens (`Backend.mix_step_gen_tokens`) and,
    when ``steps < osl``, ``osl - steps`` decode-only steps of ``b`` tokens;
    ``b == 1``: one mixed step without decode tokens and ``osl - 1``
    decode-only steps of one token.

    mixed step = pass 1 (static context at batch 1 over ``ctx + gen`` tokens,
    prefix ``prefix * floor(ctx / isl)``: every name but ``context_attention``)
    + pass 2 (static context at batch ``ceil(ctx / isl)``, isl, prefix:
    ``context_attention / ceil(isl / ctx)``) + pass 3 (``gen > 0``: static
    generation at batch ``gen``, ``isl + osl // 2``, osl 2:
    ``generation_attention``); decode-only step = 0 without tokens, else that
    static generation's per-name sum from 0.0.

    TTFT ``= 0 + (mix * ceil(isl / ctx) + dispatch) * queueing``; TPOT ``=
    (mix * tpot_mix + genonly * genonly_steps) / (tpot_mix + genonly_steps)``;
    throughput ``1000 / (0 + mix_steps * mix + genonly_steps * genonly) * b *
    (osl - 1)``, capped by the backend; then the spec's result dict.

Static steps (``run_static``, disaggregated workers)
    static_ctx: the context latency dict, each name times the prefill
    correction 1.1, summed from int 0; memory at ``(batch, isl, osl 1,
    prefix)``. static_gen: the generation latency dict times 1.08; memory
    with ``num_tokens = batch`` and ``isl + osl`` KV tokens. Each row is
    rounded like ``DataFrame.round(3)`` (`numpy_round3`) before the rate
    matching reads it, and the disaggregated row is rounded again.

Attention dp (MOE, HYBRIDMOE, DEEPSEEK / KIMIK25; ``tp * dp * cp = moe_tp *
moe_ep``): the steps run at the layout's dp (the experts see ``x * dp``
tokens, the dispatches gather / scatter over all ``tp * dp`` GPUs);
``run_agg`` scales the output throughput and the concurrency by ``pp *
dp``, ``run_static`` the global batch by dp, and the per-GPU values divide
by ``tp * pp * dp * cp``; the memory model's MoE workspace (paid by
GEMMA4MIX / DEEPSEEK / KIMIK25, not by MOE or HYBRIDMOE) scales by dp. dp does not
shard the expert weights: they stay divided by ``moe_tp * moe_ep`` only.

Pipeline parallelism (pp): the steps price every layer plus ``pp - 1`` P2P
hand-offs; the memory model divides the weights (not the KV cache) by pp;
``run_agg`` multiplies the throughput and the concurrency by ``pp * dp`` and
divides the per-GPU values by ``pp * tp * dp * cp``; ``run_static``
multiplies its requests/s by pp and divides the per-GPU values by ``tp *
pp * dp``; the agg OOM message names pp.

Context parallelism (cp > 1, sglang with tp = dp = 1): the context ops split
their tokens over the cp ranks (`aicsql.spec.step.ops`), the decode ops do
not; the label gains ``cp{cp}``; ``run_agg`` counts ``tp * pp * dp * cp``
GPUs and divides its per-GPU values by cp too; ``run_static`` counts cp in
its worker's GPUs but divides by ``tp * pp * dp`` only; the disaggregated
row's GPU count is the spec's ``pp * tp * dp`` per worker, cp not included
(``_build_disagg_summary_dict``). The KV cache is not divided by cp
(``_cp_kv_memory_divisor`` is 1).

MTP speculative decoding (docs/spec/options.md 2.3, 2.4): the `StepContext`
carries the draft depth -- its generation steps price verification
iterations (MTP-scaled counts, ``B * (nextn + 1)`` tokens: the mixed step's
pass 3, the decode-only step, the decode worker), the memory model scales the
activations by ``nextn + 1`` -- and the estimates take the accepted draft
tokens per iteration (``accepted``), projecting the aggregated result and the
decode worker's row before the rate matching (`aicsql.spec.serving.speculative`).

Images (Qwen3-VL; docs/spec/options.md 4; `aicsql.spec.serving.encoder`):
every worker carries the model's vision encoder (`Encoder`, built with the
worker so the spec's sharding refusal applies whatever the images). With
images, each request puts ``img = post_merge * num_images`` image tokens in
front of its text and every step and memory call runs at ``isl_eff = isl +
img`` -- the aggregated estimate's step counts, balance score, mixed /
decode-only steps and TRT-LLM's ``max_seq_len`` default, the prefill and
the decode worker's steps -- while the reported ``isl`` stays the text's.
The encoder phase runs once per batch: in front of the aggregated TTFT and
in its step-latency total (not in the mixed steps), and in front of the
prefill worker's TTFT (scaled by its 1.1 correction op by op); a decode
worker runs none. Its memory is added to the aggregated and the prefill
worker's memory; ``encoder_latency_ms`` / ``encoder_memory_gib`` report it.

Misses (``StepMiss``) and OOM are `ServingMiss`; bad input is ValueError.

Spec details worth knowing (all checked against the goldens or the Rust path):

* the mixed step's pass 1 always runs at a *float* prefix (``0 * np.floor(...)
  = 0.0``), so its token counts are floats and the spec's miss messages print
  ``num_tokens=8207.0``; values are unaffected below 2**53;
* DEEPSEEK / KIMIK25 have no op named ``context_attention`` (their attention
  sits inside ``context_mla_block``); the spec's mixed step reads its latency
  dict by name, and the dict is a ``defaultdict(float)`` (``base_backend``
  ~l.324), so the missing name reads as 0.0 and the MLA block is priced in
  pass 1 only (checked against the spec: tests/goldens/serving_mla_agg_goldens);
* a disaggregated prefill worker is a static context step at the workload's
  osl (its TPOT is 0.0) whose memory is sized at osl 1 (``isl + 1`` KV
  tokens); a decode worker's weights are those of its *context* op list;
* the 1.8 TTFT factor multiplies the prefill row's TTFT after its rounding
  to 3 decimals, and ``min(prefill, decode)`` of the rate matching keeps the
  prefill side on a tie (Python's ``min``).
"""

from __future__ import annotations

import math
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..limits import check_image_tokens
from ..step.engine import StepContext, StepMiss, resolve_parallel, check_moe_blocks
from ..step.ops import check_trtllm_alltoall
from ..step.model import DEEPSEEK, KIMIK25
from ..step.ops import Op, Parallel, PhaseQuants
from ..step.options import NO_IMAGES, ImageOptions
from ..kernels.quant import KV_QUANTS
from .backends import Backend, backend_for
from .encoder import Encoder
from .memory import capacity_bytes, is_oom, kv_cache_oom, memory_usage
from .rounding import numpy_round3
from .speculative import project_agg, project_decode

__all__ = [
    "ServingMiss",
    "Layout",
    "resolve_layout",
    "numpy_round3",
    "agg_estimate",
    "disagg_estimate",
    "PREFILL_LATENCY_CORRECTION_SCALE",
    "DECODE_LATENCY_CORRECTION_SCALE",
]

# cli/api.py and picking.py
PREFILL_LATENCY_CORRECTION_SCALE = 1.1
DECODE_LATENCY_CORRECTION_SCALE = 1.08
RATE_MATCHING_PREFILL_DEGRADATION_FACTOR = 0.9
RATE_MATCHING_DECODE_DEGRADATION_FACTOR = 0.92
AUTOSCALE_TTFT_CORRECTION_FACTOR = 1.8


class ServingMiss(Exception):
    """The spec has no answer: a perf-data miss in one of the steps, or the
    deployment does not fit in GPU memory (the spec's OOM RuntimeError)."""

    def __init__(self, message: str, kind: str = "miss"):
        super().__init__(message)
        self.kind = kind  # 'miss' | 'oom'


# ---- the parallel layout -----------------------------------------------------------------


class Layout(NamedTuple):
    par: Parallel  # what the ops are built with
    tp: int
    moe_tp: Optional[int]  # as the spec reports it (None for a dense model not given one)
    moe_ep: Optional[int]

    @property
    def dp(self) -> int:
        return self.par.attention_dp

    @property
    def pp(self) -> int:
        return self.par.pp

    @property
    def cp(self) -> int:
        return self.par.cp

    @property
    def label(self) -> str:
        cp = self.cp
        return f"tp{self.tp}pp{self.pp}dp{self.dp}etp{self.moe_tp}ep{self.moe_ep}" + (f"cp{cp}" if cp > 1 else "")


def resolve_layout(ctx: StepContext, tp: int, moe_tp: Optional[int], moe_ep: Optional[int], dp: int = 1,
                   pp: int = 1, cp: int = 1) -> Layout:  # fmt: skip
    """``_resolve_moe_parallelism``: a MoE model infers its missing width from
    ``tp * dp * cp`` (both missing is an error); a dense model keeps what it
    was given. Attention dp > 1: MOE, HYBRIDMOE, DEEPSEEK / KIMIK25; cp > 1:
    sglang only, with tp = dp = 1 (`resolve_parallel`)."""
    model = ctx.model
    par = resolve_parallel(model, ctx.db.backend, tp, moe_tp, moe_ep, dp, pp, cp)
    if ctx.db.backend == "trtllm":
        check_trtllm_alltoall(ctx.kernels.system, par.moe_tp, par.attention_dp)
    if model.is_moe:
        return Layout(par, tp, par.moe_tp, par.moe_ep)
    for name, v in (("moe_tp", moe_tp), ("moe_ep", moe_ep)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} = {v!r} must be a positive integer")
    return Layout(par, tp, moe_tp, moe_ep)


# ---- static steps, cached ----------------------------------------------------------------------

_STEPS: Dict[tuple, tuple] = {}
_STEPS_LOCK = threading.Lock()
_STEPS_MAX = 1 << 16


def _step(ctx: StepContext, phase: str, par: Parallel, ops: List[Op], batch, isl, osl: int, prefix=0) -> Dict[str, float]:
    """The per-name latency dict of one static step (StepMiss on a miss),
    remembered per context and arguments (their types too: a float batch is
    the spec's numpy float, see the module doc)."""
    key = (id(ctx), phase, par, batch, type(batch), isl, type(isl), osl, prefix, type(prefix))
    with _STEPS_LOCK:
        hit = _STEPS.get(key)
    if hit is not None and hit[0] is ctx:
        if hit[2] is not None:
            raise hit[2]
        return hit[1]
    try:
        by_name, miss = ctx.run_ops(phase, ops, batch, isl, osl, prefix).by_name, None
    except StepMiss as e:
        by_name, miss = None, e
    with _STEPS_LOCK:
        if len(_STEPS) >= _STEPS_MAX:
            _STEPS.clear()
        _STEPS[key] = (ctx, by_name, miss)
    if miss is not None:
        raise miss
    return by_name


class _Worker:
    """A model on a database at one parallel layout: both op lists, the
    vision encoder with the images asked for, the quant modes it reports,
    the memory model's inputs."""

    def __init__(self, ctx: StepContext, layout: Layout, report_phase: str, images: ImageOptions = NO_IMAGES):
        self.ctx = ctx
        self.layout = layout
        self.backend: Backend = backend_for(ctx.db.backend)
        lay = layout
        moe_tp = lay.par.moe_tp if ctx.model.is_moe else None
        moe_ep = lay.par.moe_ep if ctx.model.is_moe else None
        _, self.q_ctx, self.ops_ctx = ctx.layout("context", lay.tp, moe_tp, moe_ep, lay.dp, lay.pp, lay.cp)
        _, self.q_gen, self.ops_gen = ctx.layout("generation", lay.tp, moe_tp, moe_ep, lay.dp, lay.pp, lay.cp)
        # The quant modes the estimate reports: the context-role FMHA guard for
        # agg and prefill workers, the checkpoint's (and vllm's) for decode.
        self.quants: PhaseQuants = self.q_ctx if report_phase == "context" else self.q_gen
        self.weights = StepContext.weights(self.ops_ctx)
        self.kv_elements = ctx.kv_elements_per_token(lay.tp)
        self.kv_bytes = KV_QUANTS[self.quants.kvcache].memory
        self.encoder = Encoder(ctx, lay.tp, images)

    def context(self, batch, isl, prefix) -> Dict[str, float]:
        return _step(self.ctx, "context", self.layout.par, self.ops_ctx, batch, isl, 1, prefix)

    def generation(self, batch, isl, osl) -> Dict[str, float]:
        return _step(self.ctx, "generation", self.layout.par, self.ops_gen, batch, isl, osl, 0)

    def memory(self, batch_size, beam_width, isl, osl, num_tokens=0, prefix=0, max_seq_len=None,
               encoder_memory=None) -> Dict[str, float]:  # fmt: skip
        lay = self.layout
        return memory_usage(
            self.backend, self.ctx.kernels.system, self.ctx.model, self.weights, self.kv_elements, self.kv_bytes,
            lay.tp, lay.par.moe_ep, batch_size, beam_width, isl, osl, num_tokens=num_tokens, prefix=prefix,
            max_seq_len=max_seq_len, pp=lay.pp, attention_dp=lay.dp, nextn=self.ctx.nextn,
            encoder_memory=encoder_memory,
        )  # fmt: skip

    def effective_isl(self, batch: int, isl: int) -> int:
        """The LLM's input length per request: the text's `isl` plus the
        image tokens (ValueError beyond the limits of one call)."""
        image_tokens = self.encoder.tokens_per_request
        check_image_tokens(batch, isl, image_tokens)
        return isl + image_tokens

    def encoder_latency(self, batch: int, correction: float = 1.0):
        """The encoder phase of `batch` requests (int 0 without images); ServingMiss on a miss."""
        try:
            return self.encoder.latency(batch, correction)
        except StepMiss as miss:
            raise _miss(self.ctx, "encoder phase (vision encoder)", miss) from None

    def quant_fields(self, prefix: str = "") -> dict:
        q = self.quants
        return {prefix + "gemm": q.gemm, prefix + "kvcache": q.kvcache, prefix + "fmha": q.fmha, prefix + "moe": q.moe}


def _miss(ctx: StepContext, where: str, miss: StepMiss) -> ServingMiss:
    return ServingMiss(f"{ctx.model.name} on {ctx.db.name}, {where}: {miss}")


def _needs(by_name: Dict[str, float], name: str, ctx: StepContext, where: str) -> float:
    """The spec's ``latency_dict[name]`` on a ``defaultdict(float)``: 0.0 when
    the op list has no op of that name (DEEPSEEK / KIMIK25's attention is in
    their MLA block)."""
    return by_name.get(name, 0.0)


# ---- aggregated ---------------------------------------------------------------------------------


def _mix_step(w: _Worker, ctx_tokens: int, gen_tokens: int, isl: int, osl: int, prefix: int) -> float:
    """``_get_mix_step_latency`` (the spec's Python step)."""
    ctx = w.ctx
    try:
        where = "mixed step, pass 1 (context at batch 1)"
        combined = ctx_tokens + gen_tokens
        latency = w.context(1, combined, prefix * float(math.floor(ctx_tokens / isl)))
        non_attention = 0.0
        for name, value in latency.items():
            if name != "context_attention":
                non_attention += value
        where = "mixed step, pass 2 (context attention)"
        latency = w.context(float(math.ceil(ctx_tokens / isl)), isl, prefix)
        scale = float(math.ceil(isl / ctx_tokens))
        ctx_attention = _needs(latency, "context_attention", ctx, "mixed step") / scale
        gen_attention = 0.0
        if gen_tokens > 0:
            where = "mixed step, pass 3 (generation attention)"
            latency = w.generation(gen_tokens, isl + osl // 2, 2)
            gen_attention = _needs(latency, "generation_attention", ctx, "mixed step")
    except StepMiss as miss:
        raise _miss(ctx, where, miss) from None
    return non_attention + ctx_attention + gen_attention


def _genonly_step(w: _Worker, gen_tokens, isl: int, osl: int) -> float:
    """``_get_genonly_step_latency``."""
    if gen_tokens <= 0:
        return 0.0
    try:
        latency = w.generation(gen_tokens, isl + osl // 2, 2)
    except StepMiss as miss:
        raise _miss(w.ctx, "decode-only step", miss) from None
    total = 0.0
    for value in latency.values():
        total += value
    return total


class AggResult(NamedTuple):
    row: dict  # the struct fields (before the OOM verdict)
    memory: Dict[str, float]
    capacity: int
    oom: bool
    kv_warning: Optional[str]


def oom_message_agg(model: str, system: str, tp: int, dp: int = 1, pp: int = 1) -> str:
    return (
        f"OOM: the model '{model}' does not fit in GPU memory on system '{system}' "
        f"with the given parallelism (tp={tp}, pp={pp}, dp={dp}). "
        "Try increasing tp_size/pp_size, using a quantized model, or "
        "using a system with more VRAM per GPU."
    )


def worker(ctx: StepContext, layout: Layout, role: str = "context", images: ImageOptions = NO_IMAGES) -> "_Worker":
    """The model at one layout, built once and reused for many points (the
    search prices a layout's whole grid with one): ``role`` 'context' for an
    aggregated or prefill worker, 'generation' for a decode worker (the quant
    modes it reports); ``images``: the image options (none by default).
    ValueError where the spec's model construction raises."""
    return _Worker(ctx, layout, role, images)


def agg_estimate(ctx: StepContext, layout: Layout, b: int, isl: int, osl: int, prefix: int, ctx_tokens: int,
                 max_seq_len: Optional[int] = None, free_gpu_memory_fraction=None,
                 accepted: float = 0.0, images: ImageOptions = NO_IMAGES) -> AggResult:  # fmt: skip
    """``run_agg`` + ``_run_agg_estimate`` for one point (ServingMiss on a
    step miss; OOM is reported in the result, the caller decides).
    ``max_seq_len`` / ``free_gpu_memory_fraction``: the spec's memory knobs
    (options.md 3.2; None = the backend's default), read by trtllm only.
    ``accepted``: the MTP draft tokens accepted per iteration (options.md
    2.4; 0.0 = no projection). ``images``: the image options (options.md 4;
    only a Qwen3-VL model reads them)."""
    return agg_point(_Worker(ctx, layout, "context", images), b, isl, osl, prefix, ctx_tokens, max_seq_len,
                     free_gpu_memory_fraction, accepted)  # fmt: skip


def agg_point(w: "_Worker", b: int, isl: int, osl: int, prefix: int, ctx_tokens: int,
              max_seq_len: Optional[int] = None, free_gpu_memory_fraction=None,
              accepted: float = 0.0) -> AggResult:  # fmt: skip
    """`agg_estimate` on a `worker` built once (the same numbers). `isl` is
    the text's; the steps run at the worker's effective length (module doc)."""
    ctx, layout = w.ctx, w.layout
    backend = w.backend
    model = ctx.model
    text_isl = isl
    isl = w.effective_isl(b, text_isl)
    balance_score = isl * b / ctx_tokens / osl

    # the encoder phase first (run_agg's order: its miss is the one reported)
    encoder_latency_ms = w.encoder_latency(b)
    encoder_memory = w.encoder.memory(b)

    steps_to_finish_ctx = float(math.ceil(isl * b / ctx_tokens))
    num_mix_steps = num_genonly_steps = 0
    num_mix_steps_for_tpot_calc = 0
    if b > 1:
        num_mix_gen_tokens = backend.mix_step_gen_tokens(b, ctx_tokens, isl, osl)
        num_mix_ctx_tokens = ctx_tokens
        if steps_to_finish_ctx >= osl:
            num_mix_steps = steps_to_finish_ctx
            num_genonly_steps = 0
            num_genonly_tokens = 0
            num_mix_steps_for_tpot_calc = num_mix_steps
        else:
            num_mix_steps = steps_to_finish_ctx
            num_genonly_steps = osl - num_mix_steps
            num_genonly_tokens = b
            num_mix_steps_for_tpot_calc = backend.tpot_mix_steps(num_mix_steps)
    else:  # b == 1
        num_mix_steps = 1
        num_mix_ctx_tokens = ctx_tokens
        num_mix_gen_tokens = 0
        num_genonly_steps = osl - 1
        num_genonly_tokens = 1
        num_mix_steps_for_tpot_calc = 0

    mix_step_latency_ms = _mix_step(w, num_mix_ctx_tokens, num_mix_gen_tokens, isl, osl, prefix)
    mix_efficiency = backend.mix_step_efficiency(num_mix_ctx_tokens, num_mix_gen_tokens)
    mix_step_latency_ms *= mix_efficiency
    genonly_step_latency_ms = _genonly_step(w, num_genonly_tokens, isl, osl)

    prefill_step_ms = mix_step_latency_ms / mix_efficiency if mix_efficiency > 0 else mix_step_latency_ms
    ttft_per_request = prefill_step_ms * float(math.ceil(isl / ctx_tokens)) + backend.prefill_dispatch_overhead_ms(model)
    ttft = encoder_latency_ms + ttft_per_request * backend.ttft_queuing_factor(b, steps_to_finish_ctx)

    tpot_steps = num_mix_steps_for_tpot_calc + num_genonly_steps
    tpot = (
        (mix_step_latency_ms * num_mix_steps_for_tpot_calc + genonly_step_latency_ms * num_genonly_steps) / tpot_steps
        if tpot_steps > 0
        else 0.0
    )
    total_step_latency_ms = (
        encoder_latency_ms + num_mix_steps * mix_step_latency_ms + num_genonly_steps * genonly_step_latency_ms
    )
    step_throughput = (
        (1000 / total_step_latency_ms * b * (osl - 1)) if (osl > 1 and total_step_latency_ms > 0) else 0.0
    )
    output_throughput = backend.throughput_cap(step_throughput, ttft, tpot, b, osl)

    num_ctx_requests = float(math.ceil(ctx_tokens / isl))
    num_gen_requests = b - num_ctx_requests
    if b == 1:
        num_ctx_requests = 1
        num_gen_requests = 1
    pp, cp = layout.pp, layout.cp
    dp = layout.dp
    scale_factor = pp * dp
    output_throughput = output_throughput * scale_factor
    concurrency = b * scale_factor
    request_rate = output_throughput / (osl - 1) if osl > 1 else 0.0
    num_tokens = num_gen_requests + ctx_tokens if b > 1 else ctx_tokens

    memory = w.memory(b, 1, isl, osl, prefix=prefix, encoder_memory=encoder_memory,
                      **backend.agg_memory_kwargs(num_tokens, isl, osl, max_seq_len))  # fmt: skip
    tp = layout.tp
    tokens_s_gpu = output_throughput / pp / tp / dp / cp
    tokens_s_user = 1000.0 / tpot if (osl > 1 and tpot > 0.0) else 0.0
    seq_s = request_rate
    seq_s_gpu = seq_s / pp / tp / dp / cp
    request_latency = ttft + tpot * max(osl - 1, 0)

    capacity = capacity_bytes(ctx.kernels.system)
    oom = is_oom(memory, capacity)
    kv_warning = None
    check = backend.kv_check(free_gpu_memory_fraction)
    if check is not None and kv_cache_oom(memory, capacity, *check):
        frac = "backend default" if free_gpu_memory_fraction is None else str(free_gpu_memory_fraction)
        kv_warning = (
            f"Requested batch_size ({b}) exceeds estimated KV cache capacity "
            f"(free_gpu_memory_fraction={frac}). "
            "The serving runtime will queue excess requests, causing significantly higher TTFT and inaccurate TPOT."
        )
    db = ctx.db
    row = {
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        "request_latency_ms": request_latency,
        "tokens_per_s": output_throughput,
        "tokens_per_s_per_gpu": tokens_s_gpu,
        "tokens_per_s_per_user": tokens_s_user,
        "seq_per_s": seq_s,
        "seq_per_s_per_gpu": seq_s_gpu,
        "request_rate": request_rate,
        "concurrency": concurrency,
        "bs": b,
        "global_bs": b * dp,
        "num_total_gpus": tp * pp * dp * cp,
        "isl": text_isl,
        "osl": osl,
        "prefix": prefix,
        "ctx_tokens": ctx_tokens,
        "num_ctx_reqs": num_ctx_requests,
        "num_gen_reqs": num_gen_requests,
        "num_tokens": num_tokens,
        "gen_tokens": num_gen_requests,
        "balance_score": balance_score,
        "num_mix_steps": float(num_mix_steps),
        "num_genonly_steps": float(num_genonly_steps),
        "mix_step_ms": float(mix_step_latency_ms),
        "genonly_step_ms": float(genonly_step_latency_ms),
        "memory_gib": memory["total"],
        "parallel": layout.label,
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "moe_tp": layout.moe_tp,
        "moe_ep": layout.moe_ep,
        "cp": cp,
        **w.quant_fields(),
        "comm": w.quants.comm,
        "encoder_latency_ms": float(encoder_latency_ms),
        "encoder_memory_gib": encoder_memory["total"] if encoder_memory else 0.0,
        "system": db.system,
        "backend": db.backend,
        "version": db.version,
        "warning": kv_warning,
        "reason": None,
    }
    # _run_agg_estimate projects before its OOM check; the verdicts come from the memory, not the row
    row = project_agg(row, accepted, db.backend)
    return AggResult(row, memory, capacity, oom, kv_warning)


# ---- disaggregated -----------------------------------------------------------------------------


def _static_row(w: _Worker, mode: str, batch: int, isl: int, osl: int, prefix: int, scale: float) -> Tuple[dict, bool]:
    """``run_static`` (static_ctx or static_gen) at a latency correction
    scale: the fields the rate matching reads, rounded like
    ``DataFrame.round(3)``, and whether the worker is OOM. `isl` is the
    text's; the steps run at the worker's effective length, and static_ctx
    runs the encoder phase first (module doc)."""
    text_isl = isl
    isl = w.effective_isl(batch, text_isl)
    encoder_latency, encoder_memory = 0, None
    if mode == "static_ctx":
        encoder_latency = w.encoder_latency(batch, scale)
        encoder_memory = w.encoder.memory(batch)
        try:
            latency = dict(w.context(batch, isl, prefix))
        except StepMiss as miss:
            raise _miss(w.ctx, "prefill (static context step)", miss) from None
        generation_dict: Dict[str, float] = {}
    else:
        try:
            generation_dict = dict(w.generation(batch, isl, osl))
        except StepMiss as miss:
            raise _miss(w.ctx, "decode (static generation step)", miss) from None
        latency = {}
    if scale != 1.0:
        for name in latency:
            latency[name] *= scale
        for name in generation_dict:
            generation_dict[name] *= scale
    if mode == "static_ctx":
        memory = w.memory(batch, 1, isl, 1, prefix=prefix, encoder_memory=encoder_memory)
    else:
        memory = w.memory(batch, 1, isl, osl, num_tokens=batch * 1, prefix=prefix)

    context_latency = sum(latency.values())
    generation_latency = sum(generation_dict.values())
    pp = w.layout.pp
    dp = w.layout.dp
    tp = w.layout.tp
    global_bs = batch * dp
    concurrency = global_bs
    ttft = encoder_latency + context_latency
    tpot = 0.0 if osl <= 1 else generation_latency / (osl - 1)
    num_generated_tokens = max(osl - 1, 0)
    request_latency = ttft + tpot * num_generated_tokens
    if request_latency == 0.0:
        request_latency = encoder_latency + context_latency + generation_latency
    seq_s = 0.0 if request_latency == 0.0 else global_bs / request_latency * 1000 * pp
    seq_s_gpu = seq_s / tp / pp / dp
    tokens_s = seq_s * osl if mode != "static_gen" else seq_s * (osl - 1)
    if mode == "static_ctx":
        tokens_s = seq_s * 1
    tokens_s_gpu = tokens_s / tp / pp / dp
    tokens_s_user = 0.0 if tpot == 0.0 else 1000.0 / tpot
    row = {
        "isl": text_isl, "osl": osl, "prefix": prefix, "concurrency": concurrency, "bs": batch, "global_bs": global_bs,
        "ttft": ttft, "tpot": tpot, "seq/s": seq_s, "seq/s/gpu": seq_s_gpu, "tokens/s": tokens_s,
        "tokens/s/gpu": tokens_s_gpu, "tokens/s/user": tokens_s_user, "request_latency": request_latency,
        "encoder_latency": encoder_latency, "encoder_memory": encoder_memory["total"] if encoder_memory else 0.0,
        "tp": tp, "pp": pp, "dp": dp, "memory": memory["total"],
    }  # fmt: skip
    row = {k: numpy_round3(v) for k, v in row.items()}  # DataFrame(...).round(3): float columns only
    return row, is_oom(memory, capacity_bytes(w.ctx.kernels.system))


def static_worker_row(w: "_Worker", mode: str, batch: int, isl: int, osl: int, prefix: int) -> Tuple[dict, bool]:
    """One worker row of the disaggregated search (``run_static`` +
    ``get_summary_df``: ``DataFrame([row], columns=ColumnsStatic).round(3)``)
    at the role's latency correction (static_ctx 1.1, static_gen 1.08): the
    rounded fields the rate matching reads plus ``num_total_gpus = tp * pp *
    dp * cp`` (cp counted), ``moe_tp``, ``moe_ep``, ``cp``, ``parallel`` and
    the labels the worker reports; and whether it is OOM. ServingMiss on a
    step miss."""
    scale = PREFILL_LATENCY_CORRECTION_SCALE if mode == "static_ctx" else DECODE_LATENCY_CORRECTION_SCALE
    row, oom = _static_row(w, mode, batch, isl, osl, prefix, scale)
    lay = w.layout
    db = w.ctx.db
    row.update({
        "request_rate": 0.0,
        "num_total_gpus": lay.tp * lay.pp * lay.dp * lay.cp, "moe_tp": lay.moe_tp, "moe_ep": lay.moe_ep,
        "cp": lay.cp, "parallel": lay.label, **w.quant_fields(), "comm": w.quants.comm,
        "backend": db.backend, "version": db.version, "system": db.system, "power_w": 0.0,
    })  # fmt: skip
    return row, oom


def oom_message_disagg(model: str, system: str, decode_system: Optional[str] = None) -> str:
    # _run_disagg_estimate names both systems when they differ
    where = (f"prefill system '{system}' or decode system '{decode_system}'"
             if decode_system and decode_system != system else f"system '{system}'")  # fmt: skip
    return (
        f"OOM: the model '{model}' does not fit in GPU memory on {where} "
        f"with the given parallelism. "
        "Try increasing tp_size/pp_size, using a quantized model, or "
        "using a system with more VRAM per GPU."
    )


def disagg_estimate(
    ctx: StepContext,
    prefill: Layout,
    prefill_batch: int,
    prefill_workers: int,
    decode: Layout,
    decode_batch: int,
    decode_workers: int,
    isl: int,
    osl: int,
    prefix: int,
    accepted: float = 0.0,
    images: ImageOptions = NO_IMAGES,
    decode_ctx: Optional[StepContext] = None,
) -> dict:
    """``run_disagg`` + ``_run_disagg_estimate``: the struct fields (ServingMiss
    on a miss or OOM). ``accepted``: the MTP draft tokens accepted per
    iteration, projecting the decode worker's row (options.md 2.4);
    ``images``: the image options, the same for both workers (the prefill
    worker runs the encoder, the decode worker decodes after the image
    tokens; options.md 4.4, 4.6); ``decode_ctx``: the decode workers' own
    system's context (cli_estimate's ``decode_system_name``, experiments.md
    1.4), None: ``ctx``."""
    dctx = decode_ctx or ctx
    pw = _Worker(ctx, prefill, "context", images)
    dw = _Worker(dctx, decode, "generation", images)
    p, p_oom = _static_row(pw, "static_ctx", prefill_batch, isl, osl, prefix, PREFILL_LATENCY_CORRECTION_SCALE)
    d, d_oom = _static_row(dw, "static_gen", decode_batch, isl, osl, prefix, DECODE_LATENCY_CORRECTION_SCALE)
    d = project_decode(d, accepted)  # before the rate matching; the prefill row is never projected

    # _get_disagg_summary_df + _build_disagg_summary_dict
    p_ttft = p["ttft"] * AUTOSCALE_TTFT_CORRECTION_FACTOR
    seq_s = min(
        p["seq/s"] * prefill_workers * RATE_MATCHING_PREFILL_DEGRADATION_FACTOR,
        d["seq/s"] * decode_workers * RATE_MATCHING_DECODE_DEGRADATION_FACTOR,
    )
    # _build_disagg_summary_dict: pp * tp * dp per worker -- cp is not counted here
    # (the worker rows' own num_total_gpus, tp * pp * dp * cp, only steer the search).
    prefill_gpus = p["pp"] * p["tp"] * p["dp"]
    decode_gpus = d["pp"] * d["tp"] * d["dp"]
    num_total_gpus = prefill_gpus * prefill_workers + decode_gpus * decode_workers
    seq_s_gpu = seq_s / num_total_gpus if num_total_gpus > 0 else 0.0
    osl_ = p["osl"]
    tokens_s = seq_s * osl_
    tokens_s_gpu = tokens_s / num_total_gpus if num_total_gpus > 0 else 0.0
    request_latency = p_ttft + d["tpot"] * max(osl_ - 1, 0)
    db, ddb = ctx.db, dctx.db
    if p_oom or d_oom:
        raise ServingMiss(oom_message_disagg(ctx.model.name, db.system, ddb.system), "oom")
    row = {
        "ttft_ms": p_ttft,
        "tpot_ms": d["tpot"],
        "request_latency_ms": request_latency,
        "tokens_per_s": tokens_s,
        "tokens_per_s_per_gpu": tokens_s_gpu,
        "tokens_per_s_per_user": d["tokens/s/user"],
        "seq_per_s": seq_s,
        "seq_per_s_per_gpu": seq_s_gpu,
        "request_rate": seq_s,
        "concurrency": d["concurrency"] * decode_workers,
        "num_total_gpus": num_total_gpus,
        "isl": p["isl"],
        "osl": osl_,
        "prefix": p["prefix"],
    }
    for side, w, r, workers in (("prefill_", pw, p, prefill_workers), ("decode_", dw, d, decode_workers)):
        lay = w.layout
        row.update({
            side + "parallel": lay.label, side + "tp": r["tp"], side + "pp": r["pp"], side + "dp": r["dp"],
            side + "cp": lay.cp,
            side + "moe_tp": lay.moe_tp, side + "moe_ep": lay.moe_ep, side + "bs": r["bs"],
            side + "global_bs": r["global_bs"], side + "workers": workers, side + "seq_per_s_per_worker": r["seq/s"],
            side + "memory_gib": r["memory"], **w.quant_fields(side),
        })  # fmt: skip
    # _build_disagg_summary_dict's encoder_latency and (e)memory: the prefill row's (rounded with it)
    row.update({"comm": pw.quants.comm, "encoder_latency_ms": p["encoder_latency"],
                "encoder_memory_gib": p["encoder_memory"], "system": db.system, "backend": db.backend,
                "version": db.version, "decode_system": ddb.system, "decode_version": ddb.version,
                "reason": None})  # fmt: skip
    # pd.DataFrame([summary], columns=ColumnsDisagg).round(3)
    return {k: numpy_round3(v) for k, v in row.items()}


def check_blocks(ctx: StepContext, layout: Layout, phase: str = "context") -> None:
    """The model builder's fp8_block check (``Invalid quantized MoE configuration``)."""
    check_moe_blocks(ctx.model, ctx.quants(phase).moe, layout.par)


__all__ += ["AggResult", "oom_message_agg", "oom_message_disagg", "check_blocks", "DEEPSEEK", "KIMIK25", "worker",
            "agg_point", "static_worker_row"]
