//! SQL-level throughput of `gemm_latency` per resolution path, against a
//! trivial expression over the same rows (`sum(m*n*k)`).
//!
//! Each path gets a table of >= 1M query shapes derived from the measured
//! grid of h200_sxm/vllm/0.19.0 fp8_block: stored points (exact), midpoints
//! between measured m at a site (curve), twice the largest measured m
//! (hold), and n + 1 (an (n, k) that is not a site: transfer).
//! Runs on one partition, so rows/s are per core.
//! Run: `cargo bench --bench sql_gemm` (the perf data must be fetched).

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use tokio::runtime::Runtime;

use aicsql::{DataTree, SessionBuilder, default_data_dir};

const ROWS: i64 = 1_048_576;

// One partition: the numbers are per core.
const SETUP: &str = "
SET datafusion.execution.target_partitions = 1;
CREATE TABLE pts AS SELECT DISTINCT m, n, k FROM aic.perf.gemm
  WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0' AND gemm_dtype = 'fp8_block';
CREATE TABLE shapes_exact AS SELECT m, n, k FROM pts;
CREATE TABLE shapes_curve AS SELECT (m + next_m) / 2 AS m, n, k FROM (
  SELECT m, n, k, lead(m) OVER (PARTITION BY n, k ORDER BY m) AS next_m FROM pts) WHERE next_m > m + 1;
CREATE TABLE shapes_hold AS SELECT 2 * max(m) AS m, n, k FROM pts GROUP BY n, k;
CREATE TABLE shapes_transfer AS SELECT m, n + 1 AS n, k FROM pts;
";

async fn run(ctx: &SessionContext, sql: &str) {
    let batches = ctx.sql(sql).await.expect("plan").collect().await.expect("run");
    std::hint::black_box(batches);
}

async fn count(ctx: &SessionContext, table: &str) -> i64 {
    let batches =
        ctx.sql(&format!("SELECT count(*) FROM {table}")).await.expect("plan").collect().await.expect("count");
    batches[0].column(0).as_any().downcast_ref::<datafusion::arrow::array::Int64Array>().expect("i64").value(0)
}

/// `q_<class>`: the class's shapes repeated to at least `ROWS` rows, in
/// full 8192-row batches (as a scan would deliver them).
async fn replicate(ctx: &SessionContext, class: &str) {
    let shapes =
        ctx.sql(&format!("SELECT m, n, k FROM shapes_{class}")).await.expect("plan").collect().await.expect("shapes");
    let schema = shapes[0].schema();
    let one = concat_batches(&schema, &shapes).expect("concat");
    let copies = (ROWS as usize).div_ceil(one.num_rows());
    let all = concat_batches(&schema, &vec![one; copies]).expect("concat");
    let batches: Vec<RecordBatch> =
        (0..all.num_rows()).step_by(8192).map(|o| all.slice(o, 8192.min(all.num_rows() - o))).collect();
    let table = MemTable::try_new(schema, vec![batches]).expect("table");
    ctx.register_table(format!("q_{class}"), Arc::new(table)).expect("register");
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new().expect("tokio");
    let tree = Arc::new(DataTree::open(&[default_data_dir()]).expect("run `aicsql data fetch` first"));
    let ctx = SessionBuilder::with_tree(tree).build();
    rt.block_on(async {
        for stmt in SETUP.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            run(&ctx, stmt).await;
        }
        for class in ["exact", "curve", "hold", "transfer"] {
            replicate(&ctx, class).await;
        }
        // Load the table once before timing.
        run(&ctx, "SELECT gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', 1, 1280, 5120)").await;
    });
    for class in ["exact", "curve", "hold", "transfer"] {
        let rows = rt.block_on(count(&ctx, &format!("q_{class}")));
        let mut group = c.benchmark_group(format!("sql/{class}"));
        group.sample_size(10).throughput(Throughput::Elements(rows as u64));
        group.bench_function("gemm_latency", |b| {
            b.iter(|| {
                rt.block_on(run(
                    &ctx,
                    &format!("SELECT sum(gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', m, n, k)) FROM q_{class}"),
                ))
            })
        });
        group.bench_function("sum_mnk", |b| {
            b.iter(|| rt.block_on(run(&ctx, &format!("SELECT sum(m * n * k) FROM q_{class}"))))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
