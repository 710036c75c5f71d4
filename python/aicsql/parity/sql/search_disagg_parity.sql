-- Rust path vs Python path of the disagg deployment search, one support-matrix entry:
-- search_disagg(...) against py_search_disagg(...), as cells the verdict grades.
--
-- Statements 1-3 run both searches for one entry ($entry, $model, $db,
-- $total_gpus, $isl, $osl, $prefix, $ttft_ms, $tpot_ms; set aic.top_n and
-- aic.strict_sla to the entry's first) and materialise:
--   parity_search_rust, parity_search_py   each path's frame: entry, pos (0-based,
--                                          the spec's row order), the frame's columns
--   parity_search_runs                     one row per entry: its columns, rust_error /
--                                          py_error (NULL: the path answered)
-- `python -m aicsql.parity --scan support-matrix` builds those three itself
-- (each path timed on its own, a failing path recorded as an error instead
-- of stopping the scan) and runs only statement 4.
--
-- Statement 4 unpivots both frames into parity_search_cells: one row per
-- (side, entry, pos, column) with the column's `kind` as upstream grades it
-- (tools/support_matrix/support_matrix.py at v0.11.0, _APPROXIMATE_ENGINE_STEP_COLUMNS):
--   approx    compared within a tolerance (the spec's name in the comment)
--   identity  compared exactly after sorting the rows
--   extra     columns the spec's candidates frame does not have (the database
--             label, the cluster rate, the frontier and best-config marks, and
--             decode_cp: the spec's decode role has no cp column): compared only
--             for BIT_IDENTICAL
-- Columns of the spec's ColumnsDisagg that aicsql's frame does not carry
-- (encoder_latency, (d)comm, (d)backend, (d)version, (d)system, the (e)
-- columns, power_w) cannot be compared.
-- Then run search_verdict.sql (both statements). Numbers go into `num`
-- (integers as DOUBLE, exact below 2^53), strings and booleans into `txt`.

-- 1. The Rust path's frame (row_number over the unsorted scan keeps the frame's order).
CREATE OR REPLACE TABLE parity_search_rust AS
SELECT $entry AS entry, CAST(row_number() OVER () - 1 AS BIGINT) AS pos, s.*
FROM search_disagg($model, $db, $total_gpus, $isl, $osl, $prefix, $ttft_ms, $tpot_ms) s;

-- 2. The Python path's frame.
CREATE OR REPLACE TABLE parity_search_py AS
SELECT $entry AS entry, CAST(row_number() OVER () - 1 AS BIGINT) AS pos, s.*
FROM py_search_disagg($model, $db, $total_gpus, $isl, $osl, $prefix, $ttft_ms, $tpot_ms) s;

-- 3. The entry (both paths answered: a failing path stopped statement 1 or 2).
CREATE OR REPLACE TABLE parity_search_runs AS
SELECT $entry AS entry, $model AS model, $db AS db, 'disagg' AS mode,
       CAST(NULL AS VARCHAR) AS rust_error, CAST(NULL AS VARCHAR) AS py_error;

-- 4. Both frames as cells.
CREATE OR REPLACE TABLE parity_search_cells AS
WITH sides AS (
    SELECT 'rust' AS side, * FROM parity_search_rust
    UNION ALL
    SELECT 'py' AS side, * FROM parity_search_py
)
SELECT side, entry, pos, 1 AS ord, 'model' AS col, 'identity' AS kind, CAST(NULL AS DOUBLE) AS num, model AS txt FROM sides  -- model
UNION ALL SELECT side, entry, pos, 2, 'db', 'extra', CAST(NULL AS DOUBLE), db FROM sides  -- (not in the spec's frame)
UNION ALL SELECT side, entry, pos, 3, 'isl', 'identity', CAST(isl AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- isl
UNION ALL SELECT side, entry, pos, 4, 'osl', 'identity', CAST(osl AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- osl
UNION ALL SELECT side, entry, pos, 5, 'prefix', 'identity', CAST(prefix AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- prefix
UNION ALL SELECT side, entry, pos, 6, 'concurrency', 'identity', CAST(concurrency AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- concurrency
UNION ALL SELECT side, entry, pos, 7, 'request_rate', 'approx', CAST(request_rate AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- request_rate
UNION ALL SELECT side, entry, pos, 8, 'ttft_ms', 'approx', CAST(ttft_ms AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- ttft
UNION ALL SELECT side, entry, pos, 9, 'tpot_ms', 'approx', CAST(tpot_ms AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tpot
UNION ALL SELECT side, entry, pos, 10, 'request_latency_ms', 'approx', CAST(request_latency_ms AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- request_latency
UNION ALL SELECT side, entry, pos, 11, 'seq_per_s', 'approx', CAST(seq_per_s AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- seq/s
UNION ALL SELECT side, entry, pos, 12, 'seq_per_s_per_gpu', 'approx', CAST(seq_per_s_per_gpu AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- seq/s/gpu
UNION ALL SELECT side, entry, pos, 13, 'tokens_per_s', 'approx', CAST(tokens_per_s AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tokens/s
UNION ALL SELECT side, entry, pos, 14, 'tokens_per_s_per_gpu', 'approx', CAST(tokens_per_s_per_gpu AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tokens/s/gpu
UNION ALL SELECT side, entry, pos, 15, 'tokens_per_s_per_user', 'approx', CAST(tokens_per_s_per_user AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tokens/s/user
UNION ALL SELECT side, entry, pos, 16, 'tokens_per_s_per_gpu_cluster', 'extra', CAST(tokens_per_s_per_gpu_cluster AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (not in the spec's frame)
UNION ALL SELECT side, entry, pos, 17, 'num_total_gpus', 'identity', CAST(num_total_gpus AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- num_total_gpus
UNION ALL SELECT side, entry, pos, 18, 'prefill_parallel', 'identity', CAST(NULL AS DOUBLE), prefill_parallel FROM sides  -- (p)parallel
UNION ALL SELECT side, entry, pos, 19, 'prefill_tp', 'identity', CAST(prefill_tp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)tp
UNION ALL SELECT side, entry, pos, 20, 'prefill_pp', 'identity', CAST(prefill_pp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)pp
UNION ALL SELECT side, entry, pos, 21, 'prefill_dp', 'identity', CAST(prefill_dp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)dp
UNION ALL SELECT side, entry, pos, 22, 'prefill_cp', 'identity', CAST(prefill_cp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)cp
UNION ALL SELECT side, entry, pos, 23, 'prefill_moe_tp', 'identity', CAST(prefill_moe_tp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)moe_tp
UNION ALL SELECT side, entry, pos, 24, 'prefill_moe_ep', 'identity', CAST(prefill_moe_ep AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)moe_ep
UNION ALL SELECT side, entry, pos, 25, 'prefill_bs', 'identity', CAST(prefill_bs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)bs
UNION ALL SELECT side, entry, pos, 26, 'prefill_global_bs', 'identity', CAST(prefill_global_bs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)global_bs
UNION ALL SELECT side, entry, pos, 27, 'prefill_workers', 'identity', CAST(prefill_workers AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)workers
UNION ALL SELECT side, entry, pos, 28, 'prefill_seq_per_s_per_worker', 'approx', CAST(prefill_seq_per_s_per_worker AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)seq/s/worker
UNION ALL SELECT side, entry, pos, 29, 'prefill_memory_gib', 'identity', CAST(prefill_memory_gib AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (p)memory
UNION ALL SELECT side, entry, pos, 30, 'prefill_gemm', 'identity', CAST(NULL AS DOUBLE), prefill_gemm FROM sides  -- (p)gemm
UNION ALL SELECT side, entry, pos, 31, 'prefill_kvcache', 'identity', CAST(NULL AS DOUBLE), prefill_kvcache FROM sides  -- (p)kvcache
UNION ALL SELECT side, entry, pos, 32, 'prefill_fmha', 'identity', CAST(NULL AS DOUBLE), prefill_fmha FROM sides  -- (p)fmha
UNION ALL SELECT side, entry, pos, 33, 'prefill_moe', 'identity', CAST(NULL AS DOUBLE), prefill_moe FROM sides  -- (p)moe
UNION ALL SELECT side, entry, pos, 34, 'decode_parallel', 'identity', CAST(NULL AS DOUBLE), decode_parallel FROM sides  -- (d)parallel
UNION ALL SELECT side, entry, pos, 35, 'decode_tp', 'identity', CAST(decode_tp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)tp
UNION ALL SELECT side, entry, pos, 36, 'decode_pp', 'identity', CAST(decode_pp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)pp
UNION ALL SELECT side, entry, pos, 37, 'decode_dp', 'identity', CAST(decode_dp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)dp
UNION ALL SELECT side, entry, pos, 38, 'decode_cp', 'extra', CAST(decode_cp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (not in the spec's frame)
UNION ALL SELECT side, entry, pos, 39, 'decode_moe_tp', 'identity', CAST(decode_moe_tp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)moe_tp
UNION ALL SELECT side, entry, pos, 40, 'decode_moe_ep', 'identity', CAST(decode_moe_ep AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)moe_ep
UNION ALL SELECT side, entry, pos, 41, 'decode_bs', 'identity', CAST(decode_bs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)bs
UNION ALL SELECT side, entry, pos, 42, 'decode_global_bs', 'identity', CAST(decode_global_bs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)global_bs
UNION ALL SELECT side, entry, pos, 43, 'decode_workers', 'identity', CAST(decode_workers AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)workers
UNION ALL SELECT side, entry, pos, 44, 'decode_seq_per_s_per_worker', 'approx', CAST(decode_seq_per_s_per_worker AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)seq/s/worker
UNION ALL SELECT side, entry, pos, 45, 'decode_memory_gib', 'identity', CAST(decode_memory_gib AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (d)memory
UNION ALL SELECT side, entry, pos, 46, 'decode_gemm', 'identity', CAST(NULL AS DOUBLE), decode_gemm FROM sides  -- (d)gemm
UNION ALL SELECT side, entry, pos, 47, 'decode_kvcache', 'identity', CAST(NULL AS DOUBLE), decode_kvcache FROM sides  -- (d)kvcache
UNION ALL SELECT side, entry, pos, 48, 'decode_fmha', 'identity', CAST(NULL AS DOUBLE), decode_fmha FROM sides  -- (d)fmha
UNION ALL SELECT side, entry, pos, 49, 'decode_moe', 'identity', CAST(NULL AS DOUBLE), decode_moe FROM sides  -- (d)moe
UNION ALL SELECT side, entry, pos, 50, 'comm', 'identity', CAST(NULL AS DOUBLE), comm FROM sides  -- (p)comm
UNION ALL SELECT side, entry, pos, 51, 'system', 'identity', CAST(NULL AS DOUBLE), system FROM sides  -- (p)system
UNION ALL SELECT side, entry, pos, 52, 'backend', 'identity', CAST(NULL AS DOUBLE), backend FROM sides  -- (p)backend
UNION ALL SELECT side, entry, pos, 53, 'version', 'identity', CAST(NULL AS DOUBLE), version FROM sides  -- (p)version
UNION ALL SELECT side, entry, pos, 54, 'pareto', 'extra', CAST(NULL AS DOUBLE), CAST(pareto AS VARCHAR) FROM sides  -- (not in the spec's frame)
UNION ALL SELECT side, entry, pos, 55, 'best_rank', 'extra', CAST(best_rank AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (not in the spec's frame);
