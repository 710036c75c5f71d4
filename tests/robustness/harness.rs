//! The fuzz harness: generated calls of a SQL function, run through SQL in
//! Arrow batches (a million calls are a few dozen queries), every query under
//! `catch_unwind`, results checked against the invariants of the function,
//! and every failure reported with the input that caused it (a failing batch
//! is bisected down to the one call that fails).

#![allow(dead_code)]

use std::fmt::{self, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{
    Array, ArrayRef, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, LargeStringArray, StringArray,
    StringViewArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

// ---- randomness -----------------------------------------------------------------------------

pub use crate::rng::Rng;

// ---- runtime, panics --------------------------------------------------------------------------

/// A current-thread runtime: a panic anywhere in a query (the function, a
/// spawned task re-raised by DataFusion) unwinds out of `block_on`, where it
/// is caught.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// What a query did.
#[derive(Debug, Clone)]
pub enum Outcome {
    Panic(String),
    Error(String),
    Rows(Vec<RecordBatch>),
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Outcome::Panic(m) => format!("PANIC: {m}"),
            Outcome::Error(m) => format!("error: {m}"),
            Outcome::Rows(b) => format!("{} rows", b.iter().map(RecordBatch::num_rows).sum::<usize>()),
        }
    }
}

/// Runs `sql` (one or more statements separated by `;`, results of the last)
/// with panics caught.
pub fn run_sql(rt: &tokio::runtime::Runtime, ctx: &SessionContext, sql: &str) -> Outcome {
    let statements: Vec<&str> = sql.split(";\n").filter(|s| !s.trim().is_empty()).collect();
    let result = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async {
            let mut last = Vec::new();
            for s in &statements {
                last = ctx.sql(s).await?.collect().await?;
            }
            Ok::<_, datafusion::error::DataFusionError>(last)
        })
    }));
    match result {
        Err(payload) => Outcome::Panic(panic_message(payload)),
        Ok(Err(e)) => Outcome::Error(e.to_string()),
        Ok(Ok(batches)) => Outcome::Rows(batches),
    }
}

/// Runs `f` on a thread of its own, failing with `what` if it takes longer
/// than `limit`: a hang guard (not a performance assertion; the limit is
/// generous for a debug build), so a call that never returns fails the test
/// instead of stalling the suite.
pub fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("{what}: did not finish within {limit:?}"),
    }
}

// ---- argument values ----------------------------------------------------------------------------

/// The SQL kind of an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
}

/// One argument value (NULL = `None`).
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Text(Option<String>),
    Int(Option<i64>),
}

impl Val {
    pub fn text(s: impl Into<String>) -> Val {
        Val::Text(Some(s.into()))
    }

    pub fn int(v: i64) -> Val {
        Val::Int(Some(v))
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Val::Text(None) | Val::Int(None))
    }
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Text(Some(s)) => write!(f, "{s:?}"),
            Val::Int(Some(v)) => write!(f, "{v}"),
            _ => f.write_str("NULL"),
        }
    }
}

/// What a call must do under `aic.on_miss = 'null'`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// NULL in: NULL out.
    Null,
    /// Valid input: a value (checked by the function's entry) or NULL (a
    /// data miss); never an error.
    Answer,
    /// Invalid input: an error naming the function and at least one of these
    /// values (the bad ones).
    Invalid(Vec<String>),
}

/// One generated call.
#[derive(Debug, Clone)]
pub struct Call {
    pub args: Vec<Val>,
    pub expect: Expect,
}

impl Call {
    pub fn render(&self, function: &str) -> String {
        let args: Vec<String> = self.args.iter().map(Val::to_string).collect();
        format!("{function}({})", args.join(", "))
    }
}

/// Session settings of a batch (`SET aic.* = ...`).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub on_miss: String,
    pub shared_layer: String,
    pub backend: String,
    pub version: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            on_miss: "null".into(),
            shared_layer: "true".into(),
            backend: String::new(),
            version: "latest".into(),
        }
    }
}

impl Settings {
    pub fn sql(&self) -> String {
        format!(
            "SET aic.on_miss = {};\nSET aic.shared_layer = {};\nSET aic.backend = {};\nSET aic.version = {};\n",
            quote(&self.on_miss),
            quote(&self.shared_layer),
            quote(&self.backend),
            quote(&self.version)
        )
    }

    pub fn on_miss_error(&self) -> bool {
        self.on_miss.trim().eq_ignore_ascii_case("error")
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "aic.on_miss={:?} aic.shared_layer={:?} aic.backend={:?} aic.version={:?}",
            self.on_miss, self.shared_layer, self.backend, self.version
        )
    }
}

/// A SQL string literal.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

// ---- Arrow encodings ----------------------------------------------------------------------------

/// How an argument is encoded in the input table (or as a literal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enc {
    Utf8,
    LargeUtf8,
    Utf8View,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
}

pub const TEXT_ENCODINGS: [Enc; 3] = [Enc::Utf8, Enc::LargeUtf8, Enc::Utf8View];
pub const INT_ENCODINGS: [Enc; 8] =
    [Enc::Int8, Enc::Int16, Enc::Int32, Enc::Int64, Enc::UInt8, Enc::UInt16, Enc::UInt32, Enc::UInt64];

impl Enc {
    pub fn data_type(self) -> DataType {
        match self {
            Enc::Utf8 => DataType::Utf8,
            Enc::LargeUtf8 => DataType::LargeUtf8,
            Enc::Utf8View => DataType::Utf8View,
            Enc::Int8 => DataType::Int8,
            Enc::Int16 => DataType::Int16,
            Enc::Int32 => DataType::Int32,
            Enc::Int64 => DataType::Int64,
            Enc::UInt8 => DataType::UInt8,
            Enc::UInt16 => DataType::UInt16,
            Enc::UInt32 => DataType::UInt32,
            Enc::UInt64 => DataType::UInt64,
        }
    }

    /// The `arrow_cast` type name.
    pub fn arrow_name(self) -> String {
        self.data_type().to_string()
    }

    /// Whether `v` is representable.
    pub fn holds(self, v: i64) -> bool {
        match self {
            Enc::Int8 => i8::try_from(v).is_ok(),
            Enc::Int16 => i16::try_from(v).is_ok(),
            Enc::Int32 => i32::try_from(v).is_ok(),
            Enc::Int64 => true,
            Enc::UInt8 => u8::try_from(v).is_ok(),
            Enc::UInt16 => u16::try_from(v).is_ok(),
            Enc::UInt32 => u32::try_from(v).is_ok(),
            Enc::UInt64 => u64::try_from(v).is_ok(),
            _ => false,
        }
    }
}

/// The column of argument `position` over `calls`, encoded as `enc`.
pub fn column(calls: &[Call], position: usize, enc: Enc) -> ArrayRef {
    let texts = || {
        calls.iter().map(|c| match &c.args[position] {
            Val::Text(v) => v.as_deref(),
            Val::Int(_) => panic!("argument {position} is not text"),
        })
    };
    let ints = || {
        calls.iter().map(|c| match &c.args[position] {
            Val::Int(v) => *v,
            Val::Text(_) => panic!("argument {position} is not an integer"),
        })
    };
    macro_rules! ints_as {
        ($array:ty, $t:ty) => {
            Arc::new(<$array>::from(
                ints().map(|v| v.map(|v| <$t>::try_from(v).expect("value fits the encoding"))).collect::<Vec<_>>(),
            )) as ArrayRef
        };
    }
    match enc {
        Enc::Utf8 => Arc::new(StringArray::from(texts().collect::<Vec<_>>())),
        Enc::LargeUtf8 => Arc::new(LargeStringArray::from(texts().collect::<Vec<_>>())),
        Enc::Utf8View => Arc::new(StringViewArray::from(texts().collect::<Vec<_>>())),
        Enc::Int8 => ints_as!(Int8Array, i8),
        Enc::Int16 => ints_as!(Int16Array, i16),
        Enc::Int32 => ints_as!(Int32Array, i32),
        Enc::Int64 => Arc::new(Int64Array::from(ints().collect::<Vec<_>>())),
        Enc::UInt8 => ints_as!(UInt8Array, u8),
        Enc::UInt16 => ints_as!(UInt16Array, u16),
        Enc::UInt32 => ints_as!(UInt32Array, u32),
        Enc::UInt64 => ints_as!(UInt64Array, u64),
    }
}

/// A literal of `v` encoded as `enc` (`arrow_cast` so the type is exact).
pub fn literal(v: &Val, enc: Enc) -> String {
    match v {
        Val::Text(None) | Val::Int(None) => format!("arrow_cast(NULL, '{}')", enc.arrow_name()),
        Val::Text(Some(s)) => match enc {
            Enc::Utf8 => quote(s),
            other => format!("arrow_cast({}, '{}')", quote(s), other.arrow_name()),
        },
        // i64::MIN has no positive literal; cast its text.
        Val::Int(Some(i)) => format!("arrow_cast({}, '{}')", quote(&i.to_string()), enc.arrow_name()),
    }
}

/// How a batch's arguments reach the function: per position, a column of
/// the input table or a literal (when every call of the batch has the same
/// value there), with an encoding.
#[derive(Debug, Clone)]
pub struct Layout {
    pub encodings: Vec<Enc>,
    pub literal: Vec<bool>,
}

impl Layout {
    pub fn columns(kinds: &[Kind]) -> Layout {
        Layout {
            encodings: kinds.iter().map(|k| if *k == Kind::Text { Enc::Utf8 } else { Enc::Int64 }).collect(),
            literal: vec![false; kinds.len()],
        }
    }

    /// A random layout for `calls`: text encodings vary; a position where
    /// all calls agree becomes a literal half of the time.
    pub fn random(rng: &mut Rng, kinds: &[Kind], calls: &[Call]) -> Layout {
        let mut layout = Layout::columns(kinds);
        for (i, kind) in kinds.iter().enumerate() {
            if *kind == Kind::Text {
                layout.encodings[i] = *rng.pick(&TEXT_ENCODINGS);
            }
            let constant = calls.iter().all(|c| c.args[i] == calls[0].args[i]);
            layout.literal[i] = constant && rng.one_in(2);
        }
        layout
    }
}

/// The query over `calls` (registered as `fuzz_input` with an `id` column):
/// `SELECT id, f(...) AS v FROM fuzz_input`.
pub fn batch_query(function: &str, calls: &[Call], layout: &Layout) -> (String, RecordBatch) {
    let n = layout.encodings.len();
    let mut fields = vec![Field::new("id", DataType::Int64, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(0..calls.len() as i64))];
    let mut args = Vec::with_capacity(n);
    for i in 0..n {
        if layout.literal[i] {
            args.push(literal(&calls[0].args[i], layout.encodings[i]));
        } else {
            let name = format!("a{i}");
            fields.push(Field::new(&name, layout.encodings[i].data_type(), true));
            columns.push(column(calls, i, layout.encodings[i]));
            args.push(name);
        }
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("input batch");
    (format!("SELECT id, {function}({}) AS v FROM fuzz_input", args.join(", ")), batch)
}

/// Registers `batch` as `fuzz_input` (two partitions of 8,192-row batches,
/// so the function sees many batches), replacing any previous one.
pub fn register_input(ctx: &SessionContext, batch: &RecordBatch) {
    let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(), Vec::new()];
    let rows = batch.num_rows();
    let mut offset = 0;
    let mut i = 0;
    while offset < rows {
        let len = (rows - offset).min(8192);
        parts[i % 2].push(batch.slice(offset, len));
        offset += len;
        i += 1;
    }
    if rows == 0 {
        parts[0].push(batch.clone());
    }
    parts.retain(|p| !p.is_empty());
    let table = MemTable::try_new(batch.schema(), parts).expect("mem table");
    let _ = ctx.deregister_table("fuzz_input");
    ctx.register_table("fuzz_input", Arc::new(table)).expect("register fuzz_input");
}

/// Result of one batch: the function's value per call, in call order.
#[derive(Debug, Clone)]
pub enum BatchResult {
    Panic(String),
    Error(String),
    Values(Vec<Option<f64>>),
}

/// Runs one batch of calls under `settings`.
pub fn run_batch(
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
    function: &str,
    settings: &Settings,
    calls: &[Call],
    layout: &Layout,
) -> BatchResult {
    if let Outcome::Error(e) | Outcome::Panic(e) = run_sql(rt, ctx, &settings.sql()) {
        panic!("settings {settings} were refused: {e}");
    }
    let (sql, batch) = batch_query(function, calls, layout);
    register_input(ctx, &batch);
    match run_sql(rt, ctx, &sql) {
        Outcome::Panic(m) => BatchResult::Panic(m),
        Outcome::Error(m) => BatchResult::Error(m),
        Outcome::Rows(batches) => {
            let mut out = vec![None; calls.len()];
            let mut seen = 0;
            for b in &batches {
                let ids = b.column(0).as_any().downcast_ref::<Int64Array>().expect("id column");
                let Some(v) = b.column(1).as_any().downcast_ref::<Float64Array>() else {
                    return BatchResult::Error(format!(
                        "{function} returned {} instead of Float64",
                        b.column(1).data_type()
                    ));
                };
                for i in 0..b.num_rows() {
                    out[ids.value(i) as usize] = v.is_valid(i).then(|| v.value(i));
                    seen += 1;
                }
            }
            if seen != calls.len() {
                return BatchResult::Error(format!("{function} returned {seen} rows for {} calls", calls.len()));
            }
            BatchResult::Values(out)
        }
    }
}

// ---- failures --------------------------------------------------------------------------------------

/// One broken invariant, with what it takes to reproduce it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub what: String,
    pub input: String,
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n    input: {}\n    got:   {}", self.what, self.input, self.detail)
    }
}

/// Failures of a test run, capped (the first ones are what matters): at most
/// [`Failures::PER_KIND`] of each kind, so one frequent failure does not hide
/// the others.
#[derive(Debug, Default)]
pub struct Failures {
    pub list: Vec<Failure>,
    pub dropped: usize,
}

impl Failures {
    pub const CAP: usize = 40;
    pub const PER_KIND: usize = 5;

    pub fn push(&mut self, what: impl Into<String>, input: impl Into<String>, detail: impl Into<String>) {
        let what = what.into();
        let same = self.list.iter().filter(|f| f.what == what).count();
        if self.list.len() < Self::CAP && same < Self::PER_KIND {
            self.list.push(Failure { what, input: input.into(), detail: detail.into() });
        } else {
            self.dropped += 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn full(&self) -> bool {
        self.list.len() >= Self::CAP
    }

    /// Panics with every failure (the test's failure message).
    pub fn assert_none(&self, test: &str) {
        if self.list.is_empty() {
            return;
        }
        let mut msg = format!("{test}: {} failure(s)", self.list.len() + self.dropped);
        for (i, f) in self.list.iter().enumerate() {
            let _ = write!(msg, "\n[{}] {f}", i + 1);
        }
        if self.dropped > 0 {
            let _ = write!(msg, "\n... and {} more", self.dropped);
        }
        panic!("{msg}");
    }
}

/// Whether `message` names `value`: verbatim, or escaped as Rust's `{:?}`
/// would, or (for the empty string) as `''`.
pub fn names(message: &str, value: &str) -> bool {
    if value.is_empty() {
        return message.contains("''") || message.contains("\"\"");
    }
    message.contains(value) || message.contains(&value.escape_debug().to_string())
}

/// The first call of `calls` that fails on its own (panics, or errors), by
/// bisection; `None` if no single call fails alone.
pub fn culprit(
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
    function: &str,
    settings: &Settings,
    calls: &[Call],
) -> Option<(usize, BatchResult)> {
    let (mut lo, mut hi) = (0usize, calls.len());
    let mut last = None;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let slice = &calls[lo..mid];
        match run_batch(rt, ctx, function, settings, slice, &Layout::columns(&kinds_of(&slice[0]))) {
            r @ (BatchResult::Panic(_) | BatchResult::Error(_)) => {
                hi = mid;
                last = Some(r);
            }
            BatchResult::Values(_) => lo = mid,
        }
    }
    let single = &calls[lo..lo + 1];
    match run_batch(rt, ctx, function, settings, single, &Layout::columns(&kinds_of(&single[0]))) {
        r @ (BatchResult::Panic(_) | BatchResult::Error(_)) => Some((lo, r)),
        BatchResult::Values(_) => last.map(|r| (lo, r)),
    }
}

pub fn kinds_of(call: &Call) -> Vec<Kind> {
    call.args.iter().map(|a| if matches!(a, Val::Text(_)) { Kind::Text } else { Kind::Int }).collect()
}

// ---- the scalar-function fuzz ---------------------------------------------------------------------

/// A value is fine for this call, or why not.
pub type Check = fn(&Call, f64) -> Result<(), String>;

/// One scalar SQL function under fuzz: adding a function is one of these.
pub struct ScalarEntry<W: 'static> {
    pub name: &'static str,
    /// Argument kinds per accepted arity.
    pub arities: &'static [&'static [Kind]],
    /// Settings of one batch.
    pub settings: fn(&W, &mut Rng) -> Settings,
    /// A call with a valid or NULL outcome under those settings, for arity
    /// index `a`; text arguments follow the batch's [`Pin`].
    pub call: fn(&W, &mut Rng, &Settings, usize, &mut Pin) -> Call,
    /// A call that must be an error under those settings (one bad argument).
    pub invalid: fn(&W, &mut Rng, &Settings, usize) -> Call,
    /// The invariant on a non-NULL value.
    pub check: Check,
    /// Rows per batch.
    pub batch_rows: usize,
}

/// Counters of a fuzz run.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub calls: usize,
    pub queries: usize,
    pub values: usize,
    pub nulls: usize,
    pub errors_checked: usize,
    pub on_miss_error_batches: usize,
}

/// Checks one finished batch against the calls' expectations.
pub fn check_values(
    function: &str,
    check: Check,
    settings: &Settings,
    calls: &[Call],
    values: &[Option<f64>],
    stats: &mut Stats,
    failures: &mut Failures,
) {
    for (call, value) in calls.iter().zip(values) {
        match (&call.expect, value) {
            (Expect::Null, None) => stats.nulls += 1,
            (Expect::Null, Some(v)) => failures.push(
                "NULL input gave a value",
                format!("{} [{settings}]", call.render(function)),
                v.to_string(),
            ),
            (Expect::Answer, None) => stats.nulls += 1,
            (Expect::Answer, Some(v)) => {
                stats.values += 1;
                if let Err(why) = check(call, *v) {
                    failures.push(
                        format!("value breaks the invariant: {why}"),
                        format!("{} [{settings}]", call.render(function)),
                        format!("{v:?} (bits {:#x})", v.to_bits()),
                    );
                }
            }
            (Expect::Invalid(_), v) => failures.push(
                "invalid input gave no error",
                format!("{} [{settings}]", call.render(function)),
                format!("{v:?}"),
            ),
        }
    }
}

/// Checks the error of a batch holding exactly one invalid call.
pub fn check_invalid_error(
    function: &str,
    settings: &Settings,
    bad: &Call,
    result: &BatchResult,
    failures: &mut Failures,
) {
    let input = format!("{} [{settings}]", bad.render(function));
    let Expect::Invalid(needles) = &bad.expect else { unreachable!("not an invalid call") };
    match result {
        BatchResult::Panic(m) => failures.push("panic on invalid input", input, m.clone()),
        BatchResult::Values(v) => failures.push(
            "invalid input gave no error",
            input,
            format!("the batch succeeded; values near the call: {:?}", &v[..v.len().min(3)]),
        ),
        BatchResult::Error(m) => {
            if !m.contains(function) {
                failures.push("error does not name the function", input, m.clone());
            } else if !needles.iter().any(|n| names(m, n)) {
                failures.push(format!("error does not name the bad value (any of {needles:?})"), input, m.clone());
            }
        }
    }
}

/// The options of a scalar fuzz run.
pub struct FuzzPlan {
    pub seed: u64,
    /// Valid-or-NULL calls to run (the million).
    pub calls: usize,
    /// Batches that each hold one invalid call among valid ones.
    pub invalid_batches: usize,
    /// Every `n`th batch is also re-run (a sample of it) under `aic.on_miss = 'error'`.
    pub on_miss_error_every: usize,
}

/// Runs a scalar fuzz: batches of generated valid/NULL calls (each checked
/// value by value), batches with one planted invalid call (must fail naming
/// the function and the value), and samples re-run under
/// `aic.on_miss = 'error'` (a miss must become an error naming the function,
/// no miss must change no bit).
pub fn fuzz_scalar<W>(entry: &ScalarEntry<W>, world: &W, ctx: &SessionContext, plan: &FuzzPlan) -> (Stats, Failures) {
    let rt = runtime();
    let mut rng = Rng::new(plan.seed);
    let mut stats = Stats::default();
    let mut failures = Failures::default();
    let name = entry.name;
    let mut batch_index = 0usize;
    while stats.calls < plan.calls && !failures.full() {
        let settings = (entry.settings)(world, &mut rng);
        let arity = rng.below(entry.arities.len() as u64) as usize;
        let rows = entry.batch_rows.min(plan.calls - stats.calls).max(1);
        let mut pin = if rng.one_in(2) { Pin::Choose } else { Pin::Off };
        let calls: Vec<Call> = (0..rows).map(|_| (entry.call)(world, &mut rng, &settings, arity, &mut pin)).collect();
        let layout = Layout::random(&mut rng, entry.arities[arity], &calls);
        let t0 = Instant::now();
        let result = run_batch(&rt, ctx, name, &settings, &calls, &layout);
        if std::env::var_os("AICSQL_FUZZ_VERBOSE").is_some() {
            println!(
                "  batch {batch_index}: {} calls in {:.2} s [{settings}]",
                calls.len(),
                t0.elapsed().as_secs_f64()
            );
        }
        stats.queries += 1;
        stats.calls += calls.len();
        match result {
            BatchResult::Values(values) => {
                check_values(name, entry.check, &settings, &calls, &values, &mut stats, &mut failures);
                if plan.on_miss_error_every > 0 && batch_index.is_multiple_of(plan.on_miss_error_every) {
                    on_miss_error_sample(
                        &rt,
                        ctx,
                        entry,
                        &settings,
                        &calls,
                        &values,
                        &mut rng,
                        &mut stats,
                        &mut failures,
                    );
                }
            }
            BatchResult::Panic(m) | BatchResult::Error(m) => {
                // Find the call that fails alone and report it.
                match culprit(&rt, ctx, name, &settings, &calls) {
                    Some((i, r)) => failures.push(
                        "a valid or NULL call failed",
                        format!("{} [{settings}]", calls[i].render(name)),
                        match r {
                            BatchResult::Panic(m) => format!("PANIC: {m}"),
                            BatchResult::Error(m) => format!("error: {m}"),
                            BatchResult::Values(_) => unreachable!(),
                        },
                    ),
                    None => failures.push(
                        "a batch failed but no single call of it fails alone",
                        format!("{} calls, first {} [{settings}]", calls.len(), calls[0].render(name)),
                        m,
                    ),
                }
            }
        }
        batch_index += 1;
    }
    // One invalid call planted among valid ones.
    for _ in 0..plan.invalid_batches {
        if failures.full() {
            break;
        }
        let settings = (entry.settings)(world, &mut rng);
        let arity = rng.below(entry.arities.len() as u64) as usize;
        let rows = 1 + rng.below(64) as usize;
        let mut calls: Vec<Call> =
            (0..rows).map(|_| (entry.call)(world, &mut rng, &settings, arity, &mut Pin::Off)).collect();
        let bad = (entry.invalid)(world, &mut rng, &settings, arity);
        let at = rng.below(rows as u64 + 1) as usize;
        calls.insert(at, bad.clone());
        let layout = Layout::random(&mut rng, entry.arities[arity], &calls);
        let result = run_batch(&rt, ctx, name, &settings, &calls, &layout);
        stats.queries += 1;
        stats.errors_checked += 1;
        // A batch failing for a valid call would blame the wrong input: find out.
        if let BatchResult::Error(m) | BatchResult::Panic(m) = &result {
            let rest: Vec<Call> = calls.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, c)| c.clone()).collect();
            if let BatchResult::Error(e) | BatchResult::Panic(e) =
                run_batch(&rt, ctx, name, &settings, &rest, &Layout::columns(entry.arities[arity]))
            {
                if let Some((i, _)) = culprit(&rt, ctx, name, &settings, &rest) {
                    failures.push("a valid or NULL call failed", format!("{} [{settings}]", rest[i].render(name)), e);
                    continue;
                }
                let _ = m;
            }
        }
        check_invalid_error(name, &settings, &bad, &result, &mut failures);
    }
    (stats, failures)
}

/// Text arguments shared by every call of a batch (so literal layouts and
/// the per-batch resolution fast paths are exercised): the entry chooses
/// them at the first call (`Choose`) and reuses them after (`Use`).
#[derive(Debug, Clone, PartialEq)]
pub enum Pin {
    Off,
    Choose,
    Use(Vec<Val>),
}

impl Pin {
    /// The pinned value of text argument `i`, or a fresh one from `fresh`
    /// (remembered when choosing).
    pub fn text(&mut self, i: usize, fresh: impl FnOnce() -> Val) -> Val {
        match self {
            Pin::Off => fresh(),
            Pin::Use(v) => v[i].clone(),
            Pin::Choose => fresh(),
        }
    }
}

/// Re-runs up to 64 calls of a finished batch under `aic.on_miss = 'error'`:
/// if any of them was a miss (NULL from non-NULL input) the query must fail
/// naming the function; otherwise every bit must be unchanged.
#[allow(clippy::too_many_arguments)]
fn on_miss_error_sample<W>(
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
    entry: &ScalarEntry<W>,
    settings: &Settings,
    calls: &[Call],
    values: &[Option<f64>],
    rng: &mut Rng,
    stats: &mut Stats,
    failures: &mut Failures,
) {
    let n = calls.len().min(64);
    let start = rng.below((calls.len() - n + 1) as u64) as usize;
    let sample = &calls[start..start + n];
    let expected = &values[start..start + n];
    let misses: Vec<usize> = (0..n).filter(|&i| sample[i].expect == Expect::Answer && expected[i].is_none()).collect();
    let strict = Settings { on_miss: "error".into(), ..settings.clone() };
    let result = run_batch(rt, ctx, entry.name, &strict, sample, &Layout::columns(&kinds_of(&sample[0])));
    stats.queries += 1;
    stats.on_miss_error_batches += 1;
    match (misses.first(), result) {
        (_, BatchResult::Panic(m)) => failures.push(
            "panic under aic.on_miss = 'error'",
            format!("{} calls from {}", n, sample[0].render(entry.name)),
            m,
        ),
        (Some(&i), BatchResult::Values(_)) => failures.push(
            "a miss gave no error under aic.on_miss = 'error'",
            format!("{} [{strict}]", sample[i].render(entry.name)),
            "the batch succeeded",
        ),
        (Some(&i), BatchResult::Error(m)) => {
            if !m.contains(entry.name) {
                failures.push(
                    "miss error does not name the function",
                    format!("{} [{strict}]", sample[i].render(entry.name)),
                    m,
                );
            }
        }
        (None, BatchResult::Error(m)) => failures.push(
            "aic.on_miss = 'error' failed a batch without a miss",
            format!("{n} calls from {} [{strict}]", sample[0].render(entry.name)),
            m,
        ),
        (None, BatchResult::Values(v)) => {
            for i in 0..n {
                if v[i].map(f64::to_bits) != expected[i].map(f64::to_bits) {
                    failures.push(
                        "aic.on_miss = 'error' changed a value",
                        format!("{} [{strict}]", sample[i].render(entry.name)),
                        format!("{:?} instead of {:?}", v[i], expected[i]),
                    );
                }
            }
        }
    }
}

/// Eight threads, each with a session of its own over one tree, run the
/// same batch: every bit must agree with a single-threaded run.
pub fn eight_threads_agree(
    function: &str,
    make_ctx: impl Fn() -> SessionContext + Sync,
    settings: &Settings,
    calls: &[Call],
) -> Failures {
    let mut failures = Failures::default();
    let kinds = kinds_of(&calls[0]);
    let results: Vec<BatchResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (make_ctx, kinds) = (&make_ctx, &kinds);
                s.spawn(move || {
                    let rt = runtime();
                    let ctx = make_ctx();
                    run_batch(&rt, &ctx, function, settings, calls, &Layout::columns(kinds))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| BatchResult::Panic(panic_message(p)))).collect()
    });
    let bits = |r: &BatchResult| match r {
        BatchResult::Values(v) => Ok(v.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>()),
        BatchResult::Error(m) => Err(format!("error: {m}")),
        BatchResult::Panic(m) => Err(format!("PANIC: {m}")),
    };
    let first = bits(&results[0]);
    if let Err(e) = &first {
        failures.push("thread 0 failed", format!("{} calls of {function} [{settings}]", calls.len()), e.clone());
        return failures;
    }
    for (t, r) in results.iter().enumerate().skip(1) {
        let other = bits(r);
        match (&first, &other) {
            (Ok(a), Ok(b)) => {
                if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                    failures.push(
                        format!("thread {t} disagrees with thread 0"),
                        format!("{} [{settings}]", calls[i].render(function)),
                        format!("{:?} vs {:?}", b[i].map(f64::from_bits), a[i].map(f64::from_bits)),
                    );
                }
            }
            (_, Err(e)) => failures.push(format!("thread {t} failed"), format!("{} calls", calls.len()), e.clone()),
            _ => {}
        }
    }
    failures
}

/// Wall-clock budget of a time-boxed fuzz, seconds: `AICSQL_FUZZ_SECONDS`, else `default`.
pub fn budget(default: f64) -> Duration {
    let secs = std::env::var("AICSQL_FUZZ_SECONDS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(default);
    Duration::from_secs_f64(secs.max(0.1))
}

/// Calls per scalar function: `AICSQL_FUZZ_CALLS`, else `default`.
pub fn call_count(default: usize) -> usize {
    std::env::var("AICSQL_FUZZ_CALLS").ok().and_then(|s| s.replace('_', "").parse().ok()).unwrap_or(default)
}

/// A seed: `AICSQL_FUZZ_SEED` (to reproduce or vary a run), else `default`.
pub fn seed(default: u64) -> u64 {
    std::env::var("AICSQL_FUZZ_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .map(|s| s ^ default)
        .unwrap_or(default)
}

/// Prints a run's counters (visible with `--nocapture`).
pub fn report(test: &str, stats: &Stats, started: Instant) {
    println!(
        "{test}: {} calls in {} queries, {:.1} s: {} values, {} NULL, {} invalid calls checked, {} on_miss='error' samples",
        stats.calls,
        stats.queries,
        started.elapsed().as_secs_f64(),
        stats.values,
        stats.nulls,
        stats.errors_checked,
        stats.on_miss_error_batches
    );
}
