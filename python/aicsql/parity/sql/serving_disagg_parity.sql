-- Rust path vs Python path, one row per disaggregated point: estimate_disagg against py_estimate_disagg.
--
-- Input: a registered table `parity_queries` with the columns of
-- serving_grid.sql (`point` unique; the verdict groups on it) restricted to
-- mode = 'disagg'.
-- Output: those columns plus
--   rust_reason, py_reason   each side's reason (a miss or an OOM), NULL when it answered
--   status     MISS_BOTH (both give a reason or NULL), REGRESSION (only the Rust
--              path gives one), EXTRA (only the Python path does), STRICT_PASS
--              (both answered, every field equal), DRIFT (some field differs)
--   fields_differing   how many struct fields differ
--   field      the worst differing field: the largest relative difference, a
--              string field only when no number differs (first in struct order)
--   rust_value, py_value   that field's values (numbers; NULL for a string field)
--   rel_diff   abs(rust - py) / abs(py) of that field; 0.0 on STRICT_PASS
-- Numbers compare with IS DISTINCT FROM on DOUBLE (IEEE equality: every f64
-- bit but the sign of zero), integers cast to DOUBLE; strings compare as
-- strings (`warning` included); `reason` is not compared.
--
-- Run with `SET aic.on_miss = 'null'` (a miss or an OOM is a status, not an
-- error). Two statements, like step_parity.sql: `python -m aicsql.parity
-- --scan serving` times the two columns apart and runs only the second one.
-- By hand, the first one materialises both columns (the verdict reads
-- parity_results once per field).

-- 1. Both paths, one struct column each.
CREATE OR REPLACE TABLE parity_results AS
SELECT q.*,
       estimate_disagg(q.model, q.db, q.tp, q.prefill_batch, q.prefill_workers, q.tp, q.decode_batch, q.decode_workers, q.isl, q.osl, q.prefix, q.moe_tp, q.moe_ep, q.moe_tp, q.moe_ep) AS rust,
       py_estimate_disagg(q.model, q.db, q.tp, q.prefill_batch, q.prefill_workers, q.tp, q.decode_batch, q.decode_workers, q.isl, q.osl, q.prefix, q.moe_tp, q.moe_ep, q.moe_tp, q.moe_ep) AS py
FROM parity_queries q;

-- 2. The verdict per point.
WITH fields AS (
    SELECT point, 1 AS ord, 'ttft_ms' AS field, CAST(rust['ttft_ms'] AS DOUBLE) AS r, CAST(py['ttft_ms'] AS DOUBLE) AS p, CAST(NULL AS VARCHAR) AS rs, CAST(NULL AS VARCHAR) AS ps FROM parity_results
    UNION ALL SELECT point, 2, 'tpot_ms', CAST(rust['tpot_ms'] AS DOUBLE), CAST(py['tpot_ms'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 3, 'request_latency_ms', CAST(rust['request_latency_ms'] AS DOUBLE), CAST(py['request_latency_ms'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 4, 'tokens_per_s', CAST(rust['tokens_per_s'] AS DOUBLE), CAST(py['tokens_per_s'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 5, 'tokens_per_s_per_gpu', CAST(rust['tokens_per_s_per_gpu'] AS DOUBLE), CAST(py['tokens_per_s_per_gpu'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 6, 'tokens_per_s_per_user', CAST(rust['tokens_per_s_per_user'] AS DOUBLE), CAST(py['tokens_per_s_per_user'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 7, 'seq_per_s', CAST(rust['seq_per_s'] AS DOUBLE), CAST(py['seq_per_s'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 8, 'seq_per_s_per_gpu', CAST(rust['seq_per_s_per_gpu'] AS DOUBLE), CAST(py['seq_per_s_per_gpu'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 9, 'request_rate', CAST(rust['request_rate'] AS DOUBLE), CAST(py['request_rate'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 10, 'concurrency', CAST(rust['concurrency'] AS DOUBLE), CAST(py['concurrency'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 11, 'num_total_gpus', CAST(rust['num_total_gpus'] AS DOUBLE), CAST(py['num_total_gpus'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 12, 'isl', CAST(rust['isl'] AS DOUBLE), CAST(py['isl'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 13, 'osl', CAST(rust['osl'] AS DOUBLE), CAST(py['osl'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 14, 'prefix', CAST(rust['prefix'] AS DOUBLE), CAST(py['prefix'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 15, 'prefill_parallel', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['prefill_parallel'], py['prefill_parallel'] FROM parity_results
    UNION ALL SELECT point, 16, 'prefill_tp', CAST(rust['prefill_tp'] AS DOUBLE), CAST(py['prefill_tp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 17, 'prefill_pp', CAST(rust['prefill_pp'] AS DOUBLE), CAST(py['prefill_pp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 18, 'prefill_dp', CAST(rust['prefill_dp'] AS DOUBLE), CAST(py['prefill_dp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 19, 'prefill_moe_tp', CAST(rust['prefill_moe_tp'] AS DOUBLE), CAST(py['prefill_moe_tp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 20, 'prefill_moe_ep', CAST(rust['prefill_moe_ep'] AS DOUBLE), CAST(py['prefill_moe_ep'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 21, 'prefill_bs', CAST(rust['prefill_bs'] AS DOUBLE), CAST(py['prefill_bs'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 22, 'prefill_global_bs', CAST(rust['prefill_global_bs'] AS DOUBLE), CAST(py['prefill_global_bs'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 23, 'prefill_workers', CAST(rust['prefill_workers'] AS DOUBLE), CAST(py['prefill_workers'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 24, 'prefill_seq_per_s_per_worker', CAST(rust['prefill_seq_per_s_per_worker'] AS DOUBLE), CAST(py['prefill_seq_per_s_per_worker'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 25, 'prefill_memory_gib', CAST(rust['prefill_memory_gib'] AS DOUBLE), CAST(py['prefill_memory_gib'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 26, 'prefill_gemm', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['prefill_gemm'], py['prefill_gemm'] FROM parity_results
    UNION ALL SELECT point, 27, 'prefill_kvcache', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['prefill_kvcache'], py['prefill_kvcache'] FROM parity_results
    UNION ALL SELECT point, 28, 'prefill_fmha', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['prefill_fmha'], py['prefill_fmha'] FROM parity_results
    UNION ALL SELECT point, 29, 'prefill_moe', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['prefill_moe'], py['prefill_moe'] FROM parity_results
    UNION ALL SELECT point, 30, 'decode_parallel', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['decode_parallel'], py['decode_parallel'] FROM parity_results
    UNION ALL SELECT point, 31, 'decode_tp', CAST(rust['decode_tp'] AS DOUBLE), CAST(py['decode_tp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 32, 'decode_pp', CAST(rust['decode_pp'] AS DOUBLE), CAST(py['decode_pp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 33, 'decode_dp', CAST(rust['decode_dp'] AS DOUBLE), CAST(py['decode_dp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 34, 'decode_moe_tp', CAST(rust['decode_moe_tp'] AS DOUBLE), CAST(py['decode_moe_tp'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 35, 'decode_moe_ep', CAST(rust['decode_moe_ep'] AS DOUBLE), CAST(py['decode_moe_ep'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 36, 'decode_bs', CAST(rust['decode_bs'] AS DOUBLE), CAST(py['decode_bs'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 37, 'decode_global_bs', CAST(rust['decode_global_bs'] AS DOUBLE), CAST(py['decode_global_bs'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 38, 'decode_workers', CAST(rust['decode_workers'] AS DOUBLE), CAST(py['decode_workers'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 39, 'decode_seq_per_s_per_worker', CAST(rust['decode_seq_per_s_per_worker'] AS DOUBLE), CAST(py['decode_seq_per_s_per_worker'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 40, 'decode_memory_gib', CAST(rust['decode_memory_gib'] AS DOUBLE), CAST(py['decode_memory_gib'] AS DOUBLE), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR) FROM parity_results
    UNION ALL SELECT point, 41, 'decode_gemm', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['decode_gemm'], py['decode_gemm'] FROM parity_results
    UNION ALL SELECT point, 42, 'decode_kvcache', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['decode_kvcache'], py['decode_kvcache'] FROM parity_results
    UNION ALL SELECT point, 43, 'decode_fmha', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['decode_fmha'], py['decode_fmha'] FROM parity_results
    UNION ALL SELECT point, 44, 'decode_moe', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['decode_moe'], py['decode_moe'] FROM parity_results
    UNION ALL SELECT point, 45, 'comm', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['comm'], py['comm'] FROM parity_results
    UNION ALL SELECT point, 46, 'system', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['system'], py['system'] FROM parity_results
    UNION ALL SELECT point, 47, 'backend', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['backend'], py['backend'] FROM parity_results
    UNION ALL SELECT point, 48, 'version', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), rust['version'], py['version'] FROM parity_results
),
cmp AS (
    SELECT point, ord, field, r, p,
           (r IS DISTINCT FROM p) OR (rs IS DISTINCT FROM ps) AS differs,
           abs(r - p) / abs(p) AS rel
    FROM fields
),
per_point AS (
    SELECT point,
           sum(CASE WHEN differs THEN 1 ELSE 0 END) AS fields_differing,
           first_value(field ORDER BY differs DESC, rel DESC NULLS LAST, ord) AS worst_field,
           first_value(r ORDER BY differs DESC, rel DESC NULLS LAST, ord) AS worst_rust,
           first_value(p ORDER BY differs DESC, rel DESC NULLS LAST, ord) AS worst_py,
           max(CASE WHEN differs THEN rel END) AS worst_rel
    FROM cmp
    GROUP BY point
),
verdict AS (
    SELECT q.* EXCLUDE (rust, py),
           q.rust['reason'] AS rust_reason,
           q.py['reason'] AS py_reason,
           (q.rust IS NULL OR q.rust['reason'] IS NOT NULL) AS rust_misses,
           (q.py IS NULL OR q.py['reason'] IS NOT NULL) AS py_misses,
           c.fields_differing, c.worst_field, c.worst_rust, c.worst_py, c.worst_rel
    FROM parity_results q JOIN per_point c ON c.point = q.point
)
SELECT v.* EXCLUDE (rust_misses, py_misses, fields_differing, worst_field, worst_rust, worst_py, worst_rel),
       CASE
         WHEN v.rust_misses AND v.py_misses THEN 'MISS_BOTH'
         WHEN v.rust_misses THEN 'REGRESSION'
         WHEN v.py_misses THEN 'EXTRA'
         WHEN v.fields_differing = 0 THEN 'STRICT_PASS'
         ELSE 'DRIFT'
       END AS status,
       CASE WHEN NOT v.rust_misses AND NOT v.py_misses THEN v.fields_differing END AS fields_differing,
       CASE WHEN NOT v.rust_misses AND NOT v.py_misses AND v.fields_differing > 0 THEN v.worst_field END AS field,
       CASE WHEN NOT v.rust_misses AND NOT v.py_misses AND v.fields_differing > 0 THEN v.worst_rust END AS rust_value,
       CASE WHEN NOT v.rust_misses AND NOT v.py_misses AND v.fields_differing > 0 THEN v.worst_py END AS py_value,
       CASE WHEN v.rust_misses OR v.py_misses THEN CAST(NULL AS DOUBLE)
            WHEN v.fields_differing = 0 THEN 0.0
            ELSE v.worst_rel END AS rel_diff
FROM verdict v
