//! The DataFusion catalog `aic` over the mounted perf data.
//!
//! * `aic.perf.<kind>`: raw rows of every `<kind>_perf.parquet`, unioned over
//!   databases, with `system`, `backend`, `version` from the path first.
//!   Filters on those three prune files before any is opened.
//! * `aic.meta.{databases, systems, models, support_matrix}`.
//!
//! Opening the catalog lists directories only; parquet footers are read when
//! a table is first resolved, rows when it is scanned.

use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, SchemaProvider};

use aicsql_tables::DataTree;

pub mod meta;
pub mod perf;
mod prune;
mod scan;
mod schema_merge;
mod silicon_refs;

pub use meta::{MetaKind, MetaSchema, MetaTable};
pub use perf::{KEY_COLUMNS, PerfScanPartitions, PerfSchema, PerfTable};
pub use scan::{DbKey, PerfScanExec, PerfScanPlan};

/// Name under which the catalog is registered.
pub const CATALOG_NAME: &str = "aic";

/// The `aic` catalog: schemas `perf` and `meta`.
#[derive(Debug)]
pub struct AicCatalog {
    perf: Arc<PerfSchema>,
    meta: Arc<MetaSchema>,
}

impl AicCatalog {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { perf: Arc::new(PerfSchema::new(Arc::clone(&tree))), meta: Arc::new(MetaSchema::new(tree)) }
    }

    /// Schema `aic.perf`.
    pub fn perf(&self) -> &Arc<PerfSchema> {
        &self.perf
    }

    /// Schema `aic.meta`.
    pub fn meta(&self) -> &Arc<MetaSchema> {
        &self.meta
    }
}

impl CatalogProvider for AicCatalog {
    fn schema_names(&self) -> Vec<String> {
        vec!["meta".to_string(), "perf".to_string()]
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        match name {
            "perf" => Some(Arc::clone(&self.perf) as _),
            "meta" => Some(Arc::clone(&self.meta) as _),
            _ => None,
        }
    }
}
