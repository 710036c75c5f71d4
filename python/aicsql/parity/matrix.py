"""The support-matrix scan: both deployment searches on every covered
``PASS`` entry of the support matrix, graded as upstream grades its port.

This is the loop behind upstream's drift report (``scan_rust_parity.py``:
6,460 entries, 2 DRIFT): for every entry, ``cli default``'s search of the
entry's mode at the entry's own arguments on the Rust path
(``search_agg`` / ``search_disagg``) and on the Python path
(``py_search_agg`` / ``py_search_disagg``), and a verdict per entry. What is
SQL stays SQL (``queries/parity/``): the entries
(``support_matrix_entries.sql``), the frames as cells
(``search_agg_parity.sql``, ``search_disagg_parity.sql``, statement 4) and
the grading (``search_verdict.sql``). This module only does what SQL cannot:

* runs each path on its own, timed, and records a failing path as an error
  (a status) instead of stopping the scan;
* works through the entries one at a time with a progress bar -- a Python
  search takes seconds to minutes, a Rust one milliseconds;
* keeps the report resumable: every ``checkpoint`` entries (and at the end,
  and on Ctrl-C) the report so far is written to a temporary file and
  renamed over ``out``, so an interruption loses at most the entries since
  the last write and never leaves a torn file; a new run with the same
  ``out`` skips the entries already in it.

Statuses (``STATUSES``): BIT_IDENTICAL (the frames are equal cell for cell,
in the spec's row order), NO_CANDIDATE (neither path finds a candidate, and
both give the same kind of reason: every layout raised, the model fits in
no layout, or no config meets the limits -- the entry is not covered, since
the spec itself prices nothing there; upstream calls it ERROR), then
upstream's STRICT_PASS, ENVELOPE_PASS, DRIFT, REGRESSION (the Rust path
fails or finds nothing where the Python path finds candidates), ERROR (the
Python path fails or finds nothing, and the Rust path does not agree on
why); ``upstream_status`` keeps upstream's word for each entry.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.parquet as pq

from . import smoke, sqlfiles
from .progress import Progress
from .runner import META, _pair, _plain_strings, _register, _Settings

__all__ = [
    "SCAN",
    "STATUSES",
    "UPSTREAM_STATUSES",
    "NOT_COVERED",
    "ENTRY_COLUMNS",
    "entries",
    "select",
    "run",
    "search_frames",
    "grade",
    "read_report",
    "write_report",
    "request_stop",
]

SCAN = "support-matrix"
STATUSES = ("BIT_IDENTICAL", "NO_CANDIDATE", "STRICT_PASS", "ENVELOPE_PASS", "DRIFT", "REGRESSION", "ERROR")
UPSTREAM_STATUSES = ("STRICT_PASS", "ENVELOPE_PASS", "DRIFT", "REGRESSION", "ERROR")
# Entries the spec prices nothing at: outside the bar, not against it.
NOT_COVERED = ("NO_CANDIDATE",)
# The columns that describe an entry (the search's arguments and settings).
ENTRY_SCHEMA = pa.schema([
    ("entry", pa.utf8()), ("model", pa.utf8()), ("architecture", pa.utf8()), ("db", pa.utf8()), ("mode", pa.utf8()),
    ("total_gpus", pa.int64()), ("isl", pa.int64()), ("osl", pa.int64()), ("prefix", pa.int64()),
    ("ttft_ms", pa.float64()), ("tpot_ms", pa.float64()), ("top_n", pa.int64()), ("strict_sla", pa.bool_()),
])  # fmt: skip
ENTRY_COLUMNS = tuple(ENTRY_SCHEMA.names)
# What the verdict reads beside the frames: the entry, then each path's error and seconds.
_RUNS_SCHEMA = pa.schema(list(ENTRY_SCHEMA) + [
    ("rust_error", pa.utf8()), ("py_error", pa.utf8()), ("rust_seconds", pa.float64()), ("py_seconds", pa.float64()),
])  # fmt: skip
FUNCTIONS = {"agg": ("search_agg", "py_search_agg"), "disagg": ("search_disagg", "py_search_disagg")}
DEFAULT_CHECKPOINT = 10  # entries between two writes of the report
_ERROR_CHARS = 2000  # an error message is cut here in the report (a Python traceback can be long)

# Set by `request_stop` (the command line's signal handler): `run` stops before its next entry.
_STOP = threading.Event()

# The database-table names the scan uses in the session (deregistered afterwards).
_TABLES = ("parity_search_rust", "parity_search_py", "parity_search_runs", "parity_search_cells", "parity_search_pairs")


# ---- the entries ------------------------------------------------------------------------------


def entries(ctx) -> pa.Table:
    """Every covered PASS entry (``support_matrix_entries.sql``), in key order."""
    (sql,) = sqlfiles.statements(sqlfiles.load("support_matrix_entries.sql"))
    return _plain_strings(ctx.sql(sql).to_arrow_table())


def select(
    table: pa.Table,
    *,
    subset: Optional[str] = None,
    patterns: Optional[Sequence[str]] = None,
    max_gpus: Optional[int] = None,
    modes: Optional[Sequence[str]] = None,
) -> pa.Table:
    """The entries of ``table`` a run asks for, in ``table``'s order.

    ``subset``: a fixed list of `smoke.SUBSETS` ('ci'); every key of it must
    be an entry of ``table`` (a subset that silently shrinks tests nothing).
    ``patterns``: regular expressions searched in the entry key
    (``model|system|backend|version|mode``); an entry matching any of them
    is kept, a pattern matching none is an error (a typo should not run an
    empty scan). ``max_gpus``: entries whose GPU budget is at most this.
    ``modes``: 'agg' and/or 'disagg'."""
    keys = table.column("entry").to_pylist()
    keep = [True] * len(keys)
    if subset is not None:
        if subset not in smoke.SUBSETS:
            raise ValueError(f"unknown subset {subset!r}; valid: {', '.join(smoke.SUBSETS)}")
        wanted = set(smoke.SUBSETS[subset])
        missing = sorted(wanted - set(keys))
        if missing:
            raise ValueError(f"subset {subset!r}: not covered PASS entries of the support matrix: {', '.join(missing)}")
        keep = [k and key in wanted for k, key in zip(keep, keys)]
    if patterns:
        compiled = []
        for p in patterns:
            try:
                compiled.append(re.compile(p))
            except re.error as e:
                raise ValueError(f"entries {p!r} is not a regular expression: {e}") from None
        example = f", e.g. {keys[0]!r}" if keys else ""
        for p, rx in zip(patterns, compiled):
            if not any(rx.search(key) for key in keys):
                raise ValueError(f"entries {p!r} matches no covered PASS entry (keys look like "
                                 f"'model|system|backend|version|mode'{example})")  # fmt: skip
        keep = [k and any(rx.search(key) for rx in compiled) for k, key in zip(keep, keys)]
    if max_gpus is not None:
        gpus = table.column("total_gpus").to_pylist()
        keep = [k and g is not None and g <= max_gpus for k, g in zip(keep, gpus)]
    if modes:
        bad = set(modes) - set(FUNCTIONS)
        if bad:
            raise ValueError(f"unknown mode(s) {', '.join(sorted(bad))}; valid: agg, disagg")
        mode_col = table.column("mode").to_pylist()
        keep = [k and m in modes for k, m in zip(keep, mode_col)]
    return table.filter(pa.array(keep, pa.bool_()))


def request_stop() -> None:
    """Asks a running `run` to stop before its next entry, as if interrupted
    (the report written, KeyboardInterrupt raised): a stop that never lands
    inside a search. Safe to call from a signal handler."""
    _STOP.set()


def _entry_from_mapping(row: Mapping) -> Dict[str, object]:
    """An entry dict with every column of ENTRY_COLUMNS from a row that has
    at least model, db (or system / backend / version), mode and the search
    arguments; top_n and strict_sla default to cli default's (5, false)."""
    e = dict(row)
    if "db" not in e or e["db"] is None:
        try:
            e["db"] = f"{e['system']}/{e['backend']}/{e['version']}"
        except KeyError:
            raise ValueError(f"entry {row!r}: needs db or system, backend and version") from None
    missing = [c for c in ("model", "mode", "total_gpus", "isl", "osl", "ttft_ms", "tpot_ms") if e.get(c) is None]
    if missing:
        raise ValueError(f"entry {row!r}: missing {', '.join(missing)}")
    if e["mode"] not in FUNCTIONS:
        raise ValueError(f"entry {row!r}: mode {e['mode']!r} is not agg or disagg")
    e.setdefault("prefix", 0)
    e["prefix"] = e["prefix"] or 0
    e["top_n"] = e.get("top_n") or 5
    e["strict_sla"] = bool(e.get("strict_sla") or False)
    e.setdefault("architecture", None)
    if not e.get("entry"):
        system, backend, version = str(e["db"]).split("/", 2) if str(e["db"]).count("/") == 2 else (e["db"], "", "")
        e["entry"] = "|".join(str(x) for x in (e["model"], system, backend, version, e["mode"]))
    return {c: e[c] for c in ENTRY_COLUMNS}


# ---- one entry ---------------------------------------------------------------------------------


def _call(function: str, e: Mapping) -> str:
    names = ("model", "db", "total_gpus", "isl", "osl", "prefix", "ttft_ms", "tpot_ms")
    args = ", ".join(sqlfiles.literal(e[c]) for c in names)
    return f"SELECT * FROM {sqlfiles.check_identifier(function)}({args})"


def _one_line(message: str) -> str:
    text = " ".join(str(message).split())
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 1] + "…"


_EMPTY: Dict[Tuple[int, str], pa.Schema] = {}


def _frame_schema(ctx, function: str) -> pa.Schema:
    """The columns of a search table function (a NULL argument: no rows)."""
    key = (id(ctx), function)
    if key not in _EMPTY:
        nulls = ", ".join(["CAST(NULL AS VARCHAR)"] * 2 + ["CAST(NULL AS BIGINT)"] * 4 + ["CAST(NULL AS DOUBLE)"] * 2)
        _EMPTY[key] = _plain_strings(ctx.sql(f"SELECT * FROM {function}({nulls})").to_arrow_table()).schema
    return _EMPTY[key]


def search_frames(ctx, entry: Mapping, rust: Optional[str] = None, python: Optional[str] = None):
    """Both searches of one entry, each timed on its own, under the entry's
    settings (``aic.top_n``, ``aic.strict_sla``; ``aic.on_miss = 'error'``
    so that a search without a candidate says why).

    Returns ``{'rust': (frame or None, error or None, seconds), 'py': ...}``;
    a frame is a pyarrow Table in the path's row order."""
    e = _entry_from_mapping(entry)
    default_rust, default_py = FUNCTIONS[e["mode"]]
    settings = _Settings(ctx)
    out = {}
    try:
        settings.set("aic.top_n", str(int(e["top_n"])))
        settings.set("aic.strict_sla", "true" if e["strict_sla"] else "false")
        settings.set("aic.on_miss", "error")
        for side, function in (("rust", rust or default_rust), ("py", python or default_py)):
            t0 = time.perf_counter()
            try:
                frame, error = _plain_strings(ctx.sql(_call(function, e)).to_arrow_table()), None
            except Exception as exc:  # the path's failure is the entry's status, not the scan's end
                if "KeyboardInterrupt" in str(exc):
                    # Ctrl-C inside the Python path's callback comes back through the Rust bridge as an
                    # error; it is still the user stopping the scan, not this entry failing.
                    raise KeyboardInterrupt from None
                frame, error = None, _one_line(f"{function}: {exc}")
            out[side] = (frame, error, time.perf_counter() - t0)
    finally:
        settings.restore()
    return out


def _positions(frame: Optional[pa.Table], schema: pa.Schema, entry: str) -> pa.Table:
    """The frame with ``entry`` and ``pos`` (its row order) in front."""
    frame = frame if frame is not None else schema.empty_table()
    n = frame.num_rows
    frame = frame.add_column(0, "pos", pa.array(range(n), pa.int64()))
    return frame.add_column(0, "entry", pa.array([entry] * n, pa.utf8()))


def _statement(name: str, position: int) -> str:
    stmts = sqlfiles.statements(sqlfiles.load(name))
    return stmts[position]


def grade(ctx, entry: Mapping, frames, *, functions: Tuple[str, str]) -> pa.Table:
    """The verdict row of one entry (``search_verdict.sql``) from `search_frames`'s result."""
    e = _entry_from_mapping(entry)
    rust_fn, py_fn = functions
    schema = _frame_schema(ctx, rust_fn)
    (rust_frame, rust_error, rust_s), (py_frame, py_error, py_s) = frames["rust"], frames["py"]
    for side, frame in (("Rust", rust_frame), ("Python", py_frame)):
        if frame is not None and frame.schema.names != schema.names:
            raise RuntimeError(f"entry {e['entry']}: the {side} frame's columns {frame.schema.names} are not "
                               f"{rust_fn}'s {schema.names}")  # fmt: skip
    _register(ctx, "parity_search_rust", _positions(rust_frame, schema, e["entry"]))
    py_frame = py_frame.cast(schema) if py_frame is not None else None  # the same names: the Rust types
    _register(ctx, "parity_search_py", _positions(py_frame, schema, e["entry"]))
    runs = dict(e, rust_error=rust_error, py_error=py_error, rust_seconds=rust_s, py_seconds=py_s)
    _register(ctx, "parity_search_runs", pa.Table.from_pylist([runs], schema=_RUNS_SCHEMA))
    ctx.sql(_statement(f"search_{e['mode']}_parity.sql", 3)).collect()  # statement 4: the cells
    pairs, verdict = sqlfiles.statements(sqlfiles.load("search_verdict.sql"))
    ctx.sql(pairs).collect()
    return _plain_strings(ctx.sql(verdict).to_arrow_table())


# ---- the report file -------------------------------------------------------------------------


def read_report(path: Union[str, os.PathLike]) -> Optional[pa.Table]:
    """A support-matrix report written by `run` (None if there is no file)."""
    path = Path(path)
    if not path.exists():
        return None
    table = pq.read_table(path)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if meta.get(META + "scan") != SCAN or "upstream_status" not in table.column_names:
        raise ValueError(f"{path} is not a support-matrix parity report; pass another --out, "
                         "or --fresh to overwrite it")
    return table


def write_report(table: pa.Table, path: Union[str, os.PathLike]) -> None:
    """Writes ``table`` to ``path`` atomically: a temporary file in the same
    directory, then a rename, so a reader (or a resumed run) never sees half a file."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _with_meta(report: pa.Table, meta: Mapping[str, str]) -> pa.Table:
    return report.replace_schema_metadata({META + k: str(v) for k, v in meta.items()})


# ---- the scan ----------------------------------------------------------------------------------


def run(
    ctx,
    *,
    table: Optional[pa.Table] = None,
    subset: Optional[str] = None,
    patterns: Optional[Sequence[str]] = None,
    max_gpus: Optional[int] = None,
    modes: Optional[Sequence[str]] = None,
    limit: Optional[int] = None,
    out: Optional[Union[str, os.PathLike]] = None,
    fresh: bool = False,
    checkpoint: int = DEFAULT_CHECKPOINT,
    rust: Optional[str] = None,
    python: Optional[str] = None,
    progress: Optional[bool] = None,
) -> pa.Table:
    """Runs the support-matrix scan and returns its report: one row per
    entry (``ENTRY_COLUMNS``, each path's error and seconds, then the
    verdict of ``search_verdict.sql``), the rows of an earlier run of the
    same ``out`` first.

    ``table``: the entries to scan (default: `entries`, every covered PASS
    entry); a table of your own needs model, db (or system / backend /
    version), mode, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms (top_n,
    strict_sla, entry optional). ``subset``, ``patterns``, ``max_gpus``,
    ``modes``: see `select`. ``limit``: at most N entries in this run,
    counted after those already in ``out`` are skipped (so repeated runs
    with a limit work through the matrix).
    ``out``: the report file (.parquet); written every ``checkpoint``
    entries, at the end and on an interruption; an existing report there
    is resumed (its entries skipped) unless ``fresh``.
    ``rust``, ``python``: the table functions compared, 'agg,disagg' (a
    single name replaces the agg one), default the product pair.
    ``progress``: None = automatic, False = silent."""
    wall0 = time.perf_counter()
    if table is None:
        table = entries(ctx)
    else:
        table = pa.Table.from_pylist([_entry_from_mapping(r) for r in table.to_pylist()], schema=ENTRY_SCHEMA)
    table = select(table, subset=subset, patterns=patterns, max_gpus=max_gpus, modes=modes)
    rust_names, py_names = _pair(rust), _pair(python)
    functions = {
        m: (rust_names[i] or FUNCTIONS[m][0], py_names[i] or FUNCTIONS[m][1]) for i, m in enumerate(("agg", "disagg"))
    }
    for pair in functions.values():
        for name in pair:
            sqlfiles.check_identifier(name)

    previous = None if (out is None or fresh) else read_report(out)
    done = set(previous.column("entry").to_pylist()) if previous is not None else set()
    pending = [r for r in table.to_pylist() if r["entry"] not in done]
    if limit is not None:
        pending = pending[:limit]
    prior_wall = 0.0
    if previous is not None:
        prior_meta = {k.decode(): v.decode() for k, v in (previous.schema.metadata or {}).items()}
        prior_wall = float(prior_meta.get(META + "wall_seconds", "0") or 0)

    def meta() -> Dict[str, str]:
        return {
            "scan": SCAN,
            "rust_function": ",".join(dict.fromkeys(p[0] for p in functions.values())),
            "python_function": ",".join(dict.fromkeys(p[1] for p in functions.values())),
            "wall_seconds": repr(prior_wall + time.perf_counter() - wall0),
            "entries_selected": str(table.num_rows),
        }

    rows: List[pa.Table] = []

    def report() -> pa.Table:
        parts = ([previous] if previous is not None else []) + rows
        if not parts:
            return _with_meta(_empty_report(ctx, functions), meta())
        try:
            combined = pa.concat_tables([p.replace_schema_metadata(None) for p in parts])
        except pa.ArrowInvalid as e:
            raise ValueError(f"{out}: its columns differ from this version's report ({e}); pass --fresh") from None
        return _with_meta(combined, meta())

    label = f"parity {SCAN}"
    written = 0
    _STOP.clear()
    try:
        with Progress(len(pending), label, enabled=progress) as bar:
            bar.update(0)
            for i, e in enumerate(pending):
                if _STOP.is_set():
                    raise KeyboardInterrupt
                frames = search_frames(ctx, e, *functions[e["mode"]])
                rows.append(grade(ctx, e, frames, functions=functions[e["mode"]]))
                bar.update(i + 1)
                if out is not None and len(rows) - written >= checkpoint:
                    write_report(report(), out)
                    written = len(rows)
    except KeyboardInterrupt:
        if out is not None and rows:
            write_report(report(), out)
            print(f"\n{label}: interrupted; {len(rows) + len(done):,} entries in {out} (run again to resume)",
                  file=sys.stderr)  # fmt: skip
        raise
    finally:
        for name in _TABLES:
            ctx.deregister_table(name)
    final = report()
    if out is not None:
        write_report(final, out)
    return final


def _empty_report(ctx, functions) -> pa.Table:
    """The report's columns with no rows (a selection that is empty, or done)."""
    frames = {"rust": (None, "not run", 0.0), "py": (None, "not run", 0.0)}
    probe = {"model": "", "db": "", "mode": "agg", "total_gpus": 1, "isl": 1, "osl": 1, "ttft_ms": 1.0,
             "tpot_ms": 1.0, "entry": ""}  # fmt: skip
    try:
        return grade(ctx, probe, frames, functions=functions["agg"]).slice(0, 0)
    finally:
        for name in _TABLES:
            ctx.deregister_table(name)
