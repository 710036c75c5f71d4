-- The engine-step parity grid: every model of a family aicsql prices
-- (LLAMA, MOE, DEEPSEEK, KIMIK25, HYBRIDMOE, QWEN3VL, QWEN3VL_MOE, and the
-- second wave: QWEN35, GEMMA4MIX, NEMOTRONH, NEMOTRONNAS, DEEPSEEKV32,
-- DEEPSEEKV4) in
-- aic.meta.models (the golden models among them) x every h200_sxm and
-- gb200 database that has the tables its family's step reads x tp 1/2/4/8
-- x batch 1/8/64 x isl 128/1024/4096/16384 x osl 2/128 x both phases.
-- The linear-attention kernels (GDN, Mamba-2) are not required: their
-- lookups fall back to a memory roofline instead of missing.
-- The MLA families need only GEMM, all-reduce and MoE tables here: which
-- MLA table a step reads depends on the backend (and may come from another
-- backend's rows), so a database without it is a miss on both paths, which
-- the scan checks too.
-- MoE models run with moe_tp = 1 (moe_ep inferred = tp), a split every
-- backend accepts. A (model, tp) the spec refuses as input is left out:
-- the ones aic.meta.model_gemms does not list (heads not divisible by tp,
-- unsupported architecture or quantization). One row per config: model,
-- db, phase, tp, batch, isl, osl, moe_tp, moe_ep.
WITH needs(family, "table") AS (
    VALUES
        ('LLAMA', 'gemm'), ('LLAMA', 'context_attention'), ('LLAMA', 'generation_attention'), ('LLAMA', 'custom_allreduce'),
        ('QWEN3VL', 'gemm'), ('QWEN3VL', 'context_attention'), ('QWEN3VL', 'generation_attention'), ('QWEN3VL', 'custom_allreduce'),
        ('MOE', 'gemm'), ('MOE', 'context_attention'), ('MOE', 'generation_attention'), ('MOE', 'custom_allreduce'), ('MOE', 'moe'),
        ('HYBRIDMOE', 'gemm'), ('HYBRIDMOE', 'context_attention'), ('HYBRIDMOE', 'generation_attention'), ('HYBRIDMOE', 'custom_allreduce'), ('HYBRIDMOE', 'moe'),
        ('QWEN3VL_MOE', 'gemm'), ('QWEN3VL_MOE', 'context_attention'), ('QWEN3VL_MOE', 'generation_attention'), ('QWEN3VL_MOE', 'custom_allreduce'), ('QWEN3VL_MOE', 'moe'),
        ('DEEPSEEK', 'gemm'), ('DEEPSEEK', 'custom_allreduce'), ('DEEPSEEK', 'moe'),
        ('KIMIK25', 'gemm'), ('KIMIK25', 'custom_allreduce'), ('KIMIK25', 'moe'),
        ('QWEN35', 'gemm'), ('QWEN35', 'context_attention'), ('QWEN35', 'generation_attention'), ('QWEN35', 'custom_allreduce'), ('QWEN35', 'moe'),
        ('GEMMA4MIX', 'gemm'), ('GEMMA4MIX', 'context_attention'), ('GEMMA4MIX', 'generation_attention'), ('GEMMA4MIX', 'custom_allreduce'), ('GEMMA4MIX', 'moe'),
        ('NEMOTRONH', 'gemm'), ('NEMOTRONH', 'context_attention'), ('NEMOTRONH', 'generation_attention'), ('NEMOTRONH', 'custom_allreduce'), ('NEMOTRONH', 'moe'),
        ('NEMOTRONNAS', 'gemm'), ('NEMOTRONNAS', 'context_attention'), ('NEMOTRONNAS', 'generation_attention'), ('NEMOTRONNAS', 'custom_allreduce'),
        ('DEEPSEEKV32', 'gemm'), ('DEEPSEEKV32', 'custom_allreduce'), ('DEEPSEEKV32', 'moe'), ('DEEPSEEKV32', 'dsa_context_module'), ('DEEPSEEKV32', 'dsa_generation_module'),
        ('DEEPSEEKV4', 'gemm'), ('DEEPSEEKV4', 'custom_allreduce'), ('DEEPSEEKV4', 'moe'), ('DEEPSEEKV4', 'mhc_module'), ('DEEPSEEKV4', 'dsv4_csa_context_module'), ('DEEPSEEKV4', 'dsv4_csa_generation_module')
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
    WHERE m.family IN (SELECT DISTINCT family FROM needs)
)
SELECT m.model, d.db, p.phase, m.tp, b.batch, i.isl, o.osl,
       CASE WHEN m.family IN ('LLAMA', 'QWEN3VL', 'NEMOTRONNAS') THEN CAST(NULL AS BIGINT) ELSE CAST(1 AS BIGINT) END AS moe_tp,
       CAST(NULL AS BIGINT) AS moe_ep
FROM splits m
JOIN databases d ON d.family = m.family
CROSS JOIN (VALUES ('context'), ('generation')) AS p(phase)
CROSS JOIN (VALUES (1), (8), (64)) AS b(batch)
CROSS JOIN (VALUES (128), (1024), (4096), (16384)) AS i(isl)
CROSS JOIN (VALUES (2), (128)) AS o(osl)
ORDER BY m.model, d.db, p.phase, m.tp, b.batch, i.isl, o.osl
