-- Rust path vs Python path, one row per GEMM query.
--
-- Input: a registered table `parity_queries(db, quant, m, n, k, ...)`; any
-- further columns are carried through. Output: those columns plus
--   rust_ms   gemm_latency(db, quant, m, n, k)      (the Rust path, the product)
--   py_ms     py_gemm_latency(db, quant, m, n, k)   (the Python path, the spec restated)
--   status    STRICT_PASS  both answered, bit-identical (rust_ms = py_ms on doubles)
--             DRIFT        both answered, the values differ
--             REGRESSION   the Python path answered, the Rust path missed (NULL)
--             EXTRA        the Rust path answered, the Python path missed
--             MISS_BOTH    neither answered (the spec misses: both NULL)
--   rel_diff  abs(rust_ms - py_ms) / abs(py_ms) when both answered (0 for STRICT_PASS)
--
-- Bit-identical is the bar (DESIGN.md): no tolerance. A DRIFT of 1e-16 is a
-- real difference in the order of float operations on one path; bisect it
-- with gemm_bisect.sql.
--
-- Both paths read the session settings: run `SET aic.on_miss = 'null'`
-- (misses must be NULL, not errors), and choose `SET aic.shared_layer`.
--
-- Two statements. `python -m aicsql.parity` runs only the second one: it
-- computes rust_ms and py_ms itself, in two separately timed queries over
-- each chunk, and registers them as `parity_results`.

-- 1. Both paths, one column each.
CREATE OR REPLACE VIEW parity_results AS
SELECT q.*,
       gemm_latency(q.db, q.quant, q.m, q.n, q.k)    AS rust_ms,
       py_gemm_latency(q.db, q.quant, q.m, q.n, q.k) AS py_ms
FROM parity_queries q;

-- 2. The verdict per query.
SELECT r.*,
       CASE
         WHEN r.rust_ms IS NULL AND r.py_ms IS NULL THEN 'MISS_BOTH'
         WHEN r.rust_ms IS NULL THEN 'REGRESSION'
         WHEN r.py_ms IS NULL THEN 'EXTRA'
         WHEN r.rust_ms = r.py_ms THEN 'STRICT_PASS'
         ELSE 'DRIFT'
       END AS status,
       abs(r.rust_ms - r.py_ms) / abs(r.py_ms) AS rel_diff
FROM parity_results r;
