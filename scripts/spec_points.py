#!/usr/bin/env python3
"""Compute serving-point goldens with the spec (aiconfigurator v0.11.0, pure Python).

Reads a JSON list of points ``{"mode", "model", "db", "args"}`` (optionally
``"point_id"`` and ``"split"``), runs the spec's ``cli_estimate`` on each and
writes a parquet file with the schema of ``serving_point_goldens.parquet``:

    point_id, split, mode, model, db, args, error, kv_cache_warning, raw,
    arg_<name> (one column per keyword argument), and a few raw values as
    columns (ttft, tpot, tokens_per_s_per_gpu, tokens_per_s_per_user,
    request_latency, memory, p_memory, d_memory, seq_per_s, concurrency,
    num_total_gpus).

Conventions (same as the existing goldens):
  * ``db`` is ``system/backend/version``; the call is
    ``cli_estimate(model, system, mode=mode, backend_name=backend,
    backend_version=version, database_mode="SILICON", **args)``.
  * ``args`` and ``raw`` are ``json.dumps(..., sort_keys=True)``; floats keep
    full repr precision (the spec itself rounds disagg results to 3 decimals).
  * ``error`` is ``"<ExceptionType>: <message>"`` when the spec raises (e.g.
    its OOM RuntimeError); ``raw`` and the raw-value columns are then null.
  * ``kv_cache_warning`` is the spec's ``EstimateResult.kv_cache_warning``.
  * string columns are arrow ``large_string``; a column that is null in every
    row (typically ``kv_cache_warning``) is arrow type ``null``.

The spec runs with its compiled extension stubbed out (every Rust entry point
raises) and ``AICONFIGURATOR_ENGINE_STEP_BACKEND=python``, so every number
comes from the Python engine step.

Setup (once; numpy 1.26 is required by the spec):

    mkdir -p /work/specsrc
    git -C /work/.mirror/ai-dynamo+aiconfigurator/repo archive v0.11.0 | tar -x -C /work/specsrc
    python3 -m venv /work/specenv
    /work/specenv/bin/pip install "setuptools>=77" wheel
    printf 'numpy==1.26.4\\npandas==2.3.3\\npyarrow==24.0.0\\n' > /work/specenv/constraints.txt
    /work/specenv/bin/pip install -c /work/specenv/constraints.txt numpy pandas pyarrow \\
        pyyaml scipy packaging jinja2 matplotlib "plotext<6" plotly prettytable pydantic tqdm \\
        bokeh nvidia-ml-py munch
    /work/specenv/bin/pip install --no-deps --no-build-isolation -e /work/specsrc
    echo /work/specsrc/aic-core/src > /work/specenv/lib/python3.11/site-packages/aiconfigurator_core_src.pth

Perf data: the two published wheels merged, newer release wins per file
(aiconfigurator==0.10.0, then aiconfigurator-core==0.12.0 on top), as a tree
of symlinks:

    mkdir -p /work/specdata
    cp -rs ~/.cache/aicsql/aiconfigurator-0.10.0/aiconfigurator/systems /work/specdata/systems
    cd ~/.cache/aicsql/aiconfigurator-core-0.12.0/aiconfigurator_core/systems && \\
      find . -type f | sed 's|^\\./||' | while read f; do \\
        mkdir -p "/work/specdata/systems/$(dirname "$f")"; \\
        ln -sfn "$PWD/$f" "/work/specdata/systems/$f"; done

Run:

    nice -n 10 /work/specenv/bin/python scripts/spec_points.py points.json out.parquet [--split pp]

Options: ``--systems`` (default /work/specdata/systems), ``--spec-src``
(default /work/specsrc), ``--split`` (default for points without one),
``--first-id`` (point_id for points without one; default 0, counting up).
Timing on this machine (2 cores): importing the spec takes ~1.5 s, the first
point on each (system, backend, version) database ~1.5-5 s (table loading),
every later point well under 0.1 s; the 83 points of
serving_point_goldens.parquet take ~40 s, the 42 pp points ~23 s. Points run
in one process in input order; results do not depend on the order.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import types

# Raw-value columns: column name -> key in the spec's result dict.
RAW_COLUMNS = {
    "ttft": "ttft",
    "tpot": "tpot",
    "tokens_per_s_per_gpu": "tokens/s/gpu",
    "tokens_per_s_per_user": "tokens/s/user",
    "request_latency": "request_latency",
    "memory": "memory",
    "p_memory": "(p)memory",
    "d_memory": "(d)memory",
    "seq_per_s": "seq/s",
    "concurrency": "concurrency",
    "num_total_gpus": "num_total_gpus",
}

# arg_ columns that come before the raw-value columns (as in the existing file).
LEADING_ARGS = ["tp_size", "batch_size", "isl", "osl", "prefix"]
# Canonical order of the other arg_ columns; unknown names follow, sorted.
TRAILING_ARGS = [
    "ctx_tokens",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "prefill_tp_size",
    "prefill_pp_size",
    "prefill_attention_dp_size",
    "prefill_batch_size",
    "prefill_num_workers",
    "decode_tp_size",
    "decode_pp_size",
    "decode_attention_dp_size",
    "decode_batch_size",
    "decode_num_workers",
    "prefill_moe_tp_size",
    "prefill_moe_ep_size",
    "decode_moe_tp_size",
    "decode_moe_ep_size",
]
BASE_COLUMNS = ["point_id", "split", "mode", "model", "db", "args", "error", "kv_cache_warning", "raw"]


def _install_extension_stub() -> None:
    """Stand in for the compiled ``aiconfigurator_core._aiconfigurator_core``."""
    name = "aiconfigurator_core._aiconfigurator_core"
    if name in sys.modules:
        return

    def _raise(*_a, **_k):
        raise RuntimeError("aiconfigurator_core Rust extension is stubbed out (Python engine step only)")

    class _Stub:
        def __init__(self, *a, **k):
            _raise()

        @classmethod
        def from_spec(cls, *a, **k):
            _raise()

    mod = types.ModuleType(name)
    mod.AicEngine = _Stub
    mod.RustForwardPassPerfModel = _Stub
    mod._build_smoke = _raise
    mod.engine_spec_bincode_from_json = _raise
    sys.modules[name] = mod


def load_spec(spec_src: str, systems: str):
    os.environ["AICONFIGURATOR_ENGINE_STEP_BACKEND"] = "python"
    for p in (os.path.join(spec_src, "aic-core", "src"), os.path.join(spec_src, "src")):
        if p not in sys.path:
            sys.path.insert(0, p)
    _install_extension_stub()
    from aiconfigurator.sdk import perf_database
    from aiconfigurator.cli.api import cli_estimate

    perf_database.set_systems_paths(systems)
    return cli_estimate


def run_point(cli_estimate, point: dict) -> dict:
    system, backend, version = point["db"].split("/")
    args = point["args"]
    error = None
    raw = None
    kv_warning = None
    try:
        res = cli_estimate(
            point["model"],
            system,
            mode=point["mode"],
            backend_name=backend,
            backend_version=version,
            database_mode="SILICON",
            **args,
        )
        raw = res.raw
        kv_warning = res.kv_cache_warning
    except Exception as e:  # the spec's refusal is the golden
        error = f"{type(e).__name__}: {e}"
    return {"error": error, "raw": raw, "kv_cache_warning": kv_warning}


def _num(v):
    if v is None:
        return math.nan
    return float(v)


def build_row(point: dict, out: dict) -> dict:
    raw = out["raw"]
    row = {
        "point_id": point["point_id"],
        "split": point["split"],
        "mode": point["mode"],
        "model": point["model"],
        "db": point["db"],
        "args": json.dumps(point["args"], sort_keys=True),
        "error": out["error"],
        "kv_cache_warning": out["kv_cache_warning"],
        "raw": None if raw is None else json.dumps(raw, sort_keys=True),
    }
    for k, v in point["args"].items():
        row["arg_" + k] = v
    for col, key in RAW_COLUMNS.items():
        row[col] = math.nan if raw is None else _num(raw.get(key))
    return row


def write_parquet(rows: list[dict], path: str) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    arg_names = {c[4:] for r in rows for c in r if c.startswith("arg_")}
    lead = [a for a in LEADING_ARGS if a in arg_names]
    trail = [a for a in TRAILING_ARGS if a in arg_names]
    trail += sorted(arg_names - set(lead) - set(trail))
    columns = BASE_COLUMNS + ["arg_" + a for a in lead] + list(RAW_COLUMNS) + ["arg_" + a for a in trail]
    df = pd.DataFrame.from_records(rows, columns=columns)

    fields = []
    for c in columns:
        s = df[c]
        if s.dtype == object:
            if s.isna().all():
                fields.append(pa.field(c, pa.null()))
            elif all(isinstance(v, str) for v in s.dropna()):
                fields.append(pa.field(c, pa.large_string()))
            elif all(isinstance(v, bool) for v in s.dropna()):
                fields.append(pa.field(c, pa.bool_()))
            elif any(isinstance(v, str) for v in s.dropna()):
                # Mixed text and numbers (nextn: 2 or 'auto'): each value as JSON.
                df[c] = s.map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else json.dumps(v))
                fields.append(pa.field(c, pa.large_string()))
            else:
                fields.append(pa.field(c, pa.float64()))
        elif str(s.dtype).startswith("int"):
            fields.append(pa.field(c, pa.int64()))
        else:
            fields.append(pa.field(c, pa.float64()))
    table = pa.Table.from_pandas(df, schema=pa.schema(fields), preserve_index=False)
    pq.write_table(table, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("points", help="JSON file: list of {mode, model, db, args[, point_id, split]}")
    ap.add_argument("out", help="output parquet")
    ap.add_argument("--systems", default="/work/specdata/systems")
    ap.add_argument("--spec-src", default="/work/specsrc")
    ap.add_argument("--split", default="shared")
    ap.add_argument("--first-id", type=int, default=0)
    a = ap.parse_args(argv)

    with open(a.points, encoding="utf-8") as f:
        points = json.load(f)
    cli_estimate = load_spec(a.spec_src, a.systems)

    rows = []
    next_id = a.first_id
    for p in points:
        p = dict(p)
        if "point_id" not in p:
            p["point_id"] = next_id
        next_id = int(p["point_id"]) + 1
        p.setdefault("split", a.split)
        t0 = time.time()
        out = run_point(cli_estimate, p)
        dt = time.time() - t0
        status = "ERROR " + out["error"][:120] if out["error"] else "ok"
        if out["kv_cache_warning"]:
            status += " (kv warning)"
        print(f"[{p['point_id']}] {p['mode']} {p['model']} {p['db']} {json.dumps(p['args'], sort_keys=True)}: "
              f"{status} {dt:.1f}s", file=sys.stderr, flush=True)
        rows.append(build_row(p, out))
    write_parquet(rows, a.out)
    n_err = sum(r["error"] is not None for r in rows)
    print(f"wrote {len(rows)} points ({n_err} errors) to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
