"""Assembling a static context or generation step (docs/spec 1, 3.2, 9, 10.1,
11.9; families_hybrid_vl_databases.md 1.7).

Context (static_ctx)
    every op once with ``x = B * (isl - prefix)`` tokens -- except ops whose
    name contains ``logits_gemm``, which get ``x = B`` -- and the attention
    with ``batch_size = B, s = isl - prefix, prefix`` (``prefix`` cached
    tokens per request, 0 unless a serving estimate asks; ``isl - prefix <=
    0`` is the spec's ValueError). Results are summed per op
    *name* (ops sharing a name -- GPT-OSS's and HYBRIDMOE's attention ops --
    add up at the first one's place, starting from 0.0), then the names in
    order; TTFT equals that ``context_latency``.

Generation (static_gen)
    decode steps are sampled with stride 32: for ``i = 0, 32, 64, ... <
    osl - 1`` every op runs with ``x = batch_size = B`` and ``s = isl + i + 1``.
    For each sampled step the results are summed per name, and each name's
    step sum times ``repeat_i = min(32, osl - 1 - i)`` is added to that name's
    running total; the totals are then summed in order (9.3: summing each step
    first differs in the last ulp). TPOT = ``generation_latency / (osl - 1)``
    (0 when ``osl <= 1``).

The FMHA guard (3.2; families_mla 2.4) looks at the context table of the
family's context op: ``context_mla`` (granular and module MLA tables) for
DEEPSEEK / KIMIK25 off vllm, else ``context_attention``.

Quant overrides (docs/spec/options.md 1.2; `aicsql.spec.step.options`): a
`StepContext` is built per set of overrides. Explicit modes replace the
checkpoint's and no guard changes them; the checkpoint's "fp8 => fmha / kv
fp8" rule stays the inference's. In the context phase an explicit fp8 FMHA
is checked against the context op's fmha slices under the explicit kv mode,
else the checkpoint's own kv mode, else (the checkpoint sets none) every kv
slice: slices without fp8 refuse the deployment with the spec's message
(`DeploymentRefused`); an explicit FMHA skips the data-driven fallback and
the vllm legacy guard.

MTP speculative decoding (docs/spec/options.md 2.3): a `StepContext` is
built per draft depth ``nextn`` too ('auto' resolved from the checkpoint's
``num_nextn_predict_layers``). At ``nextn = n > 0`` every generation op's
count -- every inner op of a composite, not the composite's own 1.0 -- is
multiplied by ``mtp = (n + L) / L`` (`mtp_scale_factor`; `Op.scaled`) and a
generation step runs ``B * (n + 1)`` tokens per step (``x`` and
``batch_size``); context ops and steps are unchanged. The families build
their counts at ``n = 0`` (``plain * 1.0``), and ``plain * mtp`` is the
spec's value bit for bit for every family this path prices: the spec's
different association orders (GPT-OSS's windowed attention ``L * mtp / 2``)
differ by a power of two only, and the forms that do not commute (the 0.9
PDL factor of the trtllm wide-EP DeepSeek models) are not priced here.
NEMOTRONNAS refuses ``n > 0`` (`DeploymentRefused`, the spec's assertion).

For the serving estimates (``aicsql.spec.serving``) a `PhaseResult` also
carries the per-name latency dict of the phase (``by_name``, first-appearance
order: what the spec's ``context_latency_dict`` / ``generation_latency_dict``
hold), and a `StepContext` gives the context op list's weights
(`StepContext.weights`, the spec's ``get_weights``) and the KV cache elements
per token (`StepContext.kv_elements_per_token`). `StepContext.run_ops` runs a
phase on an already validated layout with the spec's own argument types: the
mixed step of an aggregated estimate passes numpy-float batch sizes and
prefixes, which this path receives as Python floats of the same values.
"""

from __future__ import annotations

import json
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..data import Database, DataTree
from ..kernels import FMHA_QUANTS, KV_QUANTS, MOE_QUANTS, Kernels, PerfMiss, kernels_for
from ..limits import check_step
from ..sol import GEMM_QUANTS
from .families import build_ops
from .model import (
    DEEPSEEK,
    DEEPSEEKV4,
    DEEPSEEKV32,
    GEMMA4MIX,
    HYBRIDMOE,
    KIMIK25,
    MOE,
    NEMOTRONH,
    NEMOTRONNAS,
    QWEN35,
    QWEN3VL_MOE,
    ModelSpec,
    load_model,
)
from .ops import Call, Op, OpValue, Parallel, PhaseQuants, check_trtllm_alltoall
from .options import QUANT_OPTIONS, QuantOverrides, draft_length, quant_overrides

__all__ = [
    "STRIDE",
    "PHASES",
    "StepMiss",
    "PhaseQuants",
    "check_moe_blocks",
    "DeploymentRefused",
    "StepContext",
    "mtp_scale_factor",
    "resolve_nextn",
    "step_context",
    "resolve_parallel",
    "DP_FAMILIES",
]

STRIDE = 32
PHASES = ("context", "generation")


class DeploymentRefused(ValueError):
    """The spec refuses the deployment for what it is (fp8_block experts
    whose per-GPU width is not a multiple of the weight block, MTP on
    NEMOTRONNAS), not for a missing table: like a miss, NULL with its reason
    under on_miss 'null'. A ValueError, as the spec raises it (the MTP one
    is the spec's AssertionError)."""


class StepMiss(Exception):
    """The spec raised PerfDataNotAvailable for one op's lookup (a *miss*)."""

    def __init__(self, op: str, miss: PerfMiss):
        super().__init__(f"{op}: {miss}")
        self.op = op
        self.miss = miss


def _positive_int(name: str, v, what: str = "") -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} = {v!r}{what} must be a positive integer")


# The families whose attention data parallelism (dp > 1) this path prices:
# every MoE family. In each of them dp reaches the step only through the MoE
# ops -- the experts see ``x * dp`` tokens, the dispatches gather before and
# scatter after them (docs/spec/engine_step.md 10.3; families_dp_cp.md 2, 5)
# -- and through the serving estimates' scale factors. QWEN3VL_MOE is the
# spec's MOEModel with a vision encoder that a text-only step never runs, so
# its dp path is MOE's (the Rust path prices it the same way). QWEN35 (its
# MoE variant) and GEMMA4MIX likewise reach dp only through their MoE ops
# (families_qwen35_gemma4 1.2); a dense QWEN35 is refused, as LLAMA is.
# NEMOTRONH (its MoE checkpoints) too: the experts at ``x * dp`` tokens, the
# dispatches' dp collectives (families_nemotron 7.1, restated from the code,
# no golden); Nemotron-H-56B and NEMOTRONNAS are dense and refused.
DP_FAMILIES = frozenset({MOE, QWEN3VL_MOE, HYBRIDMOE, DEEPSEEK, KIMIK25, QWEN35, GEMMA4MIX, NEMOTRONH})
# Families whose model class does not declare ``supports_cp``: cp > 1 is
# refused on every backend (families_qwen35_gemma4 1.2, families_nemotron 1.2, 2.2).
NO_CP_FAMILIES = frozenset({QWEN35, NEMOTRONH, NEMOTRONNAS})
# DEEPSEEKV4: dp reaches the MoE ops only, as for DEEPSEEK (families_dsv4 1.3);
# cp > 1 is sglang's, modelled inside the attention module (families_dsv4 5).
DP_FAMILIES = DP_FAMILIES | {DEEPSEEKV4}
# DEEPSEEKV32: dp reaches the MoE ops only, as for DEEPSEEK (families_dsa 3); cp > 1 is
# sglang's, inside the DSA op and the add-norms / dispatches (families_dsa 7).
DP_FAMILIES = DP_FAMILIES | {DEEPSEEKV32}


def resolve_parallel(model: ModelSpec, backend: str, tp, moe_tp, moe_ep, dp=1, pp=1, cp=1) -> Parallel:
    """Validate tp, the attention dp, pp and cp against the model and resolve
    the MoE layout (docs/spec 2, 10.1; the spec's ``get_model``):

    * MoE: ``tp * dp * cp == moe_tp * moe_ep``, a missing width inferred from
      ``tp * dp * cp`` (the spec's ``resolve_moe_parallelism``);
    * attention dp > 1 is priced for the MoE models of the families of
      `DP_FAMILIES` -- MOE, QWEN3VL_MOE, HYBRIDMOE (Llama-4, MiMo-V2-Flash),
      DEEPSEEK, KIMIK25, QWEN35 and NEMOTRONH (MoE variants) and GEMMA4MIX -- through
      their MoE ops (`MoE` at ``x * dp`` tokens, `MoEDispatch`'s per-backend
      dp collectives) and refused for the others naming the family; trtllm
      refuses tp > 1 together with dp > 1, as the spec asserts (at its first
      dispatch query; here before anything is priced);
    * pp: any positive count (every layer stays in the op lists; the P2P op
      and the serving estimates read it);
    * cp > 1 (context parallelism): the spec's model classes support it on
      sglang only (every family priced here but QWEN35, NEMOTRONH and
      NEMOTRONNAS declares ``supports_cp`` for sglang alone; those three
      declare nothing and are refused everywhere), and sglang's CP requires
      tp = 1 and attention dp = 1;
    * GEMMA4MIX: a dense variant (no routed experts) needs moe_ep = 1; the
      expert-count bound applies to the others only (NEMOTRONH included,
      where the spec has no such check but misses at the MoE lookup).
    """
    _positive_int("tp", tp)
    _positive_int("dp", dp, " (attention data parallelism)")
    _positive_int("pp", pp, " (pipeline parallelism)")
    _positive_int("cp", cp, " (context parallelism)")
    if model.heads % tp != 0:
        raise ValueError(
            f"tp = {tp} does not divide the {model.heads} attention heads of {model.name!r}"
        )
    if dp > 1 and model.family not in DP_FAMILIES:
        raise ValueError(
            f"unsupported: attention dp = {dp} for {model.name!r} of the {model.family} family "
            f"(aicsql.spec prices attention dp > 1 for the {', '.join(sorted(DP_FAMILIES))} families only)"
        )
    if dp > 1 and not model.is_moe:
        raise ValueError(
            f"unsupported: attention dp = {dp} for {model.name!r}, a dense model of the {model.family} family "
            "(aicsql.spec prices attention dp > 1 through the MoE ops only)"
        )
    if not model.is_moe:
        _check_cp(model, backend, tp, dp, cp)
        return Parallel(tp, pp=pp, cp=cp)
    for name, v in (("moe_tp", moe_tp), ("moe_ep", moe_ep)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} = {v!r} must be a positive integer")
    # The messages keep their dp = 1 wording (tp) when dp and cp are 1.
    width = tp * dp * cp
    if dp == 1 and cp == 1:
        width_name, rule = f"tp = {tp}", "tp = moe_tp * moe_ep"
    elif cp == 1:
        width_name, rule = f"tp * dp = {tp} * {dp} = {width}", "tp * dp = moe_tp * moe_ep"
    else:
        width_name, rule = f"tp * dp * cp = {tp} * {dp} * {cp} = {width}", "tp * dp * cp = moe_tp * moe_ep"
    if moe_tp is None and moe_ep is None:
        raise ValueError(
            f"{model.name!r} is a MoE model: give moe_tp and/or moe_ep ({rule})"
        )
    if moe_tp is None:
        if width % moe_ep:
            raise ValueError(f"moe_ep = {moe_ep} does not divide {width_name} ({rule})")
        moe_tp = width // moe_ep
    elif moe_ep is None:
        if width % moe_tp:
            raise ValueError(f"moe_tp = {moe_tp} does not divide {width_name} ({rule})")
        moe_ep = width // moe_tp
    if moe_tp * moe_ep != width:
        if dp == 1 and cp == 1:
            raise ValueError(f"moe_tp * moe_ep = {moe_tp} * {moe_ep} != tp = {tp} (attention_dp is 1)")
        raise ValueError(f"moe_tp * moe_ep = {moe_tp} * {moe_ep} != {width_name} ({rule})")
    _check_cp(model, backend, tp, dp, cp)
    if backend == "vllm" and moe_tp > 1 and moe_ep > 1:
        raise ValueError(f"vllm does not support moe_tp > 1 and moe_ep > 1 together (moe_tp = {moe_tp}, "
                         f"moe_ep = {moe_ep})")
    if backend == "trtllm" and tp > 1 and dp > 1:
        raise ValueError(f"trtllm does not support TP>1 and DP>1 for attn simultaneously (tp = {tp}, dp = {dp})")
    if model.gemma4_dense:
        if moe_ep != 1:
            raise ValueError(f"dense Gemma 4 variants require moe_ep_size=1, got {moe_ep}")
    elif model.experts < moe_ep:
        raise ValueError(f"moe_ep = {moe_ep} is larger than the {model.experts} experts of {model.name!r}")
    return Parallel(tp, moe_tp, moe_ep, dp, pp, cp)


def _check_cp(model: ModelSpec, backend: str, tp: int, dp: int, cp: int) -> None:
    """The spec's context-parallelism gate (``get_model``), after the MoE layout resolved."""
    if cp == 1:
        return
    if model.family in NO_CP_FAMILIES:
        raise ValueError(
            f"unsupported: Context parallelism (cp_size={cp}) is not supported for model_family={model.family!r} "
            f"on backend={backend!r}. The model class must override ``supports_cp`` and implement CP in its op "
            "pipeline."
        )
    if backend != "sglang":
        raise ValueError(
            f"unsupported: context parallelism (cp = {cp}) is not supported for model_family={model.family!r} "
            f"on backend={backend!r} (aiconfigurator supports cp > 1 on sglang only; the spec raises "
            "NotImplementedError)"
        )
    if tp != 1 or dp != 1:
        raise ValueError(
            f"sglang CP requires tp_size=1 and attention_dp_size=1 when cp_size>1 (CP and attention TP/DP are "
            f"mutually exclusive on sglang). Got tp_size={tp}, attention_dp_size={dp}, cp_size={cp}."
        )


# Families whose builder checks the fp8_block expert block alignment (MOEModel, HybridMoEModel).
_BLOCK_CHECKED = frozenset({MOE, QWEN3VL_MOE, HYBRIDMOE})


def check_moe_blocks(model: ModelSpec, moe_quant: str, par: Parallel) -> None:
    """fp8_block experts need ``(I_moe // moe_tp) % weight_block_size == 0``
    (families_hybrid 1.2; the spec's message, trailing space included)."""
    if model.family in _BLOCK_CHECKED and moe_quant == "fp8_block":
        block = model.weight_block_size
        if (model.moe_inter // par.moe_tp) % block != 0:
            raise DeploymentRefused(
                f"Invalid quantized MoE configuration: (moe_intermediate_size={model.moe_inter} / "
                f"moe_tp_size={par.moe_tp}) % weight_block_size={block} != 0. "
            )


def mtp_scale_factor(nextn: int, num_layers: int) -> float:
    """The factor of every generation op's count at draft depth `nextn`
    (options.md 2.3 item 2): ``(nextn + L) / L`` over the model's full layer
    count, one float division of two ints; 1.0 at depth 0."""
    if nextn <= 0:
        return 1.0
    return (nextn + num_layers) / num_layers


def check_mtp(model: ModelSpec, nextn: int) -> None:
    """The families that assert ``nextn == 0`` in their constructor (only
    NEMOTRONNAS among the priced ones) refuse MTP with the spec's text."""
    if nextn > 0 and model.family == NEMOTRONNAS:
        raise DeploymentRefused("NemotronNas does not support MTP speculative decoding (nextn must be 0)")


def resolve_nextn(tree: DataTree, model: str, nextn) -> int:
    """The draft depth of a step: 'auto' is the checkpoint's
    ``num_nextn_predict_layers`` (0 when absent: MTP off; options.md 2.2
    item 1), then the depth rule (`draft_length`) as for a given value."""
    if nextn == "auto":
        nextn = load_model(tree, model).nextn_layers
    return draft_length(nextn)


def _check_positive(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} = {v!r} must be a positive integer")


class _OpRun(NamedTuple):
    op: Op
    value: OpValue
    gen_index: Optional[int] = None
    gen_s: Optional[int] = None
    repeat: Optional[int] = None


class PhaseResult(NamedTuple):
    total_ms: float  # TTFT (context) or TPOT (generation)
    phase_latency_ms: float  # context_latency or generation_latency
    runs: List[_OpRun]  # every op application (generation: per sample)
    samples: List[Tuple[int, int, int]]  # generation: (i, s, repeat)
    # Latency per op name, first-appearance order (the spec's phase latency dict;
    # generation: each name's sampled step values times their repeats).
    by_name: Optional[Dict[str, float]] = None


# Families whose quant modes follow rules of their own (families_dsa 2.1,
# families_dsv4 1.2) that this path does not combine with overrides yet.
_NO_OVERRIDE_FAMILIES = frozenset({DEEPSEEKV32, DEEPSEEKV4})


class StepContext:
    """Everything one (model, database, shared layer, quant overrides, draft
    depth) needs, built once: the model, its tables, the per-phase quant
    modes, the op lists.

    ``overrides`` (`aicsql.spec.step.options`): the modes the caller set
    instead of the checkpoint's (docs/spec/options.md 1); refused with
    ValueError for the DEEPSEEKV32 and DEEPSEEKV4 families. ``nextn``: the
    MTP draft depth, an int >= 0 (options.md 2.3; see the module doc)."""

    def __init__(self, tree: DataTree, model: str, db: Database, shared_layer: bool,
                 overrides: Optional[QuantOverrides] = None, nextn: int = 0):  # fmt: skip
        self.tree = tree
        self.db = db
        self.model = load_model(tree, model)
        self.nextn = nextn
        self.mtp = mtp_scale_factor(nextn, self.model.num_layers)
        self.overrides: QuantOverrides = quant_overrides(overrides)
        if not self.overrides.is_empty() and self.model.family in _NO_OVERRIDE_FAMILIES:
            given = ", ".join(f"{k}={v!r}" for k, v in self.overrides.given().items())
            raise ValueError(
                f"quant overrides are not priced for {model!r} ({self.model.family} family) yet; "
                f"give none of {', '.join(QUANT_OPTIONS)} (given: {given})"
            )
        self.kernels: Kernels = kernels_for(tree, db, shared_layer)
        _check_modes(self.model)
        self._quants: Dict[str, PhaseQuants] = {}
        self._ops: Dict[Tuple[str, Parallel], List[Op]] = {}
        self._lock = threading.Lock()

    # ---- 3.2: the FMHA guards -------------------------------------------------------

    def _context_tables(self) -> list:
        """The tables of the family's context op key (families_mla 2.4)."""
        k = self.kernels
        if self.model.family == DEEPSEEKV32:  # "dsa_context_module": the full context DSA table (families_dsa 2.1)
            return [k.dsa_context]
        if self.model.family in (DEEPSEEK, KIMIK25) and self.db.backend != "vllm":
            return [k.context_mla, k.context_mla_module]  # "context_mla": granular and module
        return [k.context_attention]

    def _context_op_key(self) -> str:
        """The spec's ``attention_op_keys`` context op of the family (options.md 1.2 step 4)."""
        if self.model.family in (DEEPSEEK, KIMIK25) and self.db.backend != "vllm":
            return "context_mla"
        return "context_attention"

    def _context_fmha_modes(self, kv: Optional[str]) -> set:
        """The fmha modes of the context op's table(s) with rows under kv
        cache mode `kv`; ``kv = None``: the flat list, every kv slice's
        modes together (the spec's ``context_fmha_supported_modes``)."""
        modes = set()
        for table in self._context_tables():
            if kv is not None:
                modes.update(table.fmha_modes_for_kv(kv))
            else:
                modes.update(attn for attn, by_kv in table.root.items() if by_kv)
        return modes

    def quants(self, phase: str) -> PhaseQuants:
        """The phase's quant modes (docs/spec 3.2; options.md 1.2): the
        explicit overrides, the checkpoint's modes for the others, then the
        FMHA guards. Context phase (the spec's context roles): an explicit
        fp8 FMHA the context table has slices for but none in fp8 is
        `DeploymentRefused`; an inferred fp8 FMHA falls back to bfloat16
        when the slices under the run's kv mode have bfloat16 but no fp8.
        An inferred fp8 FMHA left alone becomes bfloat16 on vllm (its
        legacy guard); an explicit FMHA is never changed."""
        with self._lock:
            q = self._quants.get(phase)
        if q is not None:
            return q
        ck = self.model.quant
        ov = self.overrides
        kv = ov.kvcache if ov.kvcache is not None else ck.kv
        fmha = ov.fmha  # None = not set explicitly, the inferred mode still applies
        if phase == "context" and self.model.family != DEEPSEEKV4:
            if ov.fmha == "fp8":
                # The kv mode the check reads: explicit, else the checkpoint's own
                # (None: it sets none, and every kv slice counts).
                modes = self._context_fmha_modes(ov.kvcache if ov.kvcache is not None else self.model.checkpoint_kv)
                if modes and "fp8" not in modes:
                    raise DeploymentRefused(
                        f"fmha_quant_mode=fp8 has no {self._context_op_key()!r} perf data for this "
                        "system/backend/version. Use --fmha-quant-mode bfloat16, or omit --fmha-quant-mode to "
                        "auto-select it."
                    )
            elif ov.fmha is None and ck.fmha == "fp8":
                # Data-driven guard: the fmha modes with rows under the run's kv dtype.
                modes = self._context_fmha_modes(kv)
                if modes and "fp8" not in modes and "bfloat16" in modes:
                    fmha = "bfloat16"
        if fmha is None:
            fmha = ck.fmha
            if self.db.backend == "vllm" and fmha == "fp8":  # vLLM legacy guard
                fmha = "bfloat16"
        q = PhaseQuants(
            gemm=ov.gemm if ov.gemm is not None else ck.gemm,
            moe=ov.moe if ov.moe is not None else ck.moe,
            kvcache=kv,
            fmha=fmha,
            comm=ov.comm if ov.comm is not None else ck.comm,
        )
        if self.model.family == DEEPSEEKV32:  # families_dsa 2.1: every inferred FMHA ends bfloat16
            q = q._replace(fmha="bfloat16")
        if self.model.family == DEEPSEEKV4:  # families_dsv4 1.2: FMHA bf16, the per-GPU MoE label
            from .families.deepseek_v4 import phase_quants

            q = phase_quants(q, self.model, self.db.backend, self.kernels.system.sm_version)
        with self._lock:
            self._quants[phase] = q
        return q

    # ---- evaluating ------------------------------------------------------------------

    def _evaluate(self, op: Op, call: Call) -> OpValue:
        try:
            return op.evaluate(self.kernels, call)
        except PerfMiss as miss:
            raise StepMiss(op.name, miss) from None

    def evaluate(self, op: Op, call: Call) -> OpValue:
        """One op against this context's tables outside a phase (the serving
        estimates' vision encoder, whose ops each take their own token
        count); StepMiss on a miss."""
        return self._evaluate(op, call)

    def layout(self, phase: str, tp: int, moe_tp=None, moe_ep=None, dp: int = 1, pp: int = 1, cp: int = 1
               ) -> Tuple[Parallel, PhaseQuants, List[Op]]:  # fmt: skip
        """The validated parallel layout, quant modes and op list of `phase`
        (the op list built once per layout, generation counts times the MTP
        factor); ValueError on bad input (the trtllm all-to-all dispatch of
        `check_trtllm_alltoall` included), `DeploymentRefused` for a
        deployment the spec's model construction refuses."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
        par = resolve_parallel(self.model, self.db.backend, tp, moe_tp, moe_ep, dp, pp, cp)
        if self.db.backend == "trtllm":
            check_trtllm_alltoall(self.kernels.system, par.moe_tp, par.attention_dp)
        if par.cp > 1 and self.overrides.comm not in (None, "half"):
            # The spec prices the context-parallel all-gathers in the comm mode
            # (options.md 1.3); this path's keep half: no silent answer.
            raise ValueError("comm_quant other than 'half' is not priced with context parallelism (cp > 1) yet")
        q = self.quants(phase)
        check_moe_blocks(self.model, q.moe, par)
        check_mtp(self.model, self.nextn)
        key = (phase, par)
        with self._lock:
            ops = self._ops.get(key)
        if ops is None:
            ops = build_ops(self.model, phase, par, q, self.db.backend)
            if phase == "generation" and self.nextn > 0:
                ops = [op.scaled(self.mtp) for op in ops]
            with self._lock:
                ops = self._ops.setdefault(key, ops)
        return par, q, ops

    def run(self, phase: str, tp: int, batch: int, isl: int, osl: int, moe_tp=None, moe_ep=None,
            prefix: int = 0, dp: int = 1, pp: int = 1, cp: int = 1) -> PhaseResult:  # fmt: skip
        """One static step of `phase`; StepMiss on a miss, ValueError on bad input.
        ``prefix``: cached tokens per request of a context step (ignored in generation);
        ``dp``: the attention data parallelism (`DP_FAMILIES`); ``pp``: the
        pipeline stages (the P2P hand-offs; every layer is priced); ``cp``:
        context parallelism (sglang, tp = dp = 1; context ops only)."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
        _check_positive("batch", batch)
        _check_positive("isl", isl)
        _check_positive("osl", osl)
        _check_positive("dp", dp)
        _check_positive("pp", pp)
        _check_positive("cp", cp)
        if isinstance(prefix, bool) or not isinstance(prefix, int) or prefix < 0:
            raise ValueError(f"prefix = {prefix!r} must be a non-negative integer")
        check_step(tp, batch, isl, osl, moe_tp, moe_ep, dp, pp, cp)
        _, _, ops = self.layout(phase, tp, moe_tp, moe_ep, dp, pp, cp)
        return self.run_ops(phase, ops, batch, isl, osl, prefix)

    def run_ops(self, phase: str, ops: List[Op], batch, isl, osl: int, prefix=0) -> PhaseResult:
        """`phase` over `ops` (from `layout`) without validating the numbers,
        which may be floats of integral value where the spec passes numpy
        floats (see the module doc)."""
        if phase == "context":
            effective = isl - prefix
            if effective <= 0:
                raise ValueError(f"isl must be greater than 0 after removing prefix, but got {effective}")
            call = Call(batch * effective, batch, effective, prefix)
            logits_call = Call(batch, batch, effective, prefix)
            runs = []
            totals: Dict[str, float] = {}
            for op in ops:
                value = self._evaluate(op, logits_call if "logits_gemm" in op.name else call)
                runs.append(_OpRun(op, value))
                totals[op.name] = totals.get(op.name, 0.0) + value.total
            latency = 0
            for v in totals.values():  # name order
                latency += v
            return PhaseResult(latency, latency, runs, [], totals)

        # generation: each step verifies nextn + 1 tokens per request (the spec's
        # _run_generation_phase: batch_size * (nextn + 1), before the loop)
        b = batch * (self.nextn + 1)
        samples = [(i, isl + i + 1, min(STRIDE, osl - 1 - i)) for i in range(0, osl - 1, STRIDE)]
        runs = []
        acc: Dict[str, float] = {}
        fixed: Dict[int, OpValue] = {}  # s-independent ops: evaluated once, same bits every sample
        for i, s, repeat in samples:
            call = Call(b, b, s, 0)
            step: Dict[str, float] = {}
            for j, op in enumerate(ops):
                if op.s_dependent:
                    value = self._evaluate(op, call)
                else:
                    value = fixed.get(j)
                    if value is None:
                        value = fixed[j] = self._evaluate(op, call)
                runs.append(_OpRun(op, value, i, s, repeat))
                step[op.name] = step.get(op.name, 0.0) + value.total
            for name, value in step.items():
                acc[name] = acc.get(name, 0.0) + value * repeat
        latency = 0
        for v in acc.values():  # name order
            latency += v
        tpot = latency / (osl - 1) if osl > 1 else 0.0
        return PhaseResult(tpot, latency, runs, samples, acc)

    # ---- what the memory model reads (serving estimates) ------------------------------------

    @staticmethod
    def weights(ops: List[Op]) -> float:
        """Weight bytes of an op list on one GPU before the pipeline split, the
        spec's ``0.0 + sum of get_weights()`` over the context ops (the memory
        model divides it by pp)."""
        total = 0.0
        for op in ops:
            total += op.weights()
        return total

    def kv_elements_per_token(self, tp: int) -> int:
        """KV cache elements per token on one GPU over all layers (the spec's
        ``get_kvcache_elements_per_token``): the MLA latent ``L * (kv_lora_rank
        + qk_rope_head_dim)`` (DeepSeek-V3 defaults 512 and 64 when the config
        has none) for DEEPSEEK / KIMIK25, else ``ceil(Hkv / tp) * d * L * 2``."""
        return self.model.kv_elements_per_token(tp)

    # ---- the detailed result ----------------------------------------------------------------

    def rows(self, phase: str, result: PhaseResult, batch: int, isl: int, osl: int) -> List[dict]:
        """One row per op application (generation: per sample), then per-sample
        ``__gen_step_total__`` rows and the ``__step_total__`` row -- the goldens'
        layout. Ops sharing a name keep a row each, as in the goldens; a
        sample's ``__gen_step_total__`` is its op rows' plain sum in row order
        (the golden writer's number; the spec's own total sums per name first,
        which can differ in the last ulp, families_hybrid 6.2 item 14). An op
        row's ``source`` says where a GDN lookup's value came from
        (``"silicon"`` or ``"sol"``, the SOL fallback); it is None for the
        other ops."""
        rows: List[dict] = []
        ops_in_step: Dict[Optional[int], int] = {}
        for run in result.runs:
            op, v = run.op, run.value
            op_index = ops_in_step.get(run.gen_index, 0)
            ops_in_step[run.gen_index] = op_index + 1
            count = op.count
            rows.append(
                {
                    "phase": phase,
                    "row_kind": "op",
                    "op_index": op_index,
                    "op_name": op.name,
                    "op_kind": op.kind,
                    "count": float(count),
                    "quant": op.quant_label,
                    "lookup_table": v.lookup.table if v.lookup else None,
                    "lookup_args": json.dumps({"args": v.lookup.args, "kwargs": v.lookup.kwargs}) if v.lookup else None,
                    "interp_path": v.path,
                    "source": v.source,  # "silicon" / "sol" for a GDN lookup, else None
                    "latency_ms": v.total / count if count else 0.0,
                    "total_ms": v.total,
                    "weighted_total_ms": v.total * run.repeat if run.repeat is not None else v.total,
                    "gen_step_index": run.gen_index,
                    "gen_s": run.gen_s,
                    "gen_repeat": run.repeat,
                }
            )
        if phase == "generation":
            totals: Dict[Optional[int], float] = {}
            for row in rows:
                i = row["gen_step_index"]
                totals[i] = totals[i] + row["total_ms"] if i in totals else 0 + row["total_ms"]
            for i, s, repeat in result.samples:
                total = totals.get(i, 0)
                rows.append(
                    _total_row(phase, "gen_step_total", "__gen_step_total__", total, total * repeat, i, s, repeat)
                )
            last = _total_row(phase, "step_total", "__step_total__", result.phase_latency_ms, result.phase_latency_ms)
            last["lookup_args"] = json.dumps(
                {"batch_size": batch, "beam_width": 1, "isl": isl, "osl": osl, "stride": STRIDE}
            )
            last["tpot_ms"] = result.total_ms
            last["generation_latency_ms"] = result.phase_latency_ms
            rows.append(last)
        else:
            last = _total_row(phase, "step_total", "__step_total__", result.phase_latency_ms, result.phase_latency_ms)
            last["ttft_ms"] = result.total_ms
            last["context_latency_ms"] = result.phase_latency_ms
            rows.append(last)
        return rows


def _check_modes(model: ModelSpec) -> None:
    """The checkpoint's modes must be ones this port has tables for."""
    q = model.quant
    for kind, name, table in (("GEMM", q.gemm, GEMM_QUANTS), ("MoE", q.moe, MOE_QUANTS), ("KV cache", q.kv, KV_QUANTS),
                              ("FMHA", q.fmha, FMHA_QUANTS)):  # fmt: skip
        if name not in table:
            raise ValueError(f"unsupported {kind} quant mode {name!r} of model {model.name!r}; "
                             f"supported: {', '.join(table)}")  # fmt: skip


def _total_row(phase, kind, name, total, weighted, i=None, s=None, repeat=None) -> dict:
    return {
        "phase": phase,
        "row_kind": kind,
        "op_index": -1,
        "op_name": name,
        "op_kind": None,
        "count": None,
        "quant": None,
        "lookup_table": None,
        "lookup_args": None,
        "interp_path": None,
        "latency_ms": None,
        "total_ms": total,
        "weighted_total_ms": weighted,
        "gen_step_index": i,
        "gen_s": s,
        "gen_repeat": repeat,
    }


_CONTEXTS: Dict[Tuple[int, str, Database, bool, QuantOverrides, int], StepContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def step_context(tree: DataTree, model: str, db: Database, shared_layer: bool, overrides=None,
                 nextn=0) -> StepContext:  # fmt: skip
    """The StepContext of (model, database, shared layer, quant overrides,
    draft depth), built once per data tree. ``overrides``: None, an
    ``options`` dict or `QuantOverrides` (`aicsql.spec.step.options`);
    ``nextn``: the MTP draft depth, an int >= 0 or 'auto' (`resolve_nextn`)."""
    overrides = quant_overrides(overrides)
    nextn = resolve_nextn(tree, model, nextn)
    key = (id(tree), model, db, bool(shared_layer), overrides, nextn)
    with _CONTEXTS_LOCK:
        ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = StepContext(tree, model, db, bool(shared_layer), overrides, nextn)
        with _CONTEXTS_LOCK:
            ctx = _CONTEXTS.setdefault(key, ctx)
    return ctx
