-- Which release serves each table, and which releases it shadows: where two
-- wheels carry the same (system, backend, version, table), the newer wins.
SELECT release, layout, count(*) AS tables_served,
       count(shadowed_releases) AS tables_also_in_an_older_release
FROM aic.meta.databases
GROUP BY release, layout
ORDER BY release;

SELECT db, "table", release, shadowed_releases
FROM aic.meta.databases
WHERE shadowed_releases IS NOT NULL AND "table" IN ('gemm', 'custom_allreduce', 'moe')
ORDER BY db, "table"
LIMIT 20;
