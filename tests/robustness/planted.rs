//! The harness can fail: scalar UDFs defined here, each broken in one way
//! (a panic, a NaN, NULL instead of an error, an error that does not name
//! the function) on one planted input, run through the same fuzz as the
//! real functions, must be reported as failures naming that input.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Float64Builder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::prelude::SessionContext;

use crate::harness::{Call, Expect, Failures, FuzzPlan, Kind, Pin, Rng, ScalarEntry, Settings, Val, fuzz_scalar};

/// The planted input: `m` of the broken call.
pub const PLANTED_M: i64 = 123_456_789;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Flaw {
    /// Panics when m is the planted value.
    Panic,
    /// Returns NaN when m is the planted value.
    NaN,
    /// Returns NULL for a negative m instead of an error.
    NullForInvalid,
    /// Errors for a negative m without naming itself.
    Anonymous,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Planted {
    name: String,
    flaw: Flaw,
    signature: Signature,
}

impl ScalarUDFImpl for Planted {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        Ok(arg_types.iter().map(|t| if t.is_integer() || t.is_null() { DataType::Int64 } else { t.clone() }).collect())
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let m = cast(&arrays[2], &DataType::Int64)?;
        let m = m.as_primitive::<Int64Type>();
        let mut out = Float64Builder::with_capacity(args.number_rows);
        for i in 0..args.number_rows {
            if arrays.iter().any(|a| a.is_null(i)) {
                out.append_null();
                continue;
            }
            let v = m.value(i);
            if v < 0 {
                match self.flaw {
                    Flaw::NullForInvalid => {
                        out.append_null();
                        continue;
                    }
                    Flaw::Anonymous => return exec_err!("m = {v} is out of range"),
                    _ => return exec_err!("{}: m = {v} is out of range", self.name),
                }
            }
            if v == PLANTED_M {
                match self.flaw {
                    Flaw::Panic => panic!("planted panic at m = {v}"),
                    Flaw::NaN => {
                        out.append_value(f64::NAN);
                        continue;
                    }
                    _ => {}
                }
            }
            out.append_value(1.0 + (v % 1000) as f64);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

const KINDS: &[Kind] = &[Kind::Text, Kind::Text, Kind::Int, Kind::Int, Kind::Int];

fn settings(_: &(), _: &mut Rng) -> Settings {
    Settings::default()
}

/// Valid calls; one in 5,000 has the planted m.
fn call(_: &(), rng: &mut Rng, _: &Settings, _: usize, _: &mut Pin) -> Call {
    let m = if rng.one_in(5000) { PLANTED_M } else { rng.range(0, 1 << 40) };
    Call {
        args: vec![Val::text("db"), Val::text("quant"), Val::int(m), Val::int(rng.range(1, 99)), Val::int(1)],
        expect: Expect::Answer,
    }
}

fn invalid(_: &(), rng: &mut Rng, _: &Settings, _: usize) -> Call {
    let m = -rng.range(1, 1 << 40);
    Call {
        args: vec![Val::text("db"), Val::text("quant"), Val::int(m), Val::int(1), Val::int(1)],
        expect: Expect::Invalid(vec![m.to_string()]),
    }
}

fn run(flaw: Flaw) -> Failures {
    let name = format!("planted_{flaw:?}").to_lowercase();
    let ctx = SessionContext::new_with_config(aicsql::SessionBuilder::default_config());
    ctx.register_udf(ScalarUDF::new_from_impl(Planted {
        name: name.clone(),
        flaw,
        signature: Signature::user_defined(Volatility::Immutable),
    }));
    let entry = ScalarEntry {
        name: Box::leak(name.into_boxed_str()),
        arities: &[KINDS],
        settings,
        call,
        invalid,
        check: crate::entries::positive_finite,
        batch_rows: 20_000,
    };
    let plan = FuzzPlan { seed: 0x051a_77ed, calls: 100_000, invalid_batches: 20, on_miss_error_every: 0 };
    let (_, failures) = fuzz_scalar(&entry, &(), &ctx, &plan);
    failures
}

fn reported(failures: &Failures, what: &str, needle: &str) -> bool {
    failures.list.iter().any(|f| f.what.contains(what) && f.input.contains(needle))
}

#[test]
fn a_planted_panic_is_reported_with_its_input() {
    let failures = run(Flaw::Panic);
    assert!(
        reported(&failures, "a valid or NULL call failed", &PLANTED_M.to_string())
            && failures.list.iter().any(|f| f.detail.contains("PANIC") && f.detail.contains("planted panic")),
        "the planted panic was not reported with its input: {failures:#?}"
    );
}

#[test]
fn a_planted_nan_is_reported_with_its_input() {
    let failures = run(Flaw::NaN);
    assert!(reported(&failures, "breaks the invariant", &PLANTED_M.to_string()), "{failures:#?}");
}

#[test]
fn a_planted_null_for_invalid_input_is_reported() {
    let failures = run(Flaw::NullForInvalid);
    assert!(reported(&failures, "invalid input gave no error", "-"), "{failures:#?}");
}

#[test]
fn a_planted_anonymous_error_is_reported() {
    let failures = run(Flaw::Anonymous);
    assert!(reported(&failures, "does not name the function", "-"), "{failures:#?}");
}
