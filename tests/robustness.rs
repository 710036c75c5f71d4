//! Robustness of every SQL function on the real published data: fuzzing
//! (a million generated calls per scalar function through SQL, table
//! functions and settings for a wall-clock budget), a planted panicking UDF
//! that the harness must catch, the documented per-call limits, and
//! malformed data on temporary copies of real databases.
//!
//! Knobs (environment):
//! * `AICSQL_FUZZ_CALLS`   calls per scalar function (default 1,000,000)
//! * `AICSQL_FUZZ_SECONDS` budget per time-boxed fuzz (table functions, settings; default 20)
//! * `AICSQL_FUZZ_SEED`    hex, varies every generator's seed (a failure prints its input either way)
//! * `AICSQL_FUZZ_DATABASES` how many databases calls are drawn from (default 16, chosen by the
//!   seed around a fixed core; `all` for every one: cold loads of every GEMM table are most of
//!   a debug run's time)
//!
//! The long fuzz (10x the calls, 300 s per time-boxed function unless
//! `AICSQL_FUZZ_SECONDS` says otherwise, every database):
//! `AICSQL_FUZZ_DATABASES=all cargo test --test robustness -- --ignored`.

mod common;

#[path = "robustness/entries.rs"]
mod entries;
#[path = "robustness/harness.rs"]
mod harness;
#[path = "robustness/limits.rs"]
mod limits;
#[path = "robustness/malformed.rs"]
mod malformed;
#[path = "robustness/options.rs"]
mod options;
#[path = "robustness/planted.rs"]
mod planted;
#[path = "support/rng.rs"]
mod rng;
#[path = "robustness/settings.rs"]
mod settings;
#[path = "robustness/step_status.rs"]
mod step_status;
#[path = "robustness/table_functions.rs"]
mod table_functions;
#[path = "robustness/types.rs"]
mod types;
#[path = "robustness/world.rs"]
mod world;

use std::sync::Arc;
use std::time::Instant;

use aicsql::{DataTree, SessionBuilder};

use harness::{FuzzPlan, Layout, Pin, Rng, ScalarEntry, Settings, eight_threads_agree, fuzz_scalar, report};
use world::World;

/// The scalar functions under fuzz: `name => entry`. Each gets a fuzz test,
/// an argument-type test, an eight-thread test and a long (ignored) fuzz.
macro_rules! scalar_fuzz {
    ($($name:ident => $entry:expr, seed $seed:expr;)*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn fuzz_a_million_calls() {
                run_fuzz(&$entry, harness::call_count(1_000_000), harness::seed($seed));
            }

            #[test]
            #[ignore = "long fuzz: cargo test --test robustness -- --ignored"]
            fn fuzz_long() {
                run_fuzz(&$entry, harness::call_count(10_000_000), harness::seed($seed ^ 0x10_0000));
            }

            #[test]
            fn every_argument_type() {
                types::every_argument_type(&$entry, world::world(), harness::seed($seed ^ 0x7));
            }

            #[test]
            fn eight_threads_agree_on_a_cold_tree() {
                run_eight_threads(&$entry, harness::seed($seed ^ 0x8));
            }
        }
    )*};
}

scalar_fuzz! {
    gemm_latency => entries::gemm_latency(), seed 0x9e37_79b9_7f4a_7c15;
    gemm_sol => entries::gemm_sol(), seed 0xbf58_476d_1ce4_e5b9;
    step_latency => entries::step_latency(), seed 0x94d0_49bb_1331_11eb;
}

fn run_fuzz(entry: &ScalarEntry<World>, calls: usize, seed: u64) {
    let started = Instant::now();
    let world = world::world();
    if entry.name.starts_with("step") {
        println!("step probes refused (model, backend): {:#?}", world.step_refused.keys().collect::<Vec<_>>());
    }
    let ctx = SessionBuilder::with_tree(common::tree()).build();
    let plan = FuzzPlan { seed, calls, invalid_batches: (calls / 5000).clamp(100, 2000), on_miss_error_every: 4 };
    let (stats, failures) = fuzz_scalar(entry, world, &ctx, &plan);
    report(&format!("fuzz {}", entry.name), &stats, started);
    failures.assert_none(&format!("fuzz {}", entry.name));
    assert!(stats.calls >= calls, "ran {} of {calls} calls", stats.calls);
    assert!(stats.values > stats.calls / 20, "only {} of {} calls gave a value", stats.values, stats.calls);
}

/// Eight threads over one fresh tree (tables load while they race), one
/// batch, identical bits; the batch draws from a handful of databases so the
/// cold loads stay cheap.
fn run_eight_threads(entry: &ScalarEntry<World>, seed: u64) {
    let world = world::world();
    let tree = Arc::new(DataTree::open(&[common::data_dir()]).expect("mount"));
    let mut rng = Rng::new(seed);
    let settings = Settings::default();
    let rows = entry.batch_rows * 2;
    let wanted = ["h200_sxm/vllm/0.19.0", "gb200/vllm/0.19.0", "h200_sxm/sglang/0.5.10", "b200_sxm/trtllm/1.3.0rc10"];
    let mut calls = Vec::with_capacity(rows);
    while calls.len() < rows {
        let c = (entry.call)(world, &mut rng, &settings, entry.arities.len() - 1, &mut Pin::Off);
        if let harness::Val::Text(Some(db)) = &c.args[if entry.name.starts_with("step") { 1 } else { 0 }]
            && wanted.contains(&db.as_str())
        {
            calls.push(c);
        }
    }
    let failures =
        eight_threads_agree(entry.name, || SessionBuilder::with_tree(Arc::clone(&tree)).build(), &settings, &calls);
    failures.assert_none(&format!("{} on eight threads", entry.name));
    // The same batch on the shared (warm) tree gives the same bits too.
    let rt = harness::runtime();
    let warm = SessionBuilder::with_tree(common::tree()).build();
    let cold = SessionBuilder::with_tree(tree).build();
    let layout = Layout::columns(entry.arities[entry.arities.len() - 1]);
    let a = harness::run_batch(&rt, &warm, entry.name, &settings, &calls, &layout);
    let b = harness::run_batch(&rt, &cold, entry.name, &settings, &calls, &layout);
    match (a, b) {
        (harness::BatchResult::Values(a), harness::BatchResult::Values(b)) => {
            let bits = |v: &[Option<f64>]| v.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>();
            assert!(bits(&a) == bits(&b), "{}: a warm and a cold tree disagree", entry.name);
        }
        (a, b) => panic!("{}: warm {a:?} / cold {b:?}", entry.name),
    }
}
