//! Table functions (`gemm_trace`, `engine_step`) for a wall-clock budget:
//! one query per call (their arguments are constants), the same generated
//! inputs as their scalar twins with random literal types, and checks that
//! the rows agree with the twin bit for bit (`gemm_trace`'s result row is
//! `gemm_latency`, `engine_step`'s total row is `step_latency`).

use std::time::Instant;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::prelude::SessionContext;

use aicsql::SessionBuilder;

use crate::harness::{
    self, Call, Enc, Expect, Failures, INT_ENCODINGS, Layout, Outcome, Pin, Rng, ScalarEntry, Settings, TEXT_ENCODINGS,
    Val, literal, names, run_batch, run_sql, runtime,
};
use crate::world::{World, world};

/// Checks a call's rows against its scalar twin's value.
type RowsCheck = fn(&Call, &[RecordBatch], Option<f64>) -> Result<(), String>;

/// A table function and its scalar twin.
struct TableEntry {
    name: &'static str,
    twin: ScalarEntry<World>,
    check: RowsCheck,
}

/// The call's arguments as literals of random types that hold the values;
/// sometimes one argument of a type the function must refuse.
fn literals(rng: &mut Rng, call: &Call) -> (Vec<String>, Option<String>) {
    let mut wrong = None;
    let mut out: Vec<String> = call
        .args
        .iter()
        .map(|v| match v {
            Val::Text(_) => literal(v, *rng.pick(&TEXT_ENCODINGS)),
            Val::Int(x) => {
                let fits: Vec<Enc> = INT_ENCODINGS.iter().copied().filter(|e| x.is_none_or(|x| e.holds(x))).collect();
                literal(v, *rng.pick(&fits))
            }
        })
        .collect();
    if rng.one_in(25) {
        let at = rng.below(call.args.len() as u64) as usize;
        let lit = match &call.args[at] {
            Val::Text(_) => "arrow_cast(7, 'Int64')".to_string(),
            Val::Int(_) => rng
                .pick(&["arrow_cast(2.5, 'Float64')", "arrow_cast('18446744073709551615', 'UInt64')", "true"])
                .to_string(),
        };
        wrong = Some(lit.clone());
        out[at] = lit;
    }
    (out, wrong)
}

fn float_column(batches: &[RecordBatch], name: &str) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    for b in batches {
        let c = cast(b.column_by_name(name).expect("column"), &DataType::Float64).expect("float");
        let a = c.as_primitive::<Float64Type>();
        out.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))));
    }
    out
}

fn text_column(batches: &[RecordBatch], name: &str) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for b in batches {
        let c = cast(b.column_by_name(name).expect("column"), &DataType::Utf8).expect("text");
        let a = c.as_string::<i32>();
        out.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())));
    }
    out
}

fn finite_nonnegative(values: &[Option<f64>], column: &str, positive: bool) -> Result<(), String> {
    for (i, v) in values.iter().enumerate() {
        if let Some(v) = v
            && (!v.is_finite() || *v < 0.0 || (positive && *v == 0.0))
        {
            return Err(format!("row {}: {column} = {v:?}", i + 1));
        }
    }
    Ok(())
}

/// `gemm_trace`: numbers finite (latencies, sols, utils, weights > 0,
/// distances >= 0); the last row is `result` with `result_ms` equal to
/// `gemm_latency`'s bits, or `miss` and `gemm_latency` is NULL.
fn check_trace(_call: &Call, batches: &[RecordBatch], twin: Option<f64>) -> Result<(), String> {
    let stages = text_column(batches, "stage");
    let Some(Some(last)) = stages.last() else { return Err("no rows for a valid call".into()) };
    for (col, positive) in [
        ("site_latency_ms", true),
        ("site_sol_ms", true),
        ("util", true),
        ("weight", true),
        ("result_ms", true),
        ("distance", false),
    ] {
        finite_nonnegative(&float_column(batches, col), col, positive)?;
    }
    let result = *float_column(batches, "result_ms").last().expect("a row");
    match (last.as_str(), twin) {
        ("result", Some(t)) if result.map(f64::to_bits) == Some(t.to_bits()) => Ok(()),
        ("miss", None) if result.is_none() => Ok(()),
        (stage, t) => Err(format!("last row is '{stage}' with result_ms {result:?}, gemm_latency gives {t:?}")),
    }
}

/// `engine_step`: op latencies finite and >= 0; exactly one `step_total`
/// row, last; its `latency_ms` is `step_latency`'s bits (a miss: a `miss`
/// row, NULL totals, `step_latency` NULL).
fn check_step(call: &Call, batches: &[RecordBatch], twin: Option<f64>) -> Result<(), String> {
    let kinds = text_column(batches, "row_kind");
    let totals = kinds.iter().filter(|k| k.as_deref() == Some("step_total")).count();
    if totals != 1 || kinds.last().cloned().flatten().as_deref() != Some("step_total") {
        return Err(format!("{totals} step_total rows, last row {:?}", kinds.last()));
    }
    for col in ["latency_ms", "total_ms", "weighted_total_ms", "count"] {
        finite_nonnegative(&float_column(batches, col), col, false)?;
    }
    let total = *float_column(batches, "latency_ms").last().expect("a row");
    let missed = kinds.iter().any(|k| k.as_deref() == Some("miss"));
    match (missed, total, twin) {
        (false, Some(t), Some(s)) if t.to_bits() == s.to_bits() => crate::entries::step_check(call, t),
        (true, None, None) => Ok(()),
        (m, t, s) => Err(format!("miss row: {m}, total latency_ms {t:?}, step_latency gives {s:?}")),
    }
}

/// The twin's value for one call (canonical encodings), or its error.
fn twin_value(
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
    twin: &ScalarEntry<World>,
    settings: &Settings,
    call: &Call,
) -> Result<Option<f64>, String> {
    match run_batch(
        rt,
        ctx,
        twin.name,
        settings,
        std::slice::from_ref(call),
        &Layout::columns(&harness::kinds_of(call)),
    ) {
        harness::BatchResult::Values(v) => Ok(v[0]),
        harness::BatchResult::Error(e) => Err(e),
        harness::BatchResult::Panic(e) => Err(format!("PANIC: {e}")),
    }
}

fn fuzz_table(entry: &TableEntry, seed: u64, budget: std::time::Duration) {
    let w = world();
    let rt = runtime();
    // The budget is for calls: it starts once the shared world is loaded.
    let started = Instant::now();
    let ctx = SessionBuilder::with_tree(crate::common::tree()).build();
    let mut rng = Rng::new(seed);
    let mut failures = Failures::default();
    let (mut calls, mut answered, mut invalid, mut strict) = (0usize, 0usize, 0usize, 0usize);
    let name = entry.name;
    while (started.elapsed() < budget || calls < 50) && !failures.full() {
        let settings = w.settings(&mut rng);
        let arity = rng.below(entry.twin.arities.len() as u64) as usize;
        let call = if rng.one_in(3) {
            (entry.twin.invalid)(w, &mut rng, &settings, arity)
        } else {
            (entry.twin.call)(w, &mut rng, &settings, arity, &mut Pin::Off)
        };
        let (args, wrong) = literals(&mut rng, &call);
        let sql = format!("SELECT * FROM {name}({})", args.join(", "));
        let input = format!("{sql} [{settings}]");
        if let Outcome::Error(e) | Outcome::Panic(e) = run_sql(&rt, &ctx, &settings.sql()) {
            panic!("settings {settings} refused: {e}");
        }
        let outcome = run_sql(&rt, &ctx, &sql);
        calls += 1;
        if let Outcome::Panic(m) = &outcome {
            failures.push("panic", input, m.clone());
            continue;
        }
        if let Some(lit) = wrong {
            match outcome {
                Outcome::Error(m) if m.contains(name) => {}
                other => failures.push(
                    format!("a wrong argument type ({lit}) gave no error naming the function"),
                    input,
                    other.describe(),
                ),
            }
            continue;
        }
        match (&call.expect, outcome) {
            (Expect::Null, Outcome::Rows(b)) => {
                let n: usize = b.iter().map(RecordBatch::num_rows).sum();
                if n != 0 {
                    failures.push("NULL input gave rows", input, format!("{n} rows"));
                }
            }
            (Expect::Null, other) => failures.push("NULL input gave no empty table", input, other.describe()),
            (Expect::Invalid(needles), Outcome::Error(m)) => {
                invalid += 1;
                if !m.contains(name) {
                    failures.push("error does not name the function", input, m);
                } else if !needles.iter().any(|n| names(&m, n)) {
                    failures.push(format!("error does not name the bad value (any of {needles:?})"), input, m);
                }
            }
            (Expect::Invalid(_), other) => failures.push("invalid input gave no error", input, other.describe()),
            (Expect::Answer, Outcome::Error(m)) => failures.push("a valid call failed", input, m),
            (Expect::Answer, Outcome::Rows(b)) => {
                answered += 1;
                match twin_value(&rt, &ctx, &entry.twin, &settings, &call) {
                    Err(e) => failures.push(format!("the twin {} failed", entry.twin.name), input, e),
                    Ok(t) => {
                        if let Err(why) = (entry.check)(&call, &b, t) {
                            failures.push("rows break the invariant", input.clone(), why);
                        }
                        // engine_step under aic.on_miss = 'error': a miss is an error naming it.
                        if name == "engine_step" && rng.one_in(6) {
                            strict += 1;
                            let s = Settings { on_miss: "error".into(), ..settings.clone() };
                            let _ = run_sql(&rt, &ctx, &s.sql());
                            let got = run_sql(&rt, &ctx, &sql);
                            match (t, got) {
                                (None, Outcome::Error(m)) if m.contains(name) => {}
                                (Some(_), Outcome::Rows(b2))
                                    if float_column(&b2, "latency_ms") == float_column(&b, "latency_ms") => {}
                                (t, got) => failures.push(
                                    "aic.on_miss = 'error' breaks the step",
                                    format!("{sql} [{s}]"),
                                    format!("step_latency {t:?}: {}", got.describe()),
                                ),
                            }
                        }
                    }
                }
            }
            (Expect::Answer, Outcome::Panic(_)) => unreachable!(),
        }
    }
    println!(
        "fuzz {name}: {calls} calls in {:.1} s: {answered} answered (checked against {}), {invalid} invalid checked, {strict} under on_miss='error'",
        started.elapsed().as_secs_f64(),
        entry.twin.name
    );
    failures.assert_none(&format!("fuzz {name}"));
}

fn gemm_trace() -> TableEntry {
    TableEntry { name: "gemm_trace", twin: crate::entries::gemm_latency(), check: check_trace }
}

fn engine_step() -> TableEntry {
    TableEntry { name: "engine_step", twin: crate::entries::step_latency(), check: check_step }
}

#[test]
fn fuzz_gemm_trace() {
    fuzz_table(&gemm_trace(), harness::seed(0x7ace_0001), harness::budget(60.0));
}

#[test]
fn fuzz_engine_step() {
    fuzz_table(&engine_step(), harness::seed(0x57e9_0001), harness::budget(60.0));
}

#[test]
#[ignore = "long fuzz: cargo test --test robustness -- --ignored"]
fn fuzz_gemm_trace_long() {
    fuzz_table(&gemm_trace(), harness::seed(0x7ace_0002), harness::budget(300.0));
}

#[test]
#[ignore = "long fuzz: cargo test --test robustness -- --ignored"]
fn fuzz_engine_step_long() {
    fuzz_table(&engine_step(), harness::seed(0x57e9_0002), harness::budget(300.0));
}
