-- Rust path vs Python path, one row per engine-step config.
--
-- Input: a registered table `step_queries(model, db, phase, tp, batch, isl,
-- osl, moe_tp, moe_ep)` (e.g. step_grid.sql). Output: those columns plus
--   rust_ms   step_latency(...)      (TTFT for 'context', TPOT for 'generation')
--   py_ms     py_step_latency(...)   (the Python path)
--   status    STRICT_PASS / DRIFT / REGRESSION / EXTRA / MISS_BOTH, as in gemm_parity.sql
--   rel_diff  abs(rust_ms - py_ms) / abs(py_ms) when both answered
--
-- Run with `SET aic.on_miss = 'null'` (a config with a missing table is a
-- miss on both paths, not an error). Configs the spec refuses as input (tp
-- not dividing the heads, an unsupported quantization) fail the statement:
-- keep them out of the grid, or price such a config alone to see why.
SELECT r.*,
       CASE
         WHEN r.rust_ms IS NULL AND r.py_ms IS NULL THEN 'MISS_BOTH'
         WHEN r.rust_ms IS NULL THEN 'REGRESSION'
         WHEN r.py_ms IS NULL THEN 'EXTRA'
         WHEN r.rust_ms = r.py_ms THEN 'STRICT_PASS'
         ELSE 'DRIFT'
       END AS status,
       abs(r.rust_ms - r.py_ms) / abs(r.py_ms) AS rel_diff
FROM (
    SELECT q.*,
           step_latency(q.model, q.db, q.phase, q.tp, q.batch, q.isl, q.osl, q.moe_tp, q.moe_ep) AS rust_ms,
           py_step_latency(q.model, q.db, q.phase, q.tp, q.batch, q.isl, q.osl, q.moe_tp, q.moe_ep) AS py_ms
    FROM step_queries q
) r
