"""Entry points of the engine-step estimator (the Python path).

``step_latency_batch`` is what the Rust bridge calls, with the session's
``aic.*`` settings as strings (see ``aicsql.spec.functions``):

``backend`` / ``version``  complete a database argument that names less than
                           'system/backend/version' (the GEMM path's rule)
``on_miss``                'null': a spec miss gives NULL; 'error': ValueError
                           naming the op and its lookup
``shared_layer``           'true' = the spec's default source union

Bad input -- unknown model, database or phase, an unsupported architecture
or checkpoint, tp not dividing the heads, an inconsistent MoE layout --
always raises ValueError naming it. NULL in gives NULL out (``moe_tp`` /
``moe_ep`` NULL just means "not given", ``dp`` NULL is 1).

``dp`` (the attention data parallelism), ``pp`` (pipeline stages) and ``cp``
(context parallelism) are optional everywhere: keywords of the plain
functions, trailing arrays / arguments of the batch forms, in that order
(NULL = 1). dp > 1 is priced for the MoE families MOE, HYBRIDMOE, DEEPSEEK,
KIMIK25, GEMMA4MIX and the MoE variants of QWEN35 and NEMOTRONH (``tp * dp
* cp = moe_tp * moe_ep``); pp prices the stages' P2P hand-offs (every layer
stays in the step); cp > 1 is sglang's prefill context parallelism (tp = dp
= 1; context ops only), refused on the other backends -- and for QWEN35,
NEMOTRONH and NEMOTRONNAS everywhere -- as the spec refuses it.

``engine_step`` returns the full breakdown (the goldens' rows), and
``step_latency`` the phase's number: TTFT for 'context', TPOT for
'generation' (ms). Both take ``options``, the spec's quant overrides
(`aicsql.spec.step.options`; docs/spec/options.md 1): a dict of
``gemm_quant``, ``moe_quant``, ``kvcache_quant``, ``fmha_quant``,
``comm_quant`` (None = the checkpoint's mode); an unknown key or mode name is
a ValueError, and so is a deployment the spec refuses (an explicit fp8 FMHA
without an fp8 slice in the context op's table, fp8_block experts split off
the weight block, MTP on NEMOTRONNAS).

``options`` also takes ``nextn``, the MTP draft depth (docs/spec/options.md
2.3; an integer >= 0 or 'auto', the checkpoint's
``num_nextn_predict_layers``): a generation step then prices one
verification iteration -- every generation op's count times ``(nextn + L) /
L``, ``batch * (nextn + 1)`` tokens per step -- and a context step is
unchanged. ``nextn_accepted`` is refused here: projecting iterations onto
accepted tokens is the serving estimates' business. The batch forms read
``aic.nextn`` (and ignore ``aic.nextn_accepted``, a serving setting).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa

from ..data import Database, DataTree
from .engine import PHASES, DeploymentRefused, StepMiss, step_context
from .options import step_options

__all__ = ["engine_step", "engine_step_table", "step_latency", "step_latency_batch", "ENGINE_STEP_SCHEMA"]


def _settings(settings: Optional[Dict[str, str]], data):
    from ..functions import _Settings  # the GEMM path's settings parser (lazy: functions imports us)

    return _Settings(settings, data)


def _plain_settings(shared_layer: bool) -> Dict[str, str]:
    return {"backend": "", "version": "latest", "on_miss": "error", "shared_layer": "true" if shared_layer else "false"}


def _int_arg(name: str, v, optional: bool = False) -> Optional[int]:
    """An integer argument (integral floats accepted, e.g. from a float64 column)."""
    if v is None and optional:
        return None
    if isinstance(v, bool):
        raise ValueError(f"{name} = {v!r} is not an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise ValueError(f"{name} = {v!r} is not an integer")


def _phase(phase) -> str:
    # ASCII case folding only, no trimming: the same spellings the Rust path takes.
    text = phase.lower() if isinstance(phase, str) and phase.isascii() else phase
    if text not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
    return text


def _run(tree: DataTree, database: Database, shared: bool, model, phase, tp, batch, isl, osl, moe_tp, moe_ep,
         dp=None, pp=None, cp=None, overrides=None, nextn=0):  # fmt: skip
    ctx = step_context(tree, model, database, shared, overrides, nextn)
    ph = _phase(phase)
    dp = _int_arg("dp", dp, optional=True)
    pp = _int_arg("pp", pp, optional=True)
    cp = _int_arg("cp", cp, optional=True)
    result = ctx.run(
        ph,
        _int_arg("tp", tp),
        _int_arg("batch", batch),
        _int_arg("isl", isl),
        _int_arg("osl", osl),
        _int_arg("moe_tp", moe_tp, optional=True),
        _int_arg("moe_ep", moe_ep, optional=True),
        dp=1 if dp is None else dp,
        pp=1 if pp is None else pp,
        cp=1 if cp is None else cp,
    )
    return ctx, ph, result


def engine_step(
    model: str,
    db: str,
    phase: str,
    tp: int,
    batch: int,
    isl: int,
    osl: int,
    moe_tp: Optional[int] = None,
    moe_ep: Optional[int] = None,
    *,
    dp: int = 1,
    pp: int = 1,
    cp: int = 1,
    shared_layer: bool = True,
    options: Optional[Dict[str, Optional[str]]] = None,
    data=None,
) -> dict:
    """One static step, op by op.

    Returns ``{"rows": [...], "total_ms": TTFT or TPOT, "phase_latency_ms":
    context or generation latency, "quants": {...}}``; the rows follow the
    goldens (one per op application -- per sample step in generation -- then
    ``__gen_step_total__`` rows and a ``__step_total__`` row). A miss raises
    ValueError naming the op and its lookup. ``options``: quant overrides
    (``gemm_quant``, ``moe_quant``, ``kvcache_quant``, ``fmha_quant``,
    ``comm_quant``; docs/spec/options.md 1, `aicsql.spec.step.options`) and
    the MTP draft depth ``nextn`` (module doc)."""
    opts = step_options(options)
    s = _settings(_plain_settings(shared_layer), data)
    database = s.tree.resolve(db, s.backend, s.version)
    try:
        ctx, ph, result = _run(s.tree, database, s.shared_layer, model, phase, tp, batch, isl, osl, moe_tp, moe_ep,
                               dp, pp, cp, opts.quant, opts.mtp.nextn)  # fmt: skip
    except StepMiss as miss:
        raise ValueError(str(miss)) from None
    return {
        "rows": ctx.rows(ph, result, _int_arg("batch", batch), _int_arg("isl", isl), _int_arg("osl", osl)),
        "total_ms": result.total_ms,
        "phase_latency_ms": result.phase_latency_ms,
        "quants": ctx.quants(ph).as_dict(),
    }


def step_latency(
    model: str,
    db: str,
    phase: str,
    tp: int,
    batch: int,
    isl: int,
    osl: int,
    moe_tp: Optional[int] = None,
    moe_ep: Optional[int] = None,
    *,
    dp: int = 1,
    pp: int = 1,
    cp: int = 1,
    shared_layer: bool = True,
    options: Optional[Dict[str, Optional[str]]] = None,
    data=None,
) -> float:
    """TTFT ('context') or TPOT ('generation', of one verification iteration
    at ``nextn > 0``) in ms; a miss raises ValueError. ``options``: quant
    overrides and ``nextn``, as `engine_step`'s."""
    opts = step_options(options)
    s = _settings(_plain_settings(shared_layer), data)
    database = s.tree.resolve(db, s.backend, s.version)
    try:
        return _run(s.tree, database, s.shared_layer, model, phase, tp, batch, isl, osl, moe_tp, moe_ep,
                    dp, pp, cp, opts.quant, opts.mtp.nextn)[2].total_ms  # fmt: skip
    except StepMiss as miss:
        raise ValueError(str(miss)) from None


def _pylist(array, n: Optional[int] = None) -> list:
    if array is None:
        return [None] * (n or 0)
    if isinstance(array, (pa.Array, pa.ChunkedArray)):
        return array.to_pylist()
    if isinstance(array, pa.Scalar):
        return [array.as_py()]
    return list(array)


def step_latency_batch(
    settings: Dict[str, str],
    model: pa.Array,
    db: pa.Array,
    phase: pa.Array,
    tp: pa.Array,
    batch: pa.Array,
    isl: pa.Array,
    osl: pa.Array,
    moe_tp: Optional[pa.Array] = None,
    moe_ep: Optional[pa.Array] = None,
    dp: Optional[pa.Array] = None,
    pp: Optional[pa.Array] = None,
    cp: Optional[pa.Array] = None,
    *,
    data=None,
) -> pa.Array:
    """`step_latency` for each row (float64). NULL in any required argument
    gives NULL; a miss gives NULL (``on_miss = 'null'``) or ValueError naming
    the op and lookup (``'error'``); bad input raises ValueError.

    Tables, model and quant modes are built once per (model, database,
    shared layer); a repeated configuration is computed once."""
    s = _settings(settings, data)
    cols = [_pylist(a) for a in (model, db, phase, tp, batch, isl, osl)]
    n = len(cols[0])
    cols.append(_pylist(moe_tp, n))
    cols.append(_pylist(moe_ep, n))
    cols.append(_pylist(dp, n))
    cols.append(_pylist(pp, n))
    cols.append(_pylist(cp, n))
    lengths = [len(c) for c in cols]
    if any(length != n for length in lengths):
        raise ValueError(f"step_latency_batch: arrays differ in length {lengths}")
    raise_on_miss = s.on_miss == "error"
    databases: Dict[str, Database] = {}
    memo: Dict[tuple, Optional[float]] = {}
    out: List[Optional[float]] = []
    for row in zip(*cols):
        r_model, r_db, r_phase, r_tp, r_batch, r_isl, r_osl, r_moe_tp, r_moe_ep, r_dp, r_pp, r_cp = row
        if r_model is None or r_db is None or r_phase is None or r_tp is None or r_batch is None or r_isl is None \
                or r_osl is None:
            out.append(None)
            continue
        if row in memo:
            out.append(memo[row])
            continue
        database = databases.get(r_db)
        if database is None:
            database = databases[r_db] = s.tree.resolve(r_db, s.backend, s.version)
        try:
            value = _run(s.tree, database, s.shared_layer, r_model, r_phase, r_tp, r_batch, r_isl, r_osl,
                         r_moe_tp, r_moe_ep, r_dp, r_pp, r_cp, s.options.quant, s.options.mtp.nextn)[2].total_ms
        except (StepMiss, DeploymentRefused) as miss:
            if raise_on_miss:
                raise ValueError(f"{r_model} on {database.name}, {r_phase}: {miss}") from None
            value = None
        memo[row] = value
        out.append(value)
    return pa.array(out, type=pa.float64())


# ---- py_engine_step: the Rust engine_step's rows, from the Python path -------------------

_TEXT, _INT, _FLOAT = pa.string(), pa.int64(), pa.float64()
# The lookup's arguments as columns, in the Rust table function's order.
_LOOKUP_COLUMNS = (
    "m", "n", "k",
    "attn_batch", "attn_seq", "attn_prefix", "heads", "kv_heads", "head_dim", "window",
    "comm_gpus", "message_size",
    "moe_tokens", "moe_hidden", "moe_inter", "moe_topk", "moe_experts", "moe_tp", "moe_ep",
)  # fmt: skip
ENGINE_STEP_SCHEMA = pa.schema(
    [
        pa.field("db", _TEXT, False),
        pa.field("phase", _TEXT, False),
        pa.field("row_kind", _TEXT, False),
        pa.field("op_index", _INT),
        pa.field("op_name", _TEXT, False),
        pa.field("op_kind", _TEXT),
        pa.field("count", _FLOAT),
        pa.field("quant", _TEXT),
        pa.field("lookup_table", _TEXT),
        *[pa.field(name, _INT) for name in _LOOKUP_COLUMNS],
        pa.field("lookup_args", _TEXT),
        pa.field("interp_path", _TEXT),
        pa.field("latency_ms", _FLOAT),
        pa.field("total_ms", _FLOAT),
        pa.field("weighted_total_ms", _FLOAT),
        pa.field("gen_step_index", _INT),
        pa.field("gen_s", _INT),
        pa.field("gen_repeat", _INT),
        pa.field("miss", pa.bool_(), False),
        pa.field("reason", _TEXT),
    ]
)
_METHODS = {
    "gemm_perf": "query_gemm",
    "context_attention_perf": "query_context_attention",
    "generation_attention_perf": "query_generation_attention",
    "custom_allreduce_perf": "query_custom_allreduce",
    "nccl_perf": "query_nccl",
    "moe_perf": "query_moe",
    "mla_context_module_perf": "query_context_mla_module",
    "mla_generation_module_perf": "query_generation_mla_module",
    "context_mla_perf": "query_context_mla",
    "generation_mla_perf": "query_generation_mla",
    "mla_bmm_perf": "query_mla_bmm",
    "computescale_perf": "query_compute_scale",
    "scale_matrix_perf": "query_scale_matrix",
    "query_gdn": "query_gdn",  # the GDN rows name the method, as the goldens do
    "query_mamba2": "query_mamba2",  # so do the Mamba-2 rows
    # DeepSeek-V4 (families_dsv4 4): the rows name the spec's methods, as the goldens do
    "query_mhc_module": "query_mhc_module",
    "query_context_deepseek_v4_attention_module": "query_context_deepseek_v4_attention_module",
    "query_generation_deepseek_v4_attention_module": "query_generation_deepseek_v4_attention_module",
    # DeepSeek-V3.2 / GLM-5 (families_dsa 6.3, 6.4): the rows name the methods too
    "query_context_dsa_module": "query_context_dsa_module",
    "query_generation_dsa_module": "query_generation_dsa_module",
}


_DSV4_ATTENTION_TABLES = frozenset({
    "query_context_deepseek_v4_attention_module", "query_generation_deepseek_v4_attention_module",
    "dsv4_csa_context_module_perf", "dsv4_hca_context_module_perf", "dsv4_csa_generation_module_perf",
    "dsv4_hca_generation_module_perf",
})  # fmt: skip


def _lookup_fields(table: Optional[str], method: Optional[str], args: Sequence[Any], kwargs: Dict[str, Any]) -> dict:
    """lookup_table, the argument columns and lookup_args of one lookup."""
    row: Dict[str, Any] = {name: None for name in _LOOKUP_COLUMNS}
    row["lookup_table"] = table
    row["lookup_args"] = None
    if table is None:
        return row
    a, kw = list(args), dict(kwargs)
    if table == "gemm_perf":
        row.update(m=a[0], n=a[1], k=a[2])
    elif table in ("context_attention_perf", "generation_attention_perf"):
        b, s, rest = a[0], a[1], a[2:]
        prefix = None
        if table == "context_attention_perf":
            prefix, rest = rest[0], rest[1:]
        row.update(attn_batch=b, attn_seq=s, attn_prefix=prefix, heads=rest[0], kv_heads=rest[1],
                   head_dim=kw.get("head_size"), window=kw.get("window_size"))  # fmt: skip
    elif table == "custom_allreduce_perf":
        row.update(comm_gpus=a[1], message_size=a[2])
    elif table == "nccl_perf":
        size = a[3]  # a float on trtllm SM 100 (the quant-compressed all-gather): the column keeps integral ones
        row.update(comm_gpus=a[1], message_size=int(size) if not isinstance(size, float) or size.is_integer() else None)
    elif table == "moe_perf":
        row.update(moe_tokens=kw["num_tokens"], moe_hidden=kw["hidden_size"], moe_inter=kw["inter_size"],
                   moe_topk=kw["topk"], moe_experts=kw["num_experts"], moe_tp=kw["moe_tp_size"],
                   moe_ep=kw["moe_ep_size"])  # fmt: skip
    # The MLA and quantisation-overhead lookups reuse the attention and GEMM
    # argument columns (families_mla 3.5, 7.4): no columns of their own.
    elif table in ("mla_context_module_perf", "context_mla_perf"):
        row.update(attn_batch=kw["b"], attn_seq=kw["s"], attn_prefix=kw["prefix"], heads=kw["num_heads"])
    elif table == "mla_generation_module_perf":
        row.update(attn_batch=kw["b"], attn_seq=kw["s"], heads=kw["num_heads"])
    elif table == "generation_mla_perf":
        row.update(attn_batch=a[0], attn_seq=a[1], heads=a[2])
    elif table == "mla_bmm_perf":
        row.update(attn_batch=a[0], heads=a[1])
    elif table in ("computescale_perf", "scale_matrix_perf"):
        row.update(m=a[0], k=a[1])
    # The GDN and Mamba-2 lookups (families_qwen35_gemma4 2.3, families_nemotron
    # 3.2) fill the attention batch / sequence columns with their grid axes
    # (sequence NULL in generation); the model shape is in lookup_args.
    elif table in ("query_gdn", "query_mamba2"):
        row.update(attn_batch=kw["batch_size"], attn_seq=kw["seq_len"])
    # The DSA modules (families_dsa 6.3, 6.4) fill the attention columns.
    elif table == "query_context_dsa_module":
        row.update(attn_batch=kw["b"], attn_seq=kw["s"], attn_prefix=kw["prefix"], heads=kw["num_heads"])
    elif table == "query_generation_dsa_module":
        row.update(attn_batch=kw["b"], attn_seq=kw["s"], heads=kw["num_heads"])
    # The DeepSeek-V4 attention modules (families_dsv4 4.2, 4.3) fill the
    # attention columns (the rest of the geometry is in lookup_args); the mHC
    # lookup (4.1) has its token count in lookup_args only.
    elif table in _DSV4_ATTENTION_TABLES and "b" in kw:
        row.update(attn_batch=kw["b"], attn_seq=kw["s"], attn_prefix=kw.get("prefix"), heads=kw["num_heads"],
                   head_dim=kw["head_dim"], window=kw["window_size"])  # fmt: skip
    row["lookup_args"] = f"{method or _METHODS[table]} {json.dumps({'args': a, 'kwargs': kw})}"
    return row


def _row(db: str, phase: str, **values) -> dict:
    row = {name: None for name in ENGINE_STEP_SCHEMA.names}
    row.update(db=db, phase=phase, miss=False)
    row.update(values)
    return row


def engine_step_table(settings: Dict[str, str], *args, data=None) -> pa.RecordBatch:
    """``py_engine_step(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep [, dp [, pp [, cp]]]])``:
    the rows of the Rust ``engine_step`` table function, computed by the
    Python path -- one per op (generation: per sampled decode step), the
    ``__gen_step_total__`` rows, then the ``__step_total__`` row whose
    ``latency_ms`` is TTFT / TPOT and ``total_ms`` the phase latency. Under
    ``on_miss = 'null'`` a miss gives the op that missed (``row_kind`` 'miss',
    its lookup as columns) and a NULL total; NULL arguments give no rows."""
    if len(args) not in (7, 9, 10, 11, 12):
        raise ValueError(f"py_engine_step takes 7, 9, 10, 11 or 12 arguments, got {len(args)}")
    model, db, phase, tp, batch, isl, osl = args[:7]
    moe_tp, moe_ep = args[7:9] if len(args) >= 9 else (None, None)
    dp, pp, cp = (list(args[9:12]) + [None, None, None])[:3]
    if any(v is None for v in (model, db, phase, tp, batch, isl, osl)):
        return pa.RecordBatch.from_pylist([], schema=ENGINE_STEP_SCHEMA)
    s = _settings(settings, data)
    database = s.tree.resolve(db, s.backend, s.version)
    ph = _phase(phase)
    name = database.name
    out: List[dict] = []
    try:
        ctx, ph, result = _run(s.tree, database, s.shared_layer, model, phase, tp, batch, isl, osl, moe_tp, moe_ep,
                               dp, pp, cp, s.options.quant, s.options.mtp.nextn)  # fmt: skip
    except StepMiss as miss:
        if s.on_miss == "error":
            raise ValueError(f"{model} on {name}, {ph}: {miss}") from None
        call = miss.miss.lookup
        out.append(_row(name, ph, row_kind="miss", op_name=miss.op, miss=True, reason=str(miss.miss),
                        **_lookup_fields(miss.miss.table, call.method, call.args, call.kwargs)))  # fmt: skip
        out.append(_row(name, ph, row_kind="step_total", op_name="__step_total__", miss=True,
                        reason=f"op '{miss.op}' has no perf data"))  # fmt: skip
        return pa.RecordBatch.from_pylist(out, schema=ENGINE_STEP_SCHEMA)
    rows = ctx.rows(ph, result, _int_arg("batch", batch), _int_arg("isl", isl), _int_arg("osl", osl))
    # The goldens list every op row, then the per-step totals; the table puts
    # each sampled step's total right after its ops. (sorted() is stable.)
    rows = sorted(
        (r for r in rows if r["row_kind"] != "step_total"),  # rebuilt below: TTFT / TPOT, no lookup
        key=lambda r: (r["gen_step_index"] or 0, r["row_kind"] == "gen_step_total"),
    )
    for r in rows:
        fields = {k: r[k] for k in ("row_kind", "op_index", "op_name", "op_kind", "count", "quant", "interp_path",
                                    "latency_ms", "total_ms", "weighted_total_ms", "gen_step_index", "gen_s",
                                    "gen_repeat")}  # fmt: skip
        lookup = json.loads(r["lookup_args"]) if r["row_kind"] == "op" and r["lookup_args"] else None
        if lookup is not None:
            fields.update(_lookup_fields(r["lookup_table"], None, lookup["args"], lookup["kwargs"]))
        out.append(_row(name, ph, **fields))
    out.append(_row(name, ph, row_kind="step_total", op_name="__step_total__", latency_ms=result.total_ms,
                    total_ms=result.phase_latency_ms, weighted_total_ms=result.phase_latency_ms))  # fmt: skip
    return pa.RecordBatch.from_pylist(out, schema=ENGINE_STEP_SCHEMA)
