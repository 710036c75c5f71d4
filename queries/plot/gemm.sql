-- A GEMM estimate and what it stands on, for `aicsql plot gemm`: the
-- estimated latency of fp8_block GEMMs at (n, k) = (1280, 5120) on
-- h200_sxm/vllm/0.19.0 over m (not a measured site, so every value is a
-- site transfer), and the measured rows of the four neighbour sites
-- gemm_trace says the transfer selected (at m = 1024; the selection can
-- change with m).
--
--   aicsql plot gemm --sql "$(cat queries/plot/gemm.sql)" --out gemm.svg
WITH sites AS (
    SELECT site_n, site_k
    FROM gemm_trace('h200_sxm/vllm/0.19.0', 'fp8_block', 1024, 1280, 5120)
    WHERE selected
),
grid AS (
    SELECT CAST(power(2, value) AS BIGINT) AS m FROM generate_series(0, 14)
)
SELECT 'estimate (1280, 5120)' AS series, m,
       gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', m, 1280, 5120) AS latency_ms, 'line' AS style
FROM grid
UNION ALL
SELECT concat('measured (', CAST(g.n AS VARCHAR), ', ', CAST(g.k AS VARCHAR), ')') AS series, g.m,
       g.latency AS latency_ms, 'points' AS style
FROM aic.perf.gemm g JOIN sites s ON g.n = s.site_n AND g.k = s.site_k
WHERE g.system = 'h200_sxm' AND g.backend = 'vllm' AND g.version = '0.19.0' AND g.gemm_dtype = 'fp8_block'
ORDER BY series, m;
