//! NCCL collectives: `[nccl_dtype][op_name][num_gpus][message_size]` from
//! `comm/nccl/<nccl_version>/` (docs/spec 4.4), the NCCL version coming from the
//! system YAML's `misc.nccl_version`. Primary file only. A query uses the
//! slice of `min(g, largest collected num_gpus)` (7.1).

use foldhash::HashMap;
use std::sync::Arc;

use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::{Result, TablesError};
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{KernelMiss, system_constants};
use crate::op_sol::OpSol;
use crate::sources::{NCCL_FILE, TableSource, plan};
use crate::system::Num;

/// The NCCL table of one system.
#[derive(Debug)]
pub struct NcclTable {
    db: String,
    sources: Vec<TableSource>,
    /// Interned `(dtype, op)` pairs; `slices[i]` maps num_gpus to its grid.
    names: Vec<(String, String)>,
    slices: Vec<HashMap<i64, Grid<1>>>,
    sol: OpSol,
}

const NCCL_DTYPE: Col = Col::text("nccl_dtype");
const OP_NAME: Col = Col::text("op_name");
const NUM_GPUS: Col = Col::int("num_gpus");
const MESSAGE_SIZE: Col = Col::int("message_size");
const COLUMNS: [Col; 5] = [NCCL_DTYPE, OP_NAME, NUM_GPUS, MESSAGE_SIZE, Col::LATENCY];

impl NcclTable {
    /// Loads `system`'s NCCL table of the version its YAML names.
    pub fn load(tree: &DataTree, system: &str) -> Result<Self> {
        let (spec, sol, yaml) = system_constants(tree, system)?;
        let version = spec
            .nccl_version
            .ok_or_else(|| TablesError::document(&yaml, "missing `misc.nccl_version` (needed for NCCL collectives)"))?;
        let mut sources = plan(tree, &NCCL_FILE, system, "nccl", &version, false)?;
        let mut names: Vec<(String, String)> = Vec::new();
        let mut slices: Vec<HashMap<i64, Grid<1>>> = Vec::new();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (dtypes, ops) = (rows.text(NCCL_DTYPE)?, rows.text(OP_NAME)?);
                let (gpus, sizes, latencies) =
                    (rows.int(NUM_GPUS)?, rows.int(MESSAGE_SIZE)?, rows.float(Col::LATENCY)?);
                for i in 0..rows.len() {
                    let (dtype, op) = (dtypes.req(i)?, ops.req(i)?);
                    let id = match names.iter().position(|(d, o)| d == dtype && o == op) {
                        Some(id) => id,
                        None => {
                            names.push((dtype.to_string(), op.to_string()));
                            slices.push(HashMap::default());
                            names.len() - 1
                        }
                    };
                    let (gpus, size, latency) = (gpus.req(i)?, sizes.req(i)?, latencies.req(i)?);
                    if slices[id].entry(gpus).or_default().insert([size], latency) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(NcclTable { db: format!("{system}/nccl/{version}"), sources, names, slices, sol })
    }

    /// The process-wide shared table, loaded on first use.
    pub fn cached(tree: &DataTree, system: &str) -> Result<Arc<Self>> {
        tree.cache().nccl.get(system.to_string(), || Self::load(tree, system))
    }

    pub fn sources(&self) -> &[TableSource] {
        &self.sources
    }

    /// `query_nccl(dtype, g, op, size)`; `memory` is the dtype's bytes per element.
    pub fn query(&self, dtype: &str, memory: Num, g: i64, op: &str, size: i64) -> Result<(f64, GridPath), KernelMiss> {
        let miss = |reason: String| KernelMiss::new(&self.db, NCCL_FILE.file, reason);
        let id = self
            .names
            .iter()
            .position(|(d, o)| d == dtype && o == op)
            .ok_or_else(|| miss(format!("no data for dtype={dtype}, op={op}")))?;
        let by_gpus = &self.slices[id];
        let max_g = by_gpus.keys().copied().max().ok_or_else(|| miss(format!("no data for {op}")))?;
        let g_eff = g.min(max_g);
        let grid = by_gpus.get(&g_eff).ok_or_else(|| miss(format!("no data for {op} over num_gpus={g_eff}")))?;
        let sol = &self.sol;
        let sol_at = |c: &[i64; 1]| sol.nccl(memory, g_eff, op, c[0]);
        let (latency, path) = grid
            .resolve([size], GridConfig::RAW, &sol_at)
            .map_err(|m| KernelMiss::grid(&self.db, NCCL_FILE.file, m, &format!("{{'message_bytes': {size}}}")))?;
        if g <= max_g {
            return Ok((latency, path));
        }
        if max_g < 2 {
            return Err(miss(format!("{op} measured over {max_g} GPU only: no scaling to num_gpus={g}")));
        }
        // More GPUs than the table measured: the largest measured count's
        // latency, scaled by the ring's (g - 1) / g and the bandwidth ratio.
        let bandwidth = crate::pymath::py_true_div(sol.bw(max_g), sol.bw(g))
            .ok_or_else(|| miss(format!("zero p2p bandwidth for num_gpus={g}")))?;
        let ring = crate::pymath::int_true_div(i128::from(g - 1), i128::from(g)).unwrap_or(f64::NAN);
        let scaling = ring * max_g as f64 / (max_g - 1) as f64 * bandwidth;
        Ok((latency * scaling, path))
    }
}
