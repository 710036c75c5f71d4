//! Gated-delta-net kernels of Qwen3.5's linear-attention layers:
//! `[kernel][phase][model shape]` slices of `gdn_perf` files, a raw grid
//! over (batch, seq_len) in context and over batch in generation
//! (docs/spec/families_qwen35_gemma4.md 2).
//!
//! Unlike every other kernel table, a GDN lookup never misses: a database
//! without the table, an unknown kernel or shape, or a grid that cannot
//! anchor the query all answer with the kernel's memory roofline (2.5),
//! tagged as such. The table takes rows lent by other backends for the
//! kernel sources the manifest shares (2.1).

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::{ErrorClass, Result};
use crate::grid::{Grid, GridConfig};
use crate::kernels::{DatabaseTable, Origin, RooflineAnswer, system_constants};
use crate::op_sol::OpSol;
use crate::sources::{GDN_FILE, plan};

/// The four kernels a Qwen3.5 step prices (the names the lookups use,
/// after the loader's renames).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GdnKernel {
    /// Context: the short causal convolution over the prompt.
    ConvFn,
    /// Context: the chunked delta-rule scan.
    ChunkScan,
    /// Generation: one convolution state update.
    ConvUpdate,
    /// Generation: one recurrent delta-rule update.
    Recurrence,
}

impl GdnKernel {
    /// The `kernel_source` name the table and the lookup use.
    pub fn name(self) -> &'static str {
        match self {
            GdnKernel::ConvFn => "causal_conv1d_fn",
            GdnKernel::ChunkScan => "chunk_gated_delta_rule",
            GdnKernel::ConvUpdate => "causal_conv1d_update",
            GdnKernel::Recurrence => "fused_sigmoid_gating_delta_rule_update",
        }
    }

    /// Whether the kernel runs over a prompt (keyed by batch and length)
    /// or one decode step (keyed by batch only).
    pub fn is_context(self) -> bool {
        matches!(self, GdnKernel::ConvFn | GdnKernel::ChunkScan)
    }

    /// The `phase` a kernel's rows are filed under.
    pub fn phase(self) -> &'static str {
        if self.is_context() { "context" } else { "generation" }
    }

    /// vllm 0.24.0 collected the context scan under implementation-specific
    /// names; only that exact version's lookup tries them (2.3).
    fn vllm_0_24_aliases(self) -> &'static [&'static str] {
        match self {
            GdnKernel::ChunkScan => &[
                "chunk_gated_delta_rule_flashinfer",
                "chunk_gated_delta_rule_triton",
                "chunk_gated_delta_rule_cutedsl",
            ],
            GdnKernel::Recurrence => &["fused_recurrent_gated_delta_rule_packed_decode"],
            GdnKernel::ConvFn | GdnKernel::ConvUpdate => &[],
        }
    }
}

/// The unsharded linear-attention shape of a model: the table's model key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GdnShape {
    pub d_model: i64,
    pub k_heads: i64,
    pub k_head_dim: i64,
    pub v_heads: i64,
    pub v_head_dim: i64,
    pub d_conv: i64,
}

/// One model shape's data of one (kernel, phase).
#[derive(Debug, Clone, Copy)]
enum Curve<'t> {
    Context(&'t Grid<2>),
    Generation(&'t Grid<1>),
}

#[derive(Debug, Default)]
struct Kernel {
    name: String,
    /// Context rows, then generation rows: model keys in first-appearance order.
    context: Vec<(GdnShape, Grid<2>)>,
    generation: Vec<(GdnShape, Grid<1>)>,
}

/// The GDN table of one database (possibly empty: every lookup is then the roofline).
#[derive(Debug)]
pub struct GdnTable {
    origin: Origin,
    kernels: Vec<Kernel>,
    /// The database is vllm at exactly `0.24.0` (the alias lookup).
    vllm_0_24: bool,
    sol: OpSol,
}

const KERNEL_SOURCE: Col = Col::text("kernel_source");
const PHASE: Col = Col::text("phase");
const BATCH_SIZE: Col = Col::int("batch_size");
const SEQ_LEN: Col = Col::int("seq_len");
const D_MODEL: Col = Col::int("d_model");
const D_CONV: Col = Col::int("d_conv");
const NUM_K_HEADS: Col = Col::int("num_k_heads");
const HEAD_K_DIM: Col = Col::int("head_k_dim");
const NUM_V_HEADS: Col = Col::int("num_v_heads");
const HEAD_V_DIM: Col = Col::int("head_v_dim");
const COLUMNS: [Col; 11] = [
    KERNEL_SOURCE,
    PHASE,
    BATCH_SIZE,
    SEQ_LEN,
    D_MODEL,
    D_CONV,
    NUM_K_HEADS,
    HEAD_K_DIM,
    NUM_V_HEADS,
    HEAD_V_DIM,
    Col::LATENCY,
];

/// The loader's renames: the decode recurrence was collected under two
/// other names (2.2).
fn table_name(kernel_source: &str) -> &str {
    match kernel_source {
        "fused_recurrent_gated_delta_rule" | "fused_recurrent_gated_delta_rule_packed_decode" => {
            GdnKernel::Recurrence.name()
        }
        other => other,
    }
}

impl DatabaseTable for GdnTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.gdn
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        // No file anywhere is no error here: the lookups fall back to the roofline.
        let mut sources = match plan(tree, &GDN_FILE, system, backend, version, shared_layer) {
            Ok(sources) => sources,
            Err(e) if e.class() == ErrorClass::Miss => Vec::new(),
            Err(e) => return Err(e),
        };
        let (_, sol, _) = system_constants(tree, system)?;
        let mut kernels: Vec<Kernel> = Vec::new();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (names, phases) = (rows.text(KERNEL_SOURCE)?, rows.text(PHASE)?);
                let (batches, seqs) = (rows.int(BATCH_SIZE)?, rows.int(SEQ_LEN)?);
                let (d_models, d_convs) = (rows.int(D_MODEL)?, rows.int(D_CONV)?);
                let (k_heads, k_dims) = (rows.int(NUM_K_HEADS)?, rows.int(HEAD_K_DIM)?);
                let (v_heads, v_dims) = (rows.int(NUM_V_HEADS)?, rows.int(HEAD_V_DIM)?);
                let latencies = rows.float(Col::LATENCY)?;
                for i in 0..rows.len() {
                    let name = table_name(names.req(i)?);
                    let at = match kernels.iter().position(|k| k.name == name) {
                        Some(at) => at,
                        None => {
                            kernels.push(Kernel { name: name.to_string(), ..Kernel::default() });
                            kernels.len() - 1
                        }
                    };
                    let kernel = &mut kernels[at];
                    let shape = GdnShape {
                        d_model: d_models.req(i)?,
                        k_heads: k_heads.req(i)?,
                        k_head_dim: k_dims.req(i)?,
                        v_heads: v_heads.req(i)?,
                        v_head_dim: v_dims.req(i)?,
                        d_conv: d_convs.req(i)?,
                    };
                    let (batch, latency) = (batches.req(i)?, latencies.req(i)?);
                    // Decode rows are keyed by batch alone: their seq_len is not a key.
                    let inserted = if phases.req(i)? == "context" {
                        let seq = seqs.req(i)?;
                        entry(&mut kernel.context, shape).insert([batch, seq], latency)
                    } else {
                        entry(&mut kernel.generation, shape).insert([batch], latency)
                    };
                    if inserted {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(GdnTable {
            origin: Origin { db: format!("{system}/{backend}/{version}"), sources },
            kernels,
            vllm_0_24: backend == "vllm" && version == "0.24.0",
            sol,
        })
    }
}

/// The curve of exactly `shape` in one kernel's rows of a phase.
fn exact<'t>(k: &'t Kernel, context: bool, shape: &GdnShape) -> Option<Curve<'t>> {
    if context {
        k.context.iter().find(|(s, _)| s == shape).map(|(_, g)| Curve::Context(g))
    } else {
        k.generation.iter().find(|(s, _)| s == shape).map(|(_, g)| Curve::Generation(g))
    }
}

/// The grid of `shape` in `list`, added at the end on first sight.
fn entry<G: Default>(list: &mut Vec<(GdnShape, G)>, shape: GdnShape) -> &mut G {
    let at = match list.iter().position(|(s, _)| *s == shape) {
        Some(at) => at,
        None => {
            list.push((shape, G::default()));
            list.len() - 1
        }
    };
    &mut list[at].1
}

impl GdnTable {
    fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// `query_gdn(phase, kernel, batch_size, seq_len, shape)`: `seq_len` is
    /// the prompt length in context and ignored in generation.
    pub fn query(&self, kernel: GdnKernel, batch: i64, seq_len: i64, shape: &GdnShape) -> RooflineAnswer {
        let seq = if kernel.is_context() { Some(seq_len) } else { None };
        let roofline = RooflineAnswer::Roofline(self.sol.gdn(kernel.name(), batch, seq, shape));
        match self.curve(kernel, shape) {
            Some(Curve::Context(grid)) => {
                if seq_len <= 0 {
                    return roofline;
                }
                let sol = |c: &[i64; 2]| self.sol.gdn(kernel.name(), c[0], Some(c[1]), shape);
                match grid.resolve([batch, seq_len], GridConfig::RAW, &sol) {
                    Ok((v, path)) => RooflineAnswer::Table(v, path),
                    Err(_) => roofline,
                }
            }
            Some(Curve::Generation(grid)) => {
                let sol = |c: &[i64; 1]| self.sol.gdn(kernel.name(), c[0], None, shape);
                match grid.resolve([batch], GridConfig::RAW, &sol) {
                    Ok((v, path)) => RooflineAnswer::Table(v, path),
                    Err(_) => roofline,
                }
            }
            None => roofline,
        }
    }

    /// The curve of the model's shape (2.3 steps 2-4): the exact shape, else
    /// on vllm 0.24.0 the one alias kernel that has it, else the same
    /// `d_model` with the nearest number of value heads.
    fn curve<'t>(&'t self, kernel: GdnKernel, shape: &GdnShape) -> Option<Curve<'t>> {
        let context = kernel.is_context();
        let find = |k: &'t Kernel| exact(k, context, shape);
        let own = self.kernel(kernel.name());
        if let Some(curve) = own.and_then(find) {
            return Some(curve);
        }
        if self.vllm_0_24 {
            let mut found: Vec<Curve> =
                kernel.vllm_0_24_aliases().iter().filter_map(|a| self.kernel(a)).filter_map(find).collect();
            match found.len() {
                0 => {}
                1 => return found.pop(),
                _ => return None,
            }
        }
        let own = own?;
        let nearest = |keys: &mut dyn Iterator<Item = &GdnShape>| -> Option<GdnShape> {
            let mut best: Option<(i64, GdnShape)> = None;
            for s in keys.filter(|s| s.d_model == shape.d_model) {
                let distance = (s.v_heads - shape.v_heads).abs();
                if best.is_none_or(|(d, _)| distance < d) {
                    best = Some((distance, *s));
                }
            }
            best.map(|(_, s)| s)
        };
        if context {
            let key = nearest(&mut own.context.iter().map(|(s, _)| s))?;
            own.context.iter().find(|(s, _)| *s == key).map(|(_, g)| Curve::Context(g))
        } else {
            let key = nearest(&mut own.generation.iter().map(|(s, _)| s))?;
            own.generation.iter().find(|(s, _)| *s == key).map(|(_, g)| Curve::Generation(g))
        }
    }
}
