//! The physical scan of a perf table: selected files, read in file order,
//! mapped onto the table schema.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, StringArray, new_null_array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use aicsql_tables::{DataTree, ParquetBatchReader, PerfFile};

use crate::perf::Source;

/// A file of the table and what its footer said.
#[derive(Debug, Clone)]
pub(crate) struct ScanFile {
    pub file: PerfFile,
    /// The file's own schema, or why its footer could not be read.
    pub footer: std::result::Result<SchemaRef, String>,
}

/// Scans the files a query selected; each output partition reads a
/// contiguous run of files, so rows come out in file order.
#[derive(Debug)]
pub struct PerfScanExec {
    tree: Arc<DataTree>,
    kind: String,
    table_schema: SchemaRef,
    sources: Vec<Source>,
    projection: Vec<usize>,
    projected: SchemaRef,
    groups: Vec<Vec<ScanFile>>,
    total_files: usize,
    limit: Option<usize>,
    batch_size: usize,
    properties: Arc<PlanProperties>,
}

impl PerfScanExec {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        tree: Arc<DataTree>,
        kind: String,
        table_schema: SchemaRef,
        sources: Vec<Source>,
        projection: Vec<usize>,
        files: Vec<ScanFile>,
        total_files: usize,
        limit: Option<usize>,
        target_partitions: usize,
        batch_size: usize,
    ) -> Self {
        let n_groups = target_partitions.max(1).min(files.len()).max(1);
        let per_group = files.len().div_ceil(n_groups).max(1);
        let groups: Vec<Vec<ScanFile>> = files.chunks(per_group).map(<[ScanFile]>::to_vec).collect();
        Self::grouped(tree, kind, table_schema, sources, projection, groups, total_files, limit, batch_size)
    }

    /// A scan of files already grouped into output partitions.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn grouped(
        tree: Arc<DataTree>,
        kind: String,
        table_schema: SchemaRef,
        sources: Vec<Source>,
        projection: Vec<usize>,
        mut groups: Vec<Vec<ScanFile>>,
        total_files: usize,
        limit: Option<usize>,
        batch_size: usize,
    ) -> Self {
        let projected =
            Arc::new(Schema::new(projection.iter().map(|&i| table_schema.field(i).clone()).collect::<Vec<_>>()));
        if groups.is_empty() {
            groups.push(Vec::new());
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&projected)),
            Partitioning::UnknownPartitioning(groups.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            tree,
            kind,
            table_schema,
            sources,
            projection,
            projected,
            groups,
            total_files,
            limit,
            batch_size,
            properties,
        }
    }

    fn selected_files(&self) -> impl Iterator<Item = &ScanFile> {
        self.groups.iter().flatten()
    }

    /// What the scan reads, in terms another process can rebuild it from
    /// over its own mount of the same data ([`crate::PerfTable::scan_plan`]).
    pub fn plan(&self) -> PerfScanPlan {
        PerfScanPlan {
            kind: self.kind.clone(),
            projection: self.projection.clone(),
            groups: self.groups.iter().map(|g| g.iter().map(|f| DbKey::of(&f.file)).collect()).collect(),
            total_files: self.total_files,
            limit: self.limit,
            batch_size: self.batch_size,
        }
    }
}

/// A database by name: (system, backend, version).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DbKey {
    pub system: String,
    pub backend: String,
    pub version: String,
}

impl DbKey {
    pub(crate) fn of(file: &PerfFile) -> Self {
        Self { system: file.system.clone(), backend: file.backend.clone(), version: file.version.clone() }
    }

    pub(crate) fn matches(&self, file: &PerfFile) -> bool {
        self.system == file.system && self.backend == file.backend && self.version == file.version
    }
}

/// A [`PerfScanExec`] as a durable description: no paths, no handles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfScanPlan {
    /// Table kind (`gemm`, `moe`, ...).
    pub kind: String,
    /// Table columns read, in output order.
    pub projection: Vec<usize>,
    /// The selected databases' files, grouped by output partition, in order.
    pub groups: Vec<Vec<DbKey>>,
    /// Files of the kind before pruning (for display).
    pub total_files: usize,
    pub limit: Option<usize>,
    pub batch_size: usize,
}

impl DisplayAs for PerfScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let selected = self.selected_files().count();
        let columns: Vec<&str> = self.projection.iter().map(|&i| self.table_schema.field(i).name().as_str()).collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "PerfScanExec: table=aic.perf.{}, files={selected} of {} (pruned on system/backend/version)",
                    self.kind, self.total_files
                )?;
                if selected <= 4 {
                    let dbs: Vec<String> = self.selected_files().map(|s| s.file.db()).collect();
                    write!(f, ", databases=[{}]", dbs.join(", "))?;
                }
                write!(f, ", projection=[{}]", columns.join(", "))?;
                if let Some(limit) = self.limit {
                    write!(f, ", limit={limit}")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "table=aic.perf.{}", self.kind)?;
                write!(f, "files={selected} of {}", self.total_files)
            }
        }
    }
}

impl ExecutionPlan for PerfScanExec {
    fn name(&self) -> &str {
        "PerfScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, _: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let group = self
            .groups
            .get(partition)
            .cloned()
            .ok_or_else(|| DataFusionError::Internal(format!("PerfScanExec: no partition {partition}")))?;
        // Fail before reading anything if a selected file is unreadable.
        if let Some(bad) = group.iter().find_map(|f| f.footer.as_ref().err()) {
            return Err(DataFusionError::Execution(format!("aic.perf.{}: {bad}", self.kind)));
        }
        let reader = GroupReader {
            tree: Arc::clone(&self.tree),
            kind: self.kind.clone(),
            projected: Arc::clone(&self.projected),
            columns: self.projection.iter().map(|&i| self.sources[i].clone()).collect(),
            files: group.into_iter(),
            current: None,
            remaining: self.limit,
            batch_size: self.batch_size,
        };
        let stream = futures::stream::iter(reader);
        Ok(Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&self.projected), stream)))
    }
}

/// Iterates the batches of a run of files, mapping each onto the table schema.
struct GroupReader {
    tree: Arc<DataTree>,
    kind: String,
    projected: SchemaRef,
    columns: Vec<Source>,
    files: std::vec::IntoIter<ScanFile>,
    current: Option<(ScanFile, Vec<Option<usize>>, ParquetBatchReader)>,
    remaining: Option<usize>,
    batch_size: usize,
}

impl GroupReader {
    fn open(&self, scan: &ScanFile) -> Result<(Vec<Option<usize>>, ParquetBatchReader)> {
        let footer = scan.footer.as_ref().map_err(|e| DataFusionError::Execution(e.clone()))?;
        // File column indices to read, in file order, and for each output
        // column its position among the read columns.
        let mut wanted: Vec<usize> = self
            .columns
            .iter()
            .filter_map(|c| match c {
                Source::File(name) => footer.index_of(name).ok(),
                Source::Key(_) => None,
            })
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let positions = self
            .columns
            .iter()
            .map(|c| match c {
                Source::File(name) => footer.index_of(name).ok().and_then(|i| wanted.iter().position(|&w| w == i)),
                Source::Key(_) => None,
            })
            .collect();
        let reader = self
            .tree
            .parquet_reader(&scan.file.path, Some(&wanted), self.batch_size)
            .map_err(|e| DataFusionError::Execution(format!("aic.perf.{}: {e}", self.kind)))?;
        Ok((positions, reader))
    }

    fn map_batch(&self, scan: &ScanFile, positions: &[Option<usize>], batch: &RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for ((source, position), field) in self.columns.iter().zip(positions).zip(self.projected.fields()) {
            let array = match (source, position) {
                (Source::Key(k), _) => {
                    let value = match k {
                        0 => scan.file.system.as_str(),
                        1 => scan.file.backend.as_str(),
                        _ => scan.file.version.as_str(),
                    };
                    Arc::new(StringArray::from_iter_values(std::iter::repeat_n(value, rows))) as ArrayRef
                }
                (Source::File(_), Some(p)) => {
                    let column = batch.column(*p);
                    if column.data_type() == field.data_type() {
                        Arc::clone(column)
                    } else {
                        cast(column, field.data_type())?
                    }
                }
                (Source::File(_), None) => new_null_array(field.data_type(), rows),
            };
            arrays.push(array);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(Arc::clone(&self.projected), arrays, &options)?)
    }
}

impl Iterator for GroupReader {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.remaining == Some(0) {
                return None;
            }
            if self.current.is_none() {
                let scan = self.files.next()?;
                match self.open(&scan) {
                    Ok((positions, reader)) => self.current = Some((scan, positions, reader)),
                    Err(e) => {
                        self.remaining = Some(0);
                        return Some(Err(e));
                    }
                }
            }
            let (scan, positions, mut reader) = self.current.take()?;
            match reader.next() {
                None => {}
                Some(Err(e)) => {
                    let msg =
                        format!("aic.perf.{}: cannot read parquet file {}: {e}", self.kind, scan.file.path.display());
                    self.remaining = Some(0);
                    return Some(Err(DataFusionError::Execution(msg)));
                }
                Some(Ok(batch)) => {
                    let mapped = self.map_batch(&scan, &positions, &batch);
                    self.current = Some((scan, positions, reader));
                    let mut batch = match mapped {
                        Ok(b) => b,
                        Err(e) => return Some(Err(e)),
                    };
                    if let Some(remaining) = self.remaining.as_mut() {
                        if batch.num_rows() > *remaining {
                            batch = batch.slice(0, *remaining);
                        }
                        *remaining -= batch.num_rows();
                    }
                    return Some(Ok(batch));
                }
            }
        }
    }
}
