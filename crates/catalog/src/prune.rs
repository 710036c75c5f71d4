//! Deciding, from a query's filters, which files (or documents) a scan needs.
//!
//! A perf file carries one value of each key column (system, backend,
//! version): a filter that mentions only key columns is either true or false
//! for the whole file. Evaluating such filters against one row per file
//! selects files before any of them is opened.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};

/// True when `filter` reads only `keys` columns and is deterministic.
pub(crate) fn on_keys_only(filter: &Expr, keys: &[&str]) -> bool {
    let refs = filter.column_refs();
    !refs.is_empty() && !filter.is_volatile() && refs.iter().all(|c| keys.contains(&c.name.as_str()))
}

/// Pushdown answer for a table whose key columns are fully decided per item:
/// such filters are applied exactly by the pruning itself.
pub(crate) fn pushdown(filters: &[&Expr], keys: &[&str], exact: bool) -> Vec<TableProviderFilterPushDown> {
    filters
        .iter()
        .map(|f| match (on_keys_only(f, keys), exact) {
            (true, true) => TableProviderFilterPushDown::Exact,
            (true, false) => TableProviderFilterPushDown::Inexact,
            (false, _) => TableProviderFilterPushDown::Unsupported,
        })
        .collect()
}

/// Evaluates the key-only `filters` against one row of key values per item
/// and returns which items every such filter keeps (NULL counts as false).
pub(crate) fn select(state: &dyn Session, filters: &[Expr], keys: &[&str], values: &[Vec<&str>]) -> Result<Vec<bool>> {
    let n = values.first().map_or(0, Vec::len);
    let mut keep = vec![true; n];
    let relevant: Vec<&Expr> = filters.iter().filter(|f| on_keys_only(f, keys)).collect();
    if relevant.is_empty() || n == 0 {
        return Ok(keep);
    }
    let schema = Arc::new(Schema::new(keys.iter().map(|k| Field::new(*k, DataType::Utf8, false)).collect::<Vec<_>>()));
    let columns: Vec<ArrayRef> = values.iter().map(|v| Arc::new(StringArray::from(v.clone())) as ArrayRef).collect();
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    let df_schema = DFSchema::try_from(schema)?;
    for filter in relevant {
        let expr = state.create_physical_expr(filter.clone(), &df_schema)?;
        let result = expr.evaluate(&batch)?.into_array(n)?;
        let mask = result.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
            datafusion::common::DataFusionError::Internal(format!("filter {filter} did not evaluate to booleans"))
        })?;
        for (i, k) in keep.iter_mut().enumerate() {
            *k &= mask.is_valid(i) && mask.value(i);
        }
    }
    Ok(keep)
}
