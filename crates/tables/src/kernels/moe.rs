//! Fused MoE experts: `[moe_dtype][distribution][topk][num_experts]
//! [hidden_size][inter_size][moe_tp][moe_ep]` slices, each a raw grid over
//! num_tokens (docs/spec 4.4, 10.3). Rows of the `moe_torch_flow_min_latency`
//! kernel form a separate low-latency table. No SOL clamp.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::modes::MoeQuant;
use crate::op_sol::OpSol;
use crate::sources::{MOE_FILE, plan};

const LOW_LATENCY_KERNEL: &str = "moe_torch_flow_min_latency";
/// The distribution a query falls back to when the model's is absent.
const FALLBACK_DISTRIBUTION: &str = "uniform";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Slice {
    /// Interned `moe_dtype` and `distribution` names.
    dtype: u16,
    distribution: u16,
    topk: i64,
    experts: i64,
    hidden: i64,
    inter: i64,
    moe_tp: i64,
    moe_ep: i64,
}

/// One kernel's table (the default one or the low-latency one).
#[derive(Debug, Default)]
struct Kernel {
    slices: HashMap<Slice, Grid<1>>,
    /// `(dtype, distribution)` pairs present.
    distributions: Vec<(u16, u16)>,
}

/// The MoE table of one database.
#[derive(Debug)]
pub struct MoeTable {
    origin: Origin,
    names: Vec<String>,
    default: Kernel,
    low_latency: Kernel,
    sol: OpSol,
}

/// The experts of one MoE layer as the MoE table sees them: everything of
/// a `query_moe(...)` call but the token count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoeShape {
    pub hidden: i64,
    pub inter: i64,
    pub topk: i64,
    pub experts: i64,
    pub moe_tp: i64,
    pub moe_ep: i64,
    pub quant: MoeQuant,
    /// The workload distribution the model's experts are measured under (`power_law_1.2`).
    pub distribution: &'static str,
    pub gated: bool,
}

/// One `query_moe(...)` call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoeQuery {
    pub num_tokens: i64,
    pub shape: MoeShape,
    /// Use the low-latency kernel's table (trtllm nvfp4, few tokens).
    pub low_latency: bool,
}

const MOE_DTYPE: Col = Col::text("moe_dtype");
const NUM_TOKENS: Col = Col::int("num_tokens");
const HIDDEN_SIZE: Col = Col::int("hidden_size");
const INTER_SIZE: Col = Col::int("inter_size");
const TOPK: Col = Col::int("topk");
const NUM_EXPERTS: Col = Col::int("num_experts");
const MOE_TP_SIZE: Col = Col::int("moe_tp_size");
const MOE_EP_SIZE: Col = Col::int("moe_ep_size");
const DISTRIBUTION: Col = Col::text("distribution");
const KERNEL_SOURCE: Col = Col::text("kernel_source").optional();
const COLUMNS: [Col; 11] = [
    MOE_DTYPE,
    NUM_TOKENS,
    HIDDEN_SIZE,
    INTER_SIZE,
    TOPK,
    NUM_EXPERTS,
    MOE_TP_SIZE,
    MOE_EP_SIZE,
    DISTRIBUTION,
    KERNEL_SOURCE,
    Col::LATENCY,
];

/// The loader's two re-labellings (families_mla_gptoss_fp8static.md 5.2):
/// SGLang's FlashInfer MXFP4 kernels get quant modes of their own, which
/// DeepSeek-V4 asks for on Blackwell and Hopper (families_dsv4.md 1.2).
fn relabel<'a>(dtype: &'a str, kernel_source: Option<&str>) -> &'a str {
    match (dtype, kernel_source) {
        ("w4a8_mxfp4_mxfp8", Some("sglang_mxfp4_flashinfer_trtllm_moe")) => "w4a8_mxfp4_mxfp8_trtllm",
        ("w4a16_mxfp4", Some("sglang_flashinfer_cutlass_moe")) => "w4a16_mxfp4_cutlass",
        _ => dtype,
    }
}

fn intern(names: &mut Vec<String>, name: &str) -> u16 {
    match names.iter().position(|n| n == name) {
        Some(i) => i as u16,
        None => {
            names.push(name.to_string());
            (names.len() - 1) as u16
        }
    }
}

impl DatabaseTable for MoeTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.moe
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let mut sources = plan(tree, &MOE_FILE, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut names: Vec<String> = Vec::new();
        let (mut default, mut low_latency) = (Kernel::default(), Kernel::default());
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (dtypes, distributions, kernels) =
                    (rows.text(MOE_DTYPE)?, rows.text(DISTRIBUTION)?, rows.text(KERNEL_SOURCE)?);
                let (tokens, hiddens, inters) = (rows.int(NUM_TOKENS)?, rows.int(HIDDEN_SIZE)?, rows.int(INTER_SIZE)?);
                let (topks, experts) = (rows.int(TOPK)?, rows.int(NUM_EXPERTS)?);
                let (moe_tps, moe_eps, latencies) =
                    (rows.int(MOE_TP_SIZE)?, rows.int(MOE_EP_SIZE)?, rows.float(Col::LATENCY)?);
                for i in 0..rows.len() {
                    if names.len() >= usize::from(u16::MAX) {
                        return Err(rows.error(i, MOE_DTYPE.name, "too many distinct moe_dtype / distribution names"));
                    }
                    let dtype = intern(&mut names, relabel(dtypes.req(i)?, kernels.get(i)?));
                    let distribution = intern(&mut names, distributions.req(i)?);
                    let slice = Slice {
                        dtype,
                        distribution,
                        topk: topks.req(i)?,
                        experts: experts.req(i)?,
                        hidden: hiddens.req(i)?,
                        inter: inters.req(i)?,
                        moe_tp: moe_tps.req(i)?,
                        moe_ep: moe_eps.req(i)?,
                    };
                    let kernel =
                        if kernels.get(i)? == Some(LOW_LATENCY_KERNEL) { &mut low_latency } else { &mut default };
                    if !kernel.distributions.contains(&(dtype, distribution)) {
                        kernel.distributions.push((dtype, distribution));
                    }
                    let (tokens, latency) = (tokens.req(i)?, latencies.req(i)?);
                    if kernel.slices.entry(slice).or_default().insert([tokens], latency) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(MoeTable {
            origin: Origin { db: format!("{system}/{backend}/{version}"), sources },
            names,
            default,
            low_latency,
            sol,
        })
    }
}

impl MoeTable {
    fn id(&self, name: &str) -> Option<u16> {
        self.names.iter().position(|n| n == name).map(|i| i as u16)
    }

    /// Whether the low-latency kernel has any slice for `quant`.
    pub fn has_low_latency(&self, quant: MoeQuant) -> bool {
        self.id(quant.name()).is_some_and(|d| self.low_latency.distributions.iter().any(|&(q, _)| q == d))
    }

    /// The latency of the fused experts for `q.num_tokens` tokens.
    pub fn query<'k>(&'k self, query: &MoeQuery) -> Result<(f64, GridPath), KernelMiss> {
        let (q, num_tokens) = (&query.shape, query.num_tokens);
        let miss = |reason: String| KernelMiss::new(&self.origin.db, MOE_FILE.file, reason);
        let describe = || {
            format!(
                "quant={}, distribution={}, topk={}, num_experts={}, hidden_size={}, inter_size={}, \
                 moe_tp_size={}, moe_ep_size={}",
                q.quant, q.distribution, q.topk, q.experts, q.hidden, q.inter, q.moe_tp, q.moe_ep
            )
        };
        let dtype = self.id(q.quant.name()).ok_or_else(|| miss(format!("no data for {}", describe())))?;
        // One kernel's slice: under the model's distribution if the quant
        // has it there, else under "uniform".
        let find = |kernel: &'k Kernel| -> Option<&'k Grid<1>> {
            let distribution = self
                .id(q.distribution)
                .filter(|&d| kernel.distributions.contains(&(dtype, d)))
                .or_else(|| self.id(FALLBACK_DISTRIBUTION).filter(|&d| kernel.distributions.contains(&(dtype, d))))?;
            let slice = Slice {
                dtype,
                distribution,
                topk: q.topk,
                experts: q.experts,
                hidden: q.hidden,
                inter: q.inter,
                moe_tp: q.moe_tp,
                moe_ep: q.moe_ep,
            };
            kernel.slices.get(&slice)
        };
        // The low-latency kernel where asked for, the main table where it
        // has no such slice (the spec falls back on a missing key).
        let grid = query
            .low_latency
            .then(|| find(&self.low_latency))
            .flatten()
            .or_else(|| find(&self.default))
            .ok_or_else(|| miss(format!("no data for {}", describe())))?;
        if let [only] = grid.outer_keys()
            && *only > num_tokens
        {
            return Err(miss(format!(
                "only num_tokens={only} collected, above the query's {num_tokens} ({})",
                describe()
            )));
        }
        let sol = &self.sol;
        let sol_at = |c: &[i64; 1]| {
            sol.moe(
                c[0],
                q.hidden,
                q.inter,
                q.topk,
                q.experts,
                q.moe_tp,
                q.moe_ep,
                q.quant.memory(),
                q.quant.compute(),
                q.gated,
            )
        };
        grid.resolve([num_tokens], GridConfig::RAW, &sol_at).map_err(|m| {
            KernelMiss::grid(&self.origin.db, MOE_FILE.file, m, &format!("{{'num_tokens': {num_tokens}}}"))
        })
    }
}
