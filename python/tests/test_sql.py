"""aicsql inside datafusion-python: both paths as SQL, the settings, the
catalog, and the guards of the FFI boundary."""

from __future__ import annotations

import os
from pathlib import Path

import datafusion
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext

import aicsql

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens")
SEED_DB = "h200_sxm/vllm/0.19.0"
# The spec's numbers for the seed case (fp8_block, n=1280, k=5120), ms.
SEED = {1: 0.021895413193058825, 4: 0.020520365862156952, 32: 0.020907013733453883, 416: 0.02634752182721208}


@pytest.fixture()
def ctx():
    return aicsql.context()


def rows(ctx, sql):
    return ctx.sql(sql).to_arrow_table().to_pylist()


@pytest.mark.parametrize("shared_layer", ["true", "false"])
def test_seed_case_on_both_paths(ctx, shared_layer):
    ctx.sql(f"SET aic.shared_layer = {shared_layer}").collect()
    got = rows(
        ctx,
        f"""SELECT m, gemm_latency('{SEED_DB}', 'fp8_block', m, 1280, 5120) AS rust,
                      py_gemm_latency('{SEED_DB}', 'fp8_block', m, 1280, 5120) AS py
            FROM (VALUES (1), (4), (32), (416)) AS t(m) ORDER BY m""",
    )
    assert [(r["m"], r["rust"], r["py"]) for r in got] == [(m, v, v) for m, v in SEED.items()]


def test_traces_agree_row_for_row_on_the_seed_case(ctx):
    for m in SEED:
        rust = ctx.sql(f"SELECT * FROM gemm_trace('{SEED_DB}', 'fp8_block', {m}, 1280, 5120)").to_arrow_table()
        py = ctx.sql(f"SELECT * FROM py_gemm_trace('{SEED_DB}', 'fp8_block', {m}, 1280, 5120)").to_arrow_table()
        assert rust.num_rows > 4
        assert rust.to_pylist() == py.to_pylist()
    selected = rows(
        ctx,
        f"""SELECT site_n, site_k FROM gemm_trace('{SEED_DB}', 'fp8_block', 32, 1280, 5120)
            WHERE stage = 'transfer' AND selected ORDER BY rank""",
    )
    assert [(r["site_n"], r["site_k"]) for r in selected] == [(1536, 5120), (1024, 5120), (1536, 6144), (1536, 4096)]


def test_shared_layer_setting_switches_both_paths(ctx):
    goldens = pq.read_table(GOLDENS / "gemm_goldens.parquet").to_pylist()
    # A query whose spec answer depends on the shared layer (taken from the goldens).
    row = next(
        r for r in goldens
        if r["latency_ms"] is not None and r["latency_ms_shared"] is not None and r["latency_ms"] != r["latency_ms_shared"]
    )
    db = f"{row['system']}/{row['backend']}/{row['version']}"
    sql = f"SELECT gemm_latency('{db}', '{row['quant']}', {row['m']}, {row['n']}, {row['k']}) AS rust, " \
          f"py_gemm_latency('{db}', '{row['quant']}', {row['m']}, {row['n']}, {row['k']}) AS py"
    on = rows(ctx, sql)[0]
    ctx.sql("SET aic.shared_layer = false").collect()
    off = rows(ctx, sql)[0]
    assert on == {"rust": row["latency_ms_shared"], "py": row["latency_ms_shared"]}
    assert off == {"rust": row["latency_ms"], "py": row["latency_ms"]}


def test_every_golden_row_through_sql_on_the_python_path(ctx):
    """py_gemm_latency in SQL (the bridge, the settings, the arrays) equals
    the spec on the whole golden file, in both modes; so does the Rust path."""
    ctx.register_parquet("goldens", str(GOLDENS / "gemm_goldens.parquet"))
    query = """SELECT count(*) AS total,
                      sum(CASE WHEN py IS NOT DISTINCT FROM expected THEN 1 ELSE 0 END) AS py_equal,
                      sum(CASE WHEN rust IS NOT DISTINCT FROM expected THEN 1 ELSE 0 END) AS rust_equal,
                      sum(CASE WHEN expected IS NULL THEN 1 ELSE 0 END) AS misses
               FROM (SELECT {column} AS expected,
                            py_gemm_latency(system || '/' || backend || '/' || version, quant, m, n, k) AS py,
                            gemm_latency(system || '/' || backend || '/' || version, quant, m, n, k) AS rust
                     FROM goldens)"""
    shared = rows(ctx, query.format(column="latency_ms_shared"))[0]
    ctx.sql("SET aic.shared_layer = false").collect()
    own = rows(ctx, query.format(column="latency_ms"))[0]
    for result in (shared, own):
        assert result["total"] == 15105
        assert result["py_equal"] == result["total"] and result["rust_equal"] == result["total"]
    assert (own["misses"], shared["misses"]) == (942, 710)


def test_settings_are_checked_where_they_are_read(ctx):
    ctx.sql("SET aic.on_miss = 'zero'").collect()
    with pytest.raises(Exception, match="aic.on_miss must be 'null' or 'error', not 'zero'"):
        ctx.sql(f"SELECT gemm_latency('{SEED_DB}', 'fp8_block', 1, 1280, 5120)").collect()
    listed = rows(ctx, "SELECT name FROM information_schema.df_settings WHERE name LIKE 'aic.%' ORDER BY name")
    assert [r["name"] for r in listed] == [
        "aic.backend", "aic.comm_quant", "aic.decode_system", "aic.enable_chunked_prefill", "aic.enable_encoder_dp", "aic.fmha_quant",
        "aic.free_gpu_memory_fraction", "aic.gemm_quant", "aic.image_height", "aic.image_width", "aic.kvcache_quant",
        "aic.max_seq_len", "aic.moe_quant", "aic.nextn", "aic.nextn_accepted", "aic.num_images", "aic.on_miss",
        "aic.request_latency", "aic.shared_layer", "aic.strict_sla", "aic.top_n", "aic.version"]


def test_on_miss_error_names_the_miss_on_both_paths(ctx):
    ctx.sql("SET aic.on_miss = 'error'").collect()
    for function in ("gemm_latency", "py_gemm_latency"):
        with pytest.raises(Exception, match="nvfp4"):
            ctx.sql(f"SELECT {function}('{SEED_DB}', 'nvfp4', 1, 1280, 5120)").collect()


def test_bad_input_names_the_value_on_both_paths(ctx):
    for function in ("gemm_latency", "py_gemm_latency"):
        with pytest.raises(Exception, match="fp9"):
            ctx.sql(f"SELECT {function}('{SEED_DB}', 'fp9', 1, 1280, 5120)").collect()
        with pytest.raises(Exception, match="-3"):
            ctx.sql(f"SELECT {function}('{SEED_DB}', 'fp8', -3, 1280, 5120)").collect()
        assert rows(ctx, f"SELECT {function}('{SEED_DB}', 'fp8', NULL, 1280, 5120) AS v") == [{"v": None}]


def test_catalog_and_sol(ctx):
    count = rows(ctx, "SELECT count(*) AS c FROM aic.perf.gemm WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0'")
    assert count == [{"c": 101004}]
    systems = rows(ctx, "SELECT mem_bw FROM aic.meta.systems WHERE system = 'h200_sxm'")
    assert systems == [{"mem_bw": 4.8e12}]
    sol = rows(ctx, f"SELECT gemm_sol('{SEED_DB}', 'fp8_block', 32, 1280, 5120) AS v")[0]["v"]
    assert 0 < sol < SEED[32]


def test_register_on_a_plain_session_gives_functions_but_no_settings():
    plain = SessionContext()
    aicsql.register(plain)
    got = plain.sql(f"SELECT gemm_latency('{SEED_DB}', 'fp8_block', 32, 1280, 5120) AS v").to_arrow_table().to_pylist()
    assert got == [{"v": SEED[32]}]
    with pytest.raises(Exception, match="aic"):
        plain.sql("SET aic.shared_layer = false").collect()


def test_missing_data_directory_is_named():
    with pytest.raises(FileNotFoundError, match="/nonexistent/aicsql"):
        aicsql.context(data="/nonexistent/aicsql")


def test_other_datafusion_major_is_refused(monkeypatch):
    monkeypatch.setattr(datafusion, "__version__", "54.1.0")
    with pytest.raises(ImportError, match="datafusion 55.x"):
        aicsql._check_datafusion()


def test_every_golden_step_total_on_both_paths(ctx):
    """step_latency and py_step_latency in SQL equal the spec's TTFT / TPOT
    for every golden config (130 config-phases), bit for bit."""
    ctx.register_parquet("steps", str(GOLDENS / "engine_step_goldens.parquet"))
    got = rows(
        ctx,
        """SELECT count(*) AS total,
                  sum(CASE WHEN rust = expected THEN 1 ELSE 0 END) AS rust_equal,
                  sum(CASE WHEN py = expected THEN 1 ELSE 0 END) AS py_equal
           FROM (SELECT CASE phase WHEN 'context' THEN ttft_ms ELSE tpot_ms END AS expected,
                        step_latency(model, system || '/' || backend || '/' || version, phase, tp, batch, isl, osl,
                                     CAST(moe_tp AS BIGINT), CAST(moe_ep AS BIGINT)) AS rust,
                        py_step_latency(model, system || '/' || backend || '/' || version, phase, tp, batch, isl, osl,
                                        CAST(moe_tp AS BIGINT), CAST(moe_ep AS BIGINT)) AS py
                 FROM steps WHERE row_kind = 'step_total')""",
    )
    assert got == [{"total": 130, "rust_equal": 130, "py_equal": 130}]


def test_worked_example_on_both_paths(ctx):
    args = "'Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', '{}', 8, 1, 1024, 128"
    got = rows(
        ctx,
        f"""SELECT step_latency({args.format('context')}) AS ttft, py_step_latency({args.format('context')}) AS py_ttft,
                   step_latency({args.format('generation')}) AS tpot, py_step_latency({args.format('generation')}) AS py_tpot""",
    )
    assert got == [{"ttft": 24.74004986586315, "py_ttft": 24.74004986586315,
                    "tpot": 7.121815664339327, "py_tpot": 7.121815664339327}]


def test_a_version_that_only_reuses_its_gemm_table_on_both_paths(ctx):
    # gb200/trtllm/1.3.0rc23 holds no gemm_perf.parquet; its reuse.yaml names
    # 1.3.0rc20, so with the shared layer its answers are rc20's.
    sql = """SELECT {f}('gb200/trtllm/1.3.0rc23', q, m, n, k) AS reuse, {f}('gb200/trtllm/1.3.0rc20', q, m, n, k) AS own
             FROM (VALUES ('fp8_block'), ('bfloat16')) AS qs(q),
                  (VALUES (1, 1280, 5120), (416, 7168, 2048), (20000, 1000, 3000)) AS shapes(m, n, k)
             ORDER BY q, m"""
    rust = rows(ctx, sql.format(f="gemm_latency"))
    py = rows(ctx, sql.format(f="py_gemm_latency"))
    assert len(rust) == 6 and all(r["reuse"] is not None and r["reuse"] == r["own"] for r in rust)
    assert py == rust
    # Without the shared layer the version has no GEMM table: its lookups
    # miss on both paths (NULL, an error under on_miss = 'error').
    ctx.sql("SET aic.shared_layer = false").collect()
    for function in ("gemm_latency", "py_gemm_latency"):
        got = rows(ctx, f"SELECT {function}('gb200/trtllm/1.3.0rc23', 'fp8', 1, 1280, 5120) AS v")
        assert got == [{"v": None}], function
    ctx.sql("SET aic.on_miss = 'error'").collect()
    for function in ("gemm_latency", "py_gemm_latency"):
        with pytest.raises(Exception, match=function):
            ctx.sql(f"SELECT {function}('gb200/trtllm/1.3.0rc23', 'fp8', 1, 1280, 5120)").collect()
    ctx.sql("SET aic.on_miss = 'null'").collect()


STEP_CASES = [
    # The worked example (docs/spec 12), a MoE golden model with inferred moe_ep,
    # and a version whose tables all come from older versions (1.3.0rc23).
    ("Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0", 8, 1, 1024, 128, None, None),
    ("Qwen/Qwen3-30B-A3B", "h200_sxm/vllm/0.19.0", 4, 8, 4096, 128, 1, None),
    ("Qwen/Qwen3-32B-FP8", "gb200/trtllm/1.3.0rc23", 2, 8, 1024, 128, None, None),
]


@pytest.mark.parametrize("case", STEP_CASES, ids=lambda c: f"{c[0]}@{c[1]}/tp{c[2]}")
@pytest.mark.parametrize("phase", ["context", "generation"])
def test_engine_step_tables_agree_row_for_row(ctx, case, phase):
    model, db, tp, batch, isl, osl, moe_tp, moe_ep = case
    sql_args = f"'{model}', '{db}', '{phase}', {tp}, {batch}, {isl}, {osl}"
    if moe_tp is not None or moe_ep is not None:
        sql_args += f", {'NULL' if moe_tp is None else moe_tp}, {'NULL' if moe_ep is None else moe_ep}"
    # Miss reasons are worded by each path; every other column must be equal.
    rust = ctx.sql(f"SELECT * EXCLUDE (reason) FROM engine_step({sql_args})").to_arrow_table()
    py = ctx.sql(f"SELECT * EXCLUDE (reason) FROM py_engine_step({sql_args})").to_arrow_table()
    assert rust.num_rows >= 2
    assert rust.to_pylist() == py.to_pylist()
    total = [r for r in py.to_pylist() if r["row_kind"] == "step_total"]
    assert len(total) == 1
    assert total[0]["miss"] is False


def test_py_engine_step_rejects_bad_calls(ctx):
    with pytest.raises(Exception, match="7, 9, 10, 11 or 12 arguments"):
        ctx.sql("SELECT * FROM py_engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8)").collect()
    with pytest.raises(Exception, match="unknown phase"):
        ctx.sql("SELECT * FROM py_engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'decode', 8, 1, 1, 2)").collect()
    assert ctx.sql(
        "SELECT * FROM py_engine_step('Qwen/Qwen3-32B-FP8', NULL, 'context', 8, 1, 1024, 2)"
    ).to_arrow_table().num_rows == 0


def test_every_golden_config_engine_step_tables_agree_row_for_row(ctx):
    """engine_step and py_engine_step return the same rows (every column
    but the miss reason's wording) for each golden config-phase, and the
    total row carries the spec's TTFT / TPOT."""
    table = pq.read_table(GOLDENS / "engine_step_goldens.parquet")
    configs = [r for r in table.to_pylist() if r["row_kind"] == "step_total"]
    assert len(configs) == 130
    for c in configs:
        moe = [None if c[k] is None else int(c[k]) for k in ("moe_tp", "moe_ep")]
        args = f"'{c['model']}', '{c['system']}/{c['backend']}/{c['version']}', '{c['phase']}', " \
               f"{c['tp']}, {c['batch']}, {c['isl']}, {c['osl']}, " + ", ".join("NULL" if v is None else str(v) for v in moe)
        rust = ctx.sql(f"SELECT * EXCLUDE (reason) FROM engine_step({args})").to_arrow_table().to_pylist()
        py = ctx.sql(f"SELECT * EXCLUDE (reason) FROM py_engine_step({args})").to_arrow_table().to_pylist()
        assert rust == py, args
        expected = c["ttft_ms"] if c["phase"] == "context" else c["tpot_ms"]
        assert rust[-1]["row_kind"] == "step_total" and rust[-1]["latency_ms"] == expected, args


def test_sessions_share_one_tree_until_the_data_changes(tmp_path):
    """Sessions over the same directories share one tree (tables load once per
    process); after the directories change (a fetch renames a release into
    place), new sessions get a new tree and so the new data."""
    for release in aicsql.default_data_dir().iterdir():
        if release.is_dir():
            (tmp_path / release.name).symlink_to(release, target_is_directory=True)
    first = aicsql.context(data=tmp_path)
    first.sql(f"SELECT gemm_latency('{SEED_DB}', 'fp8_block', 1, 1280, 5120)").collect()
    library = aicsql._library([str(tmp_path)])
    assert library.loaded()["gemm"] == 1
    second = aicsql.context(data=tmp_path)
    assert aicsql._library([str(tmp_path)]) is library
    assert rows(second, f"SELECT gemm_latency('{SEED_DB}', 'fp8_block', 1, 1280, 5120) AS v")[0]["v"] == SEED[1]
    assert library.loaded()["gemm"] == 1  # served from the shared tree, not loaded again
    (tmp_path / "arrived-later").mkdir()
    fresh = aicsql._library([str(tmp_path)])
    assert fresh is not library and fresh.loaded()["gemm"] == 0


@pytest.mark.parametrize("fn", ["search_agg", "search_disagg", "search_default"])
def test_search_functions_agree_on_both_paths(ctx, fn):
    """The search table functions and their Python-path twins (py_*): the same
    schema and the same rows, in order (the Llama-3.1-8B golden case)."""
    args = "'meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50"
    rust = ctx.sql(f"SELECT * FROM {fn}({args})").to_arrow_table()
    py = ctx.sql(f"SELECT * FROM py_{fn}({args})").to_arrow_table()
    assert rust.num_rows == {"search_agg": 341, "search_disagg": 24, "search_default": 2}[fn]
    assert rust.schema.equals(py.schema)
    assert rust.to_pylist() == py.to_pylist()


def test_a_decode_system_is_priced_alike_on_both_paths(ctx):
    """estimate_disagg's decode_system (option and setting) and the searches' aic.decode_system:
    the same numbers and databases from the Rust and the Python functions (the spec's own frames are
    tests/goldens/search/*_decode_system)."""
    args = ("'meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm', 1, 1, 1, 1, 256, 1, 256, 256, 128, "
            "named_struct('decode_system', 'gb300')")
    row = rows(ctx, f"SELECT estimate_disagg({args}) AS r, py_estimate_disagg({args}) AS p")[0]
    assert row["r"] == row["p"]
    assert (row["r"]["decode_system"], row["r"]["decode_version"], row["r"]["version"]) == ("gb300", "0.27.0", "0.24.0")
    assert row["r"]["tokens_per_s_per_gpu"] == 17533.094
    ctx.sql("SET aic.decode_system = 'gb300'").collect()
    call = "('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm', 4, 256, 256, 128, 1500, 50)"
    rust = rows(ctx, f"SELECT * FROM search_disagg{call}")
    python = rows(ctx, f"SELECT * FROM py_search_disagg{call}")
    assert rust == python and len(rust) == 14
    assert {(r["decode_system"], r["decode_version"]) for r in rust} == {("gb300", "0.27.0")}
    for fn in ("estimate_agg", "py_estimate_agg"):
        with pytest.raises(Exception, match=f"{fn.removeprefix('py_')}: option decode_system is for estimate_disagg"):
            ctx.sql(f"SELECT {fn}('Qwen/Qwen3-32B', 'h200_sxm/trtllm/1.3.0rc23', 1, 1, 1024, 256, "
                    "named_struct('decode_system', 'h100_sxm'))").collect()
