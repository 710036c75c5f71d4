//! The kernel tables of the engine step besides GEMM (docs/spec section 4.4):
//! context and generation attention, custom all-reduce, NCCL, MoE, the MLA
//! tables and the fp8-static scale tables. Each
//! is loaded from its sources once (first-wins, insertion order kept),
//! indexed into [`Grid`](crate::grid::Grid) slices and shared process-wide.

mod allreduce;
mod context_attention;
mod cp_sparse;
mod dsa;
mod dsv4;
mod dsv4_calib;
mod encoder_attention;
mod gdn;
mod generation_attention;
mod mamba2;
mod mla;
mod moe;
mod nccl;
mod quantize;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::{DbKey, Slots, TableCache, db_key};
use crate::discovery::DataTree;
use crate::error::{Result, TablesError};
use crate::grid::{GridMiss, GridPath};
use crate::op_sol::OpSol;
use crate::sources::TableSource;
use crate::system::{SystemSpec, system_spec};

pub use allreduce::AllReduceTable;
pub use context_attention::{ContextAttentionTable, CtxAttnQuery};
pub use cp_sparse::{
    ByBatch, DsaSparseKinds, DsaSparseTable, Dsv4CpTable, Dsv32SparseTable, Glm5SparseTable, IslBeyondGrid, IslSteps,
    dsa_sparse_prefix,
};
pub use dsa::{ContextDsaTable, DsaArch, DsaQuant, GenerationDsaTable};
pub use dsv4::{ContextDsv4Table, Dsv4TopkCalib, GenerationDsv4Table, MhcTable, TopkVariant};
pub use encoder_attention::EncoderAttentionTable;
pub use gdn::{GdnKernel, GdnShape, GdnTable};
pub use generation_attention::{GenAttnQuery, GenAttnResult, GenerationAttentionTable};
pub use mamba2::{Mamba2Kernel, Mamba2Shape, Mamba2Table};
pub use mla::{
    ContextMlaModuleTable, ContextMlaTable, CtxMlaQuery, GenerationMlaModuleTable, GenerationMlaTable, MlaBmmTable,
};
pub use moe::{MoeQuery, MoeShape, MoeTable};
pub use nccl::NcclTable;
pub use quantize::{ComputeScaleTable, ScaleMatrixTable};

/// Where a kernel table of one database came from: the database and the
/// sources its rows were taken from, in union order.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `system/backend/version`.
    pub db: String,
    pub sources: Vec<TableSource>,
}

/// A kernel table of one database and shared-layer mode: loaded from its
/// sources on first use, then shared through the tree's cache by every
/// caller and thread that holds the tree.
pub trait DatabaseTable: Sized {
    /// This kind's slots in the tree's cache.
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self>;

    fn origin(&self) -> &Origin;

    /// Reads the table's sources (no cache).
    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self>;

    /// The tree's shared table, loaded on first use.
    fn cached(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Arc<Self>> {
        Self::slots(tree.cache()).get((db_key(system, backend, version), shared_layer), || {
            Self::load(tree, system, backend, version, shared_layer)
        })
    }

    /// `system/backend/version`.
    fn db(&self) -> &str {
        &self.origin().db
    }

    fn sources(&self) -> &[TableSource] {
        &self.origin().sources
    }
}

/// The answer of a linear-attention kernel table (GDN, Mamba-2), which
/// never misses: where it has nothing to anchor a query, the spec prices
/// the kernel at its memory roofline instead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RooflineAnswer {
    /// From the table (an exact hit, an interpolation or a hold).
    Table(f64, GridPath),
    /// The memory roofline.
    Roofline(f64),
}

/// Why a kernel-table lookup has no answer. The spec raises
/// `PerfDataNotAvailableError` in each case; the message says which slice
/// or coordinate was missing.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelMiss {
    /// `system/backend/version` of the table.
    pub db: String,
    /// The table file (`context_attention_perf`).
    pub table: &'static str,
    pub reason: String,
}

impl fmt::Display for KernelMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.db, self.table, self.reason)
    }
}

impl std::error::Error for KernelMiss {}

impl KernelMiss {
    pub(crate) fn new(db: &str, table: &'static str, reason: impl Into<String>) -> KernelMiss {
        KernelMiss { db: db.to_string(), table, reason: reason.into() }
    }

    pub(crate) fn grid(db: &str, table: &'static str, miss: GridMiss, coords: &str) -> KernelMiss {
        KernelMiss::new(db, table, format!("perf_interp: no data to anchor query {coords} ({miss})"))
    }
}

/// The system constants of a database, with the YAML they came from.
pub(crate) fn system_constants(tree: &DataTree, system: &str) -> Result<(SystemSpec, OpSol, PathBuf)> {
    let (spec, yaml) = system_spec(tree, system)?;
    let sol = OpSol::new(&spec).map_err(|e| TablesError::document(&yaml, e))?;
    Ok((spec, sol, yaml))
}
