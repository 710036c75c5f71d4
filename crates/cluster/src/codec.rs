//! Extension codecs that carry aicsql's plan nodes between the client, the
//! scheduler and the executors.
//!
//! What crosses the wire is a description: the `aic` table's kind, a table
//! function's name and evaluated arguments, a perf scan's databases and
//! partition groups. The receiving process rebuilds the node over its own
//! mount of the data, after checking that mount's [`fingerprint`] against
//! the sender's, so different data on two machines is an error naming both
//! fingerprints rather than different numbers. Every node the codecs do not
//! know goes to Ballista's own codecs.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result, ScalarValue, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Extension, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use prost::Message;

use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};

use aicsql_catalog::{AicCatalog, DbKey, MetaKind, MetaTable, PerfScanExec, PerfScanPlan, PerfTable};
use aicsql_tables::DataTree;
use aicsql_udfs::{RowsFunction, TableCall, TableCallExec};

use crate::fingerprint::fingerprint;
use crate::proto::{self, AicNode, MAGIC, Node};

/// What a process has mounted, as the codecs need it.
#[derive(Debug)]
pub struct Mount {
    tree: Arc<DataTree>,
    catalog: AicCatalog,
    functions: Vec<Arc<dyn RowsFunction>>,
    fingerprint: OnceLock<u64>,
}

impl Mount {
    pub fn new(tree: Arc<DataTree>) -> Arc<Self> {
        Arc::new(Self {
            catalog: AicCatalog::new(Arc::clone(&tree)),
            functions: aicsql_udfs::rows_functions(&tree),
            tree,
            fingerprint: OnceLock::new(),
        })
    }

    pub fn tree(&self) -> &Arc<DataTree> {
        &self.tree
    }

    /// The data's [`fingerprint`], computed on first use.
    pub fn fingerprint(&self) -> u64 {
        *self.fingerprint.get_or_init(|| fingerprint(&self.tree))
    }

    fn function(&self, name: &str) -> Result<Arc<dyn RowsFunction>> {
        self.functions.iter().find(|f| f.name() == name).cloned().ok_or_else(|| {
            DataFusionError::Internal(format!("aicsql codec: no table function named {name} in this process"))
        })
    }

    fn encode(&self, node: Node, buf: &mut Vec<u8>) -> Result<()> {
        buf.extend_from_slice(MAGIC);
        AicNode { data: self.fingerprint(), node: Some(node) }
            .encode(buf)
            .map_err(|e| DataFusionError::Internal(format!("aicsql codec: cannot encode a plan node: {e}")))
    }

    /// The node of an aicsql message (`None`: not one of ours), checked
    /// against this process's data.
    fn decode(&self, buf: &[u8]) -> Result<Option<Node>> {
        let Some(body) = buf.strip_prefix(MAGIC.as_slice()) else {
            return Ok(None);
        };
        let message = AicNode::decode(body)
            .map_err(|e| DataFusionError::Internal(format!("aicsql codec: corrupt plan node: {e}")))?;
        if message.data != self.fingerprint() {
            return Err(DataFusionError::Execution(format!(
                "aicsql cluster: the plan was made over other perf data (fingerprint {:016x}) than this process \
                 mounts ({:016x}, {} perf files); start the client, the scheduler and every executor with the same \
                 --data",
                message.data,
                self.fingerprint(),
                self.tree.perf_files().len()
            )));
        }
        message.node.map(Some).ok_or_else(|| DataFusionError::Internal("aicsql codec: empty plan node".into()))
    }

    fn perf_table(&self, kind: &str) -> Result<Arc<PerfTable>> {
        self.catalog.perf().perf_table(kind)?.ok_or_else(|| {
            DataFusionError::Execution(format!(
                "aicsql cluster: this process's data has no aic.perf.{kind} table (the processes mount different data)"
            ))
        })
    }
}

fn encode_args(function: &str, args: &[ScalarValue]) -> Result<Vec<datafusion_proto::protobuf::ScalarValue>> {
    args.iter()
        .enumerate()
        .map(|(i, v)| {
            datafusion_proto::protobuf::ScalarValue::try_from(v).map_err(|e| {
                DataFusionError::Internal(format!(
                    "aicsql codec: cannot encode argument {} of {function}: {v}: {e}",
                    i + 1
                ))
            })
        })
        .collect()
}

fn decode_args(function: &str, args: &[datafusion_proto::protobuf::ScalarValue]) -> Result<Vec<ScalarValue>> {
    args.iter()
        .enumerate()
        .map(|(i, v)| {
            ScalarValue::try_from(v).map_err(|e| {
                DataFusionError::Internal(format!("aicsql codec: cannot decode argument {} of {function}: {e}", i + 1))
            })
        })
        .collect()
}

/// The plan's column numbers mean the same columns here as where it was
/// made: same names and types, in the same order.
fn same_columns(table: &TableReference, planned: &SchemaRef, here: &SchemaRef) -> Result<()> {
    let columns =
        |s: &SchemaRef| s.fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect::<Vec<_>>();
    let (planned_cols, here_cols) = (columns(planned), columns(here));
    if planned_cols == here_cols {
        return Ok(());
    }
    let first = planned_cols
        .iter()
        .zip(&here_cols)
        .position(|(a, b)| a != b)
        .unwrap_or(planned_cols.len().min(here_cols.len()));
    let show = |cols: &[(String, datafusion::arrow::datatypes::DataType)]| {
        cols.get(first).map_or_else(|| "nothing".to_string(), |(n, t)| format!("{n} {t}"))
    };
    Err(DataFusionError::Execution(format!(
        "aicsql cluster: {table} has other columns in this process than where the plan was made ({} columns against \
         {}; column {} is {} there, {} here): the processes mount different data",
        planned_cols.len(),
        here_cols.len(),
        first + 1,
        show(&planned_cols),
        show(&here_cols)
    )))
}

/// A received perf scan as this process plans it, refused when it cannot be
/// what an aicsql process encoded: no partition, a database read twice, no
/// batch size.
fn perf_scan_plan(scan: proto::PerfScanNode) -> Result<PerfScanPlan> {
    let corrupt = |what: String| {
        DataFusionError::Internal(format!("aicsql codec: corrupt perf scan of aic.perf.{}: {what}", scan.kind))
    };
    if scan.groups.is_empty() {
        return Err(corrupt("no partition".into()));
    }
    if scan.batch_size == 0 {
        return Err(corrupt("batch size 0".into()));
    }
    let mut seen = std::collections::HashSet::new();
    let mut groups = Vec::with_capacity(scan.groups.len());
    for group in &scan.groups {
        let mut keys = Vec::with_capacity(group.databases.len());
        for d in &group.databases {
            let key = DbKey { system: d.system.clone(), backend: d.backend.clone(), version: d.version.clone() };
            if !seen.insert(key.clone()) {
                return Err(corrupt(format!("database {}/{}/{} listed twice", d.system, d.backend, d.version)));
            }
            keys.push(key);
        }
        groups.push(keys);
    }
    Ok(PerfScanPlan {
        projection: scan.projection.iter().map(|&i| i as usize).collect(),
        groups,
        total_files: usize::try_from(scan.total_files).unwrap_or(usize::MAX),
        limit: scan.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
        batch_size: usize::try_from(scan.batch_size).unwrap_or(usize::MAX),
        kind: scan.kind,
    })
}

fn table_call_node(function: &str, args: &[ScalarValue], projection: Option<&[usize]>) -> Result<proto::TableCallNode> {
    Ok(proto::TableCallNode {
        function: function.to_string(),
        args: encode_args(function, args)?,
        projection: projection.map(|p| proto::Projection { columns: p.iter().map(|&i| i as u32).collect() }),
    })
}

/// The logical codec: `aic` tables and table function calls by description.
#[derive(Debug)]
pub struct AicLogicalCodec {
    mount: Arc<Mount>,
    inner: Arc<dyn LogicalExtensionCodec>,
}

impl AicLogicalCodec {
    pub fn new(mount: Arc<Mount>) -> Self {
        Self { mount, inner: Arc::new(BallistaLogicalExtensionCodec::default()) }
    }
}

impl LogicalExtensionCodec for AicLogicalCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[LogicalPlan], ctx: &TaskContext) -> Result<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let Some(node) = self.mount.decode(buf)? else {
            return self.inner.try_decode_table_provider(buf, table_ref, schema, ctx);
        };
        let provider: Arc<dyn TableProvider> = match node {
            Node::PerfTable(kind) => self.mount.perf_table(&kind)?,
            Node::MetaTable(name) => {
                let kind = MetaKind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
                    DataFusionError::Internal(format!("aicsql codec: no table aic.meta.{name} in this process"))
                })?;
                Arc::new(MetaTable::try_new(Arc::clone(&self.mount.tree), kind)?)
            }
            Node::TableCall(call) => {
                Arc::new(TableCall::new(self.mount.function(&call.function)?, decode_args(&call.function, &call.args)?))
            }
            other => {
                return Err(DataFusionError::Internal(format!(
                    "aicsql codec: a physical node where a table was expected: {other:?}"
                )));
            }
        };
        same_columns(table_ref, &schema, &provider.schema())?;
        Ok(provider)
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        if let Some(table) = node.downcast_ref::<PerfTable>() {
            return self.mount.encode(Node::PerfTable(table.kind().to_string()), buf);
        }
        if let Some(table) = node.downcast_ref::<MetaTable>() {
            return self.mount.encode(Node::MetaTable(table.kind().name().to_string()), buf);
        }
        if let Some(call) = node.downcast_ref::<TableCall>() {
            return self
                .mount
                .encode(Node::TableCall(table_call_node(call.function().name(), call.args(), None)?), buf);
        }
        self.inner.try_encode_table_provider(table_ref, node, buf)
    }

    fn try_decode_file_format(&self, buf: &[u8], ctx: &TaskContext) -> Result<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(&self, buf: &mut Vec<u8>, node: Arc<dyn FileFormatFactory>) -> Result<()> {
        self.inner.try_encode_file_format(buf, node)
    }
}

/// The physical codec: perf scans and table function scans by description.
#[derive(Debug)]
pub struct AicPhysicalCodec {
    mount: Arc<Mount>,
    inner: Arc<dyn PhysicalExtensionCodec>,
}

impl AicPhysicalCodec {
    pub fn new(mount: Arc<Mount>) -> Self {
        Self { mount, inner: Arc::new(BallistaPhysicalExtensionCodec::default()) }
    }
}

impl PhysicalExtensionCodec for AicPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(node) = self.mount.decode(buf)? else {
            return self.inner.try_decode(buf, inputs, ctx, proto_converter);
        };
        match node {
            Node::PerfScan(scan) => {
                let plan = perf_scan_plan(scan)?;
                Ok(Arc::new(self.mount.perf_table(&plan.kind)?.scan_plan(&plan)?))
            }
            Node::TableCallExec(call) => {
                let projection = call.projection.map(|p| p.columns.iter().map(|&i| i as usize).collect());
                Ok(Arc::new(TableCallExec::try_new(
                    self.mount.function(&call.function)?,
                    decode_args(&call.function, &call.args)?,
                    projection,
                )?))
            }
            other => Err(DataFusionError::Internal(format!(
                "aicsql codec: a logical node where an execution plan was expected: {other:?}"
            ))),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(scan) = node.downcast_ref::<PerfScanExec>() {
            let plan = scan.plan();
            let node = proto::PerfScanNode {
                kind: plan.kind,
                projection: plan.projection.iter().map(|&i| i as u32).collect(),
                groups: plan
                    .groups
                    .into_iter()
                    .map(|g| proto::FileGroup {
                        databases: g
                            .into_iter()
                            .map(|k| proto::Database { system: k.system, backend: k.backend, version: k.version })
                            .collect(),
                    })
                    .collect(),
                total_files: plan.total_files as u64,
                limit: plan.limit.map(|l| l as u64),
                batch_size: plan.batch_size as u64,
            };
            return self.mount.encode(Node::PerfScan(node), buf);
        }
        if let Some(call) = node.downcast_ref::<TableCallExec>() {
            let node = table_call_node(call.function().name(), call.args(), call.projection())?;
            return self.mount.encode(Node::TableCallExec(node), buf);
        }
        self.inner.try_encode(node, buf, proto_converter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(system: &str) -> proto::Database {
        proto::Database { system: system.into(), backend: "vllm".into(), version: "0.19.0".into() }
    }

    fn scan(groups: Vec<Vec<proto::Database>>, batch_size: u64) -> proto::PerfScanNode {
        proto::PerfScanNode {
            kind: "gemm".into(),
            projection: vec![0, 2],
            groups: groups.into_iter().map(|databases| proto::FileGroup { databases }).collect(),
            total_files: 2,
            limit: Some(7),
            batch_size,
        }
    }

    #[test]
    fn a_received_perf_scan_keeps_everything_it_was_sent_with() {
        let plan = perf_scan_plan(scan(vec![vec![db("h200_sxm")], vec![db("gb200")]], 8192)).expect("a scan");
        assert_eq!(plan.kind, "gemm");
        assert_eq!(plan.projection, [0, 2]);
        assert_eq!(plan.groups.len(), 2);
        assert_eq!(plan.groups[1][0].system, "gb200");
        assert_eq!((plan.total_files, plan.limit, plan.batch_size), (2, Some(7), 8192));
    }

    #[test]
    fn a_perf_scan_no_aicsql_process_sends_is_refused_as_corrupt() {
        for (node, what) in [
            (scan(vec![], 8192), "no partition"),
            (scan(vec![vec![db("h200_sxm")]], 0), "batch size 0"),
            (scan(vec![vec![db("h200_sxm")], vec![db("h200_sxm")]], 8192), "h200_sxm/vllm/0.19.0 listed twice"),
        ] {
            let e = perf_scan_plan(node).expect_err(what).to_string();
            assert!(e.contains("corrupt perf scan of aic.perf.gemm") && e.contains(what), "{e}");
        }
    }
}
