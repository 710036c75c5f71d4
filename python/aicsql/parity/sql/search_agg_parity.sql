-- Rust path vs Python path of the agg deployment search, one support-matrix entry:
-- search_agg(...) against py_search_agg(...), as cells the verdict grades.
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
--             label, the cluster rate, the frontier and best-config marks):
--             compared only for BIT_IDENTICAL
-- Columns of the spec's ColumnsAgg that aicsql's frame does not carry
-- (encoder_latency, encoder_memory, power_w) cannot be compared.
-- Then run search_verdict.sql (both statements). Numbers go into `num`
-- (integers as DOUBLE, exact below 2^53), strings and booleans into `txt`.

-- 1. The Rust path's frame (row_number over the unsorted scan keeps the frame's order).
CREATE OR REPLACE TABLE parity_search_rust AS
SELECT $entry AS entry, CAST(row_number() OVER () - 1 AS BIGINT) AS pos, s.*
FROM search_agg($model, $db, $total_gpus, $isl, $osl, $prefix, $ttft_ms, $tpot_ms) s;

-- 2. The Python path's frame.
CREATE OR REPLACE TABLE parity_search_py AS
SELECT $entry AS entry, CAST(row_number() OVER () - 1 AS BIGINT) AS pos, s.*
FROM py_search_agg($model, $db, $total_gpus, $isl, $osl, $prefix, $ttft_ms, $tpot_ms) s;

-- 3. The entry (both paths answered: a failing path stopped statement 1 or 2).
CREATE OR REPLACE TABLE parity_search_runs AS
SELECT $entry AS entry, $model AS model, $db AS db, 'agg' AS mode,
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
UNION ALL SELECT side, entry, pos, 8, 'bs', 'identity', CAST(bs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- bs
UNION ALL SELECT side, entry, pos, 9, 'global_bs', 'identity', CAST(global_bs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- global_bs
UNION ALL SELECT side, entry, pos, 10, 'ttft_ms', 'approx', CAST(ttft_ms AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- ttft
UNION ALL SELECT side, entry, pos, 11, 'tpot_ms', 'approx', CAST(tpot_ms AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tpot
UNION ALL SELECT side, entry, pos, 12, 'request_latency_ms', 'approx', CAST(request_latency_ms AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- request_latency
UNION ALL SELECT side, entry, pos, 13, 'seq_per_s', 'approx', CAST(seq_per_s AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- seq/s
UNION ALL SELECT side, entry, pos, 14, 'seq_per_s_per_gpu', 'approx', CAST(seq_per_s_per_gpu AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- seq/s/gpu
UNION ALL SELECT side, entry, pos, 15, 'tokens_per_s', 'approx', CAST(tokens_per_s AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tokens/s
UNION ALL SELECT side, entry, pos, 16, 'tokens_per_s_per_gpu', 'approx', CAST(tokens_per_s_per_gpu AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tokens/s/gpu
UNION ALL SELECT side, entry, pos, 17, 'tokens_per_s_per_user', 'approx', CAST(tokens_per_s_per_user AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tokens/s/user
UNION ALL SELECT side, entry, pos, 18, 'tokens_per_s_per_gpu_cluster', 'extra', CAST(tokens_per_s_per_gpu_cluster AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (not in the spec's frame)
UNION ALL SELECT side, entry, pos, 19, 'num_total_gpus', 'identity', CAST(num_total_gpus AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- num_total_gpus
UNION ALL SELECT side, entry, pos, 20, 'tp', 'identity', CAST(tp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- tp
UNION ALL SELECT side, entry, pos, 21, 'pp', 'identity', CAST(pp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- pp
UNION ALL SELECT side, entry, pos, 22, 'dp', 'identity', CAST(dp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- dp
UNION ALL SELECT side, entry, pos, 23, 'moe_tp', 'identity', CAST(moe_tp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- moe_tp
UNION ALL SELECT side, entry, pos, 24, 'moe_ep', 'identity', CAST(moe_ep AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- moe_ep
UNION ALL SELECT side, entry, pos, 25, 'cp', 'identity', CAST(cp AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- cp
UNION ALL SELECT side, entry, pos, 26, 'parallel', 'identity', CAST(NULL AS DOUBLE), parallel FROM sides  -- parallel
UNION ALL SELECT side, entry, pos, 27, 'gemm', 'identity', CAST(NULL AS DOUBLE), gemm FROM sides  -- gemm
UNION ALL SELECT side, entry, pos, 28, 'kvcache', 'identity', CAST(NULL AS DOUBLE), kvcache FROM sides  -- kvcache
UNION ALL SELECT side, entry, pos, 29, 'fmha', 'identity', CAST(NULL AS DOUBLE), fmha FROM sides  -- fmha
UNION ALL SELECT side, entry, pos, 30, 'moe', 'identity', CAST(NULL AS DOUBLE), moe FROM sides  -- moe
UNION ALL SELECT side, entry, pos, 31, 'comm', 'identity', CAST(NULL AS DOUBLE), comm FROM sides  -- comm
UNION ALL SELECT side, entry, pos, 32, 'memory_gib', 'identity', CAST(memory_gib AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- memory
UNION ALL SELECT side, entry, pos, 33, 'balance_score', 'approx', CAST(balance_score AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- balance_score
UNION ALL SELECT side, entry, pos, 34, 'num_ctx_reqs', 'identity', CAST(num_ctx_reqs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- num_ctx_reqs
UNION ALL SELECT side, entry, pos, 35, 'num_gen_reqs', 'identity', CAST(num_gen_reqs AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- num_gen_reqs
UNION ALL SELECT side, entry, pos, 36, 'num_tokens', 'identity', CAST(num_tokens AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- num_tokens
UNION ALL SELECT side, entry, pos, 37, 'ctx_tokens', 'identity', CAST(ctx_tokens AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- ctx_tokens
UNION ALL SELECT side, entry, pos, 38, 'gen_tokens', 'identity', CAST(gen_tokens AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- gen_tokens
UNION ALL SELECT side, entry, pos, 39, 'system', 'identity', CAST(NULL AS DOUBLE), system FROM sides  -- system
UNION ALL SELECT side, entry, pos, 40, 'backend', 'identity', CAST(NULL AS DOUBLE), backend FROM sides  -- backend
UNION ALL SELECT side, entry, pos, 41, 'version', 'identity', CAST(NULL AS DOUBLE), version FROM sides  -- version
UNION ALL SELECT side, entry, pos, 42, 'pareto', 'extra', CAST(NULL AS DOUBLE), CAST(pareto AS VARCHAR) FROM sides  -- (not in the spec's frame)
UNION ALL SELECT side, entry, pos, 43, 'best_rank', 'extra', CAST(best_rank AS DOUBLE), CAST(NULL AS VARCHAR) FROM sides  -- (not in the spec's frame);
