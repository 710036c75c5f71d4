-- The engine-step parity grid: every LLAMA and MOE model in aic.meta.models
-- (the golden models among them) x every h200_sxm and gb200 database that
-- has each table a step reads x tp 1/2/4/8 x batch 1/8/64
-- x isl 128/1024/4096/16384 x osl 2/128 x both phases.
-- MoE models run with moe_tp = 1 (moe_ep inferred = tp), a split every
-- backend accepts. A (model, tp) the spec refuses as input is left out:
-- the ones aic.meta.model_gemms does not list (heads not divisible by tp,
-- unsupported architecture or quantization), and fp8_static checkpoints
-- (their GEMMs need the compute_scale tables, which aicsql does not
-- price). One row per config: model, db, phase, tp, batch, isl, osl,
-- moe_tp, moe_ep.
WITH databases AS (
    SELECT db FROM aic.meta.databases
    WHERE system IN ('h200_sxm', 'gb200')
      AND "table" IN ('gemm', 'context_attention', 'generation_attention', 'custom_allreduce')
    GROUP BY db HAVING count(DISTINCT "table") = 4
),
splits AS (
    SELECT DISTINCT g.model, g.tp, m.family
    FROM aic.meta.model_gemms g JOIN aic.meta.models m ON m.model = g.model
    WHERE m.family IN ('LLAMA', 'MOE')
      AND g.model NOT IN (SELECT model FROM aic.meta.model_gemms WHERE quant = 'fp8_static')
)
SELECT m.model, d.db, p.phase, m.tp, b.batch, i.isl, o.osl,
       CASE WHEN m.family = 'MOE' THEN CAST(1 AS BIGINT) END AS moe_tp,
       CAST(NULL AS BIGINT) AS moe_ep
FROM splits m
CROSS JOIN databases d
CROSS JOIN (VALUES ('context'), ('generation')) AS p(phase)
CROSS JOIN (VALUES (1), (8), (64)) AS b(batch)
CROSS JOIN (VALUES (128), (1024), (4096), (16384)) AS i(isl)
CROSS JOIN (VALUES (2), (128)) AS o(osl)
ORDER BY m.model, d.db, p.phase, m.tp, b.batch, i.isl, o.osl
