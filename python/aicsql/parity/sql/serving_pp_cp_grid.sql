-- The serving parity grid at pipeline and context parallelism (scan
-- 'serving-pp-cp'): every LLAMA and MOE model of the engine-step grid (its tp
-- from aic.meta.model_gemms, so tp divides the heads) x every h200_sxm and
-- gb200 database with the tables the family's steps read, at
--   pp 2 / 4 with tp 1 / 2 (dp 1), on every backend;
--   cp 2 / 4 with tp = dp = 1, on sglang (the spec's context parallelism:
--   SGLang's all-gather variant, LLAMA and MOE);
-- MoE models at moe_tp = 1, moe_ep = tp * cp (at most the model's experts);
-- x the workloads of serving_grid.sql (isl, osl, prefix) = (1024, 128, 0),
-- (4000, 1000, 0), (256, 256, 128), as
--   agg:    batch 1/16/128 (ctx_tokens NULL = isl);
--   disagg: the same layout on both sides, prefill batch 1, decode batch
--           16/128, one worker each.
-- The layout goes to the functions as the spec's label (`parallel`, e.g.
-- 'tp2pp4dp1etp1ep2', 'tp1pp1dp1etp1ep4cp4'; dense models print
-- etpNoneepNone). The columns of serving_dp_grid.sql plus pp and cp; the
-- verdicts are the second statements of serving_agg_parity.sql /
-- serving_disagg_parity.sql.
WITH needs(family, "table") AS (
    VALUES
        ('LLAMA', 'gemm'), ('LLAMA', 'context_attention'), ('LLAMA', 'generation_attention'), ('LLAMA', 'custom_allreduce'),
        ('MOE', 'gemm'), ('MOE', 'context_attention'), ('MOE', 'generation_attention'), ('MOE', 'custom_allreduce'), ('MOE', 'moe')
),
databases AS (
    SELECT n.family, d.db, d.backend
    FROM needs n
    JOIN (SELECT DISTINCT db, backend, "table" FROM aic.meta.databases WHERE system IN ('h200_sxm', 'gb200')) d
      ON d."table" = n."table"
    GROUP BY n.family, d.db, d.backend
    HAVING count(DISTINCT d."table") = (SELECT count(*) FROM needs n2 WHERE n2.family = n.family)
),
splits AS (
    SELECT DISTINCT g.model, g.tp, m.family, m.num_experts
    FROM aic.meta.model_gemms g JOIN aic.meta.models m ON m.model = g.model
    WHERE m.family IN ('LLAMA', 'MOE') AND g.tp IN (1, 2)
),
layouts(kind, pp, cp) AS (
    VALUES ('pp', 2, 1), ('pp', 4, 1), ('cp', 1, 2), ('cp', 1, 4)
),
configs AS (
    SELECT s.model, d.db, s.tp, l.pp, l.cp, s.family,
           CASE WHEN s.family = 'MOE' THEN CAST(1 AS BIGINT) ELSE CAST(NULL AS BIGINT) END AS moe_tp,
           CASE WHEN s.family = 'MOE' THEN CAST(s.tp * l.cp AS BIGINT) ELSE CAST(NULL AS BIGINT) END AS moe_ep,
           w.isl, w.osl, w.prefix
    FROM splits s
    JOIN databases d ON d.family = s.family
    CROSS JOIN layouts l
    CROSS JOIN (VALUES (1024, 128, 0), (4000, 1000, 0), (256, 256, 128)) AS w(isl, osl, prefix)
    WHERE (l.kind = 'pp' OR (d.backend = 'sglang' AND s.tp = 1))
      AND (s.family <> 'MOE' OR s.tp * l.cp <= s.num_experts)
),
points AS (
    SELECT 'agg' AS mode, c.model, c.db, c.tp, c.pp, c.cp, c.family, c.moe_tp, c.moe_ep,
           CAST(b.batch AS BIGINT) AS batch,
           CAST(NULL AS BIGINT) AS prefill_batch, CAST(NULL AS BIGINT) AS prefill_workers,
           CAST(NULL AS BIGINT) AS decode_batch, CAST(NULL AS BIGINT) AS decode_workers,
           c.isl, c.osl, c.prefix
    FROM configs c CROSS JOIN (VALUES (1), (16), (128)) AS b(batch)
    UNION ALL
    SELECT 'disagg' AS mode, c.model, c.db, c.tp, c.pp, c.cp, c.family, c.moe_tp, c.moe_ep,
           CAST(NULL AS BIGINT) AS batch,
           CAST(1 AS BIGINT) AS prefill_batch, CAST(1 AS BIGINT) AS prefill_workers,
           CAST(b.batch AS BIGINT) AS decode_batch, CAST(1 AS BIGINT) AS decode_workers,
           c.isl, c.osl, c.prefix
    FROM configs c CROSS JOIN (VALUES (16), (128)) AS b(batch)
)
SELECT CAST(row_number() OVER (ORDER BY model, db, mode, tp, pp, cp, isl, osl, prefix, batch, decode_batch) AS BIGINT) AS point,
       mode, model, db, CAST(tp AS BIGINT) AS tp, CAST(1 AS BIGINT) AS dp,
       CAST(pp AS BIGINT) AS pp, CAST(cp AS BIGINT) AS cp,
       arrow_cast(concat('tp', CAST(tp AS VARCHAR), 'pp', CAST(pp AS VARCHAR), 'dp1etp',
                         COALESCE(CAST(moe_tp AS VARCHAR), 'None'), 'ep', COALESCE(CAST(moe_ep AS VARCHAR), 'None'),
                         CASE WHEN cp > 1 THEN concat('cp', CAST(cp AS VARCHAR)) ELSE '' END), 'Utf8') AS parallel,
       moe_tp, moe_ep, batch, prefill_batch, prefill_workers,
       decode_batch, decode_workers, CAST(isl AS BIGINT) AS isl, CAST(osl AS BIGINT) AS osl,
       CAST(prefix AS BIGINT) AS prefix
FROM points
ORDER BY point
