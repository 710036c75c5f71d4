-- Which PASS entries of the support matrix aicsql prices, by architecture.
--
-- For every `PASS` agg entry of aic.meta.support_matrix (the matrix the
-- newest wheel ships, graded upstream), whether the model's context step
-- prices on the entry's database at a probe shape (tp 1, moe_tp 1,
-- moe_ep 1, batch 16, isl 256, osl 256), grouped by architecture, with the
-- first reason of each group that does not price (step_status says why:
-- the lookup that missed, or the refusal).
--
--   aicsql -f queries/coverage/support_matrix.sql
WITH entries AS (
    SELECT
        hugging_face_id AS model,
        architecture,
        system || '/' || backend || '/' || version AS db,
        step_status(hugging_face_id, system || '/' || backend || '/' || version, 'context', 1, 16, 256, 256, 1, 1)
            AS status
    FROM aic.meta.support_matrix
    WHERE status = 'PASS' AND mode = 'agg'
)
SELECT
    architecture,
    count(*) AS entries,
    count(*) FILTER (WHERE status = 'priced') AS priced,
    count(*) FILTER (WHERE status LIKE 'miss:%') AS misses,
    count(*) FILTER (WHERE status LIKE 'refused:%') AS refused,
    first_value(
        CASE WHEN status <> 'priced' THEN model || ' on ' || db || ': ' || status END
        ORDER BY status = 'priced', model, db
    ) AS first_reason
FROM entries
GROUP BY architecture
ORDER BY entries DESC, architecture;
