//! aiconfigurator's estimators as DataFusion functions, one file per
//! function, over the `aicsql-tables` engine. Functions never read files
//! themselves: tables are loaded once per process by `aicsql-tables` and
//! shared.

pub mod args;
pub mod config;
pub mod database;
pub mod engine_step;
pub mod errors;
pub mod estimate_agg;
pub mod estimate_disagg;
pub mod estimate_memory;
pub mod filter_first;
mod gemm_args;
pub mod gemm_latency;
pub mod gemm_sol;
pub mod gemm_trace;
mod options;
pub mod progress;
pub mod rows;
pub mod search_agg;
pub mod search_args;
pub mod search_best;
pub mod search_default;
pub mod search_disagg;
pub mod search_recommend;
mod search_threads;
mod serving_args;
pub mod step_args;
pub mod step_latency;
mod step_models;
pub mod step_status;
mod struct_out;
pub mod table_call;

use std::sync::Arc;

use datafusion::catalog::TableFunctionImpl;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{DocSection, Documentation, ScalarUDF};
use datafusion::prelude::SessionConfig;

use aicsql_tables::DataTree;

pub use config::{AicOptions, OnMiss};
pub use engine_step::EngineStep;
pub use estimate_agg::EstimateAgg;
pub use estimate_disagg::EstimateDisagg;
pub use estimate_memory::EstimateMemory;
pub use gemm_latency::GemmLatency;
pub use gemm_sol::GemmSolFn;
pub use gemm_trace::GemmTrace;
pub use search_agg::SearchAgg;
pub use search_best::SearchBest;
pub use search_default::SearchDefault;
pub use search_disagg::SearchDisagg;
pub use search_recommend::SearchRecommend;
pub use search_threads::cap_search_threads;
pub use step_latency::StepLatency;
pub use step_status::StepStatus;
pub use table_call::{RowsFunction, RowsUdtf, TableCall, TableCallExec};

/// The mounted tree as a function field: functions compare and hash by
/// identity (two registrations over the same tree are the same function).
#[derive(Debug, Clone)]
pub(crate) struct SharedTree(pub(crate) Arc<DataTree>);

impl PartialEq for SharedTree {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedTree {}

impl std::hash::Hash for SharedTree {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0), state);
    }
}

impl std::ops::Deref for SharedTree {
    type Target = DataTree;

    fn deref(&self) -> &DataTree {
        &self.0
    }
}

/// Documentation section of every aicsql function.
pub const DOC_SECTION_AICSQL: DocSection = DocSection {
    include: true,
    label: "aicsql Functions",
    description: Some("Estimators of aiconfigurator v0.11.0 over the mounted perf data."),
};

/// The scalar functions, for registration elsewhere (e.g. over FFI).
pub fn scalar_functions(tree: &Arc<DataTree>) -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(GemmLatency::new(Arc::clone(tree))),
        ScalarUDF::new_from_impl(GemmSolFn::new(Arc::clone(tree))),
        ScalarUDF::new_from_impl(StepLatency::new(Arc::clone(tree))),
        ScalarUDF::new_from_impl(StepStatus::new(Arc::clone(tree))),
        ScalarUDF::new_from_impl(EstimateAgg::new(Arc::clone(tree))),
        ScalarUDF::new_from_impl(EstimateMemory::new(Arc::clone(tree))),
        ScalarUDF::new_from_impl(EstimateDisagg::new(Arc::clone(tree))),
        ScalarUDF::new_from_impl(SearchBest::new(Arc::clone(tree))),
    ]
}

/// The table functions' row computations, for registration and for codecs
/// that rebuild a call by its function's name in another process.
pub fn rows_functions(tree: &Arc<DataTree>) -> Vec<Arc<dyn RowsFunction>> {
    vec![
        Arc::new(GemmTrace::new(Arc::clone(tree))),
        Arc::new(EngineStep::new(Arc::clone(tree))),
        Arc::new(SearchAgg::new(Arc::clone(tree))),
        Arc::new(SearchDisagg::new(Arc::clone(tree))),
        Arc::new(SearchDefault::new(Arc::clone(tree))),
        Arc::new(SearchRecommend::new(Arc::clone(tree))),
    ]
}

/// The aicsql table functions, by the name they are registered under. Each
/// checks its arguments when planned and computes its rows when executed
/// (see [`table_call`]).
pub fn table_functions(tree: &Arc<DataTree>) -> Vec<(&'static str, Arc<dyn TableFunctionImpl>)> {
    rows_functions(tree).into_iter().map(|f| (f.name(), Arc::new(RowsUdtf(f)) as Arc<dyn TableFunctionImpl>)).collect()
}

/// The table functions' documentation, by name. DataFusion 55 keeps no
/// documentation for table functions (`SHOW FUNCTIONS` lists scalar ones
/// only), so the reference and the shell's help read it here.
pub fn table_function_docs() -> Vec<(&'static str, &'static Documentation)> {
    vec![
        (engine_step::NAME, EngineStep::documentation()),
        (gemm_trace::NAME, GemmTrace::documentation()),
        (search_agg::NAME, SearchAgg::documentation()),
        (search_default::NAME, SearchDefault::documentation()),
        (search_disagg::NAME, SearchDisagg::documentation()),
        (search_recommend::NAME, SearchRecommend::documentation()),
    ]
}

/// The session configuration aicsql's functions expect, over `config`:
/// `information_schema` on, the `aic.*` options registered (if missing),
/// and DataFusion 55's leaf-expression pushdown off. That rewrite moves
/// `get_field` of a column below a filter by inlining the column's
/// definition, so
/// `SELECT e['ttft_ms'] FROM (SELECT estimate_agg(...) AS e FROM t WHERE ...)`
/// would price (and fail on) the rows the filter drops; the estimators are
/// expensive and can fail.
pub fn session_config(config: SessionConfig) -> SessionConfig {
    let mut config = config.with_information_schema(true);
    if config.options().extensions.get::<AicOptions>().is_none() {
        config = config.with_option_extension(AicOptions::default());
    }
    config.options_mut().optimizer.enable_leaf_expression_pushdown = false;
    config
}

/// Registers every aicsql function on `ctx`, and the plan rule that keeps
/// a `WHERE` below them ([`filter_first`]).
pub fn register_all(ctx: &SessionContext, tree: &Arc<DataTree>) {
    let scalars = scalar_functions(tree);
    keep_filters_first(ctx, scalars.iter().map(|udf| udf.name().to_string()));
    for udf in scalars {
        ctx.register_udf(udf);
    }
    for (name, function) in table_functions(tree) {
        ctx.register_udtf(name, function);
    }
}

/// Adds [`filter_first::FilterBeforeEstimators`] over `functions` to the
/// session's physical optimizer, once (registration runs again on a
/// session Ballista has upgraded).
fn keep_filters_first(ctx: &SessionContext, functions: impl IntoIterator<Item = String>) {
    let state = ctx.state_ref();
    let mut state = state.write();
    if state.physical_optimizers().iter().any(|rule| rule.name() == filter_first::NAME) {
        return;
    }
    let rule = Arc::new(filter_first::FilterBeforeEstimators::new(functions));
    *state = SessionStateBuilder::new_from_existing(state.clone()).with_physical_optimizer_rule(rule).build();
}
