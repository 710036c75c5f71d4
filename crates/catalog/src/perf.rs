//! Schema `aic.perf`: one table per perf-table kind, the raw rows of every
//! database's file of that kind, with the database's (system, backend,
//! version) as leading columns.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use aicsql_tables::{DataTree, PerfFile};

use crate::prune;
use crate::scan::{PerfScanExec, PerfScanPlan, ScanFile};
use crate::schema_merge::{table_type, widen};

/// The columns every perf table starts with, taken from the file's path.
pub const KEY_COLUMNS: [&str; 3] = ["system", "backend", "version"];

/// Schema provider for `aic.perf`.
#[derive(Debug)]
pub struct PerfSchema {
    tree: Arc<DataTree>,
    kinds: Vec<String>,
    tables: Mutex<HashMap<String, Arc<PerfTable>>>,
}

impl PerfSchema {
    pub fn new(tree: Arc<DataTree>) -> Self {
        let kinds = tree.table_kinds();
        Self { tree, kinds, tables: Mutex::new(HashMap::new()) }
    }

    /// The table of a kind, built once (its files' footers read) and shared.
    pub fn perf_table(&self, name: &str) -> Result<Option<Arc<PerfTable>>> {
        if !self.table_exist(name) {
            return Ok(None);
        }
        if let Some(t) = self.tables.lock().map_err(poisoned)?.get(name) {
            return Ok(Some(Arc::clone(t)));
        }
        let table = Arc::new(PerfTable::try_new(Arc::clone(&self.tree), name)?);
        let mut tables = self.tables.lock().map_err(poisoned)?;
        let table = tables.entry(name.to_string()).or_insert(table);
        Ok(Some(Arc::clone(table)))
    }
}

#[async_trait]
impl SchemaProvider for PerfSchema {
    fn table_names(&self) -> Vec<String> {
        self.kinds.clone()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.perf_table(name)?.map(|t| t as _))
    }

    /// Answered from the directory listing, so `SHOW TABLES` opens no file.
    async fn table_type(&self, name: &str) -> Result<Option<TableType>> {
        Ok(self.table_exist(name).then_some(TableType::Base))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.kinds.iter().any(|k| k == name)
    }
}

fn poisoned<T>(_: T) -> DataFusionError {
    DataFusionError::Internal("aic.perf table cache lock poisoned".into())
}

/// Where a table column comes from in one file.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// One of [`KEY_COLUMNS`], by position.
    Key(usize),
    /// A file column, by its name in the files.
    File(String),
}

/// A session extension capping the partitions of an `aic.perf` scan.
///
/// A scan is split into runs of files, one per partition, up to
/// `datafusion.execution.target_partitions`. Ballista hands each task of a
/// stage a slice of the stage's partitions by rewriting the leaves it knows
/// (file and memory scans); a leaf it does not know keeps every partition,
/// so each of N tasks would read the whole table. An aicsql cluster
/// therefore plans each perf scan as one partition (the tables are small;
/// the work they drive is what gets distributed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfScanPartitions(pub usize);

/// One perf-table kind over all databases.
#[derive(Debug)]
pub struct PerfTable {
    tree: Arc<DataTree>,
    kind: String,
    schema: SchemaRef,
    sources: Vec<Source>,
    files: Vec<ScanFile>,
}

impl PerfTable {
    /// Reads the footers of the kind's files to build the superset schema.
    /// A file whose footer cannot be read, or whose column has a type no
    /// other file's agrees with, is remembered, not fatal: only a scan that
    /// selects it fails, so the other databases stay queryable.
    pub fn try_new(tree: Arc<DataTree>, kind: &str) -> Result<Self> {
        let perf: Vec<&PerfFile> = tree.perf_files().iter().filter(|f| f.table == kind).collect();
        let footers: Vec<std::result::Result<SchemaRef, String>> =
            perf.iter().map(|f| tree.parquet_schema(&f.path).map_err(|e| e.to_string())).collect();
        let columns = FileColumns::vote(footers.iter().filter_map(|f| f.as_ref().ok()));
        let mut fields: Vec<Field> = KEY_COLUMNS.iter().map(|k| Field::new(*k, DataType::Utf8, false)).collect();
        let mut sources: Vec<Source> = (0..KEY_COLUMNS.len()).map(Source::Key).collect();
        for (name, data_type) in &columns.0 {
            let exposed = if KEY_COLUMNS.contains(&name.as_str()) { format!("file_{name}") } else { name.clone() };
            fields.push(Field::new(exposed, data_type.clone(), true));
            sources.push(Source::File(name.clone()));
        }
        let files = perf
            .into_iter()
            .zip(footers)
            .map(|(file, footer)| {
                let footer = footer.and_then(|schema| match columns.disagreement(&schema) {
                    None => Ok(schema),
                    Some((name, found, table)) => Err(format!(
                        "aic.perf.{kind}: column `{name}` is {found} in {} but {table} in the other files",
                        file.path.display()
                    )),
                });
                ScanFile { file: file.clone(), footer }
            })
            .collect();
        Ok(Self { tree, kind: kind.to_string(), schema: Arc::new(Schema::new(fields)), sources, files })
    }

    pub fn files(&self) -> impl Iterator<Item = &PerfFile> {
        self.files.iter().map(|f| &f.file)
    }

    /// Table kind (`gemm`, `moe`, ...).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Rebuilds a scan described by [`PerfScanExec::plan`] over this
    /// process's mount. A database the plan names that this mount does not
    /// serve for the kind is an error naming it (the processes mount
    /// different data), never an empty scan.
    pub fn scan_plan(&self, plan: &PerfScanPlan) -> Result<PerfScanExec> {
        if plan.kind != self.kind {
            return Err(DataFusionError::Internal(format!(
                "aic.perf.{}: asked to rebuild a scan of aic.perf.{}",
                self.kind, plan.kind
            )));
        }
        if let Some(&bad) = plan.projection.iter().find(|&&i| i >= self.schema.fields().len()) {
            return Err(DataFusionError::Execution(format!(
                "aic.perf.{}: the plan reads column {bad}, but this mount's table has {} columns (the processes \
                 mount different data)",
                self.kind,
                self.schema.fields().len()
            )));
        }
        let mut groups = Vec::with_capacity(plan.groups.len());
        for keys in &plan.groups {
            let mut group = Vec::with_capacity(keys.len());
            for key in keys {
                let file = self.files.iter().find(|f| key.matches(&f.file)).ok_or_else(|| {
                    DataFusionError::Execution(format!(
                        "aic.perf.{}: this process's data has no {} table for {}/{}/{} (the processes mount \
                         different data)",
                        self.kind, self.kind, key.system, key.backend, key.version
                    ))
                })?;
                group.push(file.clone());
            }
            groups.push(group);
        }
        Ok(PerfScanExec::grouped(
            Arc::clone(&self.tree),
            self.kind.clone(),
            Arc::clone(&self.schema),
            self.sources.clone(),
            plan.projection.clone(),
            groups,
            plan.total_files,
            plan.limit,
            plan.batch_size,
        ))
    }
}

#[async_trait]
impl TableProvider for PerfTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(prune::pushdown(filters, &KEY_COLUMNS, true))
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let values: Vec<Vec<&str>> = vec![
            self.files.iter().map(|f| f.file.system.as_str()).collect(),
            self.files.iter().map(|f| f.file.backend.as_str()).collect(),
            self.files.iter().map(|f| f.file.version.as_str()).collect(),
        ];
        let keep = prune::select(state, filters, &KEY_COLUMNS, &values)?;
        let selected: Vec<ScanFile> = self.files.iter().zip(keep).filter(|(_, k)| *k).map(|(f, _)| f.clone()).collect();
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        Ok(Arc::new(PerfScanExec::new(
            Arc::clone(&self.tree),
            self.kind.clone(),
            Arc::clone(&self.schema),
            self.sources.clone(),
            projection,
            selected,
            self.files.len(),
            limit,
            match state.config().get_extension::<PerfScanPartitions>() {
                Some(cap) => state.config().target_partitions().min(cap.0).max(1),
                None => state.config().target_partitions(),
            },
            state.config().batch_size(),
        )))
    }
}

impl fmt::Display for PerfTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "aic.perf.{} ({} files)", self.kind, self.files.len())
    }
}

/// The file columns of a table kind, in order of first appearance, each with
/// the type most files give it (widened over the types compatible with it).
struct FileColumns(Vec<(String, DataType)>);

impl FileColumns {
    fn vote<'a>(schemas: impl Iterator<Item = &'a SchemaRef>) -> Self {
        let mut order: Vec<(String, Vec<(DataType, usize)>)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for schema in schemas {
            for field in schema.fields() {
                let slot = *index.entry(field.name().clone()).or_insert_with(|| {
                    order.push((field.name().clone(), Vec::new()));
                    order.len() - 1
                });
                let t = table_type(field.data_type());
                let counts = &mut order[slot].1;
                match counts.iter_mut().find(|(seen, _)| *seen == t) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((t, 1)),
                }
            }
        }
        let columns = order
            .into_iter()
            .map(|(name, counts)| {
                // The most common type (the first seen on a tie), widened by
                // every type that widens with it.
                let mut best = 0;
                for (i, (_, n)) in counts.iter().enumerate() {
                    if *n > counts[best].1 {
                        best = i;
                    }
                }
                let mut t = counts[best].0.clone();
                for (other, _) in &counts {
                    if let Some(w) = widen(&t, other) {
                        t = w;
                    }
                }
                (name, t)
            })
            .collect();
        Self(columns)
    }

    /// The first column of `schema` whose type does not widen to the
    /// table's: (name, its type here, the table's type).
    fn disagreement(&self, schema: &SchemaRef) -> Option<(String, DataType, DataType)> {
        schema.fields().iter().find_map(|field| {
            let (_, table) = self.0.iter().find(|(name, _)| name == field.name())?;
            match widen(table, field.data_type()) {
                Some(w) if w == *table => None,
                _ => Some((field.name().clone(), field.data_type().clone(), table.clone())),
            }
        })
    }
}
