-- Estimated against measured TTFT and TPOT for upstream's end-to-end measurements, from the table
-- queries/accuracy/silicon_refs.sql makes (run it first, in the same session):
--   aicsql plot accuracy --file queries/accuracy/silicon_refs.sql --file queries/plot/accuracy.sql --out accuracy.svg
-- Columns read (docs/plots.md): silicon_ttft_ms, predicted_ttft_ms, silicon_tpot_ms, predicted_tpot_ms.
SELECT id, backend, system, silicon_ttft_ms, predicted_ttft_ms, silicon_tpot_ms, predicted_tpot_ms
FROM silicon_accuracy
WHERE status = 'OK'
ORDER BY id
