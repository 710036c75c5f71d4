//! The kernel tables of the engine step besides GEMM (docs/spec section 4.4):
//! context and generation attention, custom all-reduce, NCCL and MoE. Each
//! is loaded from its sources once (first-wins, insertion order kept),
//! indexed into [`Grid`](crate::grid::Grid) slices and shared process-wide.

mod allreduce;
mod context_attention;
mod generation_attention;
mod moe;
mod nccl;

use std::fmt;
use std::path::PathBuf;

use crate::discovery::DataTree;
use crate::error::{Result, TablesError};
use crate::grid::GridMiss;
use crate::op_sol::OpSol;
use crate::system::{SystemSpec, system_spec};

pub use allreduce::AllReduceTable;
pub use context_attention::{ContextAttentionTable, CtxAttnQuery};
pub use generation_attention::{GenAttnQuery, GenAttnResult, GenerationAttentionTable};
pub use moe::{MoeQuery, MoeShape, MoeTable};
pub use nccl::NcclTable;

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
