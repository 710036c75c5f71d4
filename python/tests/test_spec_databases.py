"""The Python path's database set and table sources against the spec
(docs/spec/families_hybrid_vl_databases.md section 4, appendices A-C;
families_mla_gptoss_fp8static.md 7.1).

Data: the cache rule (``$AICSQL_DATA``, ``$XDG_CACHE_HOME/aicsql``,
``~/.cache/aicsql``); missing data FAILS the data tests. The temp-tree tests
build their own trees.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from _support import have_data, require

try:
    import aicsql.spec  # noqa: F401
except ImportError:
    # `aicsql/__init__.py` loads the compiled Rust extension; the Python path is
    # pure Python and is tested without it: mount `aicsql` as a bare package.
    _package = types.ModuleType("aicsql")
    _package.__path__ = [str(Path(__file__).resolve().parents[1] / "aicsql")]
    sys.modules["aicsql"] = _package
    import aicsql.spec  # noqa: F401

from aicsql.spec import DataTree, data_dirs, gemm_latency, open_tree
from aicsql.spec import sources as sources_module
from aicsql.spec.catalog import latest_key
from aicsql.spec.data import Database
from aicsql.spec.sources import table_sources

REPO = Path(__file__).resolve().parents[2]
SPEC_DOC = REPO / "docs" / "spec" / "families_hybrid_vl_databases.md"

needs_data = require(have_data(open_tree), f"no perf data under {data_dirs()} (run the fetch step)")


def appendix_a():
    """(database, tags) of appendix A, the spec's list, in its order."""
    text = SPEC_DOC.read_text()
    block = text[text.index("## Appendix A") : text.index("## Appendix B")]
    rows = re.findall(r"^\s*\d+ (\S+/\S+/\S+)((?: [a-z-]+)*)\s*$", block, re.M)
    assert re.search(r"TOTAL 124", block)
    return [(db, tuple(tags.split())) for db, tags in rows]


# ---- the set (4.2, 4.4, appendix A) ----------------------------------------------------


@needs_data
def test_the_databases_are_the_spec_s_124():
    want = appendix_a()
    assert len(want) == 124
    tree = open_tree()
    got = [db.name for db in tree.databases()]
    assert got == [db for db, _ in want]
    catalog = tree.catalog
    assert catalog.dropped == {}
    latest, latest_incl = {}, {}  # appendix A tags "latest-incl-marker" only where it differs
    for name, tags in want:
        system, backend, version = name.split("/")
        assert catalog.marker_only(system, backend, version) == ("marker-only" in tags), name
        if "latest" in tags:
            latest[(system, backend)] = version
            latest_incl.setdefault((system, backend), version)
        if "latest-incl-marker" in tags:
            latest_incl[(system, backend)] = version
    pairs = {tuple(name.split("/")[:2]) for name, _ in want}
    assert len(latest) == len(pairs) == 28
    for system, backend in pairs:
        assert tree.latest(system, backend) == latest[(system, backend)]
        assert catalog.latest(system, backend, include_marker_only=True) == latest_incl[(system, backend)]


@needs_data
def test_version_dirs_that_are_not_databases():
    """Appendix B: trtllm/1.3.0rc11 (its only dir is partial), the INCOMPLETE.txt
    dirs, communication-library dirs, .gitkeep-only systems."""
    names = {db.name for db in open_tree().databases()}
    for system in ("b200_sxm", "b300_sxm", "gb200", "gb300", "h100_sxm", "h200_sxm"):
        assert f"{system}/trtllm/1.3.0rc11" not in names
    for name in ("gb300/vllm/0.14.0", "rtx_pro_6000_server/sglang/0.5.9", "rtx_pro_6000_server/sglang/0.5.10rc0",
                 "rtx_pro_6000_server/vllm/0.14.0"):  # fmt: skip
        assert name not in names
    assert not any(db.backend in ("nccl", "oneccl") for db in open_tree().databases())
    assert not {"a100_pcie", "a30", "h100_pcie", "l4"} & set(open_tree().systems())
    # A comm/<backend>/<version> dir does declare a database (wideep DeepEP tables only).
    assert "gb200/sglang/0.5.12" in names and not open_tree().catalog.marker_only("gb200", "sglang", "0.5.12")


def test_latest_key_examples():
    assert latest_key("1.3.0rc23") == (1, 3, 0, 0, 23, 23)
    assert latest_key("0.5.6.post2") == (0, 5, 6, 1, 0, 2)
    assert latest_key("0.1.dev19262") == (0, 1, 0, 1, 0, 19262)
    assert latest_key("v0.20_fix0719") == (0, 20, 0, 1, 0, 719)
    assert latest_key("nightly") == (0, 0, 0, -1, 0, 0)
    # Not PEP 440: a final release ranks above its release candidates, 0.5.10 above 0.5.9.
    assert max(["1.3.0rc20", "1.3.0", "1.3.0rc23"], key=latest_key) == "1.3.0"
    assert max(["0.5.9", "0.5.10"], key=latest_key) == "0.5.10"


# ---- sources (4.3, families_mla_gptoss_fp8static 7.1) ------------------------------------


def sources(db: str, table: str, shared_layer: bool = True):
    """(backend, version, channel, first dir under data/<system>/) of each admitted source."""
    out = []
    for f in table_sources(open_tree(), Database(*db.split("/")), table, shared_layer):
        rel = f.path.split("/systems/data/", 1)[1].split("/")
        out.append((f.backend, f.version, f.channel, rel[1]))
    return out


@needs_data
@pytest.mark.parametrize(
    "db,table,want",
    [
        # families_hybrid 4.3, admitted sources of the golden databases.
        ("gb200/vllm/0.24.0", "gemm_perf", [("0.24.0", "gemm"), ("0.19.0", "vllm"), ("0.14.0", "vllm")]),
        ("gb200/vllm/0.24.0", "custom_allreduce_perf", [("0.24.0", "comm")]),
        ("h200_sxm/sglang/0.5.14", "moe_perf",
         [("0.5.14", "moe"), ("0.5.10", "moe"), ("0.5.9", "sglang"), ("0.5.6.post2", "sglang")]),
        ("a100_sxm/vllm/0.14.0", "gemm_perf", [("0.14.0", "gemm")]),
        ("b200_sxm/vllm/0.24.0", "context_attention_perf",
         [("0.24.0", "attention"), ("0.22.0", "attention"), ("0.19.0", "vllm")]),
        # families_mla 7.1: the cross-backend channel of the MLA tables.
        ("h200_sxm/trtllm/1.3.0rc20", "mla_context_module_perf",
         [("1.3.0rc20", "mla"), ("1.3.0rc10", "trtllm"), ("vllm", "0.24.0", "mla"), ("vllm", "0.19.0", "vllm")]),
        ("h200_sxm/trtllm/1.3.0rc20", "mla_bmm_perf",
         [("1.3.0rc20", "mla_bmm"), ("1.3.0rc10", "trtllm"), ("1.2.0rc5", "trtllm"), ("sglang", "0.5.14", "mla_bmm"),
          ("sglang", "0.5.10", "sglang"), ("sglang", "0.5.9", "sglang"), ("sglang", "0.5.6.post2", "sglang")]),
        ("h200_sxm/sglang/0.5.14", "mla_context_module_perf", []),
        ("b200_sxm/vllm/0.24.0", "mla_generation_module_perf",
         [("0.24.0", "mla"), ("0.19.0", "vllm"), ("trtllm", "1.3.0rc20", "mla"), ("trtllm", "1.3.0rc10", "trtllm")]),
        ("b200_sxm/trtllm/1.3.0rc20", "computescale_perf",
         [("1.3.0rc20", "quantize"), ("1.3.0rc10", "trtllm"), ("1.2.0rc5", "trtllm")]),
        ("gb200/trtllm/1.3.0rc20", "context_mla_perf", [("1.3.0rc20", "mla"), ("1.3.0rc10", "trtllm")]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_sources_of_the_golden_databases(db, table, want):
    backend = db.split("/")[1]
    got = sources(db, table + ".parquet")
    expanded = [w if len(w) == 3 else (backend,) + w for w in want]
    assert [(b, v, d) for b, v, _, d in got] == expanded
    version = db.split("/")[2]
    for b, v, channel, _ in got:
        assert channel == ("cross" if b != backend else "primary" if v == version else "older"), (b, v, channel)


@needs_data
def test_a_partial_family_dir_of_the_requested_version_is_skipped():
    """b300_sxm/attention/sglang/0.5.14 marks context_attention_perf partial: the
    whole dir is skipped even as the primary, for both attention tables (4.3 (1))."""
    for table in ("context_attention_perf.parquet", "generation_attention_perf.parquet"):
        assert sources("b300_sxm/sglang/0.5.14", table) == [
            ("sglang", "0.5.10", "older", "sglang"), ("sglang", "0.5.9", "older", "sglang")]  # fmt: skip


@needs_data
def test_a_legacy_incomplete_dir_is_an_older_donor():
    """gb300/vllm/0.14.0 (INCOMPLETE.txt) is not a database, but the v0.11.0
    resolver admits its files as donors of newer gb300 vllm databases (4.3 (2),
    open question 7.1: decided as the code decides it)."""
    assert sources_module.LEGACY_PARTIAL_DIRS_ARE_DONORS is True
    assert sources("gb300/vllm/0.19.0", "gemm_perf.parquet") == [
        ("vllm", "0.19.0", "primary", "vllm"), ("vllm", "0.14.0", "older", "vllm")]  # fmt: skip
    assert "gb300/vllm/0.14.0" not in {db.name for db in open_tree().databases()}


@needs_data
def test_declared_versions_without_a_file_of_a_table():
    """A database holding no GEMM file takes the table from older versions
    (4.3), and a marker-only one from the shared layer alone."""
    assert gemm_latency("h200_sxm/sglang/0.5.16", "bfloat16", 32, 4096, 4096) == 0.013050666285885705
    assert gemm_latency("h200_sxm/trtllm/1.3.0rc23", "bfloat16", 32, 4096, 4096) == 0.013674666484196981
    assert sources("h200_sxm/sglang/0.5.16", "gemm_perf.parquet")[0] == ("sglang", "0.5.14", "older", "gemm")
    assert gemm_latency("h200_sxm/vllm/0.22.0", "bfloat16", 32, 4096, 4096) is not None
    assert gemm_latency("h200_sxm/vllm/0.22.0", "bfloat16", 32, 4096, 4096, shared_layer=False) is None
    with pytest.raises(ValueError, match=r"Error loading silicon data for op PerfDataFilename\.gemm: File does "
                                         r"not exist at .*h200_sxm/vllm/0\.22\.0/gemm_perf\.parquet"):
        gemm_latency("h200_sxm/vllm/0.22.0", "bfloat16", 32, 4096, 4096, shared_layer=False, on_miss="error")
    # The oldest vllm version is a database (kda tables only) without any GEMM source.
    assert gemm_latency("h200_sxm/vllm/0.1.dev19262", "bfloat16", 32, 4096, 4096) is None


@needs_data
def test_a_missing_comm_primary_joins_the_union():
    """gb200/trtllm/1.3.0rc23 holds no custom all-reduce file: its legacy-shaped
    primary is not recognised as comm, so older versions serve it (4.3)."""
    assert sources("gb200/trtllm/1.3.0rc23", "custom_allreduce_perf.parquet") == [
        ("trtllm", "1.3.0rc20", "older", "comm"), ("trtllm", "1.3.0rc10", "older", "comm")]  # fmt: skip
    assert sources("gb200/trtllm/1.3.0rc20", "custom_allreduce_perf.parquet") == [
        ("trtllm", "1.3.0rc20", "primary", "comm")]  # fmt: skip


# ---- the rules on temporary trees ------------------------------------------------------------


def make_tree(tmp_path, dirs, systems=("s1",)):
    """A tree under tmp_path: `dirs` maps 'data/s1/<...>/<version>' to {file: text}."""
    root = tmp_path / "systems"
    root.mkdir(exist_ok=True)
    for system in systems:
        (root / f"{system}.yaml").write_text(f"data_dir: data/{system}\n")
    for rel, files in dirs.items():
        d = root / rel
        d.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (d / name).write_text(text)
    return DataTree([str(tmp_path)])


def test_the_declaration_rules(tmp_path):
    reuse = "reuse:\n  - {table: gemm_perf, from_version: '0.9', reason: r, approved_by: a}\n"
    tree = make_tree(tmp_path, {
        "data/s1/gemm/vllm/1.0": {"gemm_perf.parquet": ""},
        "data/s1/gemm/vllm/1.1": {"SHARED_LAYER_REUSE.txt": ""},  # marker-only
        "data/s1/gemm/vllm/1.2": {"reuse.yaml": "reuse: []\n", "SHARED_LAYER_REUSE.txt": ""},  # empty hides it
        "data/s1/gemm/vllm/1.3": {"reuse.yaml": reuse},  # marker-only by reuse.yaml
        "data/s1/gemm/vllm/1.4": {"errors_x.json": "{}"},  # any file is a perf file
        "data/s1/gemm/vllm/1.5": {"gemm_perf.parquet": "", "collection_meta.yaml": "status: partial\n"},
        "data/s1/gemm/vllm/1.6": {"gemm_perf.parquet": "",
                                  "collection_meta.yaml": "tables:\n  moe_perf: {status: partial}\n"},
        "data/s1/gemm/vllm/1.7": {"gemm_perf.parquet": "", "INCOMPLETE.txt": ""},
        "data/s1/gemm/vllm/1.8": {"INCOMPLETE.txt": "", "collection_meta.yaml": "tables: {}\n",
                                  "gemm_perf.parquet": ""},  # INCOMPLETE ignored beside a collection_meta
        "data/s1/gemm/vllm/_1.9": {"gemm_perf.parquet": ""},
        "data/s1/vllm/2.0": {"gemm_perf.parquet": ""},  # legacy layout
        "data/s1/nccl/2.26": {"nccl_perf.parquet": ""},
        "data/s1/comm/nccl/2.27": {"nccl_perf.parquet": ""},
        "data/s1/comm/sglang/0.1": {"x_perf.parquet": ""},
    })  # fmt: skip
    assert [db.name for db in tree.databases()] == [
        "s1/sglang/0.1", "s1/vllm/1.0", "s1/vllm/1.1", "s1/vllm/1.3", "s1/vllm/1.4", "s1/vllm/1.5", "s1/vllm/1.8",
        "s1/vllm/2.0"]  # fmt: skip
    catalog = tree.catalog
    assert [v for v in tree.versions("s1", "vllm") if catalog.marker_only("s1", "vllm", v)] == ["1.1", "1.3"]
    assert tree.latest("s1", "vllm") == "2.0"
    assert tree.resolve("s1/vllm").version == "2.0"
    with pytest.raises(ValueError, match=r"unknown database s1/vllm/1\.2 .*versions: 1\.0, 1\.1"):
        tree.resolve("s1/vllm/1.2")


def test_a_malformed_marker_drops_its_system(tmp_path):
    tree = make_tree(tmp_path, {
        "data/s1/gemm/vllm/1.0": {"gemm_perf.parquet": ""},
        "data/s1/gemm/vllm/0.9": {"reuse.yaml": "reuse:\n  - {table: gemm_perf}\n"},
        "data/s2/gemm/vllm/1.0": {"gemm_perf.parquet": ""},
    }, systems=("s1", "s2"))  # fmt: skip
    assert tree.systems() == ["s2"]
    assert "reuse[0].from_version must be a non-empty string" in tree.catalog.dropped["s1"]
    with pytest.raises(ValueError, match="unknown system 's1'"):
        tree.resolve("s1/vllm/1.0")


def test_legacy_partial_donor_rule_is_one_switch(tmp_path, monkeypatch):
    """The INCOMPLETE.txt donor rule (4.3 (2)) on a temp tree, and what turning
    it off would change: only the legacy partial donor leaves the union."""
    tree = make_tree(tmp_path, {
        "data/s1/gemm/vllm/1.0": {"gemm_perf.parquet": ""},
        "data/s1/vllm/0.9": {"gemm_perf.parquet": "", "INCOMPLETE.txt": ""},
        "data/s1/vllm/0.8": {"gemm_perf.parquet": ""},
        "data/s1/gemm/vllm/0.7": {"gemm_perf.parquet": "", "INCOMPLETE.txt": ""},  # partial family dir
    })  # fmt: skip
    db = Database("s1", "vllm", "1.0")
    versions = lambda t: [f.version for f in table_sources(t, db, "gemm_perf.parquet")]  # noqa: E731
    assert versions(tree) == ["1.0", "0.9", "0.8"]
    assert "s1/vllm/0.9" not in {d.name for d in tree.databases()}
    # The requested version's own legacy INCOMPLETE dir is refused as primary.
    assert [f.version for f in table_sources(tree, Database("s1", "vllm", "0.9"), "gemm_perf.parquet")] == ["0.8"]
    monkeypatch.setattr(sources_module, "LEGACY_PARTIAL_DIRS_ARE_DONORS", False)
    fresh = DataTree([str(tmp_path)])
    assert versions(fresh) == ["1.0", "0.8"]


def test_cross_backend_channel_on_a_temp_tree(tmp_path):
    """Channel 4: other frameworks' files, every version newest first, only the
    manifest's kernel sources; the requested backend must be a consumer."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tree_dirs = {"data/s1/mla/trtllm/1.0": {}, "data/s1/mla/vllm/0.5": {}, "data/s1/mla/vllm/2.0": {},
                 "data/s1/mla/sglang/1.0": {}}  # fmt: skip
    tree = make_tree(tmp_path, tree_dirs)
    rows = pa.table({"kernel_source": ["default", "other"], "latency": [1.0, 2.0]})
    for rel in tree_dirs:
        pq.write_table(rows, tmp_path / "systems" / rel / "t_perf.parquet")
    (tmp_path / "systems" / "op_kernel_source_manifest.yaml").write_text(
        "groups:\n  - {op_file: t_perf.txt, kernel_source: default, tier: shared_fallback, "
        "frameworks: [trtllm, vllm], systems: [nowhere]}\n"
    )
    tree = DataTree([str(tmp_path)])
    got = table_sources(tree, Database("s1", "trtllm", "1.0"), "t_perf.parquet")
    assert [(f.backend, f.version, f.channel) for f in got] == [
        ("trtllm", "1.0", "primary"), ("vllm", "2.0", "cross"), ("vllm", "0.5", "cross")]  # fmt: skip
    assert sources_module.read_columns(got[1], ["latency"]) == {"latency": [1.0]}
    assert sources_module.read_columns(got[0], ["latency"]) == {"latency": [1.0, 2.0]}
    assert [f.channel for f in table_sources(tree, Database("s1", "sglang", "1.0"), "t_perf.parquet")] == ["primary"]
    assert [f.channel for f in table_sources(tree, Database("s1", "trtllm", "1.0"), "t_perf.parquet", False)] == [
        "primary"]  # fmt: skip
