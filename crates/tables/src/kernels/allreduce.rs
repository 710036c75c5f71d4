//! Custom all-reduce: `[half][num_gpus]["AUTO"][message_size]` (docs/spec 4.4,
//! 8.4). Eager-mode rows are dropped (except on b60), the dtype column is
//! ignored (every row is filed under `half`, first-wins). With the shared
//! layer, a database whose own file lives in the `comm` family dir reads
//! only that file; one without a file of its own takes the older versions'
//! (docs/spec/families_hybrid_vl_databases.md 4.3). `message_size` is an
//! element count.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::op_sol::OpSol;
use crate::sources::{CUSTOM_ALLREDUCE_FILE, plan};

/// The system whose eager-mode rows are kept.
const KEEPS_EAGER_ROWS: &str = "b60";

/// The custom all-reduce table of one database.
#[derive(Debug)]
pub struct AllReduceTable {
    origin: Origin,
    by_gpus: HashMap<i64, Grid<1>>,
    sol: OpSol,
}

const NUM_GPUS: Col = Col::int("num_gpus");
const MESSAGE_SIZE: Col = Col::int("message_size");
/// Columns whose `*_eager` values mark eager-mode rows.
const EAGER_MARKS: [Col; 3] =
    [Col::text("kernel_source").optional(), Col::text("backend").optional(), Col::text("implementation").optional()];
const COLUMNS: [Col; 6] = [NUM_GPUS, MESSAGE_SIZE, Col::LATENCY, EAGER_MARKS[0], EAGER_MARKS[1], EAGER_MARKS[2]];

impl DatabaseTable for AllReduceTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.custom_allreduce
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let mut sources = plan(tree, &CUSTOM_ALLREDUCE_FILE, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let keep_eager = system == KEEPS_EAGER_ROWS;
        let mut by_gpus: HashMap<i64, Grid<1>> = HashMap::default();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (gpus, sizes, latencies) =
                    (rows.int(NUM_GPUS)?, rows.int(MESSAGE_SIZE)?, rows.float(Col::LATENCY)?);
                let marks = [rows.text(EAGER_MARKS[0])?, rows.text(EAGER_MARKS[1])?, rows.text(EAGER_MARKS[2])?];
                for i in 0..rows.len() {
                    let mut eager = false;
                    for mark in &marks {
                        eager |= mark.get(i)?.is_some_and(|v| v.ends_with("_eager"));
                    }
                    if eager && !keep_eager {
                        continue;
                    }
                    let (gpus, size, latency) = (gpus.req(i)?, sizes.req(i)?, latencies.req(i)?);
                    if by_gpus.entry(gpus).or_default().insert([size], latency) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(AllReduceTable { origin: Origin { db: format!("{system}/{backend}/{version}"), sources }, by_gpus, sol })
    }
}

impl AllReduceTable {
    /// Whether the op routes to NCCL instead (72 GPUs per node and tp > 4).
    pub fn uses_nccl(&self, tp: i64) -> bool {
        self.sol.gpus_per_node() == 72 && tp > 4
    }

    /// `query_custom_allreduce(half, tp, size)` for `tp > 1` and a system
    /// where the custom kernel serves (see [`uses_nccl`](Self::uses_nccl)):
    /// the grid over message size in the `min(tp, gpus_per_node)` slice,
    /// scaled across nodes when `tp` exceeds a node.
    pub fn query(&self, tp: i64, size: i64) -> Result<(f64, GridPath), KernelMiss> {
        let per_node = self.sol.gpus_per_node();
        let tp_eff = tp.min(per_node);
        let grid = self.by_gpus.get(&tp_eff).filter(|g| !g.is_empty()).ok_or_else(|| {
            KernelMiss::new(&self.origin.db, CUSTOM_ALLREDUCE_FILE.file, format!("no data for num_gpus={tp_eff}"))
        })?;
        let sol = &self.sol;
        let sol_at = |c: &[i64; 1]| sol.custom_allreduce(tp_eff, c[0]);
        let (latency, path) = grid.resolve([size], GridConfig::RAW, &sol_at).map_err(|m| {
            KernelMiss::grid(&self.origin.db, CUSTOM_ALLREDUCE_FILE.file, m, &format!("{{'message_bytes': {size}}}"))
        })?;
        if tp <= per_node {
            return Ok((latency, path));
        }
        // The SDK's `(tp - 1) / tp * G / (G - 1) * bw(G) / bw(tp)`, evaluated
        // left to right as Python does (not ratio by ratio: that rounds
        // differently, 1 ulp on gb200 tp 8). Only the first division is int /
        // int; every later operand meets a float and converts exactly.
        let g = per_node;
        let int = |v: i64| crate::system::Num::Int(i128::from(v));
        let first = crate::pymath::py_true_div(int(tp - 1), int(tp)).unwrap_or(f64::NAN);
        let factor = first * g as f64 / (g - 1) as f64 * sol.bw(g).as_f64() / sol.bw(tp).as_f64();
        Ok((latency * factor, path))
    }
}
