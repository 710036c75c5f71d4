//! The `aic` catalog over hand-assembled trees made of real published files:
//! both layouts, release precedence, laziness and the error paths.

mod common;
#[path = "../crates/remote/tests/common/mod.rs"]
mod servers;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Array, Float64Array, Int64Array, StringArray};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;

use aicsql::{DataTree, SessionBuilder};

fn legacy_wheel() -> PathBuf {
    common::release_root("aiconfigurator-0.10.0", "aiconfigurator")
}

fn core_wheel() -> PathBuf {
    common::release_root("aiconfigurator-core-0.12.0", "aiconfigurator_core")
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to.parent().expect("has a parent")).expect("mkdir");
    fs::copy(from, to).unwrap_or_else(|e| panic!("copy {} -> {}: {e}", from.display(), to.display()));
}

/// A release folder `<dir>/<name>` holding `<package>/systems/...`, labelled like the fetch step does.
fn release(dir: &Path, name: &str, label: &str, package: &str) -> PathBuf {
    let root = dir.join(name);
    fs::create_dir_all(root.join(package).join("systems").join("data")).expect("mkdir");
    fs::write(root.join("RELEASE"), format!("{label}\n")).expect("write marker");
    root.join(package)
}

async fn query(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<Vec<RecordBatch>> {
    ctx.sql(sql).await?.collect().await
}

async fn single_str(ctx: &SessionContext, sql: &str) -> String {
    let batches = query(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let col = batches[0].column(0).as_any().downcast_ref::<StringArray>().expect("a string column").clone();
    col.value(0).to_string()
}

async fn single_i64(ctx: &SessionContext, sql: &str) -> i64 {
    let batches = query(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    batches[0].column(0).as_any().downcast_ref::<Int64Array>().expect("an int column").value(0)
}

/// Two releases sharing one database: 0.10.0 (legacy) and core 0.12.0 (family).
fn two_release_tree(dir: &Path) -> (PathBuf, PathBuf) {
    let old = release(dir, "aiconfigurator-0.10.0", "aiconfigurator==0.10.0", "aiconfigurator");
    let new = release(dir, "aiconfigurator-core-0.12.0", "aiconfigurator-core==0.12.0", "aiconfigurator_core");
    for version in ["0.19.0", "0.18.0"] {
        let rel = format!("systems/data/h200_sxm/vllm/{version}/custom_allreduce_perf.parquet");
        copy(&legacy_wheel().join(&rel), &old.join(&rel));
    }
    let rel = "systems/data/h200_sxm/comm/vllm/0.19.0/custom_allreduce_perf.parquet";
    copy(&core_wheel().join(rel), &new.join(rel));
    (old.parent().expect("release dir").to_path_buf(), new.parent().expect("release dir").to_path_buf())
}

#[tokio::test]
async fn newer_release_wins_whatever_the_mount_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (old, new) = two_release_tree(tmp.path());
    for mounts in [vec![old.clone(), new.clone()], vec![new.clone(), old.clone()], vec![tmp.path().to_path_buf()]] {
        let ctx = SessionBuilder::open(&mounts).expect("mount").build();
        let served = single_str(
            &ctx,
            "SELECT release FROM aic.meta.databases WHERE db = 'h200_sxm/vllm/0.19.0' AND \"table\" = 'custom_allreduce'",
        )
        .await;
        assert_eq!(served, "aiconfigurator-core==0.12.0", "mounts {mounts:?}");
        // The rows are the core file's: its first latency differs from 0.10.0's (0.004426560103893281).
        let batches = query(
            &ctx,
            "SELECT latency FROM aic.perf.custom_allreduce WHERE system = 'h200_sxm' AND version = '0.19.0' LIMIT 1",
        )
        .await
        .expect("scan");
        let latency = batches[0].column(0).as_any().downcast_ref::<Float64Array>().expect("f64").value(0);
        assert_eq!(latency, 0.004383040070533752);
        // A version only the old release has is still served, from the legacy layout.
        let layout = single_str(
            &ctx,
            "SELECT layout || ' ' || release FROM aic.meta.databases WHERE db = 'h200_sxm/vllm/0.18.0'",
        )
        .await;
        assert_eq!(layout, "legacy aiconfigurator==0.10.0");
        assert_eq!(single_i64(&ctx, "SELECT count(*) FROM aic.meta.databases").await, 2);
    }
}

#[tokio::test]
async fn opening_and_listing_read_no_parquet_file() {
    let tree = Arc::new(DataTree::open(&[common::data_dir()]).expect("mount"));
    let ctx = SessionBuilder::with_tree(Arc::clone(&tree)).build();
    query(&ctx, "SHOW TABLES").await.expect("show tables");
    query(&ctx, "SELECT count(*) FROM aic.meta.databases").await.expect("databases");
    assert_eq!(tree.parquet_opens(), 0, "catalog open / SHOW TABLES / meta.databases opened parquet files");
    let n = single_i64(
        &ctx,
        "SELECT count(*) FROM aic.perf.gemm WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0'",
    )
    .await;
    assert_eq!(n, 101004);
    let gemm_files = tree.perf_files().iter().filter(|f| f.table == "gemm").count();
    // Resolving the table reads each gemm footer once; the scan opens the one selected file.
    assert_eq!(tree.parquet_opens(), gemm_files + 1);
}

#[tokio::test]
async fn truncated_parquet_names_the_file_and_spares_the_rest() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = release(tmp.path(), "mine", "aiconfigurator==0.10.0", "aiconfigurator");
    let good = "systems/data/h200_sxm/vllm/0.19.0/custom_allreduce_perf.parquet";
    copy(&legacy_wheel().join(good), &root.join(good));
    let gemm = "systems/data/h200_sxm/vllm/0.19.0/gemm_perf.parquet";
    copy(&legacy_wheel().join(gemm), &root.join(gemm));
    let bytes =
        fs::read(legacy_wheel().join("systems/data/gb200/vllm/0.19.0/custom_allreduce_perf.parquet")).expect("read");
    let bad = root.join("systems/data/gb200/vllm/0.19.0/custom_allreduce_perf.parquet");
    fs::create_dir_all(bad.parent().expect("parent")).expect("mkdir");
    fs::write(&bad, &bytes[..bytes.len() / 2]).expect("write truncated copy");

    let ctx = SessionBuilder::open(&[tmp.path()]).expect("mount").build();
    assert_eq!(single_i64(&ctx, "SELECT count(*) FROM aic.perf.custom_allreduce WHERE system = 'h200_sxm'").await, 138);
    let err = query(&ctx, "SELECT count(*) FROM aic.perf.custom_allreduce").await.expect_err("scan of the bad file");
    let msg = err.to_string();
    assert!(msg.contains(&bad.display().to_string()), "error does not name the file: {msg}");
    assert!(msg.contains("parquet"), "error does not say what is wrong: {msg}");
    assert_eq!(single_i64(&ctx, "SELECT count(*) FROM aic.perf.gemm").await, 101004);
}

#[tokio::test]
async fn system_yaml_missing_a_field_names_file_and_field() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = release(tmp.path(), "mine", "aiconfigurator==0.10.0", "aiconfigurator");
    let rel = "systems/data/h200_sxm/vllm/0.19.0/custom_allreduce_perf.parquet";
    copy(&legacy_wheel().join(rel), &root.join(rel));
    copy(&legacy_wheel().join("systems/h200_sxm.yaml"), &root.join("systems/h200_sxm.yaml"));
    let text = fs::read_to_string(legacy_wheel().join("systems/gb200.yaml")).expect("read yaml");
    let broken: String =
        text.lines().filter(|l| !l.trim_start().starts_with("mem_bw:")).map(|l| format!("{l}\n")).collect();
    let broken_path = root.join("systems/gb200.yaml");
    fs::write(&broken_path, broken).expect("write yaml");

    let ctx = SessionBuilder::open(&[tmp.path()]).expect("mount").build();
    let err = query(&ctx, "SELECT * FROM aic.meta.systems").await.expect_err("broken yaml");
    let msg = err.to_string();
    assert!(msg.contains(&broken_path.display().to_string()), "error does not name the file: {msg}");
    assert!(msg.contains("gpu.mem_bw"), "error does not name the field: {msg}");
    // A filter that rules the broken document out does not read it.
    let batches = query(&ctx, "SELECT mem_bw FROM aic.meta.systems WHERE system = 'h200_sxm'").await.expect("h200");
    let mem_bw = batches[0].column(0).as_any().downcast_ref::<Float64Array>().expect("f64").value(0);
    assert_eq!(mem_bw, 4.8e12);
    assert_eq!(single_i64(&ctx, "SELECT count(*) FROM aic.perf.custom_allreduce").await, 138);
}

#[tokio::test]
async fn corrupt_model_config_names_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = release(tmp.path(), "mine", "aiconfigurator==0.10.0", "aiconfigurator");
    let rel = "systems/data/h200_sxm/vllm/0.19.0/custom_allreduce_perf.parquet";
    copy(&legacy_wheel().join(rel), &root.join(rel));
    let good = "model_configs/Qwen--Qwen3-32B-FP8_config.json";
    copy(&legacy_wheel().join(good), &root.join(good));
    let bad = root.join("model_configs/Org--Broken_config.json");
    fs::write(&bad, "{\"num_hidden_layers\": ").expect("write json");

    let ctx = SessionBuilder::open(&[tmp.path()]).expect("mount").build();
    let msg = query(&ctx, "SELECT * FROM aic.meta.models").await.expect_err("broken json").to_string();
    assert!(msg.contains(&bad.display().to_string()) && msg.contains("JSON"), "{msg}");
    let layers =
        single_i64(&ctx, "SELECT num_hidden_layers FROM aic.meta.models WHERE model = 'Qwen/Qwen3-32B-FP8'").await;
    assert_eq!(layers, 64);
}

#[test]
fn unknown_data_path_is_named() {
    let err = SessionBuilder::open(&["/no/such/aicsql-data"]).expect_err("missing dir");
    assert!(err.to_string().contains("/no/such/aicsql-data"), "{err}");
    let empty = tempfile::tempdir().expect("tempdir");
    let err = SessionBuilder::open(&[empty.path()]).expect_err("empty dir");
    let msg = err.to_string();
    assert!(msg.contains(&empty.path().display().to_string()) && msg.contains("no aiconfigurator data"), "{msg}");
}

#[tokio::test]
async fn superset_schema_fills_missing_columns_with_null() {
    let ctx = SessionBuilder::with_tree(common::tree()).build();
    // custom_allreduce files name their last column either `backend` (exposed
    // as `file_backend`, the path owns `backend`) or `implementation`.
    let batches = query(
        &ctx,
        "SELECT count(*) FILTER (WHERE file_backend IS NOT NULL AND implementation IS NULL), \
                count(*) FILTER (WHERE implementation IS NOT NULL AND file_backend IS NULL) \
         FROM aic.perf.custom_allreduce",
    )
    .await
    .expect("scan");
    let a = batches[0].column(0).as_any().downcast_ref::<Int64Array>().expect("i64").value(0);
    let b = batches[0].column(1).as_any().downcast_ref::<Int64Array>().expect("i64").value(0);
    assert!(a > 0 && b > 0, "both column variants should be present: {a} {b}");
    assert_eq!(batches[0].column(0).null_count(), 0);
}

/// `SessionBuilder::mount_in` takes URLs as the shell's `--data` does: a
/// tree served over HTTP (with its manifest) beside a local one, the remote
/// one mirrored into the given cache, both merged into one catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_builder_mounts_urls_and_directories_together() {
    let served = tempfile::tempdir().expect("tempdir");
    let tree = served.path().join("aic");
    common::copy_published_db(&tree, "vllm/0.19.0");
    aicsql_remote::write_manifest(&tree).expect("manifest");
    let server = servers::HttpServer::start(served.path());
    let local = tempfile::tempdir().expect("tempdir");
    common::copy_published_db(local.path(), "sglang/0.5.10");

    let cache = tempfile::tempdir().expect("tempdir");
    let mut lines = Vec::new();
    let mut log = |line: &str| lines.push(line.to_string());
    let roots = [server.url("aic"), format!("file://{}", local.path().display())];
    let builder = SessionBuilder::mount_in(cache.path(), &roots, &[], &mut log).await.expect("mount");
    assert!(lines.iter().any(|l| l.starts_with(&format!("{}/: ", server.url("aic")))), "{lines:?}");
    let ctx = builder.build();
    let batches = ctx
        .sql("SELECT backend || '/' || version, count(*) FROM aic.perf.gemm WHERE system = 'h200_sxm' GROUP BY 1 ORDER BY 1")
        .await
        .expect("plan")
        .collect()
        .await
        .expect("scan");
    let dbs = batches[0].column(0).as_any().downcast_ref::<StringArray>().expect("db");
    let counts = batches[0].column(1).as_any().downcast_ref::<Int64Array>().expect("count");
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2, "one database from each root");
    assert_eq!((dbs.value(0), dbs.value(1)), ("sglang/0.5.10", "vllm/0.19.0"));
    assert_eq!(counts.value(1), 101_004);

    let err =
        SessionBuilder::mount_in(cache.path(), &["s3://bucket/aic"], &[("region".into(), "x".into())], &mut |_| {})
            .await
            .expect_err("an option without its namespace");
    assert!(err.to_string().contains("aws.region"), "{err}");
}

/// How far the estimates are from measured hardware, as the spec's own
/// accuracy report (`tools/accuracy_tracking/run_silicon.py`) says it:
/// `queries/accuracy/silicon_refs.sql` over `aic.meta.silicon_refs` against
/// the report the spec wrote on the same data
/// (`silicon_accuracy_goldens.parquet`, `scripts/spec_silicon.py`). Every
/// point the spec prices is priced with the same version and the same TTFT
/// and TPOT to the bit, its relative errors are the report's (6 decimals);
/// every point the spec cannot price has the spec's error class as its
/// status. The report has the spec's columns, one row per point by id; the
/// summary one row per backend and system.
#[tokio::test]
async fn the_accuracy_query_is_the_specs_report() {
    let ctx = SessionBuilder::with_tree(common::tree()).build();
    let golden = common::goldens_dir().join("silicon_accuracy_goldens.parquet");
    ctx.register_parquet("spec_report", golden.to_str().expect("utf-8 path"), Default::default())
        .await
        .expect("the golden report reads");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries/accuracy/silicon_refs.sql");
    let sql = fs::read_to_string(&file).expect("the query reads");
    let results = aicsql::run_statements(&ctx, &sql).await.unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert_eq!(results.len(), 3, "the table, the report, the summary");
    let compare = "SELECT count(*) AS points,
                count(*) FILTER (WHERE s.status = 'OK' AND o.status = 'OK'
                                 AND o.predicted_ttft_ms = s.ttft AND o.predicted_tpot_ms = s.tpot
                                 AND o.predicted_with_version = s.predicted_with_version
                                 AND abs(o.ttft_rel_err - CAST(nullif(s.ttft_rel_err, '') AS DOUBLE)) <= 5e-7
                                 AND abs(o.tpot_rel_err - CAST(nullif(s.tpot_rel_err, '') AS DOUBLE)) <= 5e-7) AS equal,
                count(*) FILTER (WHERE s.status <> 'OK' AND o.status = s.status
                                 AND o.predicted_ttft_ms IS NULL AND o.predicted_with_version IS NULL) AS same_failures,
                count(*) FILTER (WHERE s.status = 'OK') AS spec_ok
         FROM report o JOIN spec_report s ON s.id = o.id";
    let report = datafusion::datasource::MemTable::try_new(results[1][0].schema(), vec![results[1].clone()])
        .expect("the report as a table");
    ctx.register_table("report", Arc::new(report)).expect("registers");
    let batches = query(&ctx, compare).await.expect("the comparison runs");
    let b = &batches[0];
    let n = |name: &str| {
        b.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<Int64Array>()).map(|a| a.value(0)).unwrap_or(-1)
    };
    assert_eq!(n("points"), 35, "every measurement, joined by id");
    assert_eq!(n("spec_ok"), 31, "the spec prices 31 of them on this data");
    assert_eq!(n("equal"), 31, "every point the spec prices, to the bit");
    assert_eq!(n("same_failures"), 4, "the spec's four failures fail here with its error class");
    // The report: exactly the spec's columns, ordered by id.
    let schema = results[1][0].schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "status",
            "predicted_ttft_ms",
            "predicted_tpot_ms",
            "silicon_ttft_ms",
            "silicon_tpot_ms",
            "ttft_rel_err",
            "tpot_rel_err",
            "predicted_with_version"
        ]
    );
    let ids: Vec<String> = results[1]
        .iter()
        .flat_map(|b| {
            let a = b.column(0).as_any().downcast_ref::<StringArray>().expect("id is text");
            (0..a.len()).map(|i| a.value(i).to_string()).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(ids.len(), 35);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ORDER BY id");
    // The summary against the spec's own report, aggregated the same way:
    // per (backend, system), the points, the priced ones and the mean and
    // worst absolute errors (the report's 6 decimals: within 5e-7).
    let summary = datafusion::datasource::MemTable::try_new(results[2][0].schema(), vec![results[2].clone()])
        .expect("the summary as a table");
    ctx.register_table("summary", Arc::new(summary)).expect("registers");
    let checked = query(
        &ctx,
        "WITH spec AS (
             SELECT r.backend, r.system, count(*) AS points, count(*) FILTER (WHERE s.status = 'OK') AS priced,
                    avg(abs(CAST(nullif(s.ttft_rel_err, '') AS DOUBLE))) AS ttft_mean,
                    max(abs(CAST(nullif(s.ttft_rel_err, '') AS DOUBLE))) AS ttft_worst,
                    avg(abs(CAST(nullif(s.tpot_rel_err, '') AS DOUBLE))) AS tpot_mean,
                    max(abs(CAST(nullif(s.tpot_rel_err, '') AS DOUBLE))) AS tpot_worst
             FROM spec_report s JOIN aic.meta.silicon_refs r ON r.id = s.id GROUP BY r.backend, r.system)
         SELECT count(*) AS pairs,
                count(*) FILTER (WHERE o.points = spec.points AND o.priced = spec.priced
                    AND coalesce(abs(o.mean_abs_ttft_err - spec.ttft_mean) <= 5e-7, spec.ttft_mean IS NULL)
                    AND coalesce(abs(o.worst_abs_ttft_err - spec.ttft_worst) <= 5e-7, spec.ttft_worst IS NULL)
                    AND coalesce(abs(o.mean_abs_tpot_err - spec.tpot_mean) <= 5e-7, spec.tpot_mean IS NULL)
                    AND coalesce(abs(o.worst_abs_tpot_err - spec.tpot_worst) <= 5e-7, spec.tpot_worst IS NULL)) AS equal,
                (SELECT count(*) FROM summary) AS rows
         FROM spec JOIN summary o ON o.backend = spec.backend AND o.system = spec.system",
    )
    .await
    .expect("the summary comparison runs");
    let c = &checked[0];
    let m = |i: usize| c.column(i).as_any().downcast_ref::<Int64Array>().map(|a| a.value(0)).unwrap_or(-1);
    assert_eq!((m(0), m(1), m(2)), (16, 16, 16), "16 (backend, system) pairs, each the spec's numbers");
}
