//! Random deployments, valid and absurd, through the serving layer: no call
//! panics; a priced estimate is finite, positive where it must be and
//! self-consistent; a refusal is a miss, an OOM or an input error, never
//! "corrupt data" (the data is the published tree). Seeded and bounded.

mod common;

use aicsql_serving::{AggQuery, DisaggQuery, Parallel, Server, ServingError};
use aicsql_tables::{DataTree, StepError};
use common::data_dir;

#[path = "../../../tests/support/rng.rs"]
mod rng;
use rng::Rng;

/// Mostly realistic sizes, sometimes the extremes.
fn size(rng: &mut Rng, realistic: &[u32]) -> u32 {
    match rng.below(40) {
        0 => 0,
        1 => u32::MAX,
        2 => 1 + rng.below(1 << 24) as u32,
        _ => *rng.pick(realistic),
    }
}

const CASES: &[(&str, &str, &str, &str, bool)] = &[
    ("meta-llama/Meta-Llama-3.1-8B", "h200_sxm", "vllm", "0.19.0", false),
    ("Qwen/Qwen3-32B-FP8", "h200_sxm", "sglang", "0.5.10", false),
    ("Qwen/Qwen3-30B-A3B", "gb200", "sglang", "0.5.14", true),
    ("Qwen/Qwen3-30B-A3B", "h200_sxm", "trtllm", "1.3.0rc10", true),
    ("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", "0.5.14", true),
];

fn parallel(rng: &mut Rng, moe: bool) -> Parallel {
    let mut tp = *rng.pick(&[1, 1, 2, 4, 8, 8, 3, 0, 16]);
    let mut dp = *rng.pick(&[1, 1, 1, 1, 2, 4, 0]);
    let pp = *rng.pick(&[1, 1, 1, 1, 1, 2, 4, 2]);
    let cp = *rng.pick(&[1, 1, 1, 1, 1, 2, 4, 0]);
    // Context parallelism is priced at tp = dp = 1 (sglang): mostly draw that.
    if cp > 1 && rng.below(4) != 0 {
        (tp, dp) = (1, 1);
    }
    let (moe_tp, moe_ep) = if moe {
        match rng.below(4) {
            0 => (Some(1), None),
            1 => (None, Some(tp * dp * cp)),
            2 => (Some(*rng.pick(&[1, 2, 4])), Some(*rng.pick(&[1, 2, 4, 8]))),
            _ => (None, None),
        }
    } else {
        (None, None)
    };
    Parallel { tp, pp, dp, cp, moe_tp, moe_ep }
}

/// A refusal must be one of the classes a caller can act on.
fn refusal_is_classified(e: &ServingError, what: &str) {
    if let ServingError::Step(StepError::Data(d)) = e {
        panic!("{what}: reported as broken data: {d}");
    }
    assert!(!e.to_string().is_empty(), "{what}: empty error");
}

#[test]
fn random_deployments_never_panic_and_stay_consistent() {
    let dir = data_dir();
    let tree = DataTree::open(&[&dir]).unwrap_or_else(|e| panic!("perf data not found in {} ({e})", dir.display()));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut priced, mut refused) = (0usize, 0usize);
    for &(model, system, backend, version, moe) in CASES {
        let mut server = Server::new(&tree, model, system, backend, version, true)
            .unwrap_or_else(|e| panic!("{model} on {system}/{backend}/{version}: {e}"));
        for _ in 0..600 {
            let p = parallel(&mut rng, moe);
            let (batch, isl, osl) = (
                size(&mut rng, &[1, 2, 16, 64, 128]),
                size(&mut rng, &[128, 1024, 4000, 8192]),
                size(&mut rng, &[1, 2, 128, 1000]),
            );
            let prefix = if rng.below(3) == 0 { size(&mut rng, &[0, 64, 512, 1024]) } else { 0 };
            let ctx_tokens = if rng.below(3) == 0 { Some(size(&mut rng, &[256, 1024, 8192])) } else { None };
            let q = AggQuery { parallel: p, batch, isl, osl, prefix, ctx_tokens, kv_sizing: Default::default() };
            let what = format!("{model} on {backend}: {q:?}");
            match server.estimate_agg(&q) {
                Ok(e) => {
                    priced += 1;
                    assert!(e.ttft_ms.is_finite() && e.ttft_ms > 0.0, "{what}: ttft {}", e.ttft_ms);
                    assert!(e.tpot_ms.is_finite() && e.tpot_ms >= 0.0, "{what}: tpot {}", e.tpot_ms);
                    assert!(osl <= 1 || e.tpot_ms > 0.0, "{what}: tpot 0 with osl {osl}");
                    assert!(e.memory.total.is_finite() && e.memory.total > 0.0, "{what}: memory {:?}", e.memory);
                    let sum =
                        e.memory.weights + e.memory.activations + e.memory.kvcache + e.memory.nccl + e.memory.others;
                    assert!((sum - e.memory.total).abs() <= 1e-9 * e.memory.total, "{what}: memory parts {sum}");
                    assert!(e.tokens_per_s_per_gpu.is_finite() && e.tokens_per_s_per_gpu >= 0.0, "{what}");
                    assert_eq!(e.concurrency, u64::from(batch) * u64::from(p.dp) * u64::from(p.pp), "{what}");
                    assert_eq!(e.num_total_gpus, p.gpus(), "{what}");
                }
                Err(e) => {
                    refused += 1;
                    refusal_is_classified(&e, &what);
                }
            }
            let d = DisaggQuery {
                prefill: p,
                prefill_batch: size(&mut rng, &[1, 2, 8]),
                prefill_workers: size(&mut rng, &[1, 2, 3]),
                decode: parallel(&mut rng, moe),
                decode_batch: batch,
                decode_workers: size(&mut rng, &[1, 2]),
                isl,
                osl,
                prefix,
            };
            let what = format!("{model} on {backend}: {d:?}");
            match server.estimate_disagg(&d) {
                Ok(e) => {
                    priced += 1;
                    for (name, v) in
                        [("ttft", e.ttft_ms), ("request_latency", e.request_latency_ms), ("seq/s", e.seq_per_s)]
                    {
                        assert!(v.is_finite() && v >= 0.0, "{what}: {name} {v}");
                    }
                    // Every value is at the spec's 3 decimals.
                    assert_eq!(aicsql_tables::pymath::np_round(e.ttft_ms, 3), e.ttft_ms, "{what}");
                }
                Err(e) => {
                    refused += 1;
                    refusal_is_classified(&e, &what);
                }
            }
        }
    }
    println!("{priced} estimates priced, {refused} refused (all classified)");
    assert!(priced > 500 && refused > 1000, "the draw should both price and refuse: {priced} / {refused}");
}
