//! Throughput of `StepModel::latency` (the static engine step the serving
//! layer and the search live on), on the spec's worked example: Qwen3-32B-FP8
//! on h200_sxm/vllm/0.19.0 at tp 8 (docs/spec section 12), and the
//! Qwen3-30B-A3B MoE on the same database at moe_ep 8.
//! `cargo bench -p aicsql-tables --bench step` (data from `$AICSQL_DATA` or
//! `~/.cache/aicsql`). One thread: the numbers are per core. Each iteration
//! prices a grid of distinct shapes (batch x isl), op lists built once, so
//! what is measured is the per-step work: the op evaluations and lookups.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput};

use aicsql_tables::{DataTree, Phase, StepModel, StepShape};

fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA").unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache/aicsql"))
}

/// 16 batches x 16 input lengths; osl 128 (4 decode samples at stride 32).
fn grid(tp: u32, moe_ep: Option<u32>) -> Vec<StepShape> {
    let batches = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];
    let isls = [128, 200, 256, 384, 512, 700, 1024, 1500, 2048, 3000, 4096, 5000, 6144, 7000, 8192, 10000];
    let mut out = Vec::with_capacity(batches.len() * isls.len());
    for &batch in &batches {
        for &isl in &isls {
            out.push(StepShape { tp, pp: 1, dp: 1, cp: 1, batch, isl, osl: 128, moe_tp: moe_ep.map(|_| 1), moe_ep });
        }
    }
    out
}

fn main() {
    let tree = match DataTree::open(&[data_dir()]) {
        Ok(tree) => tree,
        Err(e) => {
            eprintln!("no perf data ({e}); run `cargo run -- data fetch` first");
            return;
        }
    };
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("step");
    for (model, tp, moe_ep) in [("Qwen/Qwen3-32B-FP8", 8, None), ("Qwen/Qwen3-30B-A3B", 8, Some(8))] {
        let mut step = match StepModel::new(&tree, model, "h200_sxm", "vllm", "0.19.0", true) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{model}: {e}");
                continue;
            }
        };
        let shapes = grid(tp, moe_ep);
        for phase in [Phase::Context, Phase::Generation] {
            // Warm: tables loaded, op lists built; count what prices.
            let priced = shapes.iter().filter(|s| step.latency(phase, s).is_ok()).count();
            group.throughput(Throughput::Elements(shapes.len() as u64));
            group.bench_function(format!("{} {model} ({priced} of {} priced)", phase.name(), shapes.len()), |b| {
                b.iter(|| {
                    let mut sum = 0.0;
                    for s in &shapes {
                        if let Ok(v) = step.latency(phase, black_box(s)) {
                            sum += v;
                        }
                    }
                    black_box(sum)
                })
            });
        }
    }
    group.finish();
    c.final_summary();
}
