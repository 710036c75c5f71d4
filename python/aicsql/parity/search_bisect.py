"""Bisecting a support-matrix entry whose two searches differ, down to the lookup.

Upstream's drift report took a person a day to walk from "this entry
DRIFTs" to "one GEMM query breaks a distance tie the other way". Here the
walk is one call, :func:`bisect_search`, each level narrowing the next:

1. **row** -- both searches of the entry (the scan's own calls); the first
   candidate row, in the spec's row order, where the frames differ, and
   the first column that differs in it;
2. **estimate** -- the configuration of that row (the Rust row's, then the
   Python row's if it is another one) priced again by ``estimate_agg`` /
   ``estimate_disagg`` against ``py_estimate_*``; the first struct field
   that differs. No difference at either configuration: the two paths
   price the same points alike and the searches part ways in what they
   keep (sweep, sort, tie or pick) -- the walk stops at the row;
3. **step** -- the steps that estimate prices, in its order (the serving
   spec's derivation, ``aicsql.spec.serving.estimate``): an aggregated
   point's *mix* step (pass 1: the context ops over the step's context and
   decode tokens at batch 1; pass 2: context attention at batch
   ``ceil(ctx_tokens / isl)``; pass 3: generation attention over the
   decode tokens) and its *generation-only* step; a disaggregated
   deployment's *prefill* (static context) and *decode* (static
   generation) steps; each priced with ``step_latency`` against
   ``py_step_latency``; the first that differs. The SQL step functions take
   no cached prefix, so a context step is priced at ``isl - prefix`` new
   tokens without a prefix: the same GEMM, MoE and communication shapes
   (``x = batch * (isl - prefix)`` tokens), only attention differs;
4. **op** -- ``parity.bisect_step`` on that step: the first op whose
   ``engine_step`` row differs from its ``py_engine_step`` row;
5. **lookup** -- for a GEMM op, ``parity.bisect`` on its query: the first
   site-transfer step where the two traces differ, with a diagnosis (e.g.
   ``tie: same distance, different site order``).

The result says how far down it got (``level``) and why it stopped.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from . import matrix, sqlfiles
from .runner import _Settings, bisect, bisect_step

__all__ = ["SearchBisection", "bisect_search", "resolve_entry", "first_row_difference", "steps_of", "gemm_query"]

LEVELS = ("identical", "search", "row", "estimate", "step", "op", "lookup")

# The product functions the walk calls; `functions=` renames any of them (a variant under test).
PRODUCT = (
    "search_agg", "search_disagg", "py_search_agg", "py_search_disagg",
    "estimate_agg", "estimate_disagg", "py_estimate_agg", "py_estimate_disagg",
    "step_latency", "py_step_latency", "engine_step", "py_engine_step", "gemm_trace", "py_gemm_trace",
)  # fmt: skip

# A GEMM op's lookup as engine_step reports it (both paths): query_gemm {"args": [m, n, k, quant], "kwargs": {}}.
_GEMM_LOOKUP = re.compile(r"^query_gemm (\{.*\})$")


def gemm_query(lookup: Optional[str]) -> Optional[Tuple[int, int, int, str]]:
    """(m, n, k, quant) of a GEMM op's ``lookup_args``; None for any other lookup."""
    match = _GEMM_LOOKUP.match(lookup or "")
    if match is None:
        return None
    try:
        m, n, k, quant = json.loads(match.group(1))["args"]
        return int(m), int(n), int(k), str(quant)
    except (ValueError, KeyError, TypeError):
        return None


@dataclass
class SearchBisection:
    """How far the walk got and what it found at each level (None: not reached).

    ``level``: the deepest level reached -- 'identical' (the frames are
    equal), 'search' (a path failed: ``diagnosis`` says which and why),
    'row', 'estimate', 'step', 'op' or 'lookup'."""

    entry: Dict[str, object]
    level: str
    diagnosis: str
    row: Optional[Dict[str, object]] = None
    estimate: Optional[Dict[str, object]] = None
    step: Optional[Dict[str, object]] = None
    op: Optional[Dict[str, object]] = None
    lookup: Optional[Dict[str, object]] = None

    def __str__(self) -> str:
        lines = [f"entry {self.entry['entry']}: {self.diagnosis}"]
        if self.row is not None:
            r = self.row
            lines.append(f"  row {r['pos']}: column {r['column']}: rust {r['rust_value']!r}, python {r['py_value']!r}")
            lines.append(f"    configuration priced: {r['config']}")
            for side, name in (("only_rust", "only the Rust path keeps"), ("only_py", "only the Python path keeps")):
                if r.get(side):
                    more = f" (+{len(r[side]) - 3} more)" if len(r[side]) > 3 else ""
                    lines.append(f"    {name}: {r[side][:3]}{more}")
        if self.estimate is not None:
            e = self.estimate
            lines.append(f"  {e['function']}: field {e['field']}: rust {e['rust']!r}, python {e['py']!r}")
        if self.step is not None:
            s = self.step
            lines.append(f"  {s['step']} step ({s['what']}): {s['call']}: rust {s['rust_ms']!r}, python {s['py_ms']!r}")
        if self.op is not None:
            o = self.op
            lines.append(f"  op {o['op_name']} ({o['diagnosis']}): rust {o.get('lookup_rust')} = "
                         f"{o.get('latency_ms_rust')!r}, python {o.get('lookup_py')} = {o.get('latency_ms_py')!r}")
        if self.lookup is not None:
            g = self.lookup
            lines.append(f"  GEMM {g['query']}: {g['diagnosis']} at rank {g.get('rank_rust')}: distance "
                         f"{g.get('distance_rust')!r} vs {g.get('distance_py')!r}, site "
                         f"({g.get('site_n_rust')}, {g.get('site_k_rust')}) on the Rust path vs "
                         f"({g.get('site_n_py')}, {g.get('site_k_py')}) on the Python path")  # fmt: skip
        return "\n".join(lines)


# ---- the entry ---------------------------------------------------------------------------------


def resolve_entry(ctx, entry, report=None) -> Dict[str, object]:
    """The entry's columns (`matrix.ENTRY_COLUMNS`) from what the caller has:

    * an ``int``: the row of that number in ``report`` (a report table or
      the path of a report file);
    * a ``str``: an entry key, ``model|system|backend|version|mode``;
    * a row of the report or of ``support_matrix_entries.sql`` (model, db,
      mode and the search arguments), or any mapping with those;
    * a row of ``aic.meta.support_matrix`` itself (hugging_face_id, system,
      backend, version, mode, command): its arguments are parsed the
      scan's way."""
    if isinstance(entry, bool):
        raise TypeError(f"entry {entry!r}: pass a row number, an entry key or a row")
    if isinstance(entry, int):
        if report is None:
            raise ValueError(f"entry {entry}: a row number needs the report (report=table or path)")
        table = pq.read_table(report) if isinstance(report, (str, Path)) else report
        if not 0 <= entry < table.num_rows:
            raise IndexError(f"entry {entry}: the report has rows 0..{table.num_rows - 1}")
        return matrix._entry_from_mapping(table.slice(entry, 1).to_pylist()[0])
    if isinstance(entry, str):
        return _by_key(ctx, entry)
    if isinstance(entry, Mapping):
        if entry.get("total_gpus") is not None:
            return matrix._entry_from_mapping(entry)
        if entry.get("command") is not None and entry.get("hugging_face_id") is not None:
            key = "|".join(str(entry[c]) for c in ("hugging_face_id", "system", "backend", "version", "mode"))
            return _by_key(ctx, key)
        raise ValueError(f"entry {dict(entry)!r}: needs the search arguments (total_gpus, isl, ...) or a support-matrix "
                         "row's command")  # fmt: skip
    raise TypeError(f"entry {entry!r}: pass a row number, an entry key or a row")


def _by_key(ctx, key: str) -> Dict[str, object]:
    table = matrix.entries(ctx)
    rows = [r for r in table.to_pylist() if r["entry"] == key]
    if not rows:
        raise ValueError(f"entry {key!r} is not a covered PASS entry of the support matrix "
                         "(keys: model|system|backend|version|mode)")  # fmt: skip
    return matrix._entry_from_mapping(rows[0])


# ---- level 1: the row --------------------------------------------------------------------------


def _same(a, b) -> bool:
    """Exact equality, NaN equal to NaN, the type included (1 is not 1.0 here)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def first_row_difference(rust: pa.Table, py: pa.Table) -> Optional[Dict[str, object]]:
    """The first row (in the frames' order) and column (in schema order)
    where two frames differ; None if they are equal. A row only one frame
    has differs in its first column."""
    r_rows, p_rows = rust.to_pylist(), py.to_pylist()
    columns = rust.column_names
    for pos in range(max(len(r_rows), len(p_rows))):
        r = r_rows[pos] if pos < len(r_rows) else None
        p = p_rows[pos] if pos < len(p_rows) else None
        if r is None or p is None:
            return {"pos": pos, "column": columns[0], "rust_value": r and r[columns[0]], "py_value": p and p[columns[0]],
                    "rust_row": r, "py_row": p}  # fmt: skip
        for c in columns:
            if not _same(r[c], p[c]):
                return {"pos": pos, "column": c, "rust_value": r[c], "py_value": p[c], "rust_row": r, "py_row": p}
    return None


def _config(mode: str, row: Mapping) -> Dict[str, object]:
    """What identifies a candidate (docs/spec/search.md 6.6) and what pricing it again needs."""
    if mode == "agg":
        keys = ("parallel", "bs", "ctx_tokens", "tp", "pp", "dp", "cp", "moe_tp", "moe_ep")
    else:
        keys = tuple(f"{side}_{k}" for side in ("prefill", "decode")
                     for k in ("parallel", "bs", "workers", "tp", "pp", "dp", "cp", "moe_tp", "moe_ep"))  # fmt: skip
    return {k: row[k] for k in keys}


# ---- level 2: the estimate ---------------------------------------------------------------------


def _lit(v) -> str:
    return sqlfiles.literal(v)


def _estimate_call(function: str, e: Mapping, c: Mapping) -> str:
    if e["mode"] == "agg":
        args = [e["model"], e["db"], c["parallel"], c["bs"], e["isl"], e["osl"], e["prefix"], c["ctx_tokens"]]
    else:
        args = [e["model"], e["db"], c["prefill_parallel"], c["prefill_bs"], c["prefill_workers"], c["decode_parallel"],
                c["decode_bs"], c["decode_workers"], e["isl"], e["osl"], e["prefix"]]  # fmt: skip
    return f"{function}({', '.join(_lit(a) for a in args)})"


def _scalar(ctx, expression: str):
    """One scalar call's value, or the exception's text (a path failing is a finding, not a crash)."""
    try:
        return ctx.sql(f"SELECT {expression} AS v").to_arrow_table().column("v")[0].as_py(), None
    except Exception as exc:
        return None, " ".join(str(exc).split())


def _struct_difference(rust: Optional[dict], py: Optional[dict]) -> Tuple[Optional[tuple], Optional[tuple]]:
    """(the first price that differs, the first other field that differs) of
    two estimate structs, each (field, rust, python) or None. A price is a
    float field (latencies, rates, memory); the others echo the
    configuration (its label, widths, counts) and can differ in spelling
    only -- a dense model's moe_tp None or 1 -- which moves no search."""
    if rust is None or py is None:
        return (None if rust is None and py is None else ("(struct)", rust, py)), None
    price = echo = None
    for name in rust:
        if name == "reason" or _same(rust[name], py.get(name)):
            continue
        if isinstance(rust[name], float) or isinstance(py.get(name), float):
            price = price or (name, rust[name], py.get(name))
        else:
            echo = echo or (name, rust[name], py.get(name))
    return price, echo


# ---- level 3: the steps ------------------------------------------------------------------------


def steps_of(e: Mapping, c: Mapping) -> List[Dict[str, object]]:
    """The engine steps the estimate of configuration ``c`` prices, in its
    order, as step_latency arguments (docs: the module's level 3).

    The aggregated schedule is the serving spec's (``agg_point``): ``b > 1``
    mixes ``mix_step_gen_tokens`` decode tokens into each of the
    ``ceil(isl * b / ctx_tokens)`` mixed steps and, when that is fewer than
    osl steps, runs decode-only steps of ``b`` tokens; ``b == 1`` mixes no
    decode token and runs osl - 1 decode-only steps of one token."""
    from aicsql.spec.serving.backends import backend_for  # the spec's per-backend schedule

    isl, osl, prefix = int(e["isl"]), int(e["osl"]), int(e["prefix"] or 0)
    if e["mode"] == "agg":
        lay = {k: c[k] for k in ("tp", "moe_tp", "moe_ep", "dp", "pp", "cp")}
        b, ctx_tokens = int(c["bs"]), int(c["ctx_tokens"])
        backend = backend_for(str(e["db"]).split("/")[1])
        if b > 1:
            gen = int(backend.mix_step_gen_tokens(b, ctx_tokens, isl, osl))
            genonly = 0 if math.ceil(isl * b / ctx_tokens) >= osl else b
        else:
            gen, genonly = 0, 1
        cached = prefix * (ctx_tokens // isl)
        steps = [
            dict(step="mix", what="pass 1: context ops at batch 1", phase="context", batch=1,
                 isl=ctx_tokens + gen - cached, osl=1, cached=cached, **lay),
            dict(step="mix", what="pass 2: context attention", phase="context", batch=math.ceil(ctx_tokens / isl),
                 isl=isl - prefix, osl=1, cached=prefix, **lay),
        ]  # fmt: skip
        if gen > 0:
            steps.append(dict(step="mix", what="pass 3: generation attention", phase="generation", batch=gen,
                              isl=isl + osl // 2, osl=2, cached=0, **lay))  # fmt: skip
        if genonly > 0:
            steps.append(dict(step="generation-only", what="a decode-only step", phase="generation", batch=genonly,
                              isl=isl + osl // 2, osl=2, cached=0, **lay))  # fmt: skip
        return steps
    out = []
    for side, step, phase, s_isl, s_osl, cached in (("prefill", "prefill", "context", isl - prefix, 1, prefix),
                                                    ("decode", "decode", "generation", isl, osl, 0)):  # fmt: skip
        lay = {k: c[f"{side}_{k}"] for k in ("tp", "moe_tp", "moe_ep", "dp", "pp", "cp")}
        what = "static context" if phase == "context" else "static generation"
        out.append(dict(step=step, what=what, phase=phase, batch=int(c[f"{side}_bs"]), isl=s_isl, osl=s_osl,
                        cached=cached, **lay))  # fmt: skip
    return out


def _step_call(function: str, e: Mapping, s: Mapping) -> str:
    args = [e["model"], e["db"], s["phase"], s["tp"], s["batch"], s["isl"], s["osl"], s["moe_tp"], s["moe_ep"],
            s["dp"], s["pp"], s["cp"]]  # fmt: skip
    return f"{function}({', '.join(_lit(a) for a in args)})"


# ---- the walk ----------------------------------------------------------------------------------


def bisect_search(ctx, entry, *, report=None, functions: Optional[Mapping[str, str]] = None) -> SearchBisection:
    """From an entry whose searches differ down to where they part ways
    (the module docstring has the levels). ``entry``: a row number of
    ``report``, an entry key, or a row (see `resolve_entry`).
    ``functions``: renames any product function of the walk (`PRODUCT`),
    e.g. ``{'py_search_agg': 'py_search_agg_variant', ...}``.
    Runs under the session's settings (the entry's own top_n and
    strict_sla for the searches; a miss is a value, not an error, below)."""
    names = {f: f for f in PRODUCT}
    for old, new in (functions or {}).items():
        if old not in names:
            raise ValueError(f"functions: {old!r} is not one of {', '.join(PRODUCT)}")
        names[old] = sqlfiles.check_identifier(new)
    e = resolve_entry(ctx, entry, report)
    mode = e["mode"]
    frames = matrix.search_frames(ctx, e, names[f"search_{mode}"], names[f"py_search_{mode}"])
    (rust, rust_error, _), (py, py_error, _) = frames["rust"], frames["py"]
    if rust_error or py_error:
        which = "; ".join(x for x in (rust_error and f"Rust: {rust_error}", py_error and f"Python: {py_error}") if x)
        return SearchBisection(e, "search", f"a search failed ({which})")
    diff = first_row_difference(rust, py)
    if diff is None:
        return SearchBisection(e, "identical", f"the two frames are identical ({rust.num_rows} rows)")

    configs = []
    for side in ("rust_row", "py_row"):
        if diff[side] is not None:
            c = _config(mode, diff[side])
            if c not in configs:
                configs.append(c)
    row = {k: diff[k] for k in ("pos", "column", "rust_value", "py_value")}
    row["config"] = configs[0]
    row.update(_set_difference(mode, rust, py))
    if not row["only_rust"] and not row["only_py"] and diff["rust_row"] and diff["py_row"]:
        # The same rows in another order: the two rows at this position tie on a sort key, or not.
        a, b = diff["rust_row"], diff["py_row"]
        row["tied"] = [(c, a[c]) for c in _SORT_KEYS if c in a and a[c] is not None and _same(a[c], b[c])]
    settings = _Settings(ctx)
    try:
        settings.set("aic.on_miss", "null")
        return _below_row(ctx, e, names, row, configs)
    finally:
        settings.restore()


def _below_row(ctx, e, names, row, configs) -> SearchBisection:
    mode = e["mode"]
    rust_fn, py_fn = names[f"estimate_{mode}"], names[f"py_estimate_{mode}"]
    labels = []
    for c in configs:
        (r, r_err), (p, p_err) = _scalar(ctx, _estimate_call(rust_fn, e, c)), _scalar(ctx, _estimate_call(py_fn, e, c))
        if r_err or p_err:
            row["config"] = c
            which = "; ".join(x for x in (r_err and f"Rust: {r_err}", p_err and f"Python: {p_err}") if x)
            return SearchBisection(e, "row", f"row {row['pos']} differs ({row['column']}); pricing its configuration "
                                   f"failed ({which})", row=row)  # fmt: skip
        price, echo = _struct_difference(r, p)
        if echo is not None:
            labels.append(f"{echo[0]} {echo[1]!r} vs {echo[2]!r}")
        if price is not None:
            row["config"] = c
            estimate = {"function": f"{rust_fn} / {py_fn}", "field": price[0], "rust": price[1], "py": price[2]}
            return _below_estimate(ctx, e, names, row, estimate, c)
    kept = _kept(row)
    note = f" (they differ only in how they echo it: {'; '.join(dict.fromkeys(labels))})" if labels else ""
    return SearchBisection(
        e, "row",
        f"row {row['pos']} differs ({row['column']}: rust {row['rust_value']!r}, python {row['py_value']!r}), but both "
        f"paths price its configuration{'s' if len(configs) > 1 else ''} alike{note}: the searches differ in what they "
        f"keep (sweep, sort, tie or pick), not in a price{kept}", row=row)  # fmt: skip


# Sort keys of the search (docs/spec/search.md 6.1): two rows that tie on one of them and only
# one path keeps are a tie broken differently (agg: seq/s per call, tokens/s/gpu at the end).
_SORT_KEYS = ("seq_per_s", "tokens_per_s_per_gpu", "seq_per_s_per_gpu", "tokens_per_s_per_user", "tpot_ms")


def _kept(row: Dict[str, object]) -> str:
    """Which configurations only one path keeps, and the sort keys they tie on."""
    only_rust, only_py = row.get("only_rust") or [], row.get("only_py") or []
    ties = row.get("tied") or []
    if not only_rust and not only_py:
        listed = ", ".join(f"{c} = {v!r}" for c, v in ties)
        tie = f"; the two rows at {row['pos']} tie on {listed}: a tie ordered differently" if ties else ""
        return "; both keep the same configurations, in another order" + tie
    out = f"; only the Rust path keeps {len(only_rust)} configuration(s), only the Python path {len(only_py)}"
    if ties:
        which = "the first of each" if only_rust and only_py else "the extra one and a configuration both keep"
        out += f"; {which} tie on {', '.join(f'{c} = {v!r}' for c, v in ties)}: a tie broken differently"
    return out


def _set_difference(mode: str, rust: pa.Table, py: pa.Table) -> Dict[str, object]:
    """The configurations only one frame has (in frame order) and the sort
    keys the first of each share."""
    r_rows, p_rows = rust.to_pylist(), py.to_pylist()
    key = (lambda c: tuple(sorted(c.items())))
    r_keys = {key(_config(mode, r)) for r in r_rows}
    p_keys = {key(_config(mode, p)) for p in p_rows}
    only_rust = [r for r in r_rows if key(_config(mode, r)) not in p_keys]
    only_py = [p for p in p_rows if key(_config(mode, p)) not in r_keys]
    tied = []
    if only_rust and only_py:  # the first row each path keeps alone, against each other
        a, b = only_rust[0], only_py[0]
        tied = [(c, a[c]) for c in _SORT_KEYS if c in a and a[c] is not None and _same(a[c], b[c])]
    elif only_rust or only_py:  # one path keeps an extra row: against the rows both keep
        extra, rows = (only_rust[0], r_rows) if only_rust else (only_py[0], p_rows)
        shared = [r for r in rows if key(_config(mode, r)) in r_keys and key(_config(mode, r)) in p_keys]
        for c in _SORT_KEYS:
            if c in extra and extra[c] is not None and any(_same(extra[c], r[c]) for r in shared):
                tied.append((c, extra[c]))
    return {"only_rust": [_config(mode, r) for r in only_rust], "only_py": [_config(mode, p) for p in only_py],
            "tied": tied}  # fmt: skip


def _below_estimate(ctx, e, names, row, estimate, c) -> SearchBisection:
    head = f"row {row['pos']} differs ({row['column']}); its estimate differs in {estimate['field']}"
    for s in steps_of(e, c):
        call_r, call_p = _step_call(names["step_latency"], e, s), _step_call(names["py_step_latency"], e, s)
        (r, r_err), (p, p_err) = _scalar(ctx, call_r), _scalar(ctx, call_p)
        if r_err or p_err or not _same(r, p):
            step = dict(s, call=call_r, rust_ms=r if not r_err else r_err, py_ms=p if not p_err else p_err)
            if r_err or p_err:
                return SearchBisection(e, "step", f"{head}; the {s['step']} step ({s['what']}) fails on one path",
                                       row=row, estimate=estimate, step=step)  # fmt: skip
            return _below_step(ctx, e, names, row, estimate, step, head)
    return SearchBisection(
        e, "estimate",
        f"{head}, but no step it prices differs at prefix 0 (the SQL step functions take no cached prefix: the "
        "difference is in attention over the cached prefix, or in the estimate's own arithmetic)",
        row=row, estimate=estimate)  # fmt: skip


def _below_step(ctx, e, names, row, estimate, step, head) -> SearchBisection:
    head = f"{head}; the {step['step']} step ({step['what']}) differs"
    ops = bisect_step(ctx, e["model"], e["db"], step["phase"], step["tp"], step["batch"], step["isl"], step["osl"],
                      step["moe_tp"], step["moe_ep"], dp=step["dp"], pp=step["pp"], cp=step["cp"],
                      rust=names["engine_step"], python=names["py_engine_step"]).to_pylist()  # fmt: skip
    if not ops:
        return SearchBisection(e, "step", f"{head}, but its engine_step rows agree op for op (the total differs)",
                               row=row, estimate=estimate, step=step)  # fmt: skip
    op = ops[0]
    head = f"{head}; first op {op['op_name']}: {op['diagnosis']}"
    query = gemm_query(op.get("lookup_rust")) or gemm_query(op.get("lookup_py"))
    if query is None:
        return SearchBisection(e, "op", head, row=row, estimate=estimate, step=step, op=op)
    m, n, k, quant = query
    found = bisect(ctx, e["db"], quant, m, n, k, rust=names["gemm_trace"], python=names["py_gemm_trace"]).to_pylist()
    query = f"{e['db']} {quant} (m={m}, n={n}, k={k})"
    if not found:
        return SearchBisection(e, "op", f"{head}; its GEMM {query} traces identically on both paths",
                               row=row, estimate=estimate, step=step, op=op)  # fmt: skip
    lookup = dict(found[0], query=query, quant=quant, m=m, n=n, k=k)
    return SearchBisection(e, "lookup", f"{head}; GEMM {query}: {lookup['diagnosis']}", row=row, estimate=estimate,
                           step=step, op=op, lookup=lookup)  # fmt: skip
