//! Mamba-2 kernels of Nemotron-H's state-space layers: `[kernel][model
//! shape]` context slices of `mamba2_perf` files, a raw grid over (batch,
//! seq_len) (docs/spec/families_nemotron.md 3).
//!
//! Like the GDN table, a lookup never misses: the memory roofline answers
//! wherever the table has nothing (1.6, 3.2). Two details of the spec's
//! loader decide what the table holds: decode rows are never stored (its
//! nested maps take every generation row for a conflict), and a model shape
//! the table lacks borrows the first stored shape with the same `d_model`.

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::{ErrorClass, Result};
use crate::grid::{Grid, GridConfig};
use crate::kernels::{DatabaseTable, Origin, RooflineAnswer, system_constants};
use crate::op_sol::OpSol;
use crate::sources::{MAMBA2_FILE, plan};

/// The four kernels a Nemotron-H step prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mamba2Kernel {
    /// Context: the causal convolution over the prompt.
    ConvFn,
    /// Context: the chunked state-space scan.
    ChunkScan,
    /// Generation: one convolution state update.
    ConvUpdate,
    /// Generation: one state update.
    StateUpdate,
}

impl Mamba2Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Mamba2Kernel::ConvFn => "causal_conv1d_fn",
            Mamba2Kernel::ChunkScan => "mamba_chunk_scan_combined",
            Mamba2Kernel::ConvUpdate => "causal_conv1d_update",
            Mamba2Kernel::StateUpdate => "selective_state_update",
        }
    }

    pub fn is_context(self) -> bool {
        matches!(self, Mamba2Kernel::ConvFn | Mamba2Kernel::ChunkScan)
    }

    pub fn is_conv(self) -> bool {
        matches!(self, Mamba2Kernel::ConvFn | Mamba2Kernel::ConvUpdate)
    }

    pub fn phase(self) -> &'static str {
        if self.is_context() { "context" } else { "generation" }
    }
}

/// A model's unsharded Mamba-2 dimensions: the table's model key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mamba2Shape {
    pub d_model: i64,
    pub d_state: i64,
    pub d_conv: i64,
    pub heads: i64,
    pub head_dim: i64,
    pub groups: i64,
    pub chunk: i64,
}

/// The Mamba-2 table of one database (possibly empty).
#[derive(Debug)]
pub struct Mamba2Table {
    origin: Origin,
    /// Per kernel name, its context curves by model shape in first-appearance order.
    kernels: Vec<(String, Vec<(Mamba2Shape, Grid<2>)>)>,
    sol: OpSol,
}

const KERNEL_SOURCE: Col = Col::text("kernel_source");
const PHASE: Col = Col::text("phase");
const BATCH_SIZE: Col = Col::int("batch_size");
const SEQ_LEN: Col = Col::int("seq_len");
const D_MODEL: Col = Col::int("d_model");
const D_STATE: Col = Col::int("d_state");
const D_CONV: Col = Col::int("d_conv");
const NHEADS: Col = Col::int("nheads");
const HEAD_DIM: Col = Col::int("head_dim");
const N_GROUPS: Col = Col::int("n_groups");
const CHUNK_SIZE: Col = Col::int("chunk_size");
const COLUMNS: [Col; 12] = [
    KERNEL_SOURCE,
    PHASE,
    BATCH_SIZE,
    SEQ_LEN,
    D_MODEL,
    D_STATE,
    D_CONV,
    NHEADS,
    HEAD_DIM,
    N_GROUPS,
    CHUNK_SIZE,
    Col::LATENCY,
];

impl DatabaseTable for Mamba2Table {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.mamba2
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        // No file anywhere (every vllm and sglang database) is no error.
        let mut sources = match plan(tree, &MAMBA2_FILE, system, backend, version, shared_layer) {
            Ok(sources) => sources,
            Err(e) if e.class() == ErrorClass::Miss => Vec::new(),
            Err(e) => return Err(e),
        };
        let (_, sol, _) = system_constants(tree, system)?;
        let mut kernels: Vec<(String, Vec<(Mamba2Shape, Grid<2>)>)> = Vec::new();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (names, phases) = (rows.text(KERNEL_SOURCE)?, rows.text(PHASE)?);
                let (batches, seqs, d_models) = (rows.int(BATCH_SIZE)?, rows.int(SEQ_LEN)?, rows.int(D_MODEL)?);
                let (states, convs, heads) = (rows.int(D_STATE)?, rows.int(D_CONV)?, rows.int(NHEADS)?);
                let (dims, groups, chunks) = (rows.int(HEAD_DIM)?, rows.int(N_GROUPS)?, rows.int(CHUNK_SIZE)?);
                let latencies = rows.float(Col::LATENCY)?;
                for i in 0..rows.len() {
                    // The spec's loader never keeps a decode row (see the module doc).
                    if phases.req(i)? != "context" {
                        continue;
                    }
                    let name = names.req(i)?;
                    let at = match kernels.iter().position(|(k, _)| k == name) {
                        Some(at) => at,
                        None => {
                            kernels.push((name.to_string(), Vec::new()));
                            kernels.len() - 1
                        }
                    };
                    let shape = Mamba2Shape {
                        d_model: d_models.req(i)?,
                        d_state: states.req(i)?,
                        d_conv: convs.req(i)?,
                        heads: heads.req(i)?,
                        head_dim: dims.req(i)?,
                        groups: groups.req(i)?,
                        chunk: chunks.req(i)?,
                    };
                    let curves = &mut kernels[at].1;
                    let slot = match curves.iter().position(|(s, _)| *s == shape) {
                        Some(slot) => slot,
                        None => {
                            curves.push((shape, Grid::new()));
                            curves.len() - 1
                        }
                    };
                    if curves[slot].1.insert([batches.req(i)?, seqs.req(i)?], latencies.req(i)?) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(Mamba2Table { origin: Origin { db: format!("{system}/{backend}/{version}"), sources }, kernels, sol })
    }
}

impl Mamba2Table {
    /// `query_mamba2(phase, kernel, batch_size, seq_len, shape)`: `seq_len`
    /// is the prompt length in context and ignored in generation.
    pub fn query(&self, kernel: Mamba2Kernel, batch: i64, seq_len: i64, shape: &Mamba2Shape) -> RooflineAnswer {
        let seq = kernel.is_context().then_some(seq_len).filter(|s| *s > 0);
        let roofline = RooflineAnswer::Roofline(self.sol.mamba2(kernel.is_conv(), batch, seq, shape));
        let (Some(seq_len), true) = (seq, kernel.is_context()) else { return roofline };
        let Some((_, curves)) = self.kernels.iter().find(|(k, _)| k == kernel.name()) else { return roofline };
        let grid = curves
            .iter()
            .find(|(s, _)| s == shape)
            .or_else(|| curves.iter().find(|(s, _)| s.d_model == shape.d_model))
            .map(|(_, g)| g);
        let Some(grid) = grid else { return roofline };
        let sol = |c: &[i64; 2]| self.sol.mamba2(kernel.is_conv(), c[0], Some(c[1]), shape);
        match grid.resolve([batch, seq_len], GridConfig::RAW, &sol) {
            Ok((v, path)) => RooflineAnswer::Table(v, path),
            Err(_) => roofline,
        }
    }
}
