//! The published data for unit tests: the cache the fetch step fills
//! (`$AICSQL_DATA`, else `$XDG_CACHE_HOME/aicsql`, else `~/.cache/aicsql`).

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::discovery::DataTree;
use crate::system::{Num, SystemSpec};

pub(crate) fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"))
}

/// One mounted tree per test binary; panics with the fix when the data is missing.
pub(crate) fn tree() -> &'static DataTree {
    static TREE: OnceLock<DataTree> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = data_dir();
        DataTree::open(&[&dir]).unwrap_or_else(|e| {
            panic!("perf data not found in {} ({e}); run `cargo run -- data fetch` first", dir.display())
        })
    })
}

/// h200_sxm's constants as its system YAML gives them (unit tests of the
/// SOL formulas, without reading the data).
pub(crate) fn h200_spec() -> SystemSpec {
    SystemSpec {
        system: "h200_sxm".into(),
        data_dir: None,
        mem_bw: Num::Int(4_800_000_000_000),
        mem_bw_empirical_scaling_factor: Num::Float(0.8),
        mem_empirical_constant_latency: Num::Float(3e-6),
        mem_capacity: None,
        bfloat16_tc_flops: Num::Int(989_000_000_000_000),
        fp8_tc_flops: Some(Num::Int(1_978_000_000_000_000)),
        fp4_tc_flops: None,
        int8_tc_flops: None,
        sm_version: None,
        num_gpus_per_node: 8,
        num_gpus_per_rack: None,
        intra_node_bw: Num::Int(450_000_000_000),
        inter_node_bw: Num::Int(50_000_000_000),
        inter_rack_bw: None,
        p2p_latency: Num::Float(1e-5),
        nccl_version: None,
        nccl_mem: Vec::new(),
        other_mem: None,
    }
}
