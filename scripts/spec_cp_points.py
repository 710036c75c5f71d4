#!/usr/bin/env python3
"""Serving-point goldens at context parallelism (cp > 1) with the spec (aiconfigurator v0.11.0).

The spec's ``cli_estimate`` has no cp argument. This runner is ``cli_estimate`` for
``mode="agg"`` and ``mode="disagg"`` with one: it repeats the spec's
``_run_agg_estimate`` / ``_run_disagg_estimate`` (``src/aiconfigurator/cli/api.py``) step by
step on the spec's own lower-level API -- ``build_model_config``, ``resolve_context_fmha_by_data``,
``resolve_dsv4_moe_arch``, ``InferenceSession.run_agg``, ``DisaggInferenceSession.run_disagg``,
``_apply_power_coverage_gate`` -- and sets ``ModelConfig.cp_size`` the way the spec's search does
(``sweep.py``: ``dataclasses.replace(model_config, ..., cp_size=cp)`` before ``get_model``). cp
also enters the MoE-width resolution (``ModelConfig.resolve_moe_parallelism`` checks
``tp * dp * cp == moe_tp * moe_ep``), which ``cli_estimate``'s ``_resolve_moe_parallelism``
builds from a ModelConfig without cp; here that ModelConfig gets ``cp_size`` too. Nothing else
differs from ``cli_estimate`` (``database_mode="SILICON"``, explicit ``backend_version``).

Point args (JSON, like ``scripts/spec_points.py``): every ``cli_estimate`` keyword that the
existing goldens use, plus
  * agg: ``cp_size`` (default 1);
  * disagg: ``prefill_cp_size`` and ``decode_cp_size`` (default 1 each).
The cp keys stay in the ``args`` JSON and become ``arg_cp_size`` / ``arg_prefill_cp_size`` /
``arg_decode_cp_size`` columns. Rows, serialisation and parquet schema are
``scripts/spec_points.py``'s (imported, not copied).

Checks the runner supports:
  * ``--verify-golden G.parquet``: run the points of an existing golden file (no cp keys, so
    cp = 1) and compare every column bit for bit with it. ``--verify-explicit-cp1`` adds
    ``cp_size=1`` / ``prefill_cp_size=1, decode_cp_size=1`` to each point's args and compares
    everything except the args / arg_ columns.
  * ``--cross-check``: also price every point through the spec's real ``cli_estimate`` with
    ``cp_size`` injected into its two ModelConfig builders (``api._build_model_config`` and
    ``api._resolve_moe_parallelism`` wrapped), and fail if anything differs.

Run (setup in the header of scripts/spec_points.py):

    python3 scripts/spec_family_cp_points.py /tmp/family_cp_points.json
    nice -n 10 /work/specenv/bin/python scripts/spec_cp_points.py /tmp/family_cp_points.json \
        tests/goldens/serving_family_cp_goldens.parquet --split family_cp --cross-check
    nice -n 10 /work/specenv/bin/python scripts/spec_cp_points.py \
        --verify-golden tests/goldens/serving_pp_goldens.parquet
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_points  # noqa: E402  (load_spec, build_row, write_parquet, RAW_COLUMNS)

CP_KEYS = ("cp_size", "prefill_cp_size", "decode_cp_size")

# Place the cp arg_ columns next to their dp siblings (spec_points sorts unknown names last).
for _after, _name in (
    ("attention_dp_size", "cp_size"),
    ("prefill_attention_dp_size", "prefill_cp_size"),
    ("decode_attention_dp_size", "decode_cp_size"),
):
    if _name not in spec_points.TRAILING_ARGS:
        spec_points.TRAILING_ARGS.insert(spec_points.TRAILING_ARGS.index(_after) + 1, _name)


def _api():
    from aiconfigurator.cli import api

    return api


def _resolve_moe_parallelism(tp_size, attention_dp_size, moe_tp_size, moe_ep_size, cp_size, model_path):
    """``api._resolve_moe_parallelism`` with cp in the ModelConfig it validates with."""
    api = _api()
    if model_path is not None and not api.check_is_moe(model_path):
        return moe_tp_size, moe_ep_size
    cfg = api.ModelConfig(
        tp_size=tp_size,
        attention_dp_size=attention_dp_size,
        moe_tp_size=moe_tp_size,
        moe_ep_size=moe_ep_size,
        cp_size=cp_size,
    )
    return cfg.resolve_moe_parallelism()


def _build_model_config(cp_size, *a, **k):
    """``build_model_config`` plus ``cp_size`` (as sweep.py does with dataclasses.replace)."""
    return dataclasses.replace(_api()._build_model_config(*a, **k), cp_size=cp_size)


def _loader(backend_name, backend_version, database_mode="SILICON", transfer_policy=None):
    """The ``_load_database`` closure of ``cli_estimate`` (explicit version, default systems paths)."""
    from aiconfigurator.sdk.perf_database import get_database_view

    def load_database(sys_name):
        db = get_database_view(
            sys_name,
            backend_name,
            backend_version,
            allow_missing_data=database_mode != "SILICON",
            database_mode=database_mode,
            transfer_policy=transfer_policy,
        )
        if db is None:
            raise ValueError(
                f"Failed to load perf database for system={sys_name}, "
                f"backend={backend_name}, version={backend_version}."
            )
        return db

    return load_database


def estimate_agg(
    model_path,
    system_name,
    *,
    backend_name,
    backend_version,
    cp_size=1,
    isl=1024,
    osl=1024,
    batch_size=128,
    ctx_tokens=None,
    tp_size=1,
    pp_size=1,
    attention_dp_size=1,
    moe_tp_size=None,
    moe_ep_size=None,
    gemm_quant_mode=None,
    kvcache_quant_mode=None,
    fmha_quant_mode=None,
    moe_quant_mode=None,
    comm_quant_mode=None,
    free_gpu_memory_fraction=None,
    max_seq_len=None,
    prefix=0,
    nextn=0,
    nextn_accepted=None,
):
    """``cli_estimate(mode="agg")`` -> ``_run_agg_estimate``, with ``cp_size``."""
    api = _api()
    from aiconfigurator.sdk.backends.factory import get_backend
    from aiconfigurator.sdk.config import RuntimeConfig
    from aiconfigurator.sdk.inference_session import InferenceSession
    from aiconfigurator.sdk.models import get_model

    # cli_estimate prologue
    if nextn == "auto":
        nextn = api._resolve_nextn_auto(model_path)
    nextn, nextn_accepted = api._normalize_nextn(nextn, nextn_accepted)
    ctx_tokens = ctx_tokens if ctx_tokens is not None else isl
    load_database = _loader(backend_name, backend_version)

    # _run_agg_estimate
    moe_tp_size, moe_ep_size = _resolve_moe_parallelism(
        tp_size, attention_dp_size, moe_tp_size, moe_ep_size, cp_size, model_path
    )
    model_config = _build_model_config(
        cp_size,
        tp_size,
        pp_size,
        attention_dp_size,
        moe_tp_size,
        moe_ep_size,
        gemm_quant_mode,
        kvcache_quant_mode,
        fmha_quant_mode,
        moe_quant_mode,
        comm_quant_mode,
        enable_encoder_dp=True,
    )
    api._apply_nextn(model_config, nextn)
    api.resolve_context_fmha_by_data(
        model_config, model_path, load_database(system_name), backend_name, is_context_role=True
    )
    api.resolve_dsv4_moe_arch(model_config, model_path, system_name=system_name, backend_name=backend_name)
    runtime_config = RuntimeConfig(
        isl=isl,
        osl=osl,
        batch_size=batch_size,
        image_height=0,
        image_width=0,
        num_images_per_request=1,
        prefix=prefix,
        engine_step_backend=None,
    )
    model = get_model(model_path, model_config, backend_name)
    database = load_database(system_name)
    backend = get_backend(backend_name)
    session = InferenceSession(model, database, backend)
    summary = session.run_agg(
        runtime_config,
        ctx_tokens=ctx_tokens,
        max_seq_len=max_seq_len,
        free_gpu_memory_fraction=free_gpu_memory_fraction,
    )
    summary = api.SpeculativeDecodingProfile.from_inputs(nextn, nextn_accepted).project_summary(summary, role="agg")

    if summary.check_oom():
        raise RuntimeError(
            f"OOM: the model '{model_path}' does not fit in GPU memory on system '{system_name}' "
            f"with the given parallelism (tp={tp_size}, pp={pp_size}, dp={attention_dp_size}). "
            "Try increasing tp_size/pp_size, using a quantized model, or "
            "using a system with more VRAM per GPU."
        )
    result_dict = summary.get_result_dict()
    if result_dict is None:
        raise RuntimeError("Estimation produced no results. The configuration may be invalid.")
    result_dict = api._apply_power_coverage_gate(summary, result_dict)

    kv_warning = None
    if summary.check_kv_cache_oom():
        frac_str = str(free_gpu_memory_fraction) if free_gpu_memory_fraction is not None else "backend default"
        kv_warning = (
            f"Requested batch_size ({batch_size}) exceeds estimated KV cache capacity "
            f"(free_gpu_memory_fraction={frac_str}). "
            "The serving runtime will queue excess requests, causing significantly higher TTFT and inaccurate TPOT."
        )
    return result_dict, kv_warning, summary


def estimate_disagg(
    model_path,
    system_name,
    *,
    backend_name,
    backend_version,
    prefill_cp_size=1,
    decode_cp_size=1,
    isl=1024,
    osl=1024,
    tp_size=1,
    pp_size=1,
    attention_dp_size=1,
    moe_tp_size=None,
    moe_ep_size=None,
    gemm_quant_mode=None,
    kvcache_quant_mode=None,
    fmha_quant_mode=None,
    moe_quant_mode=None,
    comm_quant_mode=None,
    decode_system_name=None,
    prefill_tp_size=None,
    prefill_pp_size=None,
    prefill_attention_dp_size=None,
    prefill_moe_tp_size=None,
    prefill_moe_ep_size=None,
    prefill_batch_size=None,
    prefill_num_workers=None,
    decode_tp_size=None,
    decode_pp_size=None,
    decode_attention_dp_size=None,
    decode_moe_tp_size=None,
    decode_moe_ep_size=None,
    decode_batch_size=None,
    decode_num_workers=None,
    prefix=0,
    nextn=0,
    nextn_accepted=None,
):
    """``cli_estimate(mode="disagg")`` -> ``_run_disagg_estimate``, with per-side cp."""
    api = _api()
    from aiconfigurator.sdk.backends.factory import get_backend
    from aiconfigurator.sdk.config import RuntimeConfig
    from aiconfigurator.sdk.inference_session import DisaggInferenceSession

    # cli_estimate prologue: nextn, required args, shared-arg fallbacks
    if nextn == "auto":
        nextn = api._resolve_nextn_auto(model_path)
    nextn, nextn_accepted = api._normalize_nextn(nextn, nextn_accepted)
    decode_system_name = decode_system_name or system_name
    for name, val in [
        ("prefill_batch_size", prefill_batch_size),
        ("prefill_num_workers", prefill_num_workers),
        ("decode_batch_size", decode_batch_size),
        ("decode_num_workers", decode_num_workers),
    ]:
        if val is None:
            raise ValueError(f"{name} is required for disagg mode.")
    p_tp = prefill_tp_size if prefill_tp_size is not None else tp_size
    p_pp = prefill_pp_size if prefill_pp_size is not None else pp_size
    p_dp = prefill_attention_dp_size if prefill_attention_dp_size is not None else attention_dp_size
    p_etp = prefill_moe_tp_size if prefill_moe_tp_size is not None else moe_tp_size
    p_eep = prefill_moe_ep_size if prefill_moe_ep_size is not None else moe_ep_size
    d_tp = decode_tp_size if decode_tp_size is not None else tp_size
    d_pp = decode_pp_size if decode_pp_size is not None else pp_size
    d_dp = decode_attention_dp_size if decode_attention_dp_size is not None else attention_dp_size
    d_etp = decode_moe_tp_size if decode_moe_tp_size is not None else moe_tp_size
    d_eep = decode_moe_ep_size if decode_moe_ep_size is not None else moe_ep_size
    load_database = _loader(backend_name, backend_version)

    # _run_disagg_estimate
    p_moe_tp, p_moe_ep = _resolve_moe_parallelism(p_tp, p_dp, p_etp, p_eep, prefill_cp_size, model_path)
    d_moe_tp, d_moe_ep = _resolve_moe_parallelism(d_tp, d_dp, d_etp, d_eep, decode_cp_size, model_path)
    quants = (gemm_quant_mode, kvcache_quant_mode, fmha_quant_mode, moe_quant_mode, comm_quant_mode)
    prefill_model_config = _build_model_config(
        prefill_cp_size, p_tp, p_pp, p_dp, p_moe_tp, p_moe_ep, *quants, enable_encoder_dp=True
    )
    decode_model_config = _build_model_config(
        decode_cp_size, d_tp, d_pp, d_dp, d_moe_tp, d_moe_ep, *quants, enable_encoder_dp=True
    )
    api._apply_nextn(prefill_model_config, nextn)
    api._apply_nextn(decode_model_config, nextn)
    api.resolve_context_fmha_by_data(
        prefill_model_config, model_path, load_database(system_name), backend_name, is_context_role=True
    )
    api.resolve_dsv4_moe_arch(prefill_model_config, model_path, system_name=system_name, backend_name=backend_name)
    api.resolve_dsv4_moe_arch(
        decode_model_config, model_path, system_name=decode_system_name or system_name, backend_name=backend_name
    )
    runtime_config = RuntimeConfig(
        isl=isl,
        osl=osl,
        image_height=0,
        image_width=0,
        num_images_per_request=1,
        prefix=prefix,
        engine_step_backend=None,
    )
    session = DisaggInferenceSession(
        prefill_database=load_database(system_name),
        prefill_backend=get_backend(backend_name),
        decode_database=load_database(decode_system_name),
        decode_backend=get_backend(backend_name),
    )
    session.set_latency_correction_scales(
        api.DEFAULT_PREFILL_LATENCY_CORRECTION_SCALE,
        api.DEFAULT_DECODE_LATENCY_CORRECTION_SCALE,
    )
    summary = session.run_disagg(
        model_path=model_path,
        runtime_config=runtime_config,
        prefill_model_config=prefill_model_config,
        prefill_batch_size=prefill_batch_size,
        prefill_num_worker=prefill_num_workers,
        decode_model_config=decode_model_config,
        decode_batch_size=decode_batch_size,
        decode_num_worker=decode_num_workers,
        speculative_profile=api.SpeculativeDecodingProfile.from_inputs(nextn, nextn_accepted),
    )
    if summary.check_oom():
        if decode_system_name != system_name:
            where = f"prefill system '{system_name}' or decode system '{decode_system_name}'"
        else:
            where = f"system '{system_name}'"
        raise RuntimeError(
            f"OOM: the model '{model_path}' does not fit in GPU memory on {where} "
            f"with the given parallelism. "
            "Try increasing tp_size/pp_size, using a quantized model, or "
            "using a system with more VRAM per GPU."
        )
    result_dict = summary.get_result_dict()
    if result_dict is None:
        raise RuntimeError("Disagg estimation produced no results. The configuration may be invalid.")
    result_dict = api._apply_power_coverage_gate(summary, result_dict)
    return result_dict, None, summary


def run_point(point: dict) -> dict:
    """Same contract as ``spec_points.run_point``: {"error", "raw", "kv_cache_warning"}."""
    system, backend, version = point["db"].split("/")
    args = dict(point["args"])
    error = raw = kv_warning = None
    try:
        if point["mode"] == "agg":
            fn = estimate_agg
        elif point["mode"] == "disagg":
            fn = estimate_disagg
        else:
            raise ValueError(f"spec_cp_points runs agg and disagg only, not {point['mode']!r}")
        raw, kv_warning, _ = fn(point["model"], system, backend_name=backend, backend_version=version, **args)
    except Exception as e:  # the spec's refusal is the golden
        error = f"{type(e).__name__}: {e}"
    return {"error": error, "raw": raw, "kv_cache_warning": kv_warning}


# ------------------------------------------------------------------ cross-check route
@contextlib.contextmanager
def _cli_estimate_with_cp(cp_prefill: int, cp_decode: int):
    """Make the spec's own ``cli_estimate`` build its ModelConfigs with cp.

    ``_run_agg_estimate`` / ``_run_disagg_estimate`` call ``_resolve_moe_parallelism`` and
    ``_build_model_config`` once per side, prefill (or agg) first, then decode.
    """
    api = _api()
    orig_res, orig_build = api._resolve_moe_parallelism, api._build_model_config
    calls = {"res": 0, "build": 0}

    def cp_of(kind):
        i = calls[kind]
        calls[kind] += 1
        return cp_prefill if i == 0 else cp_decode

    def res(tp, dp, etp, eep, model_path=None):
        return _resolve_moe_parallelism(tp, dp, etp, eep, cp_of("res"), model_path)

    def build(*a, **k):
        return dataclasses.replace(orig_build(*a, **k), cp_size=cp_of("build"))

    api._resolve_moe_parallelism, api._build_model_config = res, build
    try:
        yield
    finally:
        api._resolve_moe_parallelism, api._build_model_config = orig_res, orig_build


def run_point_via_cli_estimate(cli_estimate, point: dict) -> dict:
    args = dict(point["args"])
    if point["mode"] == "agg":
        cps = (args.pop("cp_size", 1), 1)
    else:
        cps = (args.pop("prefill_cp_size", 1), args.pop("decode_cp_size", 1))
    with _cli_estimate_with_cp(*cps):
        return spec_points.run_point(cli_estimate, dict(point, args=args))


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# ------------------------------------------------------------------ golden verification
def verify_golden(path: str, explicit_cp1: bool) -> int:
    import pyarrow.parquet as pq

    golden = pq.read_table(path)
    gdf = golden.to_pandas()
    points = [
        dict(point_id=int(r.point_id), split=r.split, mode=r.mode, model=r.model, db=r.db, args=json.loads(r.args))
        for r in gdf.itertuples()
    ]
    rows = []
    for p in points:
        q = p
        if explicit_cp1:
            extra = {"cp_size": 1} if p["mode"] == "agg" else {"prefill_cp_size": 1, "decode_cp_size": 1}
            q = dict(p, args={**p["args"], **extra})
        rows.append(spec_points.build_row(p, run_point(q)))
    tmp = os.path.join("/tmp", os.path.basename(path) + f".verify{os.getpid()}.parquet")
    spec_points.write_parquet(rows, tmp)
    mine = pq.read_table(tmp)
    os.unlink(tmp)
    if not explicit_cp1:
        ok_table = mine.equals(golden) and mine.schema.equals(golden.schema)
        print(f"{path}: table and schema identical: {ok_table}", file=sys.stderr)
    mdf = mine.to_pandas()
    n_ok = 0
    for i in range(len(gdf)):
        diffs = [c for c in gdf.columns if not _same(gdf.iloc[i][c], mdf.iloc[i][c])]
        if diffs:
            print(f"  point {gdf.iloc[i].point_id}: differs in {diffs}", file=sys.stderr)
        else:
            n_ok += 1
    print(f"{path}: {n_ok}/{len(gdf)} rows identical{' (args carry explicit cp=1)' if explicit_cp1 else ''}",
          file=sys.stderr)
    return 0 if n_ok == len(gdf) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("points", nargs="?", help="JSON file: list of {mode, model, db, args[, point_id, split]}")
    ap.add_argument("out", nargs="?", help="output parquet")
    ap.add_argument("--systems", default="/work/specdata/systems")
    ap.add_argument("--spec-src", default="/work/specsrc")
    ap.add_argument("--split", default="family_cp")
    ap.add_argument("--first-id", type=int, default=0)
    ap.add_argument("--cross-check", action="store_true",
                    help="also price each point through cli_estimate with cp injected; fail on any difference")
    ap.add_argument("--verify-golden", action="append", default=[],
                    help="existing golden parquet to reproduce at cp = 1 (repeatable)")
    ap.add_argument("--verify-explicit-cp1", action="store_true",
                    help="with --verify-golden: put cp keys = 1 into the args")
    a = ap.parse_args(argv)

    cli_estimate = spec_points.load_spec(a.spec_src, a.systems)
    rc = 0
    for g in a.verify_golden:
        rc |= verify_golden(g, a.verify_explicit_cp1)
    if not a.points:
        return rc

    with open(a.points, encoding="utf-8") as f:
        points = json.load(f)
    rows = []
    n_mismatch = 0
    next_id = a.first_id
    for p in points:
        p = dict(p)
        if "point_id" not in p:
            p["point_id"] = next_id
        next_id = int(p["point_id"]) + 1
        p.setdefault("split", a.split)
        t0 = time.time()
        out = run_point(p)
        dt = time.time() - t0
        status = "ERROR " + out["error"][:160] if out["error"] else "ok"
        if out["kv_cache_warning"]:
            status += " (kv warning)"
        if a.cross_check:
            other = run_point_via_cli_estimate(cli_estimate, p)
            if other != out:
                n_mismatch += 1
                status += " CROSS-CHECK MISMATCH"
            else:
                status += " (cross-check ok)"
        print(f"[{p['point_id']}] {p['mode']} {p['model']} {p['db']} {json.dumps(p['args'], sort_keys=True)}: "
              f"{status} {dt:.1f}s", file=sys.stderr, flush=True)
        rows.append(spec_points.build_row(p, out))
    if a.out:
        spec_points.write_parquet(rows, a.out)
    n_err = sum(r["error"] is not None for r in rows)
    print(f"wrote {len(rows)} points ({n_err} errors) to {a.out}", file=sys.stderr)
    if a.cross_check:
        print(f"cross-check against cli_estimate with cp injected: {len(rows) - n_mismatch}/{len(rows)} identical",
              file=sys.stderr)
    return rc | (1 if n_mismatch else 0)


if __name__ == "__main__":
    sys.exit(main())
