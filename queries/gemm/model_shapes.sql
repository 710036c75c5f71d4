-- Price the per-rank GEMMs of a dense model's layer on several databases,
-- for several token counts. Shapes follow docs/spec/engine_step.md section 6:
--   qkv  n = H*d/tp + 2*d*ceil(Hkv/tp), k = h
--   proj n = h, k = H*d/tp
--   gate_ffn1 n = 2*I/tp, k = h;  ffn2 n = h, k = I/tp
-- Edit the model, tp, quant and databases below.
WITH model AS (
  SELECT model, hidden_size AS h, num_attention_heads AS heads, num_key_value_heads AS kv,
         head_dim AS d, intermediate_size AS inter, 8 AS tp
  FROM aic.meta.models WHERE model = 'Qwen/Qwen3-32B'
),
shapes AS (
  SELECT model, 'qkv' AS op, heads * d / tp + 2 * d * ((kv + tp - 1) / tp) AS n, h AS k FROM model
  UNION ALL SELECT model, 'proj', h, heads * d / tp FROM model
  UNION ALL SELECT model, 'gate_ffn1', 2 * inter / tp, h FROM model
  UNION ALL SELECT model, 'ffn2', h, inter / tp FROM model
),
dbs AS (
  SELECT db FROM aic.meta.databases
  WHERE "table" = 'gemm' AND db IN ('h200_sxm/vllm/0.19.0', 'gb200/vllm/0.19.0', 'h100_sxm/vllm/0.19.0')
)
SELECT s.model, s.op, s.n, s.k, dbs.db, t.m,
       gemm_latency(dbs.db, 'bfloat16', t.m, s.n, s.k) AS latency_ms,
       gemm_sol(dbs.db, 'bfloat16', t.m, s.n, s.k) / gemm_latency(dbs.db, 'bfloat16', t.m, s.n, s.k) AS util
FROM shapes s CROSS JOIN dbs CROSS JOIN (VALUES (1), (64), (1024), (8192)) AS t(m)
ORDER BY s.op, t.m, latency_ms;
