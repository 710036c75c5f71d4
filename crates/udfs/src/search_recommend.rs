//! `search_recommend(model, db, isl, osl, prefix, ttft_ms, tpot_ms,
//! target_request_rate [, target_concurrency])`: aiconfigurator's `cli
//! recommend`, the fewest GPUs of a system that serve a load under the SLA.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::Documentation;

use aicsql_serving::{
    AggCandidate, Candidate, DisaggCandidate, LoadTarget, Mode, Outcome, Recommendation, Search, SearchQuery, Server,
    recommend_experiments,
};
use aicsql_tables::DataTree;

use crate::DOC_SECTION_AICSQL;
use crate::args::{constant_int, constant_number, constant_text};
use crate::config::AicOptions;
use crate::database::{decode_database_arg, on_decode_system, resolve};
use crate::errors::serving_error;
use crate::rows::{self, Column, Rows, Value, col, required};
use crate::search_args::{auto_backends, refuse_quant_settings, roles, search_query, search_server};
use crate::table_call::RowsFunction;

pub const NAME: &str = "search_recommend";

/// Argument names in order; the last is optional.
pub const ARGS: [&str; 9] =
    ["model", "db", "isl", "osl", "prefix", "ttft_ms", "tpot_ms", "target_request_rate", "target_concurrency"];

/// Table function `search_recommend`.
#[derive(Debug)]
pub struct SearchRecommend {
    tree: Arc<DataTree>,
}

/// One row: a best config of one experiment (or the experiment's reason).
#[derive(Default)]
struct Line {
    model: String,
    db: String,
    mode: &'static str,
    experiment: String,
    rank: Option<i64>,
    chosen: bool,
    budget: i64,
    replicas: Option<i64>,
    gpus: Option<i64>,
    tokens_per_s_per_gpu: Option<f64>,
    seq_per_s: Option<f64>,
    concurrency: Option<i64>,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    request_latency_ms: Option<f64>,
    tokens_per_s_per_user: Option<f64>,
    replica_gpus: Option<i64>,
    parallel: Option<String>,
    bs: Option<i64>,
    prefill_parallel: Option<String>,
    prefill_workers: Option<i64>,
    decode_parallel: Option<String>,
    decode_bs: Option<i64>,
    decode_workers: Option<i64>,
    reason: Option<String>,
}

fn columns() -> Vec<Column<Line>> {
    use Value::{Bool, Float, Int, Text};
    vec![
        required("model", Text(|r: &Line| Some(r.model.as_str()))),
        required("db", Text(|r| Some(r.db.as_str()))),
        required("mode", Text(|r| Some(r.mode))),
        // The spec's experiment name: the mode, with the backend under backend 'auto' (agg_vllm).
        required("experiment", Text(|r| Some(r.experiment.as_str()))),
        col("rank", Int(|r| r.rank)),
        required("chosen", Bool(|r| Some(r.chosen))),
        required("budget_gpus", Int(|r| Some(r.budget))),
        col("replicas_needed", Int(|r| r.replicas)),
        col("total_gpus_needed", Int(|r| r.gpus)),
        col("tokens_per_s_per_gpu", Float(|r| r.tokens_per_s_per_gpu)),
        col("seq_per_s", Float(|r| r.seq_per_s)),
        col("concurrency", Int(|r| r.concurrency)),
        col("ttft_ms", Float(|r| r.ttft_ms)),
        col("tpot_ms", Float(|r| r.tpot_ms)),
        col("request_latency_ms", Float(|r| r.request_latency_ms)),
        col("tokens_per_s_per_user", Float(|r| r.tokens_per_s_per_user)),
        col("num_total_gpus", Int(|r| r.replica_gpus)),
        col("parallel", Text(|r| r.parallel.as_deref())),
        col("bs", Int(|r| r.bs)),
        col("prefill_parallel", Text(|r| r.prefill_parallel.as_deref())),
        col("prefill_workers", Int(|r| r.prefill_workers)),
        col("decode_parallel", Text(|r| r.decode_parallel.as_deref())),
        col("decode_bs", Int(|r| r.decode_bs)),
        col("decode_workers", Int(|r| r.decode_workers)),
        col("reason", Text(|r| r.reason.as_deref())),
    ]
}

impl SearchRecommend {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree }
    }

    pub fn schema() -> SchemaRef {
        rows::schema(&columns())
    }

    pub fn documentation() -> &'static Documentation {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "aiconfigurator v0.11.0's `cli recommend`: the fewest GPUs of the database's system that serve \
                 target_request_rate (requests/s) or target_concurrency (concurrent requests; give exactly one, \
                 the other NULL or absent) under the TTFT and TPOT limits (or aic.request_latency). The agg and \
                 disagg experiments search at a budget of one node's GPUs, then 2, 4 ... times that up to 64 \
                 while an experiment found nothing because nothing fitted in GPU memory; worker sizes are the \
                 powers of two up to the budget and a disaggregated replica spans at most one node. Each \
                 experiment keeps, per layout, the config needing the fewest GPUs (replicas_needed = the load \
                 over one replica's rate or concurrency, rounded up; total_gpus_needed = replicas x its GPUs), \
                 its top aic.top_n by GPUs then tokens/s/gpu; one row per such config with its rank, `chosen` on \
                 rank 1 of the experiment needing fewer GPUs. Like the spec's `cli_recommend(database_mode=...)` \
                 it prices in SILICON mode: the spec's API defaults to HYBRID, which aicsql does not price yet, so \
                 its answers equal the spec's called with database_mode='SILICON'. A tie between agg and disagg \
                 goes to disagg (the spec's is the experiment its thread pool finished first, in practice the \
                 disagg sweep).",
                format!("{NAME}({}, {} [, {}])", ARGS[..7].join(", "), ARGS[7], ARGS[8]),
            )
            .with_sql_example(
                r#"```sql
> SELECT mode, rank, chosen, budget_gpus, replicas_needed, total_gpus_needed, parallel, decode_parallel
  FROM search_recommend('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.24.0', 1024, 256, 0, 1000, 30, 40)
  WHERE rank = 1;
+--------+------+--------+-------------+-----------------+-------------------+------------------+------------------+
| mode   | rank | chosen | budget_gpus | replicas_needed | total_gpus_needed | parallel         | decode_parallel  |
+--------+------+--------+-------------+-----------------+-------------------+------------------+------------------+
| agg    | 1    | true   | 8           | 2               | 2                 | tp1pp1dp1etp1ep1 |                  |
| disagg | 1    | false  | 8           | 2               | 4                 |                  | tp1pp1dp1etp1ep1 |
+--------+------+--------+-------------+-----------------+-------------------+------------------+------------------+
```"#,
            )
            .with_argument("model", "Hugging Face id of a model in aic.meta.models.")
            .with_argument(
                "db",
                "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version).",
            )
            .with_argument("isl", "Input sequence length.")
            .with_argument("osl", "Output sequence length.")
            .with_argument("prefix", "Cached prefix tokens of each request (part of isl).")
            .with_argument("ttft_ms", "TTFT limit in ms.")
            .with_argument("tpot_ms", "TPOT limit in ms.")
            .with_argument("target_request_rate", "Requests per second to serve (NULL with target_concurrency).")
            .with_argument("target_concurrency", "Optional: concurrent requests to serve instead.")
            .build()
        })
    }
}

/// The call's arguments: (model, db, query, target), `None` for a NULL
/// model, database, length or limit.
type Call = (String, String, SearchQuery, LoadTarget);

fn parse(values: &[ScalarValue], options: &AicOptions) -> Result<Option<Call>> {
    if !(8..=9).contains(&values.len()) {
        return plan_err!(
            "{NAME}({}, {} [, {}]) takes 8 or 9 arguments, got {}",
            ARGS[..7].join(", "),
            ARGS[7],
            ARGS[8],
            values.len()
        );
    }
    refuse_quant_settings(NAME, options)?;
    let (model, db) = (constant_text(NAME, 1, &values[0])?, constant_text(NAME, 2, &values[1])?);
    let count = |i: usize| -> Result<Option<u32>> {
        match constant_int(NAME, i + 1, &values[i])? {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .or_else(|_| plan_err!("{NAME}: {} = {v} is out of range (0 ..= {})", ARGS[i], u32::MAX)),
        }
    };
    let (isl, osl, prefix) = (count(2)?, count(3)?, count(4)?);
    let number = |i: usize| values.get(i).map_or(Ok(None), |v| constant_number(NAME, i + 1, ARGS[i], v));
    let (ttft, tpot, rate, concurrency) = (number(5)?, number(6)?, number(7)?, number(8)?);
    let target = match (rate, concurrency) {
        (Some(r), None) => LoadTarget::RequestRate(r),
        (None, Some(c)) => LoadTarget::Concurrency(c),
        _ => {
            return plan_err!(
                "{NAME}: give exactly one of target_request_rate and target_concurrency (the other NULL)"
            );
        }
    };
    let (which, value) = match target {
        LoadTarget::RequestRate(v) => ("target_request_rate", v),
        LoadTarget::Concurrency(v) => ("target_concurrency", v),
    };
    if !(value.is_finite() && value > 0.0) {
        return plan_err!("{NAME}: {which} = {value} must be a positive finite number");
    }
    let (Some(model), Some(db), Some(isl), Some(osl), Some(prefix), Some(ttft_ms), Some(tpot_ms)) =
        (model, db, isl, osl, prefix, ttft, tpot)
    else {
        return Ok(None);
    };
    // The budget is the escalation's (one node's GPUs first).
    let query = search_query(options, [1, isl, osl, prefix], [ttft_ms, tpot_ms], 1);
    Ok(Some((model, db, query, target)))
}

/// One line per load-match best config of `s`, rank 1 first: the columns
/// every candidate has, then its layout's (`layout`).
fn best_lines<C: Candidate>(out: &mut Vec<Line>, base: &Line, s: &Search<C>, layout: impl Fn(&C, Line) -> Line) {
    for (k, (&i, &(replicas, gpus))) in s.best.iter().zip(&s.needed).enumerate() {
        let c = &s.candidates[i];
        let line = Line {
            rank: Some(k as i64 + 1),
            replicas: Some(replicas),
            gpus: Some(gpus),
            tokens_per_s_per_gpu: Some(c.tokens_per_s_per_gpu()),
            seq_per_s: Some(c.seq_per_s()),
            concurrency: Some(c.concurrency() as i64),
            ttft_ms: Some(c.ttft_ms()),
            tpot_ms: Some(c.tpot_ms()),
            request_latency_ms: Some(c.request_latency_ms()),
            tokens_per_s_per_user: Some(c.tokens_per_s_per_user()),
            replica_gpus: i64::try_from(c.num_total_gpus()).ok(),
            ..base.clone_head()
        };
        out.push(layout(c, line));
    }
}

fn agg_lines(out: &mut Vec<Line>, base: &Line, s: &Search<AggCandidate>) {
    best_lines(out, base, s, |c, line| {
        let e = &c.estimate;
        Line { parallel: Some(e.label().to_string()), bs: Some(i64::from(e.bs)), ..line }
    });
}

fn disagg_lines(out: &mut Vec<Line>, base: &Line, s: &Search<DisaggCandidate>) {
    best_lines(out, base, s, |c, line| {
        let e = &c.estimate;
        Line {
            prefill_parallel: Some(e.prefill.label().to_string()),
            prefill_workers: Some(i64::from(e.prefill.workers)),
            decode_parallel: Some(e.decode.label().to_string()),
            decode_bs: Some(i64::from(e.decode.bs)),
            decode_workers: Some(i64::from(e.decode.workers)),
            ..line
        }
    });
}

impl Line {
    /// The experiment's columns, for its config lines.
    fn clone_head(&self) -> Line {
        Line {
            model: self.model.clone(),
            db: self.db.clone(),
            mode: self.mode,
            experiment: self.experiment.clone(),
            budget: self.budget,
            ..Line::default()
        }
    }
}

fn lines(model: &str, db: &str, r: &Recommendation) -> Vec<Line> {
    let budget = r.budgets.last().copied().map_or(0, i64::from);
    let head = |mode: Mode| Line {
        model: model.into(),
        db: db.into(),
        mode: mode.name(),
        experiment: mode.name().into(),
        budget,
        ..Line::default()
    };
    let mut out = Vec::new();
    let mut experiment = |mode: Mode, reason: &Option<String>, empty: bool, fill: &dyn Fn(&mut Vec<Line>, &Line)| {
        let base = head(mode);
        if empty {
            out.push(Line { reason: Some(reason.clone().unwrap_or_else(|| "no candidate".into())), ..base });
            return;
        }
        let first = out.len();
        fill(&mut out, &base);
        if r.chosen == Some(mode)
            && let Some(line) = out.get_mut(first)
        {
            line.chosen = true;
        }
    };
    experiment(Mode::Agg, &r.agg.reason, r.agg.best.is_empty(), &|o, b| agg_lines(o, b, &r.agg));
    if let Some(d) = &r.disagg {
        experiment(Mode::Disagg, &d.reason, d.best.is_empty(), &|o, b| disagg_lines(o, b, d));
    }
    out
}

impl RowsFunction for SearchRecommend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn schema(&self) -> SchemaRef {
        SearchRecommend::schema()
    }

    fn check(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<()> {
        let options = AicOptions::from_config(config)?;
        parse(args, &options).map(|_| ())
    }

    fn rows(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
        let options = AicOptions::from_config(config)?;
        let Some((model, db, query, target)) = parse(args, &options)? else {
            return Ok(RecordBatch::new_empty(SearchRecommend::schema()));
        };
        if db.split('/').nth(1).unwrap_or(options.backend.as_str()) == "auto" {
            return every_backend(&self.tree, &model, &db, &query, target, &options);
        }
        let database = resolve(NAME, &self.tree, &db, &options)?;
        let decode = decode_database_arg(&db, &database, &options.decode_system, &options)
            .map(|arg| {
                resolve(NAME, &self.tree, &arg, &options).map_err(|e| on_decode_system(e, &options.decode_system))
            })
            .transpose()?;
        let name = database.name();
        let build = |d: &crate::database::Database| -> Result<Server<'static>> {
            search_server(&self.tree, &model, d, &options).map_err(|e| serving_error(NAME, &model, &d.name(), e))
        };
        let mut server = build(&database)?;
        let mut decode = decode.as_ref().map(build).transpose()?;
        let r = server
            .search_recommend(decode.as_mut(), &query, target)
            .map_err(|e| serving_error(NAME, &model, &name, e))?;
        let columns = columns();
        let mut rows = Rows::new(&columns);
        for line in lines(&model, &name, &r) {
            rows.push(&line);
        }
        rows.finish()
    }
}

/// `backend = 'auto'` (docs/spec/experiments.md 4.6): every backend's
/// experiments at each budget, one block of lines per experiment; above two
/// experiments the spec merges the load-match picks per mode by
/// tokens/s/gpu, and `chosen` marks the merged winner's line.
fn every_backend(
    tree: &Arc<DataTree>,
    model: &str,
    db: &str,
    query: &SearchQuery,
    target: LoadTarget,
    options: &AicOptions,
) -> Result<RecordBatch> {
    let mut backends = auto_backends(NAME, tree, model, db, options)?;
    let dbs: Vec<(aicsql_serving::Backend, String)> = backends.iter().map(|b| (b.backend, b.db.clone())).collect();
    let mut roles = roles(&mut backends);
    let (budgets, result) =
        recommend_experiments(&mut roles, query, target).map_err(|e| serving_error(NAME, model, db, e))?;
    let budget = budgets.last().copied().map_or(0, i64::from);
    // The chosen line: the merged winner (experiment, candidate), or the chosen experiment's rank 1.
    let chosen_row: Option<(usize, usize)> = match (&result.merged, result.chosen) {
        (Some(merged), Some(e)) => {
            let picks = if result.experiments[e].mode == Mode::Agg { &merged[0] } else { &merged[1] };
            picks.best.first().copied()
        }
        (None, Some(e)) => match &result.experiments[e].outcome {
            Outcome::Agg(s) => s.best.first().map(|&i| (e, i)),
            Outcome::Disagg(s) => s.best.first().map(|&i| (e, i)),
            Outcome::Failed(_) => None,
        },
        _ => None,
    };
    let mut out: Vec<Line> = Vec::new();
    for (k, e) in result.experiments.iter().enumerate() {
        let edb = dbs.iter().find(|(b, _)| *b == e.backend).map_or("", |(_, d)| d.as_str());
        let base = Line {
            model: model.into(),
            db: edb.into(),
            mode: e.mode.name(),
            experiment: e.name.clone(),
            budget,
            ..Line::default()
        };
        let first = out.len();
        let best: &[usize] = match &e.outcome {
            Outcome::Agg(s) => {
                agg_lines(&mut out, &base, s);
                &s.best
            }
            Outcome::Disagg(s) => {
                disagg_lines(&mut out, &base, s);
                &s.best
            }
            Outcome::Failed(reason) => {
                out.push(Line { reason: Some(reason.clone()), ..base });
                &[]
            }
        };
        if let Some((ce, ci)) = chosen_row
            && ce == k
            && let Some(pos) = best.iter().position(|&i| i == ci)
        {
            out[first + pos].chosen = true;
        }
    }
    let columns = columns();
    let mut rows = Rows::new(&columns);
    for line in &out {
        rows.push(line);
    }
    rows.finish()
}
