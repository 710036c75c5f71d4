"""Side by side, in one process: the Rust path (`estimate_agg`,
`estimate_disagg`) against the Python path (`py_estimate_*`) on the same
1,024-deployment grid (tp 1/2/4/8 x batch 1..64 x four workloads), one
partition, tables loaded by a warm-up query; every timed query shifts isl
so no pass is already priced. Run: python python/benches/serving_paths.py
"""

import time

import aicsql

MODEL, DB = "meta-llama/Meta-Llama-3.1-8B", "h200_sxm/vllm/0.19.0"
GRID = """
CREATE TABLE grid AS
SELECT t.tp, b.batch, w.isl, w.osl, w.prefix
FROM (VALUES (1), (2), (4), (8)) AS t(tp)
CROSS JOIN (SELECT value AS batch FROM generate_series(1, 64)) AS b
CROSS JOIN (VALUES (1024, 128, 0), (4000, 1000, 0), (256, 256, 128), (8192, 512, 0)) AS w(isl, osl, prefix)
ORDER BY tp, batch, isl
"""
CALLS = {
    "agg": "{f}('{m}', '{db}', tp, batch, isl + {s}, osl, prefix)",
    "disagg": "{f}('{m}', '{db}', tp, 1, 1, tp, batch, 1, isl + {s}, osl, prefix)",
}


def main() -> None:
    ctx = aicsql.context()
    ctx.sql("SET datafusion.execution.target_partitions = 1").collect()
    ctx.sql(GRID).collect()
    shift = 0
    print(f"{MODEL} on {DB}, 1024 deployments per query")
    for mode, call in CALLS.items():
        for path, function in (("rust", f"estimate_{mode}"), ("python", f"py_estimate_{mode}")):
            def query(s):
                expr = call.format(f=function, m=MODEL, db=DB, s=s)
                return ctx.sql(f"SELECT count(e['ttft_ms']) AS n FROM (SELECT {expr} AS e FROM grid)").collect()

            query(0)  # tables and models loaded
            runs, start = 0, time.perf_counter()
            while time.perf_counter() - start < 3.0 or runs < 2:
                shift += 1
                query(shift)
                runs += 1
            seconds = (time.perf_counter() - start) / runs
            print(f"  {mode:6} {path:6}: {1024 / seconds:>10,.0f} points/s/core ({seconds * 1000:.1f} ms per query)")


if __name__ == "__main__":
    main()
