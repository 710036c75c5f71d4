-- Rust path vs Python path, one row per engine-step config.
--
-- Input: a registered table `parity_queries(model, db, phase, tp, batch,
-- isl, osl, moe_tp, moe_ep)` (step_grid.sql builds the issue's grid).
-- Output: those columns plus
--   rust_ms   step_latency(...)      (TTFT for 'context', TPOT for 'generation')
--   py_ms     py_step_latency(...)   (the Python path)
--   status    STRICT_PASS / DRIFT / REGRESSION / EXTRA / MISS_BOTH, as in gemm_parity.sql
--   rel_diff  abs(rust_ms - py_ms) / abs(py_ms) when both answered
--
-- Run with `SET aic.on_miss = 'null'` (a config whose data is missing is a
-- miss on both paths, not an error). A config the spec refuses as input
-- (tp not dividing the heads, an unsupported quantization) fails the
-- statement: step_grid.sql leaves those out.
--
-- Two statements, like gemm_parity.sql; `python -m aicsql.parity --scan
-- steps` times the two columns apart and runs only the second one.

-- 1. Both paths, one column each.
CREATE OR REPLACE VIEW parity_results AS
SELECT q.*,
       step_latency(q.model, q.db, q.phase, q.tp, q.batch, q.isl, q.osl, q.moe_tp, q.moe_ep)    AS rust_ms,
       py_step_latency(q.model, q.db, q.phase, q.tp, q.batch, q.isl, q.osl, q.moe_tp, q.moe_ep) AS py_ms
FROM parity_queries q;

-- 2. The verdict per config.
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
