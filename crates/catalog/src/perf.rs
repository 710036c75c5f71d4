//! Schema `aic.perf`: one table per perf-table kind, the raw rows of every
//! database's file of that kind, with the database's (system, backend,
//! version) as leading columns.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use aicsql_tables::{DataTree, PerfFile};

use crate::prune;
use crate::scan::{PerfScanExec, ScanFile};
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
}

#[async_trait]
impl SchemaProvider for PerfSchema {
    fn table_names(&self) -> Vec<String> {
        self.kinds.clone()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if !self.table_exist(name) {
            return Ok(None);
        }
        if let Some(t) = self.tables.lock().map_err(poisoned)?.get(name) {
            return Ok(Some(Arc::clone(t) as _));
        }
        let table = Arc::new(PerfTable::try_new(Arc::clone(&self.tree), name)?);
        let mut tables = self.tables.lock().map_err(poisoned)?;
        let table = tables.entry(name.to_string()).or_insert(table);
        Ok(Some(Arc::clone(table) as _))
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
    /// A file whose footer cannot be read is remembered, not fatal: only a
    /// scan that selects it fails, so the other databases stay queryable.
    pub fn try_new(tree: Arc<DataTree>, kind: &str) -> Result<Self> {
        let mut fields: Vec<Field> = KEY_COLUMNS.iter().map(|k| Field::new(*k, DataType::Utf8, false)).collect();
        let mut sources: Vec<Source> = (0..KEY_COLUMNS.len()).map(Source::Key).collect();
        let mut by_name: HashMap<String, (usize, String)> = HashMap::new();
        let mut files = Vec::new();
        for file in tree.perf_files().iter().filter(|f| f.table == kind) {
            let footer = tree.parquet_schema(&file.path);
            if let Ok(schema) = &footer {
                for field in schema.fields() {
                    let name = field.name();
                    match by_name.get(name) {
                        None => {
                            let exposed = if KEY_COLUMNS.contains(&name.as_str()) {
                                format!("file_{name}")
                            } else {
                                name.clone()
                            };
                            by_name.insert(name.clone(), (fields.len(), file.path.display().to_string()));
                            fields.push(Field::new(exposed, table_type(field.data_type()), true));
                            sources.push(Source::File(name.clone()));
                        }
                        Some((idx, first_path)) => {
                            let current = fields[*idx].data_type().clone();
                            let Some(common) = widen(&current, field.data_type()) else {
                                return plan_err!(
                                    "aic.perf.{kind}: column `{name}` is {current} in {first_path} \
                                     but {} in {}",
                                    field.data_type(),
                                    file.path.display()
                                );
                            };
                            let f = fields[*idx].clone().with_data_type(common);
                            fields[*idx] = f;
                        }
                    }
                }
            }
            files.push(ScanFile { file: file.clone(), footer: footer.map_err(|e| e.to_string()) });
        }
        Ok(Self { tree, kind: kind.to_string(), schema: Arc::new(Schema::new(fields)), sources, files })
    }

    pub fn files(&self) -> impl Iterator<Item = &PerfFile> {
        self.files.iter().map(|f| &f.file)
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
            state.config().target_partitions(),
            state.config().batch_size(),
        )))
    }
}

impl fmt::Display for PerfTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "aic.perf.{} ({} files)", self.kind, self.files.len())
    }
}
