-- The serving parity grid at attention dp > 1 (scan 'serving-dp'): every MOE
-- model of the engine-step grid (the MOE family prices attention dp; its
-- tp from aic.meta.model_gemms, so tp divides the heads) x every h200_sxm
-- and gb200 database with the tables the family's steps read x (tp, dp) in
-- (1, 2), (1, 4), (2, 2), (2, 4) at moe_tp = 1, moe_ep = tp * dp (at most the
-- model's experts; trtllm refuses tp > 1 with dp > 1, so it gets tp 1 only)
-- x the workloads of serving_grid.sql (isl, osl, prefix) = (1024, 128, 0),
-- (4000, 1000, 0), (256, 256, 128), as
--   agg:    batch 1/16/128 (ctx_tokens NULL = isl);
--   disagg: the same layout on both sides, prefill batch 1, decode batch
--           16/128, one worker each.
-- The layout goes to the functions as the spec's label (`parallel`, e.g.
-- 'tp2pp1dp4etp1ep8'), moe_tp / moe_ep repeating its widths. The columns of
-- serving_grid.sql plus dp and parallel; the verdicts are the second
-- statements of serving_agg_parity.sql / serving_disagg_parity.sql.
WITH needs(family, "table") AS (
    VALUES ('MOE', 'gemm'), ('MOE', 'context_attention'), ('MOE', 'generation_attention'), ('MOE', 'custom_allreduce'),
           ('MOE', 'moe')
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
    WHERE m.family = 'MOE' AND g.tp IN (1, 2)
),
configs AS (
    SELECT s.model, d.db, s.tp, l.dp,
           CAST(1 AS BIGINT) AS moe_tp,
           CAST(s.tp * l.dp AS BIGINT) AS moe_ep,
           w.isl, w.osl, w.prefix
    FROM splits s
    JOIN databases d ON d.family = s.family
    CROSS JOIN (VALUES (2), (4)) AS l(dp)
    CROSS JOIN (VALUES (1024, 128, 0), (4000, 1000, 0), (256, 256, 128)) AS w(isl, osl, prefix)
    WHERE s.tp * l.dp <= s.num_experts AND (d.backend <> 'trtllm' OR s.tp = 1)
),
points AS (
    SELECT 'agg' AS mode, c.model, c.db, c.tp, c.dp, c.moe_tp, c.moe_ep,
           CAST(b.batch AS BIGINT) AS batch,
           CAST(NULL AS BIGINT) AS prefill_batch, CAST(NULL AS BIGINT) AS prefill_workers,
           CAST(NULL AS BIGINT) AS decode_batch, CAST(NULL AS BIGINT) AS decode_workers,
           c.isl, c.osl, c.prefix
    FROM configs c CROSS JOIN (VALUES (1), (16), (128)) AS b(batch)
    UNION ALL
    SELECT 'disagg' AS mode, c.model, c.db, c.tp, c.dp, c.moe_tp, c.moe_ep,
           CAST(NULL AS BIGINT) AS batch,
           CAST(1 AS BIGINT) AS prefill_batch, CAST(1 AS BIGINT) AS prefill_workers,
           CAST(b.batch AS BIGINT) AS decode_batch, CAST(1 AS BIGINT) AS decode_workers,
           c.isl, c.osl, c.prefix
    FROM configs c CROSS JOIN (VALUES (16), (128)) AS b(batch)
)
SELECT CAST(row_number() OVER (ORDER BY model, db, mode, tp, dp, isl, osl, prefix, batch, decode_batch) AS BIGINT) AS point,
       mode, model, db, CAST(tp AS BIGINT) AS tp, CAST(dp AS BIGINT) AS dp,
       arrow_cast(concat('tp', CAST(tp AS VARCHAR), 'pp1dp', CAST(dp AS VARCHAR), 'etp', CAST(moe_tp AS VARCHAR), 'ep',
                         CAST(moe_ep AS VARCHAR)), 'Utf8') AS parallel,
       moe_tp, moe_ep, batch, prefill_batch, prefill_workers,
       decode_batch, decode_workers, CAST(isl AS BIGINT) AS isl, CAST(osl AS BIGINT) AS osl,
       CAST(prefix AS BIGINT) AS prefix
FROM points
ORDER BY point
