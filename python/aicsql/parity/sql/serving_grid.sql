-- The serving parity grid: every LLAMA and MOE model of the engine-step grid
-- (step_grid.sql: the models aic.meta.model_gemms lists at a tp, so a tp
-- not dividing the heads or an unsupported checkpoint is left out) x every
-- h200_sxm and gb200 database with the tables the family's steps read x
-- tp 1/2/4/8 x three workloads (isl, osl, prefix) = (1024, 128, 0),
-- (4000, 1000, 0), (256, 256, 128), as
--   agg:    batch 1/16/128 (ctx_tokens NULL = isl);
--   disagg: the same tp on both sides, prefill batch 1, decode batch
--           16/128, one worker each.
-- MoE models run with moe_tp = 1, moe_ep = tp (a split every backend
-- accepts); dense models pass NULL for both (the spec keeps them None).
-- One row per point: point (unique, the verdict groups on it), mode, model,
-- db, tp, moe_tp, moe_ep, batch (agg), prefill_batch, prefill_workers,
-- decode_batch, decode_workers (disagg), isl, osl, prefix.
WITH needs(family, "table") AS (
    VALUES
        ('LLAMA', 'gemm'), ('LLAMA', 'context_attention'), ('LLAMA', 'generation_attention'), ('LLAMA', 'custom_allreduce'),
        ('MOE', 'gemm'), ('MOE', 'context_attention'), ('MOE', 'generation_attention'), ('MOE', 'custom_allreduce'), ('MOE', 'moe')
),
databases AS (
    SELECT n.family, d.db
    FROM needs n
    JOIN (SELECT DISTINCT db, "table" FROM aic.meta.databases WHERE system IN ('h200_sxm', 'gb200')) d
      ON d."table" = n."table"
    GROUP BY n.family, d.db
    HAVING count(DISTINCT d."table") = (SELECT count(*) FROM needs n2 WHERE n2.family = n.family)
),
splits AS (
    SELECT DISTINCT g.model, g.tp, m.family
    FROM aic.meta.model_gemms g JOIN aic.meta.models m ON m.model = g.model
    WHERE m.family IN (SELECT DISTINCT family FROM needs) AND g.tp IN (1, 2, 4, 8)
),
configs AS (
    SELECT s.model, d.db, s.tp,
           CASE WHEN s.family = 'MOE' THEN CAST(1 AS BIGINT) ELSE CAST(NULL AS BIGINT) END AS moe_tp,
           CASE WHEN s.family = 'MOE' THEN CAST(s.tp AS BIGINT) ELSE CAST(NULL AS BIGINT) END AS moe_ep,
           w.isl, w.osl, w.prefix
    FROM splits s
    JOIN databases d ON d.family = s.family
    CROSS JOIN (VALUES (1024, 128, 0), (4000, 1000, 0), (256, 256, 128)) AS w(isl, osl, prefix)
),
points AS (
    SELECT 'agg' AS mode, c.model, c.db, c.tp, c.moe_tp, c.moe_ep,
           CAST(b.batch AS BIGINT) AS batch,
           CAST(NULL AS BIGINT) AS prefill_batch, CAST(NULL AS BIGINT) AS prefill_workers,
           CAST(NULL AS BIGINT) AS decode_batch, CAST(NULL AS BIGINT) AS decode_workers,
           c.isl, c.osl, c.prefix
    FROM configs c CROSS JOIN (VALUES (1), (16), (128)) AS b(batch)
    UNION ALL
    SELECT 'disagg' AS mode, c.model, c.db, c.tp, c.moe_tp, c.moe_ep,
           CAST(NULL AS BIGINT) AS batch,
           CAST(1 AS BIGINT) AS prefill_batch, CAST(1 AS BIGINT) AS prefill_workers,
           CAST(b.batch AS BIGINT) AS decode_batch, CAST(1 AS BIGINT) AS decode_workers,
           c.isl, c.osl, c.prefix
    FROM configs c CROSS JOIN (VALUES (16), (128)) AS b(batch)
)
SELECT CAST(row_number() OVER (ORDER BY model, db, mode, tp, isl, osl, prefix, batch, decode_batch) AS BIGINT) AS point,
       mode, model, db, CAST(tp AS BIGINT) AS tp, moe_tp, moe_ep, batch, prefill_batch, prefill_workers,
       decode_batch, decode_workers, CAST(isl AS BIGINT) AS isl, CAST(osl AS BIGINT) AS osl,
       CAST(prefix AS BIGINT) AS prefix
FROM points
ORDER BY point
