-- Model shapes x systems as a plain join: every GEMM of a model's layer
-- stack (aic.meta.model_gemms) priced on every database with a GEMM table
-- (aic.meta.databases), at m = 1024 tokens, summed per layer stack.
-- A database without the model's quant mode misses (NULL) and is listed last.
-- Run: cargo run -- -f queries/gemm/model_gemms_by_database.sql
SELECT d.db,
       g.tp,
       round(sum(g.count * gemm_latency(d.db, g.quant, 1024, g.n, g.k)), 4) AS gemm_ms_per_step,
       count(*) AS gemm_ops,
       count(*) FILTER (WHERE gemm_latency(d.db, g.quant, 1024, g.n, g.k) IS NULL) AS missed_ops
FROM aic.meta.model_gemms AS g
CROSS JOIN (SELECT db FROM aic.meta.databases WHERE "table" = 'gemm') AS d
WHERE g.model = 'Qwen/Qwen3-32B-FP8'
GROUP BY d.db, g.tp
ORDER BY g.tp, missed_ops, gemm_ms_per_step, d.db;
