-- Rank the systems (databases) for one model by TPOT at several tensor-parallel
-- degrees: every database that has the tables a step needs, crossed with tp.
-- A (database, tp) the spec cannot price (missing data, heads not divisible)
-- gives NULL and is left out. Change the model, batch and lengths below.
-- Run: cargo run -- -f queries/step/rank_systems_by_tpot.sql
WITH databases AS (
    SELECT db FROM aic.meta.databases
    WHERE "table" IN ('gemm', 'context_attention', 'generation_attention', 'custom_allreduce')
    GROUP BY db HAVING count(DISTINCT "table") = 4
),
configs AS (
    SELECT db, tp,
           step_latency('Qwen/Qwen3-32B-FP8', db, 'generation', tp, 8, 1024, 128) AS tpot_ms,
           step_latency('Qwen/Qwen3-32B-FP8', db, 'context', tp, 8, 1024, 128) AS ttft_ms
    FROM databases CROSS JOIN (VALUES (1), (2), (4), (8)) AS t(tp)
)
SELECT tp,
       rank() OVER (PARTITION BY tp ORDER BY tpot_ms) AS rank,
       db,
       round(tpot_ms, 4) AS tpot_ms,
       round(ttft_ms, 3) AS ttft_ms
FROM configs
WHERE tpot_ms IS NOT NULL
ORDER BY tp, rank, db;
