//! The activation-quantisation tables an fp8_static GEMM subtracts
//! (docs/spec/families_mla_gptoss_fp8static.md 6, 7.4): `computescale_perf`
//! (dynamic minus static quantisation) and `scale_matrix_perf` (the static
//! scaling of a low-precision input), both `[quant_dtype][m][k]`,
//! first row wins, no SOL clamp at load.
//!
//! A query clamps (m, k) into the collected range first (the k range over
//! every m row), then runs a raw 2-axis grid. Outside the range the compute
//! scale is held flat (it is a delta, not a kernel); the scale matrix is a
//! memory kernel, so its value is rescaled by the SOL ratio.

use std::collections::BTreeMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::op_sol::OpSol;
use crate::quant::GemmQuant;
use crate::sources::{COMPUTE_SCALE_FILE, SCALE_MATRIX_FILE, TableFile, plan};

const QUANT_DTYPE: Col = Col::text("quant_dtype");
const M: Col = Col::int("m");
const K: Col = Col::int("k");
const COLUMNS: [Col; 4] = [QUANT_DTYPE, M, K, Col::DELTA];

/// One quant's grid with its clamping range.
#[derive(Debug, Default)]
struct Slice {
    grid: Grid<2>,
    m_range: (i64, i64),
    k_range: (i64, i64),
}

/// The rows of one of the two tables, by quant name in file order.
#[derive(Debug)]
struct Scales {
    origin: Origin,
    file: &'static TableFile,
    slices: BTreeMap<String, Slice>,
    /// Quant names in sorted order, for the miss message.
    names: Vec<String>,
    sol: OpSol,
}

impl Scales {
    fn load(
        tree: &DataTree,
        file: &'static TableFile,
        system: &str,
        backend: &str,
        version: &str,
        shared_layer: bool,
    ) -> Result<Scales> {
        let mut sources = plan(tree, file, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut slices: BTreeMap<String, Slice> = BTreeMap::new();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (quants, ms, ks, latencies) =
                    (rows.text(QUANT_DTYPE)?, rows.int(M)?, rows.int(K)?, rows.float(Col::DELTA)?);
                for i in 0..rows.len() {
                    let name = quants.req(i)?;
                    if name.parse::<GemmQuant>().is_err() {
                        return Err(rows.error(i, QUANT_DTYPE.name, format!("unknown GEMM quant mode '{name}'")));
                    }
                    let slice = match slices.get_mut(name) {
                        Some(s) => s,
                        None => slices.entry(name.to_string()).or_default(),
                    };
                    let (m, k) = (ms.req(i)?, ks.req(i)?);
                    if slice.grid.insert([m, k], latencies.req(i)?) {
                        added += 1;
                        let first = slice.grid.len() == 1;
                        let widen =
                            |r: &mut (i64, i64), v: i64| *r = if first { (v, v) } else { (r.0.min(v), r.1.max(v)) };
                        widen(&mut slice.m_range, m);
                        widen(&mut slice.k_range, k);
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        let names = slices.keys().cloned().collect();
        Ok(Scales { origin: Origin { db: format!("{system}/{backend}/{version}"), sources }, file, slices, names, sol })
    }

    /// `query_compute_scale(m, k, quant)` / `query_scale_matrix(...)`:
    /// `factor` is the SOL's bytes per m*k element (2 or 3), `rescale`
    /// whether a clamped query is scaled by the SOL ratio.
    fn query(
        &self,
        m: i64,
        k: i64,
        quant: GemmQuant,
        factor: i64,
        rescale: bool,
    ) -> std::result::Result<(f64, GridPath), KernelMiss> {
        let miss = |reason: String| KernelMiss::new(&self.origin.db, self.file.file, reason);
        let slice = self.slices.get(quant.slice_name()).ok_or_else(|| {
            miss(format!(
                "{} perf data not available for requested quant mode '{quant}'; supported modes: {:?}",
                self.file.label, self.names
            ))
        })?;
        let m_c = m.clamp(slice.m_range.0, slice.m_range.1);
        let k_c = k.clamp(slice.k_range.0, slice.k_range.1);
        let sol = &self.sol;
        let sol_at = |c: &[i64; 2]| sol.scale_memory(factor, c[0], c[1]);
        let (value, path) = slice.grid.resolve([m_c, k_c], GridConfig::RAW, &sol_at).map_err(|e| {
            KernelMiss::grid(&self.origin.db, self.file.file, e, &format!("{{'m': {m_c}, 'k': {k_c}}}"))
        })?;
        if !rescale || (m_c, k_c) == (m, k) {
            return Ok((value, path));
        }
        let ratio = sol.scale_memory(factor, m, k) / sol.scale_memory(factor, m_c, k_c);
        Ok((value * ratio, GridPath::UtilHold))
    }
}

macro_rules! scale_table {
    ($name:ident, $file:expr, $slot:ident, $factor:expr, $rescale:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name(Scales);

        impl DatabaseTable for $name {
            fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
                &cache.$slot
            }

            fn origin(&self) -> &Origin {
                &self.0.origin
            }

            fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
                Scales::load(tree, &$file, system, backend, version, shared_layer).map($name)
            }
        }

        impl $name {
            /// The table's latency for an (m, k) activation (ms).
            pub fn query(&self, m: i64, k: i64, quant: GemmQuant) -> std::result::Result<(f64, GridPath), KernelMiss> {
                self.0.query(m, k, quant, $factor, $rescale)
            }
        }
    };
}

scale_table!(
    ComputeScaleTable,
    COMPUTE_SCALE_FILE,
    compute_scale,
    2,
    false,
    "`computescale_perf`: what a dynamically quantised GEMM spends computing its activation scale."
);
scale_table!(
    ScaleMatrixTable,
    SCALE_MATRIX_FILE,
    scale_matrix,
    3,
    true,
    "`scale_matrix_perf`: the static scaling of an already low-precision input."
);
