-- The measured GEMM grid of one database: per quant mode, how many (n, k)
-- sites and how many m points per site. Edit the WHERE clause to pick another.
SELECT gemm_dtype, count(*) AS sites, min(points) AS min_m_points, max(points) AS max_m_points,
       min(n) AS min_n, max(n) AS max_n, min(k) AS min_k, max(k) AS max_k
FROM (
  SELECT gemm_dtype, n, k, count(DISTINCT m) AS points
  FROM aic.perf.gemm
  WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0'
  GROUP BY gemm_dtype, n, k
)
GROUP BY gemm_dtype
ORDER BY gemm_dtype;
