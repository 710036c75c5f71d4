//! Loads every table of every mounted database into one tree's cache (GEMM
//! in every quant mode its file holds, both shared-layer settings; the
//! attention, all-reduce, NCCL and MoE tables) and reports what it loaded
//! and how long it took. Run it under `/usr/bin/time -v` for the peak RSS
//! of a process that holds all of the published data:
//!
//! ```sh
//! cargo run --release -p aicsql-tables --example load_all [-- DATA_DIR]
//! ```

use std::collections::BTreeSet;
use std::time::Instant;

use aicsql_tables::kernels::{
    AllReduceTable, ContextAttentionTable, DatabaseTable, GenerationAttentionTable, MoeTable, NcclTable,
};
use aicsql_tables::{DataTree, GemmQuant, GemmTable};

fn main() {
    let dir = std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(default_dir);
    let tree = match DataTree::open(&[&dir]) {
        Ok(tree) => tree,
        Err(e) => {
            eprintln!("load_all: {e}");
            std::process::exit(1);
        }
    };
    let start = Instant::now();
    let databases: BTreeSet<(String, String, String, String)> = tree
        .perf_files()
        .iter()
        .map(|f| (f.system.clone(), f.backend.clone(), f.version.clone(), f.table.clone()))
        .collect();
    let mut errors = 0usize;
    let mut note = |what: &str, result: Result<(), String>| {
        if let Err(e) = result {
            errors += 1;
            eprintln!("{what}: {e}");
        }
    };
    for (system, backend, version, table) in &databases {
        let db = format!("{system}/{backend}/{version}");
        for shared in [false, true] {
            let (s, b, v) = (system.as_str(), backend.as_str(), version.as_str());
            match table.as_str() {
                "gemm" => {
                    let bf16 = GemmTable::cached(&tree, s, b, v, GemmQuant::Bfloat16, shared);
                    let dtypes = bf16.as_ref().map(|t| t.supported_dtypes().to_vec()).unwrap_or_default();
                    note(&db, bf16.map(drop).map_err(|e| e.to_string()));
                    for quant in GemmQuant::ALL.into_iter().filter(|q| dtypes.iter().any(|d| d == q.name())) {
                        let loaded = GemmTable::cached(&tree, s, b, v, quant, shared);
                        note(&db, loaded.map(drop).map_err(|e| e.to_string()));
                    }
                }
                "context_attention" => note(
                    &db,
                    ContextAttentionTable::cached(&tree, s, b, v, shared).map(drop).map_err(|e| e.to_string()),
                ),
                "generation_attention" => note(
                    &db,
                    GenerationAttentionTable::cached(&tree, s, b, v, shared).map(drop).map_err(|e| e.to_string()),
                ),
                "moe" => note(&db, MoeTable::cached(&tree, s, b, v, shared).map(drop).map_err(|e| e.to_string())),
                "custom_allreduce" => {
                    note(&db, AllReduceTable::cached(&tree, s, b, v, true).map(drop).map_err(|e| e.to_string()))
                }
                "nccl" => note(&db, NcclTable::cached(&tree, s).map(drop).map_err(|e| e.to_string())),
                _ => {}
            }
        }
    }
    println!("{:?}", tree.cache().stats());
    println!(
        "{} table files considered, {errors} load errors, {:.1} s",
        databases.len(),
        start.elapsed().as_secs_f64()
    );
}

fn default_dir() -> std::path::PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_default().join(".cache").join("aicsql"))
}
