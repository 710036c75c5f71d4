"""The Python path (`aicsql.spec`) against the spec's GEMM goldens, bit for bit.

Goldens: ``$AICSQL_GOLDENS``, else ``<repo>/tests/goldens``.
Data: the cache rule (``$AICSQL_DATA``, ``$XDG_CACHE_HOME/aicsql``, ``~/.cache/aicsql``).
"""

from __future__ import annotations

import collections
import csv
import math
import os
from pathlib import Path

import sys
import types

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _support import have_data, require

try:
    import aicsql.spec  # noqa: F401
except ImportError:
    # `aicsql/__init__.py` loads the compiled Rust extension. The Python path is
    # pure Python and is tested without it: mount `aicsql` as a bare package.
    _package = types.ModuleType("aicsql")
    _package.__path__ = [str(Path(__file__).resolve().parents[1] / "aicsql")]
    sys.modules["aicsql"] = _package
    import aicsql.spec  # noqa: F401

from aicsql.spec import (
    TRACE_SCHEMA,
    data_dirs,
    gemm_latency,
    gemm_latency_batch,
    gemm_sol,
    gemm_trace,
    gemm_trace_table,
    load_table,
    open_tree,
)
from aicsql.spec.data import Database, DataTree
from aicsql.spec.gemm import gemm_sources
from aicsql.spec.pep440 import Version, parse, sort_versions

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens")
GEMM_GOLDENS = GOLDENS / "gemm_goldens.parquet"

SEED_DB = "h200_sxm/vllm/0.19.0"
SEED = {  # m -> spec latency (ms), fp8_block n=1280 k=5120, shared layer on and off
    1: 0.021895413193058825,
    4: 0.020520365862156952,
    32: 0.020907013733453883,
    416: 0.02634752182721208,
}
TIE_DISTANCE = 0.41572201881803594


needs_data = require(have_data(open_tree), f"no perf data under {data_dirs()} (run the fetch step)")
needs_goldens = require(GEMM_GOLDENS.is_file(), f"no goldens at {GOLDENS}")


def settings(shared_layer: bool = True, **extra) -> dict:
    s = {"backend": "", "version": "latest", "on_miss": "null", "shared_layer": "true" if shared_layer else "false"}
    s.update(extra)
    return s


@pytest.fixture(scope="module")
def goldens():
    return pq.read_table(GEMM_GOLDENS)


# ---- (1) the seed case: the site-order tie ---------------------------------------------


@needs_data
@pytest.mark.parametrize("shared_layer", [True, False], ids=["shared", "own_file"])
def test_seed_case_values(shared_layer):
    for m, want in SEED.items():
        got = gemm_latency(SEED_DB, "fp8_block", m, 1280, 5120, shared_layer=shared_layer)
        assert got == want, (m, got, want)


@needs_data
@pytest.mark.parametrize("shared_layer", [True, False], ids=["shared", "own_file"])
def test_seed_case_trace_tie_break(shared_layer):
    rows = gemm_trace(SEED_DB, "fp8_block", 32, 1280, 5120, shared_layer=shared_layer)
    transfer = [r for r in rows if r["stage"] == "transfer"]
    top = [(r["rank"], r["site_n"], r["site_k"], r["selected"]) for r in transfer[:5]]
    assert top == [
        (1, 1536, 5120, True),
        (2, 1024, 5120, True),
        (3, 1536, 6144, True),
        (4, 1536, 4096, True),
        (5, 1024, 6144, False),
    ]
    # Ranks 4 and 5 are an exact float tie, broken by site order.
    assert transfer[3]["distance"] == TIE_DISTANCE
    assert transfer[4]["distance"] == TIE_DISTANCE
    assert transfer[4]["weight"] is None and transfer[4]["reason"] == "not blended: beyond nn_sites = 4"
    for r in transfer[:4]:
        assert r["weight"] == 1 / (r["distance"] ** 2 + 1e-12)
        assert r["util"] == r["site_sol_ms"] / r["site_latency_ms"]
        assert r["covers_m"] is True
    assert rows[-1]["stage"] == "result" and rows[-1]["selected"] is True
    assert rows[-1]["result_ms"] == SEED[32]
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1))
    assert {r["db"] for r in rows} == {SEED_DB}


# ---- (2) every golden row, both modes ------------------------------------------------------


@needs_data
@needs_goldens
@pytest.mark.parametrize(
    "shared_layer,column", [(False, "latency_ms"), (True, "latency_ms_shared")], ids=["own_file", "shared"]
)
def test_every_golden_row_bit_identical(goldens, shared_layer, column):
    db = pa.array(
        [f"{s}/{b}/{v}" for s, b, v in zip(*(goldens.column(c).to_pylist() for c in ("system", "backend", "version")))]
    )
    got = gemm_latency_batch(
        settings(shared_layer), db, goldens.column("quant"), goldens.column("m"), goldens.column("n"), goldens.column("k")
    ).to_pylist()
    want = goldens.column(column).to_pylist()
    classes = goldens.column("class").to_pylist()
    identical = sum(1 for g, w in zip(got, want) if g is not None and w is not None and g == w)
    misses_matched = sum(1 for g, w in zip(got, want) if g is None and w is None)
    wrong = collections.Counter(c for g, w, c in zip(got, want, classes) if not (g == w or (g is None and w is None)))
    print(f"{column}: {identical} bit-identical, {misses_matched} misses matched, of {len(want)}")
    assert not wrong, f"{sum(wrong.values())} rows differ, by class: {dict(wrong)}"
    assert identical + misses_matched == goldens.num_rows == 15105
    # Bit-identical, not merely ==: compare the IEEE bits too (== treats 0.0 and -0.0 alike).
    assert all(math.copysign(1.0, g) == math.copysign(1.0, w) for g, w in zip(got, want) if g is not None)


@needs_data
@needs_goldens
@pytest.mark.parametrize(
    "shared_layer,suffix", [(False, ""), (True, "_shared")], ids=["own_file", "shared"]
)
def test_every_golden_miss_message(goldens, shared_layer, suffix):
    """Under on_miss='error' a miss raises the spec's own message."""
    checked = 0
    for r in goldens.to_pylist():
        reason = r["miss_reason" + suffix]
        if reason is None:
            continue
        db = f"{r['system']}/{r['backend']}/{r['version']}"
        with pytest.raises(ValueError) as e:
            gemm_latency(db, r["quant"], r["m"], r["n"], r["k"], shared_layer=shared_layer, on_miss="error")
        assert str(e.value) == reason
        checked += 1
    assert checked == (942 if not shared_layer else 710)


@needs_data
@needs_goldens
def test_trace_agrees_with_latency_and_golden_class(goldens):
    """The trace's last row carries the same bits; its first row the golden's path."""
    stage_of_class = {
        "exact": "exact",
        "curve": "curve",
        "hold_high": "hold",
        "hold_low": "hold",
        "transfer": "transfer",
        "tie": "transfer",
    }
    rows = goldens.to_pylist()
    for r in rows[::13]:
        db = f"{r['system']}/{r['backend']}/{r['version']}"
        trace = gemm_trace(db, r["quant"], r["m"], r["n"], r["k"], shared_layer=False)
        if r["latency_ms"] is None:
            assert trace[-1]["stage"] == "miss" and trace[-1]["result_ms"] is None
        else:
            assert trace[-1]["stage"] == "result" and trace[-1]["result_ms"] == r["latency_ms"]
            assert trace[0]["stage"] == stage_of_class[r["class"]], r


@needs_data
@needs_goldens
def test_files_serving_golden_databases():
    """tables.csv says which wheel file serves each golden database (identical copies may serve too)."""
    tree = open_tree()
    with open(GOLDENS / "tables.csv", newline="") as f:
        for row in csv.DictReader(f):
            served = tree.gemm_file(Database(row["system"], row["backend"], row["version"]))
            assert served is not None, row
            allowed = [row["path"]] + [alt.split(":", 1)[1] for alt in row["also_in"].split(";") if alt]
            assert any(served.path.endswith(p.split("/", 1)[1]) for p in allowed), (served.path, allowed)
            table = load_table(tree, Database(row["system"], row["backend"], row["version"]), shared_layer=False)
            assert table.supported == row["gemm_dtypes"].split(";")


# ---- (3) error paths, NULLs, settings -------------------------------------------------------


@needs_data
def test_unknown_quant_names_it_and_lists_valid():
    with pytest.raises(ValueError) as e:
        gemm_latency(SEED_DB, "fp9", 1, 1280, 5120)
    message = str(e.value)
    assert "'fp9'" in message
    for q in ("bfloat16", "fp8", "fp8_static", "fp8_block", "nvfp4", "int8_wo", "int4_wo", "sq"):
        assert q in message
    with pytest.raises(ValueError, match="fp9"):
        gemm_trace_table(settings(), SEED_DB, "fp9", 1, 1280, 5120)


@needs_data
def test_unknown_database_lists_valid():
    with pytest.raises(ValueError) as e:
        gemm_latency("h999/vllm/0.19.0", "fp8", 1, 1280, 5120)
    assert "unknown system 'h999'" in str(e.value) and "h200_sxm" in str(e.value) and "a100_sxm" in str(e.value)
    with pytest.raises(ValueError) as e:
        gemm_latency("h200_sxm/vllm/0.0.1", "fp8", 1, 1280, 5120)
    # The spec's database set (families_hybrid_vl_databases.md 4.2): marker-only
    # 0.22.0 and kda-only 0.1.dev19262 are databases too; plain string order.
    assert "0.0.1" in str(e.value) and "versions: 0.1.dev19262, 0.14.0, 0.18.0, 0.19.0, 0.22.0, 0.24.0" in str(e.value)
    with pytest.raises(ValueError) as e:
        gemm_latency("h200_sxm/tensorflow", "fp8", 1, 1280, 5120)
    assert "'tensorflow'" in str(e.value) and "sglang, trtllm, vllm" in str(e.value)
    with pytest.raises(ValueError, match="names no backend"):
        gemm_latency_batch(settings(), pa.array(["h200_sxm"]), pa.array(["fp8"]), pa.array([1]), pa.array([2]), pa.array([3]))


@needs_data
@pytest.mark.parametrize(
    "shape,text",
    [((-1, 1280, 5120), "m = -1"), ((1, 0, 5120), "n = 0"), ((1, 1280, 0), "k = 0"), ((1, -5, 5120), "n = -5")],
)
def test_shape_out_of_range(shape, text):
    with pytest.raises(ValueError, match=text):
        gemm_latency(SEED_DB, "fp8", *shape)
    with pytest.raises(ValueError, match=text):
        gemm_latency_batch(settings(), pa.array([SEED_DB]), pa.array(["fp8"]), *(pa.array([v]) for v in shape))
    with pytest.raises(ValueError, match=text):
        gemm_trace_table(settings(), SEED_DB, "fp8", *shape)


@needs_data
def test_m_zero_is_valid():
    assert gemm_latency(SEED_DB, "fp8_block", 0, 1536, 5120) > 0


@needs_data
def test_known_quant_the_database_lacks_is_a_miss():
    assert gemm_latency(SEED_DB, "nvfp4", 1, 1280, 5120) is None
    with pytest.raises(ValueError) as e:
        gemm_latency(SEED_DB, "nvfp4", 1, 1280, 5120, on_miss="error")
    assert str(e.value).startswith(
        "GEMM perf data not available for requested quant mode. system='h200_sxm', backend='vllm', "
        "version='0.19.0', quant_mode='nvfp4'. Supported gemm modes: ['bfloat16', 'fp8', 'fp8_block']"
    )
    trace = gemm_trace(SEED_DB, "nvfp4", 1, 1280, 5120)
    assert [(r["stage"], r["reason"]) for r in trace] == [("miss", "the database has no GEMM data for this quant mode")]


@needs_data
def test_shape_miss_null_error_and_trace():
    assert gemm_latency(SEED_DB, "fp8", 416, 8, 8) is None
    with pytest.raises(ValueError, match=r"requested shape\. system='h200_sxm', backend='vllm', version='0\.19\.0', "
                       r"quant_mode='fp8', m=416, n=8, k=8"):
        gemm_latency_batch(
            settings(on_miss="error"), pa.array([SEED_DB]), pa.array(["fp8"]), pa.array([416]), pa.array([8]), pa.array([8])
        )
    trace = gemm_trace(SEED_DB, "fp8", 416, 8, 8)
    assert trace[-1]["stage"] == "miss" and trace[-1]["reason"] == "no site within max_site_distance"
    # With nothing in reach, the trace shows the nearest site beyond it.
    assert trace[0]["stage"] == "transfer" and trace[0]["rank"] is None and trace[0]["distance"] > 2.0


@needs_data
def test_batch_nulls_and_string_types():
    n = 6
    dbs = [SEED_DB, None, SEED_DB, SEED_DB, SEED_DB, SEED_DB]
    quants = ["fp8_block", "fp8_block", None, "fp8_block", "fp8_block", "fp8_block"]
    ms = [1, 1, 1, None, 1, 1]
    ns = [1280, 1280, 1280, 1280, None, 1280]
    ks = [5120, 5120, 5120, 5120, 5120, None]
    for string_type in (pa.string(), pa.large_string(), pa.string_view()):
        out = gemm_latency_batch(
            settings(),
            pa.array(dbs, string_type),
            pa.array(quants, string_type),
            pa.array(ms, pa.int64()),
            pa.array(ns, pa.int64()),
            pa.array(ks, pa.int64()),
        )
        assert out.type == pa.float64() and len(out) == n
        assert out.to_pylist() == [SEED[1], None, None, None, None, None]
    empty = gemm_latency_batch(settings(), *(pa.array([], t) for t in (pa.string(),) * 2 + (pa.int64(),) * 3))
    assert len(empty) == 0 and empty.type == pa.float64()


@needs_data
def test_database_settings_and_latest():
    want = SEED[1]
    for db, extra in (
        ("h200_sxm", {"backend": "vllm", "version": "0.19.0"}),
        ("h200_sxm/vllm", {"version": "0.19.0"}),
        ("h200_sxm/vllm/0.19.0", {"backend": "sglang", "version": "latest"}),
    ):
        out = gemm_latency_batch(
            settings(**extra), pa.array([db]), pa.array(["fp8_block"]), pa.array([1]), pa.array([1280]), pa.array([5120])
        )
        assert out.to_pylist() == [want]
    # 'latest' is the spec's (families_hybrid_vl_databases.md 4.4): marker-only
    # versions excluded (vllm 0.22.0), its own version key; 1.3.0rc23 holds no
    # GEMM file but is a database (moe/, msa/ dirs) priced by the shared layer.
    assert open_tree().resolve("h200_sxm", "vllm", "latest").version == "0.24.0"
    assert open_tree().resolve("h200_sxm/trtllm", "", "latest").version == "1.3.0rc23"
    latest = gemm_latency_batch(
        settings(backend="vllm"), pa.array(["h200_sxm"]), pa.array(["bfloat16"]), pa.array([64]), pa.array([4096]), pa.array([4096])
    )
    assert latest.to_pylist() == [gemm_latency("h200_sxm/vllm/0.24.0", "bfloat16", 64, 4096, 4096)]
    trace = gemm_trace_table(settings(backend="vllm", version="0.19.0"), "h200_sxm", "fp8_block", 1, 1280, 5120)
    assert set(trace.column("db").to_pylist()) == {SEED_DB}


@needs_data
def test_trace_schema_and_null_arguments():
    batch = gemm_trace_table(settings(), SEED_DB, "fp8_block", 1, 1536, 5120)
    assert batch.schema == TRACE_SCHEMA
    rows = batch.to_pylist()
    assert [r["stage"] for r in rows] == ["exact", "result"]
    assert rows[0]["reason"] == "stored point" and rows[0]["site_sol_ms"] is None
    for args in ((None, "fp8", 1, 2, 3), (SEED_DB, None, 1, 2, 3), (SEED_DB, "fp8", None, 2, 3)):
        empty = gemm_trace_table(settings(), *args)
        assert empty.num_rows == 0 and empty.schema == TRACE_SCHEMA


@needs_data
def test_sol_worked_example():
    # Spec 12.1: SOL(1024, 1280, 5120, fp8_block) on h200, compute-bound.
    assert gemm_sol(SEED_DB, "fp8_block", 1024, 1280, 5120) == 2 * 1024 * 1280 * 5120 / 1978e12 * 1000
    assert gemm_sol(SEED_DB, "fp8_block", 1024, 1280, 5120) == 0.006785527199191102


@needs_data
def test_shared_layer_sources():
    from aicsql.spec import gemm_sources

    tree = open_tree()
    versions = lambda db, shared: [f.version for f in gemm_sources(tree, tree.resolve(db), shared)]  # noqa: E731
    assert versions("h200_sxm/vllm/0.19.0", True) == ["0.19.0", "0.18.0", "0.14.0"]
    assert versions("h200_sxm/vllm/0.19.0", False) == ["0.19.0"]
    assert versions("gb200/vllm/0.19.0", True) == ["0.19.0", "0.14.0"]
    assert versions("h200_sxm/trtllm/1.3.0rc10", True) == ["1.3.0rc10", "1.2.0rc5"]
    # Newer release first (PEP 440 of the release, not its name): it serves shared paths.
    published = [r.version for r in tree.roots if not r.is_local]
    assert published == sorted(published, reverse=True)
    assert [r.release for r in tree.roots][:2] == ["aiconfigurator-core==0.12.0", "aiconfigurator==0.10.0"]
    # The union runs over the version dirs of both releases.
    assert versions("h200_sxm/sglang/0.5.14", True) == ["0.5.14", "0.5.10", "0.5.9", "0.5.6.post2"]


# ---- PEP 440 ---------------------------------------------------------------------------------


def test_pep440_order():
    ordered = [
        "1.0.dev0",
        "1.0a1",
        "1.0a2.dev1",
        "1.0a2",
        "1.0b1",
        "1.0rc1",
        "1.0",
        "1.0+local",
        "1.0+5",
        "1.0.post1.dev0",
        "1.0.post1",
        "1.1",
        "1!0.1",
    ]
    parsed = [Version(v) for v in ordered]
    assert parsed == sorted(parsed)
    assert all(a < b for a, b in zip(parsed, parsed[1:]))
    assert Version("1.0") == Version("1.0.0") == Version("v1.0")
    assert Version("1.3.0rc10") > Version("1.3.0rc5") > Version("1.2.0")
    assert Version("0.5.6.post2") < Version("0.5.9") < Version("0.5.10") < Version("0.5.14")
    assert Version("1.0RC1") == Version("1.0rc1") == Version("1.0c1") == Version("1.0-rc.1")
    assert parse("latest") is None and parse("not-a-version") is None
    assert sort_versions(["0.19.0", "weird", "0.14.0", "0.18.0", "0.24.0"]) == [
        "0.14.0",
        "0.18.0",
        "0.19.0",
        "0.24.0",
        "weird",
    ]


def test_partial_version_dirs_follow_the_spec(tmp_path):
    """A version dir is partial when its collection_meta.yaml marks *any* table
    partial (the whole dir is skipped, for every table); a top-level `status`
    is not read; a partial family dir of the requested version is skipped even
    as its primary (docs/spec/families_hybrid_vl_databases.md 4.2, 4.3 (1))."""
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "h200_sxm.yaml").write_text("data_dir: data/h200_sxm\n")
    base = tmp_path / "systems" / "data" / "h200_sxm" / "gemm" / "vllm"
    metas = {
        "1.0.0": "status: partial\n",
        "0.9.0": "status: partial\n",
        "0.8.0": "tables:\n  gemm_perf:\n    status: partial\n",
        "0.7.0": "tables:\n  moe_perf:\n    status: partial\n",
        "0.6.0": None,
    }
    for version, meta in metas.items():
        (base / version).mkdir(parents=True)
        (base / version / "gemm_perf.parquet").write_bytes(b"")
        if meta is not None:
            (base / version / "collection_meta.yaml").write_text(meta)
    tree = DataTree([str(tmp_path)])
    got = [f.version for f in gemm_sources(tree, Database("h200_sxm", "vllm", "1.0.0"), shared_layer=True)]
    assert got == ["1.0.0", "0.9.0", "0.6.0"]
    got = [f.version for f in gemm_sources(tree, Database("h200_sxm", "vllm", "0.8.0"), shared_layer=True)]
    assert got == ["0.6.0"]
    assert [db.version for db in tree.databases()] == ["0.6.0", "0.9.0", "1.0.0"]


def test_the_python_path_imports_without_datafusion_or_the_compiled_module():
    """aicsql.spec is pure Python: with datafusion and aicsql._internal made
    unimportable it still imports and prices the seed case."""
    import subprocess
    import sys

    script = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "datafusion" or name.startswith("datafusion.") or name == "aicsql._internal":
            raise ImportError(f"{name} is blocked by this test")
        return None
sys.meta_path.insert(0, Refuse())
from aicsql import spec
print(repr(spec.gemm_latency("h200_sxm/vllm/0.19.0", "fp8_block", 1, 1280, 5120)))
assert "datafusion" not in sys.modules and "aicsql._internal" not in sys.modules
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO / "python")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr(0.021895413193058825)
