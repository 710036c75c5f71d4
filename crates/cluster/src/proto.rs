//! The wire form of aicsql's plan nodes: names and arguments, never paths or
//! handles. Each message carries the fingerprint of the data it was planned
//! over, so a process that mounts other data refuses it by name.

use datafusion_proto::protobuf::ScalarValue as ProtoScalar;

/// Every aicsql node starts with these bytes, so a codec tells its own
/// nodes from Ballista's and DataFusion's without trying to parse them.
pub const MAGIC: &[u8; 4] = b"AIC1";

#[derive(Clone, PartialEq, prost::Message)]
pub struct AicNode {
    /// [`crate::fingerprint`] of the planning process's data.
    #[prost(uint64, tag = "1")]
    pub data: u64,
    #[prost(oneof = "Node", tags = "2, 3, 4, 5, 6")]
    pub node: Option<Node>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Node {
    /// `aic.perf.<kind>` (logical plans).
    #[prost(string, tag = "2")]
    PerfTable(String),
    /// `aic.meta.<name>` (logical plans).
    #[prost(string, tag = "3")]
    MetaTable(String),
    /// A table function call (logical plans).
    #[prost(message, tag = "4")]
    TableCall(TableCallNode),
    /// A table function call's scan (physical plans).
    #[prost(message, tag = "5")]
    TableCallExec(TableCallNode),
    /// A perf table's scan (physical plans).
    #[prost(message, tag = "6")]
    PerfScan(PerfScanNode),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TableCallNode {
    #[prost(string, tag = "1")]
    pub function: String,
    #[prost(message, repeated, tag = "2")]
    pub args: Vec<ProtoScalar>,
    /// Output columns of the function's schema; absent: all of them.
    #[prost(message, optional, tag = "3")]
    pub projection: Option<Projection>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Projection {
    #[prost(uint32, repeated, tag = "1")]
    pub columns: Vec<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PerfScanNode {
    #[prost(string, tag = "1")]
    pub kind: String,
    #[prost(uint32, repeated, tag = "2")]
    pub projection: Vec<u32>,
    /// The selected databases, grouped by output partition.
    #[prost(message, repeated, tag = "3")]
    pub groups: Vec<FileGroup>,
    #[prost(uint64, tag = "4")]
    pub total_files: u64,
    #[prost(uint64, optional, tag = "5")]
    pub limit: Option<u64>,
    #[prost(uint64, tag = "6")]
    pub batch_size: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FileGroup {
    #[prost(message, repeated, tag = "1")]
    pub databases: Vec<Database>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Database {
    #[prost(string, tag = "1")]
    pub system: String,
    #[prost(string, tag = "2")]
    pub backend: String,
    #[prost(string, tag = "3")]
    pub version: String,
}
