-- Parity scan queries: every GEMM of every model in aic.meta.models, at
-- tp 1/2/4/8, for a ladder of token counts m, on every database that has a
-- GEMM table, in every quant mode that database's GEMM file carries.
--
-- Output: one row per unique (db, quant, m, n, k), with
--   uses     how many (model, tp, op) GEMMs asked for exactly this query
--   example  one of them, 'model op tp<N>' (the smallest, for a stable report)
--   in_spec  whether any of them belongs to a model family the spec covers
-- Register the result as `parity_queries` and run gemm_parity.sql over it
-- (`python -m aicsql.parity --scan gemm-models` does both, in chunks).
--
-- Shapes, per rank (docs/spec/engine_step.md sections 2, 6 and 10; integer
-- division is floor division, all operands are positive):
--   qkv        n = H*d/tp + 2*d*ceil(Hkv/tp)   k = h
--   proj       n = h                           k = H*d/tp
--   gate_ffn1  n = 2*I/tp                      k = h       (dense MLP)
--   ffn2       n = h                           k = I/tp    (dense MLP)
--   router     n = E                           k = h       (MoE router)
--   logits     n = V/tp                        k = h
-- with H = num_attention_heads, Hkv = num_key_value_heads (0 when NULL),
-- d = head_dim (else h/H), I = intermediate_size, E = num_experts, V = vocab_size.
--
-- Which GEMMs a model has, by family:
--   LLAMA      qkv, proj, gate_ffn1, ffn2, logits            (section 6)
--   MOE        qkv, proj, router, logits                     (section 10.2: no dense MLP)
--   HYBRIDMOE  qkv, proj, logits, router only when E >= 128  (section 10.4; Llama-4's dense
--              FFN width, intermediate_size_mlp, is not in aic.meta.models, so it is left out)
--   NULL       architectures the spec does not cover (MLA, hybrid attention, ...): their
--              configs are still priced with the formulas above -- the MOE list when the
--              config has experts, else the LLAMA list -- because the point here is parity
--              coverage of plausible shapes, not the model's true op list (`in_spec` = false).
--
-- Divisibility (section 2: "H must be divisible by tp"): a (model, tp) whose
-- num_attention_heads is not a multiple of tp is skipped entirely. A GEMM
-- whose n or k comes out < 1 (a config without intermediate_size or experts)
-- is dropped.
--
-- Quant modes: the spec's GEMM modes (section 3) whose slice occurs as a
-- gemm_dtype in the database's own GEMM file: bfloat16, fp8, fp8_block, nvfp4,
-- int8_wo, int4_wo, sq each read their own slice; fp8_static reads fp8
-- (section 8.1). With the shared layer on, older versions can add slices;
-- those modes are not scanned for the newer database. Every shape is crossed
-- with every mode, including logits and router, which the spec itself always
-- prices in bfloat16: a parity scan wants the coverage.
WITH tps AS (
  SELECT tp FROM (VALUES (1), (2), (4), (8)) AS t(tp)
),
ms AS (
  SELECT m FROM (VALUES (1), (2), (3), (4), (8), (16), (37), (64), (128), (416), (1000), (1024),
                        (4096), (8192), (16384), (20000), (65536)) AS t(m)
),
models AS (
  SELECT model,
         family,
         family IS NOT NULL                                        AS in_spec,
         CASE
           WHEN family = 'LLAMA' THEN 'dense'
           WHEN family IN ('MOE', 'HYBRIDMOE') THEN lower(family)
           WHEN coalesce(num_experts, 0) > 0 THEN 'moe'
           ELSE 'dense'
         END                                                       AS op_list,
         hidden_size                                               AS hid,
         num_attention_heads                                       AS heads,
         coalesce(num_key_value_heads, 0)                          AS kv_heads,
         coalesce(head_dim, hidden_size / num_attention_heads)     AS d,
         coalesce(intermediate_size, 0)                            AS inter,
         coalesce(num_experts, 0)                                  AS experts,
         vocab_size                                                AS vocab
  FROM aic.meta.models
  WHERE hidden_size > 0 AND num_attention_heads > 0 AND vocab_size > 0
),
model_tp AS (
  -- The spec's divisibility rule: heads must split evenly over tp.
  SELECT models.*, tps.tp FROM models CROSS JOIN tps WHERE heads % tp = 0
),
gemms AS (
  SELECT model, in_spec, tp, 'qkv' AS op,
         heads * d / tp + 2 * d * ((kv_heads + tp - 1) / tp) AS n, hid AS k
  FROM model_tp
  UNION ALL
  SELECT model, in_spec, tp, 'proj', hid, heads * d / tp FROM model_tp
  UNION ALL
  SELECT model, in_spec, tp, 'logits', vocab / tp, hid FROM model_tp
  UNION ALL
  SELECT model, in_spec, tp, 'gate_ffn1', 2 * inter / tp, hid FROM model_tp WHERE op_list = 'dense'
  UNION ALL
  SELECT model, in_spec, tp, 'ffn2', hid, inter / tp FROM model_tp WHERE op_list = 'dense'
  UNION ALL
  SELECT model, in_spec, tp, 'router', experts, hid FROM model_tp
  WHERE op_list = 'moe' OR (op_list = 'hybridmoe' AND experts >= 128)
),
shapes AS (
  -- One row per distinct (n, k). Identical (db, quant, m, n, k) queries come
  -- only from identical (n, k), since db, quant and m are crossed in below
  -- independently of the model; so counting GEMMs per (n, k) here is the same
  -- as counting duplicate queries after the cross join, on far fewer rows.
  SELECT n, k,
         count(*)                                                                AS uses,
         min(model || ' ' || op || ' tp' || CAST(tp AS VARCHAR))                 AS example,
         bool_or(in_spec)                                                        AS in_spec
  FROM gemms
  WHERE n >= 1 AND k >= 1
  GROUP BY n, k
),
quant_modes AS (
  -- Which quant modes (the spec's names, section 3) read which gemm_dtype
  -- slice: each its own, and fp8_static reads fp8 (section 8.1). A file's own
  -- 'fp8_static' rows are read by no mode, so they add no quant here.
  SELECT gemm_dtype, quant FROM (VALUES
    ('bfloat16', 'bfloat16'), ('fp8', 'fp8'), ('fp8', 'fp8_static'), ('fp8_block', 'fp8_block'), ('nvfp4', 'nvfp4'), ('int8_wo', 'int8_wo'), ('int4_wo', 'int4_wo'),
    ('sq', 'sq')) AS t(gemm_dtype, quant)
),
gemm_slices AS (
  -- The gemm_dtype slices in each database's own GEMM file.
  SELECT DISTINCT system, backend, version, gemm_dtype FROM aic.perf.gemm
),
db_quants AS (
  -- The quant modes those slices serve.
  SELECT DISTINCT d.db, qm.quant
  FROM aic.meta.databases d
  JOIN gemm_slices g ON g.system = d.system AND g.backend = d.backend AND g.version = d.version
  JOIN quant_modes qm ON qm.gemm_dtype = g.gemm_dtype
  WHERE d."table" = 'gemm'
)
SELECT q.db, q.quant, ms.m, s.n, s.k, s.uses, arrow_cast(s.example, 'Utf8') AS example, s.in_spec
FROM shapes s CROSS JOIN ms CROSS JOIN db_quants q
ORDER BY q.db, q.quant, s.n, s.k, ms.m
