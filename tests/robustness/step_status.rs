//! `step_status` against `step_latency` on the same generated calls: a
//! priced step is 'priced' exactly where step_latency has a value, a miss is
//! 'miss: ...' exactly where step_latency is NULL for valid input, NULL in
//! gives NULL; an invalid call is never 'priced': it is 'refused: ...'
//! with a reason, or (a bad phase or shape, the query's own mistake)
//! an error naming the function.

use std::time::Instant;

use datafusion::arrow::array::{Array, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;

use aicsql::SessionBuilder;

use crate::entries;
use crate::harness::{
    self, BatchResult, Expect, Failures, Layout, Outcome, Pin, Rng, batch_query, register_input, run_batch, run_sql,
    runtime,
};
use crate::world::world;

/// `step_status` of each call of one batch (None: NULL), or the query's error.
fn statuses(
    rt: &tokio::runtime::Runtime,
    ctx: &datafusion::prelude::SessionContext,
    calls: &[harness::Call],
    layout: &Layout,
) -> Result<Vec<Option<String>>, String> {
    let (sql, batch) = batch_query("step_status", calls, layout);
    register_input(ctx, &batch);
    match run_sql(rt, ctx, &sql) {
        Outcome::Panic(m) => Err(format!("PANIC: {m}")),
        Outcome::Error(m) => Err(m),
        Outcome::Rows(batches) => {
            let mut out = vec![None; calls.len()];
            for b in &batches {
                let ids = b.column(0).as_any().downcast_ref::<Int64Array>().expect("id column");
                let text = cast(b.column(1), &DataType::Utf8).map_err(|e| e.to_string())?;
                let text = text.as_string::<i32>();
                for i in 0..b.num_rows() {
                    out[ids.value(i) as usize] = text.is_valid(i).then(|| text.value(i).to_string());
                }
            }
            Ok(out)
        }
    }
}

fn agree(calls: usize, seed: u64) {
    let w = world();
    let entry = entries::step_latency();
    let rt = runtime();
    let ctx = SessionBuilder::with_tree(crate::common::tree()).build();
    let mut rng = Rng::new(seed);
    let mut failures = Failures::default();
    let started = Instant::now();
    let (mut done, mut priced, mut missed, mut refused) = (0usize, 0usize, 0usize, 0usize);
    while done < calls && !failures.full() {
        let mut settings = (entry.settings)(w, &mut rng);
        settings.on_miss = "null".into();
        let arity = rng.below(entry.arities.len() as u64) as usize;
        let mut pin = if rng.one_in(2) { Pin::Choose } else { Pin::Off };
        let batch: Vec<harness::Call> = (0..entry.batch_rows.min(calls - done))
            .map(|_| (entry.call)(w, &mut rng, &settings, arity, &mut pin))
            .collect();
        let layout = Layout::random(&mut rng, entry.arities[arity], &batch);
        done += batch.len();
        let latencies = match run_batch(&rt, &ctx, "step_latency", &settings, &batch, &layout) {
            BatchResult::Values(v) => v,
            other => {
                failures.push(
                    "step_latency failed on valid calls",
                    format!("{} calls [{settings}]", batch.len()),
                    format!("{other:?}"),
                );
                continue;
            }
        };
        let status = match statuses(&rt, &ctx, &batch, &layout) {
            Ok(s) => s,
            Err(e) => {
                failures.push("step_status failed on valid calls", format!("{} calls [{settings}]", batch.len()), e);
                continue;
            }
        };
        for ((call, latency), status) in batch.iter().zip(&latencies).zip(&status) {
            let input = || format!("{} [{settings}]", call.render("step_status"));
            match (&call.expect, latency, status.as_deref()) {
                (Expect::Null, None, None) => {}
                (_, Some(_), Some("priced")) => priced += 1,
                (Expect::Answer, None, Some(s)) if s.starts_with("miss: perf data not available for op '") => {
                    missed += 1
                }
                (_, l, s) => failures.push(
                    "step_status disagrees with step_latency",
                    input(),
                    format!("step_latency {l:?}, step_status {s:?}"),
                ),
            }
        }
    }
    // Invalid calls, one at a time: never 'priced'.
    let mut settings = (entry.settings)(w, &mut rng);
    settings.on_miss = "null".into();
    for _ in 0..300 {
        let arity = rng.below(entry.arities.len() as u64) as usize;
        let bad = (entry.invalid)(w, &mut rng, &settings, arity);
        let Expect::Invalid(needles) = &bad.expect else { unreachable!("not an invalid call") };
        let input = format!("{} [{settings}]", bad.render("step_status"));
        if let Outcome::Error(e) | Outcome::Panic(e) = run_sql(&rt, &ctx, &settings.sql()) {
            panic!("settings {settings} were refused: {e}");
        }
        match statuses(&rt, &ctx, std::slice::from_ref(&bad), &Layout::columns(entry.arities[arity])) {
            Ok(s) => match s[0].as_deref() {
                // A status belongs to its row, which names the model and the
                // database: the reason need not repeat them, only say why.
                Some(r) if r.starts_with("refused: ") && r.len() > "refused: ".len() + 8 => refused += 1,
                other => failures.push(
                    "an invalid call is not refused with a reason",
                    input,
                    format!("{other:?} (bad: {needles:?})"),
                ),
            },
            Err(e) if e.starts_with("PANIC") => failures.push("panic on invalid input", input, e),
            Err(e) if !e.contains("step_status") => failures.push("error does not name the function", input, e),
            Err(_) => refused += 1,
        }
    }
    println!(
        "step_status: {done} calls agree with step_latency ({priced} priced, {missed} misses), 300 invalid refused, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    failures.assert_none("step_status vs step_latency");
    assert!(priced > done / 20 && missed > 0 && refused == 300, "{priced} priced, {missed} missed, {refused} refused");
}

#[test]
fn agrees_with_step_latency_on_generated_calls() {
    agree(harness::call_count(200_000), harness::seed(0x57a7_0001));
}

#[test]
#[ignore = "long fuzz: cargo test --test robustness -- --ignored"]
fn agrees_with_step_latency_long() {
    agree(harness::call_count(2_000_000), harness::seed(0x57a7_0002));
}
