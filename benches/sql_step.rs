//! SQL-level throughput of `step_latency`, one model of each family the
//! Rust path prices, on a database that has every table its step reads.
//!
//! Each case prices 4,096 configs (both phases x tp 1/2/4/8 x batch 1..64
//! x isl 128/1024/4096/16384 x osl 2/128) in one query, on one partition,
//! after a warm-up query that loads the tables, so configs/s are per core
//! with the tables cached in the process.
//! Run: `cargo bench --bench sql_step` (the perf data must be fetched);
//! `--profile dev` reuses the test build (the Rust engine is optimised in
//! both, DataFusion only in the bench profile).

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use datafusion::arrow::array::Array;
use datafusion::prelude::SessionContext;
use tokio::runtime::Runtime;

use aicsql::{DataTree, SessionBuilder, default_data_dir};

/// (family, model, database, MoE model): one per family, on a database
/// where the parity scan prices every config of the grid.
const CASES: &[(&str, &str, &str, bool)] = &[
    ("LLAMA", "meta-llama/Meta-Llama-3.1-8B", "h200_sxm/vllm/0.19.0", false),
    ("LLAMA fp8_static", "Qwen/Qwen3-32B-FP8-Static-PerTensor", "h200_sxm/trtllm/1.3.0rc20", false),
    ("QWEN3VL", "Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/vllm/0.19.0", false),
    ("MOE gpt-oss", "openai/gpt-oss-20b", "h200_sxm/vllm/0.19.0", true),
    ("QWEN3VL_MOE", "Qwen/Qwen3-VL-30B-A3B-Instruct", "h200_sxm/vllm/0.19.0", true),
    ("HYBRIDMOE", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "gb200/vllm/0.24.0", true),
    ("DEEPSEEK", "deepseek-ai/DeepSeek-V3", "h200_sxm/sglang/0.5.14", true),
    ("KIMIK25", "nvidia/Kimi-K2.5-NVFP4", "gb200/trtllm/1.3.0rc20", true),
];

const SETUP: &str = "
SET datafusion.execution.target_partitions = 1;
CREATE TABLE configs AS
SELECT p.phase, t.tp, b.batch, i.isl, o.osl
FROM (VALUES ('context'), ('generation')) AS p(phase)
CROSS JOIN (VALUES (1), (2), (4), (8)) AS t(tp)
CROSS JOIN (SELECT value AS batch FROM generate_series(1, 64)) AS b
CROSS JOIN (VALUES (128), (1024), (4096), (16384)) AS i(isl)
CROSS JOIN (VALUES (2), (128)) AS o(osl)
";

async fn run(ctx: &SessionContext, sql: &str) {
    let batches = ctx.sql(sql).await.expect("plan").collect().await.expect("run");
    std::hint::black_box(batches);
}

fn query(model: &str, db: &str, moe: bool) -> String {
    let moe_tp = if moe { "1" } else { "NULL" };
    format!("SELECT sum(step_latency('{model}', '{db}', phase, tp, batch, isl, osl, {moe_tp}, NULL)) FROM configs")
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new().expect("tokio");
    let tree = Arc::new(DataTree::open(&[default_data_dir()]).expect("run `aicsql data fetch` first"));
    let ctx = SessionBuilder::with_tree(tree).build();
    rt.block_on(async {
        for stmt in SETUP.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            run(&ctx, stmt).await;
        }
    });
    let mut group = c.benchmark_group("step_latency");
    group.sample_size(10).throughput(Throughput::Elements(4096));
    for (family, model, db, moe) in CASES {
        let sql = query(model, db, *moe);
        // Loads the tables (and fails loudly if the case no longer prices).
        rt.block_on(async {
            let batches = ctx.sql(&sql).await.expect("plan").collect().await.expect("warm-up");
            let total =
                batches[0].column(0).as_any().downcast_ref::<datafusion::arrow::array::Float64Array>().expect("f64");
            assert!(total.is_valid(0) && total.value(0) > 0.0, "{model} on {db} does not price");
        });
        group.bench_function(format!("{family}: {model} on {db}"), |b| b.iter(|| rt.block_on(run(&ctx, &sql))));
    }
    group.finish();
}

/// The engine bench's grid (`crates/tables/benches/step.rs`) in SQL: the
/// worked example (Qwen3-32B-FP8 on h200_sxm/vllm/0.19.0, tp 8), one phase per
/// query, batch 1..256 x 16 input lengths, osl 128: 4,096 configs, so the
/// two levels can be compared config for config.
const WORKED_GRID: &str = "
CREATE TABLE worked AS
SELECT b.batch, i.isl
FROM (SELECT value AS batch FROM generate_series(1, 256)) AS b
CROSS JOIN (VALUES (128), (200), (256), (384), (512), (700), (1024), (1500), (2048), (3000), (4096), (5000),
                   (6144), (7000), (8192), (10000)) AS i(isl)
";

fn bench_worked_example(c: &mut Criterion) {
    let rt = Runtime::new().expect("tokio");
    let tree = Arc::new(DataTree::open(&[default_data_dir()]).expect("run `aicsql data fetch` first"));
    let ctx = SessionBuilder::with_tree(tree).build();
    rt.block_on(async {
        run(&ctx, "SET datafusion.execution.target_partitions = 1").await;
        run(&ctx, WORKED_GRID).await;
    });
    let mut group = c.benchmark_group("step_latency worked example");
    group.sample_size(10).throughput(Throughput::Elements(4096));
    for phase in ["context", "generation"] {
        let sql = format!(
            "SELECT sum(step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', '{phase}', 8, batch, isl, 128)) \
             FROM worked"
        );
        rt.block_on(run(&ctx, &sql));
        group.bench_function(phase, |b| b.iter(|| rt.block_on(run(&ctx, &sql))));
    }
    group.finish();
}

criterion_group!(benches, bench, bench_worked_example);
criterion_main!(benches);
