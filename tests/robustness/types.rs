//! Every Arrow type an argument can arrive as: the three string types for
//! text, every integer type for integers (as columns and as literals), an
//! untyped NULL, and types that must be refused (floats with a fraction,
//! decimals, booleans, text for an integer, an integer for text, a UInt64
//! beyond i64). A type that is accepted must give the same bits as the
//! canonical Utf8 / Int64 call; a type that is refused must be refused with
//! an error naming the function.

use crate::harness::{
    BatchResult, Call, Enc, Expect, Failures, INT_ENCODINGS, Kind, Layout, Pin, Rng, ScalarEntry, Settings,
    TEXT_ENCODINGS, Val, literal, run_batch, run_sql, runtime,
};
use crate::world::World;
use aicsql::SessionBuilder;

fn bits(r: &BatchResult) -> Result<Vec<Option<u64>>, String> {
    match r {
        BatchResult::Values(v) => Ok(v.iter().map(|x| x.map(f64::to_bits)).collect()),
        BatchResult::Error(e) => Err(format!("error: {e}")),
        BatchResult::Panic(e) => Err(format!("PANIC: {e}")),
    }
}

pub fn every_argument_type(entry: &ScalarEntry<World>, world: &World, seed: u64) {
    let rt = runtime();
    let ctx = SessionBuilder::with_tree(crate::common::tree()).build();
    let mut rng = Rng::new(seed);
    let mut failures = Failures::default();
    let settings = Settings::default();
    let name = entry.name;
    let mut accepted_uint64 = None;
    for (a, kinds) in entry.arities.iter().enumerate() {
        let pool: Vec<Call> = (0..3000).map(|_| (entry.call)(world, &mut rng, &settings, a, &mut Pin::Off)).collect();
        for (p, kind) in kinds.iter().enumerate() {
            let encodings: &[Enc] = if *kind == Kind::Text { &TEXT_ENCODINGS } else { &INT_ENCODINGS };
            for &enc in encodings {
                // As a column: the calls whose value fits the type.
                let calls: Vec<Call> = pool
                    .iter()
                    .filter(|c| match &c.args[p] {
                        Val::Int(Some(v)) => enc.holds(*v),
                        _ => true,
                    })
                    .take(400)
                    .cloned()
                    .collect();
                if calls.is_empty() {
                    continue;
                }
                let canonical = Layout::columns(kinds);
                let mut layout = canonical.clone();
                layout.encodings[p] = enc;
                let expected = bits(&run_batch(&rt, &ctx, name, &settings, &calls, &canonical));
                let got = run_batch(&rt, &ctx, name, &settings, &calls, &layout);
                let input = format!(
                    "{name} argument {} as a {enc:?} column ({} calls, first {})",
                    p + 1,
                    calls.len(),
                    calls[0].render(name)
                );
                compare(&mut failures, &mut accepted_uint64, name, enc, &input, &expected, &got);
                // As a literal, on a few single calls.
                for c in calls.iter().take(3) {
                    let one = std::slice::from_ref(c);
                    let mut layout = canonical.clone();
                    layout.encodings[p] = enc;
                    layout.literal[p] = true;
                    let expected = bits(&run_batch(&rt, &ctx, name, &settings, one, &canonical));
                    let got = run_batch(&rt, &ctx, name, &settings, one, &layout);
                    let input = format!("{name} argument {} as a {enc:?} literal: {}", p + 1, c.render(name));
                    compare(&mut failures, &mut accepted_uint64, name, enc, &input, &expected, &got);
                }
            }
            // An untyped NULL literal: same as a NULL of the argument's own type.
            for c in pool.iter().filter(|c| c.expect == Expect::Answer).take(3) {
                let mut nulled = c.clone();
                nulled.args[p] = if *kind == Kind::Text { Val::Text(None) } else { Val::Int(None) };
                let expected = bits(&run_batch(
                    &rt,
                    &ctx,
                    name,
                    &settings,
                    std::slice::from_ref(&nulled),
                    &Layout::columns(kinds),
                ));
                let args: Vec<String> = c
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        if i == p {
                            "NULL".to_string()
                        } else {
                            literal(v, if matches!(v, Val::Text(_)) { Enc::Utf8 } else { Enc::Int64 })
                        }
                    })
                    .collect();
                let sql = format!("SELECT {name}({}) AS v", args.join(", "));
                let got = scalar_value(&rt, &ctx, &sql).map(|v| v.map(f64::to_bits));
                let want = expected.clone().map(|v| v[0]);
                let same = match (&got, &want) {
                    (Ok(a), Ok(b)) => a == b,
                    (Err(a), Err(b)) => !a.starts_with("PANIC") && !b.starts_with("PANIC"),
                    _ => false,
                };
                if !same {
                    failures.push("an untyped NULL differs from a typed NULL", sql, format!("{got:?} vs {want:?}"));
                }
            }
            // Types that are not the argument's kind.
            let Some(c) = pool.iter().find(|c| c.expect == Expect::Answer) else { continue };
            let value = match &c.args[p] {
                Val::Int(Some(v)) => *v,
                _ => 1,
            };
            let wrong: Vec<(String, bool)> = if *kind == Kind::Int {
                vec![
                    // (literal, may be accepted when it equals the integer)
                    (format!("arrow_cast({value}.5, 'Float64')"), false),
                    (format!("arrow_cast({value}.5, 'Float32')"), false),
                    (format!("arrow_cast({value}, 'Float64')"), true),
                    (format!("arrow_cast({value}, 'Decimal128(20, 0)')"), true),
                    (format!("arrow_cast({value}.5, 'Decimal128(20, 1)')"), false),
                    ("true".to_string(), false),
                    (format!("'{value}'"), true),
                    ("arrow_cast('18446744073709551615', 'UInt64')".to_string(), false),
                    ("arrow_cast('1970-01-02', 'Date32')".to_string(), false),
                ]
            } else {
                vec![
                    ("arrow_cast(1, 'Int64')".to_string(), false),
                    ("arrow_cast(1.5, 'Float64')".to_string(), false),
                    ("true".to_string(), false),
                    ("arrow_cast('1970-01-02', 'Date32')".to_string(), false),
                    ("arrow_cast(X'00', 'Binary')".to_string(), false),
                ]
            };
            let canonical =
                bits(&run_batch(&rt, &ctx, name, &settings, std::slice::from_ref(c), &Layout::columns(kinds)));
            for (lit, may_accept) in wrong {
                let args: Vec<String> = c
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        if i == p {
                            lit.clone()
                        } else {
                            literal(v, if matches!(v, Val::Text(_)) { Enc::Utf8 } else { Enc::Int64 })
                        }
                    })
                    .collect();
                let sql = format!("SELECT {name}({}) AS v", args.join(", "));
                match run_sql(&rt, &ctx, &sql) {
                    crate::harness::Outcome::Panic(m) => failures.push("panic on a wrong argument type", sql, m),
                    crate::harness::Outcome::Error(m) => {
                        if !m.contains(name) {
                            failures.push("a refused argument type: the error does not name the function", sql, m);
                        }
                    }
                    crate::harness::Outcome::Rows(_) => {
                        let got = scalar_value(&rt, &ctx, &sql);
                        let same = matches!((&got, &canonical), (Ok(g), Ok(c)) if g.map(f64::to_bits) == c[0]);
                        if !may_accept || !same {
                            failures.push(
                                "a wrong argument type was accepted",
                                sql,
                                format!(
                                    "{got:?} (the canonical call gives {:?})",
                                    canonical.as_ref().map(|c| c[0].map(f64::from_bits))
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
    println!(
        "{name}: UInt64 arguments are {}",
        match accepted_uint64 {
            Some(true) => "accepted",
            Some(false) => "refused (the error names the function)",
            None => "not tried",
        }
    );
    failures.assert_none(&format!("{name}: argument types"));
}

/// Compares a run with one argument re-encoded against the canonical run.
/// Every integer type but UInt64 (no implicit cast to BIGINT) and every
/// string type must be accepted with identical bits; UInt64 may be refused
/// with an error naming the function.
fn compare(
    failures: &mut Failures,
    accepted_uint64: &mut Option<bool>,
    name: &str,
    enc: Enc,
    input: &str,
    expected: &Result<Vec<Option<u64>>, String>,
    got: &BatchResult,
) {
    let got_bits = bits(got);
    match (&got_bits, enc) {
        (Err(e), Enc::UInt64) if !e.starts_with("PANIC") && e.contains(name) => {
            *accepted_uint64 = Some(false);
            return;
        }
        (Ok(_), Enc::UInt64) => *accepted_uint64 = Some(true),
        _ => {}
    }
    if &got_bits != expected {
        failures.push(
            format!("a {enc:?} argument differs from the canonical encoding"),
            input.to_string(),
            format!("{:?} vs {:?}", summary(&got_bits), summary(expected)),
        );
    }
}

fn summary(r: &Result<Vec<Option<u64>>, String>) -> String {
    match r {
        Ok(v) => format!(
            "{} values, first {:?}",
            v.len(),
            v.iter().take(3).map(|x| x.map(f64::from_bits)).collect::<Vec<_>>()
        ),
        Err(e) => e.clone(),
    }
}

fn scalar_value(
    rt: &tokio::runtime::Runtime,
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
) -> Result<Option<f64>, String> {
    use datafusion::arrow::array::{Array, Float64Array};
    match run_sql(rt, ctx, sql) {
        crate::harness::Outcome::Rows(b) => {
            let a = b[0].column(0).as_any().downcast_ref::<Float64Array>().ok_or("not Float64")?;
            Ok(a.is_valid(0).then(|| a.value(0)))
        }
        crate::harness::Outcome::Error(e) => Err(format!("error: {e}")),
        crate::harness::Outcome::Panic(e) => Err(format!("PANIC: {e}")),
    }
}
