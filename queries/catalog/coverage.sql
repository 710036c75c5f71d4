-- Which kernel tables each database has: one row per database, one column per
-- table kind the estimators use. `aicsql -f queries/catalog/coverage.sql`
SELECT db,
       bool_or("table" = 'gemm') AS gemm,
       bool_or("table" = 'context_attention') AS context_attention,
       bool_or("table" = 'generation_attention') AS generation_attention,
       bool_or("table" = 'custom_allreduce') AS custom_allreduce,
       bool_or("table" = 'moe') AS moe,
       count(*) AS tables
FROM aic.meta.databases
WHERE backend IN ('vllm', 'sglang', 'trtllm')
GROUP BY db
ORDER BY db;
