//! SQL-level throughput of the serving estimates: `estimate_agg` and
//! `estimate_disagg` over a grid of 1,024 deployments (tp 1/2/4/8 x batch
//! 1..64 x four workloads) per query, one partition, tables loaded by a
//! warm-up query, so points/s are per core with the tables cached.
//! Run: `cargo bench --bench sql_serving` (the perf data must be fetched);
//! `--profile dev` reuses the test build.

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use datafusion::arrow::array::{Array, Int64Array};
use datafusion::prelude::SessionContext;
use tokio::runtime::Runtime;

use aicsql::{DataTree, SessionBuilder, default_data_dir};

/// (label, model, database, MoE): dense and MoE models on each backend.
const CASES: &[(&str, &str, &str, bool)] = &[
    ("LLAMA vllm", "meta-llama/Meta-Llama-3.1-8B", "h200_sxm/vllm/0.19.0", false),
    ("LLAMA fp8 sglang", "Qwen/Qwen3-32B-FP8", "h200_sxm/sglang/0.5.10", false),
    ("MOE trtllm", "Qwen/Qwen3-30B-A3B", "h200_sxm/trtllm/1.3.0rc10", true),
];

const POINTS: u64 = 1024;

const SETUP: &str = "
SET datafusion.execution.target_partitions = 1;
CREATE TABLE grid AS
SELECT t.tp, b.batch, w.isl, w.osl, w.prefix
FROM (VALUES (1), (2), (4), (8)) AS t(tp)
CROSS JOIN (SELECT value AS batch FROM generate_series(1, 64)) AS b
CROSS JOIN (VALUES (1024, 128, 0), (4000, 1000, 0), (256, 256, 128), (8192, 512, 0)) AS w(isl, osl, prefix)
ORDER BY tp, batch, isl
";

async fn run(ctx: &SessionContext, sql: &str) -> i64 {
    let batches = ctx.sql(sql).await.expect("plan").collect().await.expect("run");
    let priced = batches[0].column(0).as_any().downcast_ref::<Int64Array>().expect("count");
    if priced.is_valid(0) { priced.value(0) } else { 0 }
}

/// The grid's points with `shift` added to every isl: each iteration prices
/// points no earlier query priced (the functions keep priced passes).
fn agg(model: &str, db: &str, moe: bool, shift: u64) -> String {
    let moe = if moe { ", 1, NULL" } else { "" };
    let ctx = if moe.is_empty() { "" } else { ", NULL" };
    format!(
        "SELECT count(e['ttft_ms']) FROM (SELECT estimate_agg('{model}', '{db}', tp, batch, isl + {shift}, osl, prefix{ctx}{moe}) AS e FROM grid)"
    )
}

fn disagg(model: &str, db: &str, moe: bool, shift: u64) -> String {
    let moe = if moe { ", 1, NULL, 1, NULL" } else { "" };
    format!(
        "SELECT count(d['ttft_ms']) FROM (SELECT estimate_disagg('{model}', '{db}', tp, 1, 1, tp, batch, 1, isl + {shift}, osl, prefix{moe}) AS d FROM grid)"
    )
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new().expect("tokio");
    let tree = Arc::new(DataTree::open(&[default_data_dir()]).expect("run `aicsql data fetch` first"));
    let ctx = SessionBuilder::with_tree(tree).build();
    rt.block_on(async {
        for stmt in SETUP.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let _ = ctx.sql(stmt).await.expect("plan").collect().await.expect("setup");
        }
    });
    for (function, build) in [("estimate_agg", agg as fn(&str, &str, bool, u64) -> String), ("estimate_disagg", disagg)]
    {
        let mut group = c.benchmark_group(function);
        group.sample_size(10).throughput(Throughput::Elements(POINTS));
        for (label, model, db, moe) in CASES {
            // Loads the tables, and fails loudly if the case stops pricing.
            let priced = rt.block_on(run(&ctx, &build(model, db, *moe, 0)));
            assert!(priced > 0, "{function}: {model} on {db} prices nothing");
            let mut shift = 0;
            group.bench_function(format!("{label}: {model} on {db} ({priced} of {POINTS} priced)"), |b| {
                b.iter(|| {
                    shift += 1;
                    rt.block_on(run(&ctx, &build(model, db, *moe, shift)))
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
