#!/usr/bin/env python3
"""Compute one search golden case with the spec (aiconfigurator v0.11.0, pure Python).

Runs the spec's ``cli_default`` (``aiconfigurator cli default``: the agg and
the disagg experiment, picking, chosen mode) for one case and writes the
case directory of ``tests/goldens/search/<case>/``:

    meta.json                       args, spec_seconds, error, chosen_exp,
                                    best_throughputs, row counts
    agg.candidates.parquet          the whole frame the agg Task.run() returned
    agg.pareto_fronts.parquet       result.pareto_fronts["agg"]
    agg.best_configs.parquet        result.best_configs["agg"] (top_n rows at most)
    disagg.candidates.parquet       the same for the disagg experiment
    disagg.pareto_fronts.parquet
    disagg.best_configs.parquet

Conventions (those of the committed cases):
  * the call is ``cli_default(model, gpus, system, backend=backend,
    backend_version=version, database_mode="SILICON", isl=isl, osl=osl,
    prefix=prefix, ttft=ttft, tpot=tpot, top_n=top_n)``; ``strict_sla`` is
    left at its default (False) -- ``--strict-sla`` is refused here;
  * the candidate frame is a deep copy of what ``Task.run()`` returned, taken
    before the picking adds ``tokens/s/gpu_cluster`` to its own copy;
  * frames keep the spec's column names, order, row order and rounding, and
    are written with ``DataFrame.to_parquet(index=False)`` (pyarrow), but
    for the agg frames' ``_per_ops_source`` column (a dict per row, which
    the spec's own ``save_results`` strips before writing too): dropped;
  * ``object`` columns: all text -> arrow string; all Python ints (the
    disagg candidates and fronts hold their int columns so) -> pandas
    nullable ``Int64`` (``numpy_type`` ``Int64`` in the pandas metadata,
    arrow int64); all Python floats (the disagg front's
    ``tokens/s/gpu_cluster``: the spec computes it from the object
    ``num_total_gpus`` column) -> float64, as in the two Qwen cases; the
    Llama h200 / vllm case stored that column as each value's ``str``
    instead (the float's repr, which round-trips; the tests parse it back):
    ``--object-floats-as-text`` reproduces that convention; any other
    object column that is not all text -> the ``str`` of each value;
  * ``meta.json``: ``best_throughputs`` are the spec's floats,
    ``candidates`` / ``pareto_fronts`` / ``best_configs`` the row counts,
    ``error`` the spec's exception (``"<Type>: <message>"``) or null,
    ``spec_seconds`` the wall time of the ``cli_default`` call; ``--note``
    adds a ``note`` field. JSON is written with ``indent=1`` like the
    committed files.

The spec runs with its compiled extension stubbed out (every Rust entry point
raises) and ``AICONFIGURATOR_ENGINE_STEP_BACKEND=python``, so every number
comes from the Python engine step; the perf data tree is set with
``perf_database.set_systems_paths()``. Setup of ``/work/specenv``,
``/work/specsrc`` and ``/work/specdata/systems``: see the header of
``scripts/spec_points.py``, plus plotext 5 (the spec's uv.lock pins 5.3.2;
``cli_default``'s closing summary draws the Pareto plot with
``plotext.plot_size``, which plotext 6 no longer has -- the run then fails
with an AttributeError after the search):

    /work/specenv/bin/pip install -c /work/specenv/constraints.txt plotext==5.3.2

numpy's sort: this machine has AVX-512, and numpy 1.26's AVX-512 sort breaks
ties differently from the generic introsort the goldens follow. The script
sets ``NPY_DISABLE_CPU_FEATURES`` to the AVX-512 features before numpy is
imported (unless it is already set) and refuses to run if numpy still
reports AVX512F / AVX512_SKX enabled.

Run (one case; the arguments of an existing meta.json can be reused with
``--from-meta``):

    nice -n 10 /work/specenv/bin/python scripts/spec_search_case.py OUT_DIR \\
        --model meta-llama/Meta-Llama-3.1-8B --gpus 4 --system rtx_pro_6000_server \\
        --backend sglang --version 0.5.14 --isl 256 --osl 256 --prefix 128 \\
        --ttft 1500 --tpot 50 --top-n 1 --note "..."

    nice -n 10 /work/specenv/bin/python scripts/spec_search_case.py /tmp/check \\
        --from-meta tests/goldens/search/qwen3_32b_fp8_h200_vllm_8gpu/meta.json \\
        --compare tests/goldens/search/qwen3_32b_fp8_h200_vllm_8gpu

    nice -n 10 /work/specenv/bin/python scripts/spec_search_case.py /tmp/check \\
        --from-meta tests/goldens/search/llama31_8b_h200_vllm_4gpu/meta.json \\
        --compare tests/goldens/search/llama31_8b_h200_vllm_4gpu --object-floats-as-text

``--compare DIR`` checks the seven written files against another case
directory: the frames must be equal (same column names, arrow types, pandas
dtypes, values, row order; the pyarrow version in the metadata is ignored),
meta.json must agree on everything but ``spec_seconds*`` and ``note``; the
exit status is 1 on a difference. Options: ``--systems`` (default
/work/specdata/systems), ``--spec-src`` (default /work/specsrc).
Timing on this machine (2 cores, quiet): the Llama-3.1-8B h200 / vllm case
takes ~65 s, the rtx_pro_6000_server / sglang one ~40 s (see its meta.json).
"""

from __future__ import annotations

import os

AVX512 = "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", AVX512)

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

MODES = ("agg", "disagg")
FRAMES = ("candidates", "pareto_fronts", "best_configs")
# Dropped from every frame: the per-op source dicts of the agg rows (the spec's own save strips it too).
DROPPED = ("_per_ops_source",)
ARG_KEYS = ("model", "gpus", "system", "backend", "version", "isl", "osl", "prefix", "ttft", "tpot", "top_n")
# Options a case may set (in args only when set, so the other cases' meta.json stay as they are).
OPTION_KEYS = (
    "nextn",
    "nextn_accepted",
    "max_seq_len",
    "free_gpu_memory_fraction",
    "enable_chunked_prefill",
    "image_height",
    "image_width",
    "num_images",
    "enable_encoder_dp",
    "request_latency",
    "decode_system",
    "target_request_rate",
    "target_concurrency",
)
# Options of the CLI that cli_default() does not take (set by wrapping what it calls, see run_case).
CLI_ONLY_KEYS = ("enable_chunked_prefill",)
# A load target makes the case cli_recommend's (docs/spec/experiments.md 4): no total_gpus, its budgets instead.
RECOMMEND_KEYS = ("target_request_rate", "target_concurrency")


def _check_numpy() -> None:
    import numpy as np

    feats = np.core._multiarray_umath.__cpu_features__
    on = [f for f in ("AVX512F", "AVX512_SKX") if feats.get(f)]
    if on:
        sys.exit(f"numpy has {on} enabled: set NPY_DISABLE_CPU_FEATURES=\"{AVX512}\" before numpy is imported")


def _install_extension_stub() -> None:
    """Stand in for the compiled ``aiconfigurator_core._aiconfigurator_core`` (as spec_points.py)."""
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


def load_recommend(spec_src: str, systems: str, budgets: list):
    """The spec's cli_recommend (after `load_spec` has patched the capture), with every budget it
    tries appended to ``budgets`` (its escalation, docs/spec/experiments.md 4.3)."""
    from aiconfigurator.cli import api

    build = api._build_recommend_tasks

    def build_and_keep(base_tasks, total_gpus):
        budgets.append(int(total_gpus))
        return build(base_tasks, total_gpus)

    api._build_recommend_tasks = build_and_keep
    return api.cli_recommend


def load_spec(spec_src: str, systems: str):
    """The spec's cli_default, and the dict Task.run() frames are captured into (by serving mode)."""
    os.environ["AICONFIGURATOR_ENGINE_STEP_BACKEND"] = "python"
    for p in (os.path.join(spec_src, "aic-core", "src"), os.path.join(spec_src, "src")):
        if p not in sys.path:
            sys.path.insert(0, p)
    _install_extension_stub()
    from aiconfigurator.sdk import perf_database
    from aiconfigurator.sdk.task_v2 import Task
    from aiconfigurator.cli.api import cli_default

    perf_database.set_systems_paths(systems)

    captured: dict = {}
    run = Task.run

    def run_and_keep(self, *a, **k):
        df = run(self, *a, **k)
        # By task (the experiment names come from result.tasks) and, for a run that raises before
        # it returns a result, by serving mode.
        kept = None if df is None else df.copy(deep=True)
        captured[id(self)] = kept
        captured.setdefault("by_mode", {}).setdefault(self.serving_mode, []).append(kept)
        return df

    Task.run = run_and_keep

    # Each experiment's own picks (under --backend auto the result holds the merged ones only).
    from aiconfigurator.cli import main as cli_main

    process = cli_main.process_experiment_result

    def process_and_keep(task, task_result, *a, **k):
        out = process(task, task_result, *a, **k)
        best, _, front = out[0], out[1], out[2]
        captured[("picks", id(task))] = (
            None if best is None else best.copy(deep=True),
            None if front is None else front.copy(deep=True),
        )
        return out

    cli_main.process_experiment_result = process_and_keep
    return cli_default, captured


def _storable(df, floats_as_text: bool = False):
    """The frame as it is stored (see the module doc): ``_per_ops_source`` dropped, object columns
    of Python ints as nullable ``Int64``, of floats as float64 (as text with ``floats_as_text``),
    any other object column that is not all text as text."""
    import pandas as pd

    df = df.drop(columns=[c for c in DROPPED if c in df.columns]).reset_index(drop=True)
    for c in df.columns:
        s = df[c]
        if s.dtype != object:
            continue
        values = list(s.dropna())
        if all(isinstance(v, str) for v in values):
            continue
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            df[c] = s.astype(pd.Int64Dtype())
        elif not floats_as_text and all(isinstance(v, float) for v in values):
            df[c] = s.astype("float64")
        else:
            df[c] = s.map(lambda v: v if v is None or isinstance(v, str) else str(v))
    return df


def _enable_chunked_prefill() -> None:
    """``cli default --enable-chunked-prefill``: the CLI passes the flag to
    ``build_default_tasks``; ``cli_default()`` has no such argument and calls
    it without, so the call is made with the flag set, as the CLI makes it."""
    import functools

    from aiconfigurator.cli import api

    api.build_default_tasks = functools.partial(api.build_default_tasks, enable_chunked_prefill=True)


class _Done(Exception):
    """The recommend call returned (leaves the try without calling cli_default)."""


def run_case(args: dict, spec_src: str, systems: str, note: str | None) -> tuple[dict, dict]:
    cli_default, captured = load_spec(spec_src, systems)
    if args.get("enable_chunked_prefill"):
        _enable_chunked_prefill()
    error = None
    result = None
    t0 = time.time()
    recommend = any(args.get(k) is not None for k in RECOMMEND_KEYS)
    budgets: list = []
    try:
        if recommend:
            # cli_recommend's own arguments: no GPU budget (it escalates from a node), SILICON as the goldens.
            cli_recommend = load_recommend(spec_src, systems, budgets)
            result = cli_recommend(
                args["model"],
                args["system"],
                backend=args["backend"],
                backend_version=None if args["version"] == "latest" else args["version"],
                database_mode="SILICON",
                isl=args["isl"],
                osl=args["osl"],
                prefix=args["prefix"],
                ttft=args["ttft"],
                tpot=args["tpot"],
                top_n=args["top_n"],
                **{k: args[k] for k in OPTION_KEYS if args.get(k) is not None and k not in CLI_ONLY_KEYS},
            )
            raise _Done()
        result = cli_default(
            args["model"],
            args["gpus"],
            args["system"],
            backend=args["backend"],
            # 'latest': no version, so each role resolves its system's newest (experiments.md 1.3).
            backend_version=None if args["version"] == "latest" else args["version"],
            database_mode="SILICON",
            isl=args["isl"],
            osl=args["osl"],
            prefix=args["prefix"],
            ttft=args["ttft"],
            tpot=args["tpot"],
            top_n=args["top_n"],
            # MTP, TRT-LLM's KV knobs and images (docs/spec/options.md 2.5, 3.2, 4): only when the case sets them.
            **{k: args[k] for k in OPTION_KEYS if args.get(k) is not None and k not in CLI_ONLY_KEYS},
        )
    except _Done:
        pass
    except Exception as e:  # the spec's refusal is recorded
        error = f"{type(e).__name__}: {e}"
    seconds = time.time() - t0

    import pandas as pd

    frames: dict = {}
    names = list(result.tasks) if result is not None else list(MODES)
    plain = set(names) <= set(MODES)
    for name in names:
        if result is not None:
            cand = captured.get(id(result.tasks[name]))
        else:
            kept = captured.get("by_mode", {}).get(name, [])
            if len(kept) > 1:
                raise RuntimeError(f"two {name} experiments in a run that raised")
            cand = kept[0] if kept else None
        frames[(name, "candidates")] = cand if cand is not None else pd.DataFrame()
    if result is not None and plain:
        for mode in names:
            frames[(mode, "pareto_fronts")] = result.pareto_fronts.get(mode)
            frames[(mode, "best_configs")] = result.best_configs.get(mode)
    elif result is not None:
        # Several experiments (--backend auto, DeepEP twins): each one's own picks, and the picks the
        # spec reports (merged per serving mode when more than two tasks were built).
        for name in names:
            best, front = captured.get(("picks", id(result.tasks[name])), (None, None))
            frames[(name, "pareto_fronts")] = front
            frames[(name, "best_configs")] = best
        for key in result.best_configs:
            if key not in names:
                frames[(key, "pareto_fronts")] = result.pareto_fronts.get(key)
                frames[(key, "best_configs")] = result.best_configs.get(key)
    meta = {
        "args": args,
        "spec_seconds": seconds,
        "error": error,
        "chosen_exp": None if result is None else result.chosen_exp,
        "best_throughputs": {} if result is None else {m: float(v) for m, v in result.best_throughputs.items()},
    }
    if recommend and result is not None:
        # the budget of the last attempt (the escalation's answer)
        meta["total_gpus_used"] = int(next(iter(result.tasks.values())).total_gpus)
    if recommend:
        meta["budgets_tried"] = budgets
    if not plain:
        meta["experiments"] = names
        meta["outcomes"] = {
            n: (None if o.error is None else f"{type(o.error).__name__}: {o.error}") for n, o in result.outcomes.items()
        }
    keys = list(dict.fromkeys(k for k, _ in frames))
    for frame in FRAMES:
        meta[frame] = {m: len(frames[(m, frame)]) for m in keys if frames.get((m, frame)) is not None}
    if note:
        meta["note"] = note
    return meta, frames


def write_case(out: str, meta: dict, frames: dict, floats_as_text: bool = False) -> None:
    os.makedirs(out, exist_ok=True)
    for (mode, frame), df in frames.items():
        if df is None:
            continue
        _storable(df, floats_as_text).to_parquet(os.path.join(out, f"{mode}.{frame}.parquet"), index=False)
    with open(os.path.join(out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)


def _pandas_columns(schema) -> list:
    md = json.loads((schema.metadata or {}).get(b"pandas", b"{}"))
    return [(c["name"], c["pandas_type"], c["numpy_type"]) for c in md.get("columns", [])]


def compare_case(ours: str, theirs: str) -> list[str]:
    """Differences between two case directories (frames exactly; meta.json but the timing and note)."""
    import pyarrow.parquet as pq

    diffs = []
    files = sorted({f for d in (ours, theirs) for f in os.listdir(d) if f.endswith(".parquet")})
    for name in files:
        missing = [d for d in (ours, theirs) if not os.path.exists(os.path.join(d, name))]
        if missing:
            diffs.append(f"{name}: missing in {missing}")
            continue
        a, b = pq.read_table(os.path.join(ours, name)), pq.read_table(os.path.join(theirs, name))
        if a.schema.names != b.schema.names:
            diffs.append(f"{name}: columns {a.schema.names} vs {b.schema.names}")
            continue
        for f1, f2 in zip(a.schema, b.schema):
            if f1.type != f2.type:
                diffs.append(f"{name}: column {f1.name} type {f1.type} vs {f2.type}")
        if _pandas_columns(a.schema) != _pandas_columns(b.schema):
            diffs.append(f"{name}: pandas dtypes differ")
        if a.num_rows != b.num_rows:
            diffs.append(f"{name}: {a.num_rows} rows vs {b.num_rows}")
        ra, rb = a.to_pylist(), b.to_pylist()
        for i, (x, y) in enumerate(zip(ra, rb)):
            bad = [c for c in x if not (x[c] == y.get(c) or (x[c] != x[c] and y.get(c) != y.get(c)))]
            if bad:
                diffs.append(f"{name}: first differing row {i}: " +
                             "; ".join(f"{c}: {x[c]!r} vs {y.get(c)!r}" for c in bad))
                break
        else:
            if not a.equals(b):
                diffs.append(f"{name}: tables not equal (beyond values)")
    with open(os.path.join(ours, "meta.json"), encoding="utf-8") as f:
        ma = json.load(f)
    with open(os.path.join(theirs, "meta.json"), encoding="utf-8") as f:
        mb = json.load(f)
    skip = lambda k: k.startswith("spec_seconds") or k == "note"  # noqa: E731
    for k in sorted(set(ma) | set(mb)):
        if not skip(k) and ma.get(k) != mb.get(k):
            diffs.append(f"meta.json {k}: {ma.get(k)!r} vs {mb.get(k)!r}")
    return diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the case directory to write")
    ap.add_argument("--from-meta", help="take the arguments from this meta.json (its 'args')")
    ap.add_argument("--model")
    ap.add_argument("--gpus", type=int)
    ap.add_argument("--system")
    ap.add_argument("--backend")
    ap.add_argument("--version", help="the backend version, or 'latest' (the spec's None: each role's newest)")
    ap.add_argument("--isl", type=int)
    ap.add_argument("--osl", type=int)
    ap.add_argument("--prefix", type=int, default=0)
    ap.add_argument("--ttft", type=float)
    ap.add_argument("--tpot", type=float)
    ap.add_argument("--top-n", type=int, default=5)
    ap.add_argument("--nextn", help="MTP draft tokens per step (an integer or 'auto'); written to args only if given")
    ap.add_argument("--nextn-accepted", dest="nextn_accepted", type=float,
                    help="MTP accepted draft tokens per step")
    ap.add_argument("--max-seq-len", dest="max_seq_len", type=int,
                    help="TRT-LLM's KV-cache sequence length; written to args only if given")
    ap.add_argument("--free-gpu-memory-fraction", dest="free_gpu_memory_fraction", type=float,
                    help="TRT-LLM's KV-cache share of free GPU memory; written to args only if given")
    ap.add_argument("--enable-chunked-prefill", dest="enable_chunked_prefill", action="store_true", default=None,
                    help="the CLI's --enable-chunked-prefill (cli_default() has no such argument); "
                         "written to args only if given")
    ap.add_argument("--image-height", dest="image_height", type=int, help="image height in pixels (vision models)")
    ap.add_argument("--image-width", dest="image_width", type=int, help="image width in pixels (vision models)")
    ap.add_argument("--num-images", dest="num_images", type=int, help="images per request (vision models)")
    ap.add_argument("--disable-encoder-dp", dest="enable_encoder_dp", action="store_false", default=None,
                    help="the CLI's --disable-encoder-dp: the TP-sharded vision encoder; written to args only if given")
    ap.add_argument("--request-latency", dest="request_latency", type=float,
                    help="an end-to-end request-latency target (ms): the sweeps run (TTFT, TPOT) pairs instead of the "
                         "TPOT list (docs/spec/experiments.md 3); written to args only if given")
    ap.add_argument("--decode-system", dest="decode_system",
                    help="the decode workers' system (docs/spec/experiments.md 1); written to args only if given")
    ap.add_argument("--target-request-rate", dest="target_request_rate", type=float,
                    help="cli_recommend: the request rate (req/s) to serve with the fewest GPUs (--gpus is then unused)")
    ap.add_argument("--target-concurrency", dest="target_concurrency", type=float,
                    help="cli_recommend: the concurrent requests to serve with the fewest GPUs")
    ap.add_argument("--note", help="a 'note' field for meta.json (why the case exists, how it was made)")
    ap.add_argument("--compare", help="a case directory the written files must equal")
    ap.add_argument("--object-floats-as-text", action="store_true",
                    help="store object columns of floats as text (the Llama h200 / vllm case's convention)")
    ap.add_argument("--systems", default="/work/specdata/systems")
    ap.add_argument("--spec-src", default="/work/specsrc")
    a = ap.parse_args(argv)

    _check_numpy()
    if a.from_meta:
        with open(a.from_meta, encoding="utf-8") as f:
            args = json.load(f)["args"]
    else:
        args = {k: getattr(a, k) for k in ARG_KEYS}
        missing = [k for k, v in args.items() if v is None]
        if missing:
            ap.error("missing arguments: " + ", ".join("--" + k.replace("_", "-") for k in missing))
    options = {k: getattr(a, k, None) for k in OPTION_KEYS} if not a.from_meta else {}
    args = {k: args[k] for k in ARG_KEYS} | {k: v for k, v in {**args, **options}.items() if k in OPTION_KEYS and v is not None}
    if isinstance(args.get("nextn"), str) and args["nextn"] != "auto":
        args["nextn"] = int(args["nextn"])

    meta, frames = run_case(args, a.spec_src, a.systems, a.note)
    write_case(a.out, meta, frames, a.object_floats_as_text)
    counts = {f: meta[f] for f in FRAMES}
    print(f"{a.out}: {meta['spec_seconds']:.1f} s, error {meta['error']}, chosen {meta['chosen_exp']}, "
          f"best {meta['best_throughputs']}, rows {counts}", file=sys.stderr)
    if a.compare:
        diffs = compare_case(a.out, a.compare)
        for d in diffs:
            print("DIFF " + d, file=sys.stderr)
        print(f"compare with {a.compare}: {'equal' if not diffs else f'{len(diffs)} differences'}", file=sys.stderr)
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
