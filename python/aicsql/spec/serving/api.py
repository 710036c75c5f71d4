"""Entry points of the serving estimates (the Python path of ``estimate_agg``,
``estimate_disagg`` and ``estimate_memory``).

SQL (the Rust functions' contract, which the batch functions follow)::

    estimate_agg(model, db, parallel, batch, isl, osl [, prefix [, ctx_tokens [, moe_tp, moe_ep]]])
    estimate_memory(...same arguments...)
    estimate_disagg(model, db, prefill_parallel, prefill_batch, prefill_workers,
                    decode_parallel, decode_batch, decode_workers, isl, osl
                    [, prefix [, prefill_moe_tp, prefill_moe_ep, decode_moe_tp, decode_moe_ep]])

``parallel`` is an integer tp (pp = dp = cp = 1; the moe arguments apply) or
the spec's label ``tp{tp}pp{pp}dp{dp}etp{moe_tp|None}ep{moe_ep|None}`` with
an optional trailing ``cp{cp}`` (how the spec's frames print a layout); a moe
argument that disagrees with the label -- a number where the label says
another number or ``None`` -- is an error. Attention dp > 1 (``tp * dp * cp
= moe_tp * moe_ep``) is priced for the MoE families MOE (Qwen3-MoE,
Mixtral, GPT-OSS, MiniMax-M2, ...), HYBRIDMOE (Llama-4, MiMo-V2-Flash),
DEEPSEEK, KIMIK25 and the MoE variants of QWEN35 and NEMOTRONH, and
refused for the others naming the family (NEMOTRONH and NEMOTRONNAS use the
base memory model: the KV cache of all ``L`` layers at ``ceil(Hkv / tp)``
heads -- zero for NEMOTRONNAS, whose model-level ``Hkv`` is null --
families_nemotron 4). GEMMA4MIX (Gemma 4) sizes its KV cache per layer
type, the sliding-window layers capped at the window (families_qwen35_gemma4
9; `kvcache.kv_bytes_per_sequence`).
Pipeline parallelism (pp > 1) is priced for every family. Context
parallelism (cp > 1: sglang's prefill CP) is priced where the spec has it --
sglang, with tp = 1 and attention dp = 1 -- and refused elsewhere with the
spec's reason (``cli_estimate`` has no cp argument: cp reaches an estimate
through the label, as the search frames print it).

A NULL required argument gives a NULL struct; NULL prefix = 0, NULL
ctx_tokens = isl. A perf-data miss or an OOM gives a struct whose fields are
all NULL except ``reason`` (the message), or raises ValueError with it under
``on_miss = 'error'``; invalid input always raises ValueError.
``estimate_memory`` prices every step of the aggregated estimate first (a
miss is a miss) and reports a deployment that does not fit as ``fits =
false`` with its numbers.

The plain functions (`estimate_agg`, `estimate_disagg`, `estimate_memory`)
take the same arguments as keywords and return the struct as a dict. They
also take ``options``, the spec's quantisation overrides (``cli_estimate``'s
``--gemm/moe/kvcache/fmha/comm-quant-mode``; docs/spec/options.md 1;
`aicsql.spec.step.options`): a dict of ``gemm_quant``, ``moe_quant``,
``kvcache_quant``, ``fmha_quant``, ``comm_quant`` whose values are the
spec's mode names (None = the checkpoint's mode), the same overrides on both
sides of a disaggregated estimate. The quant fields of the struct show the
resolved modes (``comm`` only labels the result: ``cli_estimate`` prices no
collective in it). An unknown key or mode name is a ValueError (the spec's
KeyError), always raised; a deployment the spec refuses for its modes (an
explicit fp8 FMHA without an fp8 slice in the context op's table, fp8_block
experts split off the weight block) is a reason like a miss, and a mode
without a table misses at the first lookup keyed on it. Not priced yet, and
refused with ValueError: overrides for the DEEPSEEKV32 (DSA) and DEEPSEEKV4
families, and a comm mode other than ``half`` with cp > 1.

``options`` also takes the spec's memory knobs (docs/spec/options.md 3):
``free_gpu_memory_fraction`` (a number in (0, 1]; aicsql refuses other
values, the spec does not check) and ``max_seq_len`` (an integer >= 1);
None = the backend's default. Only the aggregated estimate on trtllm reads
them (and ``estimate_memory``, which reports its memory): the KV cache is
sized for ``batch`` sequences of ``max_seq_len`` tokens (default ``isl +
osl``) and the KV-budget check uses the fraction (default 0.9), the warning
naming it (``str`` of the value; ``backend default`` when not given). vllm,
sglang and ``estimate_disagg`` accept and ignore both, as the spec does. The
batch forms read the same knobs from the settings ``aic.free_gpu_memory_fraction``
and ``aic.max_seq_len`` ('' = unset).

``options`` also takes MTP speculative decoding (docs/spec/options.md 2):
``nextn``, the draft depth (an integer >= 0, or 'auto': the checkpoint's
``num_nextn_predict_layers``, 0 when it has none), and ``nextn_accepted``,
the average accepted draft tokens per decode iteration, required once the
depth is > 0 (within ``[0, nextn]``; ignored at depth 0). Both sides of a
disaggregated estimate run at the depth. The steps then price verification
iterations (generation op counts times ``(nextn + L) / L``, ``nextn + 1``
tokens per request and step, activations times ``nextn + 1``) and the result
is projected over the accepted tokens (`aicsql.spec.serving.speculative`):
the aggregated result, the decode worker's row before the rate matching.
Malformed values are ValueErrors with the spec's texts, always raised;
NEMOTRONNAS with ``nextn > 0`` is a refused deployment (a reason). The batch
forms read ``aic.nextn`` and ``aic.nextn_accepted`` ('' = unset).

``options`` also takes the images of a vision-language request
(docs/spec/options.md 4): ``image_height``, ``image_width`` (pixels, integers
>= 0, default 0 = no image), ``num_images`` (per request, an integer >= 0,
default 1) and ``enable_encoder_dp`` (default True: the vision encoder is
replicated over the tp ranks, each taking its share of the images; False:
sharded like the LLM, which tp must divide -- else a refused deployment
with the spec's text, images or not). Only Qwen3-VL (QWEN3VL, QWEN3VL_MOE)
reads them; every other model ignores them, as the spec does. An image of
``H x W`` pixels is ``(H // 32) * (W // 32)`` LLM tokens on Qwen3-VL (16-pixel
patches merged 2 x 2) in front of each request's text: every step and the
KV cache run at that effective length, the reported ``isl`` stays the
text's, and the encoder phase is priced once per batch in front of the
aggregated TTFT (and in its throughput) and the prefill worker's TTFT, its
memory added to theirs (``encoder_latency_ms``, ``encoder_memory_gib``;
`aicsql.spec.serving.encoder`). The batch forms read ``aic.image_height``,
``aic.image_width``, ``aic.num_images`` and ``aic.enable_encoder_dp``
('' = unset).
"""

from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import pyarrow as pa

from ..data import Database
from ..limits import MAX_ISL, check_step
from ..step.api import _int_arg, _pylist, _settings
from ..step.engine import DeploymentRefused, StepContext, resolve_nextn, step_context
from ..step.options import Options, options_over, parse_options, refuse_decode_system
from .estimate import (
    Layout,
    ServingMiss,
    agg_estimate,
    disagg_estimate,
    oom_message_agg,
    resolve_layout,
)

__all__ = [
    "AGG_SCHEMA",
    "DISAGG_SCHEMA",
    "MEMORY_SCHEMA",
    "estimate_agg",
    "estimate_agg_batch",
    "estimate_disagg",
    "estimate_disagg_batch",
    "estimate_memory",
    "estimate_memory_batch",
    "parse_parallel",
    "ParallelArg",
]

_F, _I, _S, _B = pa.float64(), pa.int64(), pa.utf8(), pa.bool_()


def _schema(fields: Sequence[Tuple[str, pa.DataType]]) -> pa.StructType:
    return pa.struct([pa.field(name, t, nullable=True) for name, t in fields])


AGG_SCHEMA = _schema(
    [(n, _F) for n in ("ttft_ms", "tpot_ms", "request_latency_ms", "tokens_per_s", "tokens_per_s_per_gpu",
                       "tokens_per_s_per_user", "seq_per_s", "seq_per_s_per_gpu", "request_rate")]
    + [(n, _I) for n in ("concurrency", "bs", "global_bs", "num_total_gpus", "isl", "osl", "prefix", "ctx_tokens")]
    + [(n, _F) for n in ("num_ctx_reqs", "num_gen_reqs", "num_tokens", "gen_tokens", "balance_score", "num_mix_steps",
                         "num_genonly_steps", "mix_step_ms", "genonly_step_ms", "memory_gib")]
    + [("parallel", _S)]
    + [(n, _I) for n in ("tp", "pp", "dp", "moe_tp", "moe_ep", "cp")]
    + [(n, _S) for n in ("gemm", "kvcache", "fmha", "moe", "comm")]
    + [("encoder_latency_ms", _F), ("encoder_memory_gib", _F)]
    + [(n, _S) for n in ("system", "backend", "version", "warning", "reason")]
)  # fmt: skip

MEMORY_SCHEMA = _schema(
    [(n, _F) for n in ("weights_gib", "activations_gib", "kvcache_gib", "nccl_gib", "others_gib", "total_gib",
                       "capacity_gib")]
    + [("fits", _B), ("reason", _S)]
)  # fmt: skip


def _side(prefix: str) -> List[Tuple[str, pa.DataType]]:
    return (
        [(prefix + "parallel", _S)]
        + [(prefix + n, _I) for n in ("tp", "pp", "dp", "cp", "moe_tp", "moe_ep", "bs", "global_bs", "workers")]
        + [(prefix + "seq_per_s_per_worker", _F), (prefix + "memory_gib", _F)]
        + [(prefix + n, _S) for n in ("gemm", "kvcache", "fmha", "moe")]
    )


DISAGG_SCHEMA = _schema(
    [(n, _F) for n in ("ttft_ms", "tpot_ms", "request_latency_ms", "tokens_per_s", "tokens_per_s_per_gpu",
                       "tokens_per_s_per_user", "seq_per_s", "seq_per_s_per_gpu", "request_rate")]
    + [(n, _I) for n in ("concurrency", "num_total_gpus", "isl", "osl", "prefix")]
    + _side("prefill_")
    + _side("decode_")
    + [("comm", _S), ("encoder_latency_ms", _F), ("encoder_memory_gib", _F)]
    + [(n, _S) for n in ("system", "backend", "version", "decode_system", "decode_version", "reason")]
)  # fmt: skip


# ---- arguments ------------------------------------------------------------------------------

_LABEL = re.compile(r"tp(\d+)pp(\d+)dp(\d+)etp(\d+|None)ep(\d+|None)(?:cp(\d+))?\Z")


class ParallelArg(NamedTuple):
    """A parsed ``parallel`` argument: the widths the estimate is asked for."""

    tp: int
    moe_tp: Optional[int]
    moe_ep: Optional[int]
    dp: int = 1
    pp: int = 1
    cp: int = 1


def parse_parallel(parallel, moe_tp=None, moe_ep=None, name: str = "parallel") -> ParallelArg:
    """(tp, moe_tp, moe_ep, dp, pp, cp) of a ``parallel`` argument and the
    moe arguments (dp = pp = cp = 1 for an integer tp). pp, dp and cp are
    validated by the layout (`resolve_parallel`), naming them."""
    moe_tp = _int_arg(name.replace("parallel", "moe_tp"), moe_tp, optional=True)
    moe_ep = _int_arg(name.replace("parallel", "moe_ep"), moe_ep, optional=True)
    if isinstance(parallel, str):
        text = parallel.strip()
        if text.isdigit():
            return ParallelArg(int(text), moe_tp, moe_ep)
        m = _LABEL.match(text)
        if m is None:
            raise ValueError(
                f"{name} = {parallel!r} is neither a tp (integer) nor the spec's parallel label "
                "'tp{tp}pp{pp}dp{dp}etp{moe_tp|None}ep{moe_ep|None}[cp{cp}]' (e.g. 'tp8pp1dp1etp1ep8')"
            )
        tp, pp, dp = int(m.group(1)), int(m.group(2)), int(m.group(3))
        cp = int(m.group(6)) if m.group(6) is not None else 1
        for dim, value in (("pp", pp), ("dp", dp), ("cp", cp)):
            if value < 1:
                raise ValueError(f"{dim} = {value} in {name} = {parallel!r} must be a positive integer")
        resolved = []
        for arg_name, label_text, arg in (("moe_tp", m.group(4), moe_tp), ("moe_ep", m.group(5), moe_ep)):
            label_value = None if label_text == "None" else int(label_text)
            if arg is not None and arg != label_value:
                raise ValueError(f"{arg_name} = {arg} contradicts {name} = {parallel!r} "
                                 f"({'etp' if arg_name == 'moe_tp' else 'ep'}{label_text})")  # fmt: skip
            resolved.append(label_value)
        return ParallelArg(tp, resolved[0], resolved[1], dp, pp, cp)
    return ParallelArg(_int_arg(name, parallel), moe_tp, moe_ep)


def _positive(name: str, v) -> int:
    v = _int_arg(name, v)
    if v < 1:
        raise ValueError(f"{name} = {v} must be a positive integer")
    return v


def _prefix(v) -> int:
    v = _int_arg("prefix", v, optional=True)
    if v is None:
        return 0
    if v < 0:
        raise ValueError(f"prefix = {v} must be a non-negative integer")
    return v


class _Agg:
    """The arguments of one aggregated point, validated."""

    def __init__(self, model, db, parallel, batch, isl, osl, prefix, ctx_tokens, moe_tp, moe_ep):
        self.tp, self.moe_tp, self.moe_ep, self.dp, self.pp, self.cp = parse_parallel(parallel, moe_tp, moe_ep)
        self.batch = _positive("batch", batch)
        self.isl = _positive("isl", isl)
        self.osl = _positive("osl", osl)
        self.prefix = _prefix(prefix)
        ctx = _int_arg("ctx_tokens", ctx_tokens, optional=True)
        self.ctx_tokens = self.isl if ctx is None else ctx
        if self.ctx_tokens < 1:
            raise ValueError(f"ctx_tokens = {self.ctx_tokens} must be a positive integer")
        if self.ctx_tokens > MAX_ISL:
            raise ValueError(f"ctx_tokens = {self.ctx_tokens} exceeds the limit of {MAX_ISL} "
                             "(aicsql bounds the work of one call)")  # fmt: skip
        check_step(self.tp, self.batch, self.isl, self.osl, self.moe_tp, self.moe_ep, self.dp, self.pp, self.cp)


def _agg(ctx: StepContext, a: _Agg, options: Options, accepted: float):
    layout = resolve_layout(ctx, a.tp, a.moe_tp, a.moe_ep, a.dp, a.pp, a.cp)
    mem = options.memory
    return agg_estimate(ctx, layout, a.batch, a.isl, a.osl, a.prefix, a.ctx_tokens, mem.max_seq_len,
                        mem.free_gpu_memory_fraction, accepted, options.images)  # fmt: skip


def _agg_row(ctx: StepContext, a: _Agg, options: Options, accepted: float) -> dict:
    """The estimate_agg struct (ServingMiss on a miss or OOM)."""
    result = _agg(ctx, a, options, accepted)
    if result.oom:
        raise ServingMiss(oom_message_agg(ctx.model.name, ctx.db.system, a.tp, a.dp, a.pp), "oom")
    return result.row


def _memory_row(ctx: StepContext, a: _Agg, options: Options, accepted: float) -> dict:
    result = _agg(ctx, a, options, accepted)
    m = result.memory
    return {
        "weights_gib": m["weights"],
        "activations_gib": m["activations"],
        "kvcache_gib": m["kvcache"],
        "nccl_gib": m["nccl"],
        "others_gib": m["others"],
        "total_gib": m["total"],
        "capacity_gib": result.capacity / (1 << 30),
        "fits": not result.oom,
        "reason": None,
    }


class _Disagg:
    def __init__(self, model, db, p_parallel, p_batch, p_workers, d_parallel, d_batch, d_workers, isl, osl, prefix,
                 p_moe_tp, p_moe_ep, d_moe_tp, d_moe_ep):  # fmt: skip
        self.prefill = parse_parallel(p_parallel, p_moe_tp, p_moe_ep, "prefill_parallel")
        self.decode = parse_parallel(d_parallel, d_moe_tp, d_moe_ep, "decode_parallel")
        self.p_batch = _positive("prefill_batch", p_batch)
        self.p_workers = _positive("prefill_workers", p_workers)
        self.d_batch = _positive("decode_batch", d_batch)
        self.d_workers = _positive("decode_workers", d_workers)
        self.isl = _positive("isl", isl)
        self.osl = _positive("osl", osl)
        self.prefix = _prefix(prefix)
        for par, batch in ((self.prefill, self.p_batch), (self.decode, self.d_batch)):
            check_step(par.tp, batch, self.isl, self.osl, par.moe_tp, par.moe_ep, par.dp, par.pp, par.cp)


def _disagg_row(ctx: StepContext, a: _Disagg, options: Options, accepted: float,
                decode_ctx: Optional[StepContext] = None) -> dict:  # fmt: skip
    # the memory knobs are ignored, as the spec's run_disagg has no such parameters (options.md 3.2);
    # decode_ctx: the decode workers' system's (experiments.md 1.4), None: ctx
    prefill = resolve_layout(ctx, *a.prefill)
    decode = resolve_layout(decode_ctx or ctx, *a.decode)
    return disagg_estimate(ctx, prefill, a.p_batch, a.p_workers, decode, a.d_batch, a.d_workers, a.isl, a.osl,
                           a.prefix, accepted, options.images, decode_ctx)  # fmt: skip


# ---- one call -------------------------------------------------------------------------------


class _Call:
    """Settings, databases, options and contexts shared by the rows of one call."""

    def __init__(self, settings: Optional[Dict[str, str]], data, options: Optional[Options] = None):
        # The plain functions' options, else the settings' (the batch forms: aic.gemm_quant, ...,
        # aic.free_gpu_memory_fraction, aic.max_seq_len, aic.nextn, aic.nextn_accepted,
        # aic.image_height, aic.image_width, aic.num_images, aic.enable_encoder_dp).
        self.s = _settings(settings, data)
        self.options = options if options is not None else self.s.options
        mtp = self.options.mtp
        if mtp.nextn != "auto":  # the spec checks the acceptance first; 'auto' waits for the checkpoint
            mtp.accepted_at(mtp.nextn)
        self.raise_on_miss = self.s.on_miss == "error"
        self._dbs: Dict[str, Database] = {}

    def context(self, model: str, db: str) -> Tuple[StepContext, float]:
        """The step context of (model, db) at the call's options, and the
        accepted draft tokens per iteration of its projection (0.0: none).
        The MTP options are settled first, 'auto' from the checkpoint, as the
        spec checks them before it resolves the database."""
        if not isinstance(model, str):
            raise ValueError(f"model = {model!r} is not a string")
        mtp = self.options.mtp
        nextn = resolve_nextn(self.s.tree, model, mtp.nextn)
        accepted = mtp.accepted_at(nextn)
        database = self._dbs.get(db)
        if database is None:
            database = self._dbs[db] = self.s.tree.resolve(db, self.s.backend, self.s.version)
        return step_context(self.s.tree, model, database, self.s.shared_layer, self.options.quant, nextn), accepted

    def decode_context(self, model: str, db: str) -> Optional[StepContext]:
        """The decode workers' context under the call's ``decode_system``
        (None: not heterogeneous, `decode_database_text`)."""
        database = self._dbs.get(db) or self.s.tree.resolve(db, self.s.backend, self.s.version)
        text = decode_database_text(db, database, self.options.decode_system, self.s.version)
        if text is None:
            return None
        return self.context(model, text)[0]

    def row(self, fn, schema: pa.StructType, model, db, args, roles: bool = False) -> dict:
        """``fn(ctx, args, options, accepted)``'s struct (``roles``: a
        disaggregated deployment's, with the decode role's context too); a
        miss becomes the reason (or ValueError)."""
        ctx, accepted = self.context(model, db)
        try:
            if roles:
                return fn(ctx, args, self.options, accepted, self.decode_context(model, db))
            return fn(ctx, args, self.options, accepted)
        except (ServingMiss, DeploymentRefused) as miss:
            if self.raise_on_miss:
                raise ValueError(str(miss)) from None
            out = {name: None for name in schema.names}
            out["reason"] = str(miss)
            return out


def decode_database_text(text: str, prefill: Database, decode_system: str, version: str) -> Optional[str]:
    """The database of a disaggregated deployment's decode workers on
    ``decode_system`` (experiments.md 1.3): the prefill's backend, its version
    when the call named one (in ``text`` or the version setting), else
    'latest', the decode system's own. None when ``decode_system`` is empty
    or the prefill's system."""
    decode_system = (decode_system or "").strip()
    if not decode_system or decode_system == prefill.system:
        return None
    parts = text.split("/")
    named = parts[2] if len(parts) >= 3 else version
    return f"{decode_system}/{prefill.backend}/{'latest' if named == 'latest' else prefill.version}"


def _plain(on_miss: str, shared_layer: bool, backend: str, version: str) -> Dict[str, str]:
    return {"backend": backend, "version": version, "on_miss": on_miss, "shared_layer": "true" if shared_layer else "false"}


def estimate_agg(model: str, db: str, parallel, batch: int, isl: int, osl: int, prefix: Optional[int] = None,
                 ctx_tokens: Optional[int] = None, moe_tp: Optional[int] = None, moe_ep: Optional[int] = None, *,
                 on_miss: str = "null", shared_layer: bool = True, backend: str = "", version: str = "latest",
                 options: Optional[Dict[str, object]] = None, data=None) -> dict:  # fmt: skip
    """One aggregated (IFB) estimate as a dict of the ``estimate_agg`` struct
    fields; a miss or OOM is a dict whose only non-None field is ``reason``
    (ValueError under ``on_miss = 'error'``). ``options``: the spec's quant
    overrides, memory knobs, MTP and image options (module doc)."""
    refuse_decode_system("estimate_agg", options)
    call = _Call(_plain(on_miss, shared_layer, backend, version), data, parse_options(options))
    return call.row(_agg_row, AGG_SCHEMA, model, db,
                    _Agg(model, db, parallel, batch, isl, osl, prefix, ctx_tokens, moe_tp, moe_ep))  # fmt: skip


def estimate_memory(model: str, db: str, parallel, batch: int, isl: int, osl: int, prefix: Optional[int] = None,
                    ctx_tokens: Optional[int] = None, moe_tp: Optional[int] = None, moe_ep: Optional[int] = None, *,
                    on_miss: str = "null", shared_layer: bool = True, backend: str = "", version: str = "latest",
                    options: Optional[Dict[str, object]] = None, data=None) -> dict:  # fmt: skip
    """The memory model of an aggregated estimate (``estimate_memory`` fields);
    ``options`` as `estimate_agg`'s."""
    refuse_decode_system("estimate_memory", options)
    call = _Call(_plain(on_miss, shared_layer, backend, version), data, parse_options(options))
    return call.row(_memory_row, MEMORY_SCHEMA, model, db,
                    _Agg(model, db, parallel, batch, isl, osl, prefix, ctx_tokens, moe_tp, moe_ep))  # fmt: skip


def estimate_disagg(model: str, db: str, prefill_parallel, prefill_batch: int, prefill_workers: int, decode_parallel,
                    decode_batch: int, decode_workers: int, isl: int, osl: int, prefix: Optional[int] = None,
                    prefill_moe_tp: Optional[int] = None, prefill_moe_ep: Optional[int] = None,
                    decode_moe_tp: Optional[int] = None, decode_moe_ep: Optional[int] = None, *,
                    on_miss: str = "null", shared_layer: bool = True, backend: str = "", version: str = "latest",
                    options: Optional[Dict[str, object]] = None, data=None) -> dict:  # fmt: skip
    """One disaggregated estimate (``estimate_disagg`` fields, the spec's 3
    decimals); ``options`` as `estimate_agg`'s, the same overrides on both
    sides (the spec applies them to the prefill and the decode config)."""
    call = _Call(_plain(on_miss, shared_layer, backend, version), data, parse_options(options))
    args = _Disagg(model, db, prefill_parallel, prefill_batch, prefill_workers, decode_parallel, decode_batch,
                   decode_workers, isl, osl, prefix, prefill_moe_tp, prefill_moe_ep, decode_moe_tp, decode_moe_ep)
    return call.row(_disagg_row, DISAGG_SCHEMA, model, db, args, roles=True)


# ---- batches (the Rust bridge) -----------------------------------------------------------------


def _columns(name: str, arrays, required: int, total: int) -> List[list]:
    if len(arrays) < required or len(arrays) > total:
        raise ValueError(f"{name}: expected {required} to {total} arrays, got {len(arrays)}")
    cols = [_pylist(a) for a in arrays]
    n = len(cols[0])
    cols += [[None] * n for _ in range(total - len(cols))]
    lengths = [len(c) for c in cols]
    if any(length != n for length in lengths):
        raise ValueError(f"{name}: arrays differ in length {lengths}")
    return cols


def _struct(rows: List[Optional[dict]], schema: pa.StructType) -> pa.StructArray:
    mask = [r is None for r in rows]
    children = []
    for field in schema:
        values = [None if r is None else r.get(field.name) for r in rows]
        if pa.types.is_floating(field.type):
            values = [None if v is None else float(v) for v in values]
        elif pa.types.is_integer(field.type):
            values = [None if v is None else int(v) for v in values]
        children.append(pa.array(values, type=field.type))
    return pa.StructArray.from_arrays(children, fields=list(schema), mask=pa.array(mask, pa.bool_()))


def _batch(name: str, settings, arrays, required: int, total: int, build, fn, schema, data) -> pa.StructArray:
    """One SQL call: the positional arrays, and a trailing options STRUCT
    (one dict per row, None fields unset) over the session's settings, as
    the Rust functions take it (`options_over`)."""
    call = _Call(settings, data)
    given: Optional[list] = None
    if arrays and pa.types.is_struct(_type(arrays[-1])):
        given, arrays = _pylist(arrays[-1]), arrays[:-1]
    cols = _columns(name, arrays, required, total)
    roles = name == "estimate_disagg"
    if given and not roles:
        for g in given:
            refuse_decode_system(name, g or {})
    calls: Dict[tuple, _Call] = {(): call}
    memo: Dict[tuple, dict] = {}
    out: List[Optional[dict]] = []
    for i, row in enumerate(zip(*cols)):
        if any(v is None for v in row[:required]):
            out.append(None)
            continue
        options = tuple(sorted((k, v) for k, v in (given[i] or {}).items() if v is not None)) if given else ()
        row_call = calls.get(options)
        if row_call is None:
            try:
                merged = options_over(call.options, dict(options))
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
            row_call = calls[options] = _Call(settings, data, merged)
        key = (row, options)
        value = memo.get(key)
        if value is None:
            value = memo[key] = row_call.row(fn, schema, row[0], row[1], build(*row), roles)
        out.append(value)
    return _struct(out, schema)


def _type(array) -> pa.DataType:
    return array.type if hasattr(array, "type") else pa.array(array).type


def estimate_agg_batch(settings: Dict[str, str], *arrays, data=None) -> pa.StructArray:
    """``estimate_agg`` per row: arrays (model, db, parallel, batch, isl, osl
    [, prefix [, ctx_tokens [, moe_tp, moe_ep]]] [, options STRUCT]); the struct of `AGG_SCHEMA`.
    Contexts are built once per (model, database); a repeated row is computed once."""
    return _batch("estimate_agg", settings, arrays, 6, 10, _Agg, _agg_row, AGG_SCHEMA, data)


def estimate_memory_batch(settings: Dict[str, str], *arrays, data=None) -> pa.StructArray:
    """``estimate_memory`` per row (same arguments as `estimate_agg_batch`); `MEMORY_SCHEMA`."""
    return _batch("estimate_memory", settings, arrays, 6, 10, _Agg, _memory_row, MEMORY_SCHEMA, data)


def estimate_disagg_batch(settings: Dict[str, str], *arrays, data=None) -> pa.StructArray:
    """``estimate_disagg`` per row: arrays (model, db, prefill_parallel,
    prefill_batch, prefill_workers, decode_parallel, decode_batch,
    decode_workers, isl, osl [, prefix [, prefill_moe_tp, prefill_moe_ep,
    decode_moe_tp, decode_moe_ep]] [, options STRUCT]); the struct of `DISAGG_SCHEMA`."""
    return _batch("estimate_disagg", settings, arrays, 10, 15, _Disagg, _disagg_row, DISAGG_SCHEMA, data)
