//! A physical-plan rule that keeps a `WHERE` below the estimators.
//!
//! DataFusion's `ProjectionPushdown` swaps a projection below a filter
//! whenever the projection narrows the schema
//! (`FilterExec::try_swapping_with_projection`), so
//! `SELECT id, estimate_agg(...) FROM grid WHERE id = 1` runs the estimator
//! on every row of `grid` and filters afterwards: a selective filter pays for
//! the whole grid, and a row the `WHERE` removes can fail the query
//! (apache/datafusion#25459 tracks the order of the two pushdowns).
//!
//! This rule runs after DataFusion's own and undoes that swap where it
//! matters: for a `FilterExec` directly above a `ProjectionExec` that calls
//! one of aicsql's functions, every conjunct of the predicate that reads
//! only columns the projection passes through unchanged moves below the
//! projection (rewritten onto the projection's input). Conjuncts that read
//! an estimator's output stay above it, as they must. A filter's own
//! embedded projection is folded into the projection, so columns nobody
//! reads are not computed either. A filter that calls an estimator in some
//! of its conjuncts (`WHERE id = 1 AND estimate_agg(...)['ttft_ms'] < 50`)
//! is split in two, the other conjuncts first: `AND` evaluates both of its
//! sides over a whole batch.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::{collect_columns, conjunction, split_conjunction};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

/// The rule's name in `EXPLAIN VERBOSE`.
pub const NAME: &str = "aicsql_filter_before_estimators";

/// Keeps filters below projections that call the named (expensive) functions.
#[derive(Debug)]
pub struct FilterBeforeEstimators {
    functions: HashSet<String>,
}

impl FilterBeforeEstimators {
    /// A rule guarding calls of `functions` (scalar function names).
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(functions: I) -> Self {
        Self { functions: functions.into_iter().map(Into::into).collect() }
    }

    /// Whether `expr` calls one of the guarded functions anywhere inside.
    fn calls_guarded(&self, expr: &Arc<dyn PhysicalExpr>) -> bool {
        let mut found = false;
        // The closure never fails; apply's Result only carries its errors.
        let _ = expr.apply(|node| {
            if let Some(call) = node.downcast_ref::<ScalarFunctionExpr>()
                && self.functions.contains(call.name())
            {
                found = true;
                return Ok(datafusion::common::tree_node::TreeNodeRecursion::Stop);
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        });
        found
    }

    /// `filter` over `projection`, rewritten with the filter's movable
    /// conjuncts below the projection; `None` when nothing can move.
    fn reorder(&self, filter: &FilterExec, projection: &ProjectionExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let exprs = projection.expr();
        if !exprs.iter().any(|e| self.calls_guarded(&e.expr)) {
            return Ok(None);
        }
        // Output column i of the projection, when it is a plain column of
        // the projection's input.
        let passthrough = |column: &Column| -> Option<Arc<dyn PhysicalExpr>> {
            let expr = &exprs.get(column.index())?.expr;
            expr.downcast_ref::<Column>().map(|_| Arc::clone(expr))
        };
        let (mut below, mut above) = (Vec::new(), Vec::new());
        for conjunct in split_conjunction(filter.predicate()) {
            let movable = collect_columns(conjunct).iter().all(|c| passthrough(c).is_some());
            if movable {
                let rewritten = Arc::clone(conjunct).transform(|node| {
                    Ok(match node.downcast_ref::<Column>().and_then(passthrough) {
                        Some(input_column) => Transformed::yes(input_column),
                        None => Transformed::no(node),
                    })
                })?;
                below.push(rewritten.data);
            } else {
                above.push(Arc::clone(conjunct));
            }
        }
        if below.is_empty() {
            return Ok(None);
        }
        let lower = FilterExecBuilder::new(conjunction(below), Arc::clone(projection.input()))
            .with_default_selectivity(filter.default_selectivity())
            .with_batch_size(filter.batch_size())
            .with_fetch(if above.is_empty() { filter.fetch() } else { None })
            .build()?;
        let lower: Arc<dyn ExecutionPlan> = Arc::new(lower);
        if above.is_empty() {
            // The filter's embedded projection picks the projection's outputs.
            let kept: Vec<ProjectionExpr> = match filter.projection() {
                Some(indices) => indices.iter().map(|&i| exprs[i].clone()).collect(),
                None => exprs.to_vec(),
            };
            return Ok(Some(Arc::new(ProjectionExec::try_new(kept, lower)?)));
        }
        let middle: Arc<dyn ExecutionPlan> = Arc::new(ProjectionExec::try_new(exprs.to_vec(), lower)?);
        let upper = FilterExecBuilder::from(filter).with_input(middle).with_predicate(conjunction(above)).build()?;
        Ok(Some(Arc::new(upper)))
    }
}

impl FilterBeforeEstimators {
    /// A filter whose predicate calls a guarded function in some conjuncts
    /// only, as two filters: the other conjuncts first, so the function
    /// runs on the rows they keep (`AND` evaluates both sides of a batch).
    fn split(&self, filter: &FilterExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let (costly, cheap): (Vec<_>, Vec<_>) =
            split_conjunction(filter.predicate()).into_iter().cloned().partition(|c| self.calls_guarded(c));
        if costly.is_empty() || cheap.is_empty() {
            return Ok(None);
        }
        let lower = FilterExecBuilder::new(conjunction(cheap), Arc::clone(filter.input()))
            .with_default_selectivity(filter.default_selectivity())
            .with_batch_size(filter.batch_size())
            .build()?;
        let upper =
            FilterExecBuilder::from(filter).with_input(Arc::new(lower)).with_predicate(conjunction(costly)).build()?;
        Ok(Some(Arc::new(upper)))
    }
}

impl PhysicalOptimizerRule for FilterBeforeEstimators {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let rewritten = match filter.input().downcast_ref::<ProjectionExec>() {
                Some(projection) => self.reorder(filter, projection)?,
                None => self.split(filter)?,
            };
            Ok(match rewritten {
                Some(plan) => Transformed::yes(plan),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}
