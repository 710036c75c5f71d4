//! Runs the `.slt` files under `tests/slt` against an aicsql session on the
//! real published data, with DataFusion's own sqllogictest engine.
//!
//! `cargo test --test sqllogictests [-- FILTER]` runs the files whose name
//! contains FILTER.

mod common;

use std::path::{Path, PathBuf};

use datafusion_sqllogictest::{DataFusion, df_value_validator, value_normalizer};
use indicatif::ProgressBar;
use sqllogictest::strict_column_validator;

use aicsql::SessionBuilder;
use datafusion::prelude::ParquetReadOptions;

fn slt_files(filter: Option<&str>) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .filter(|p| filter.is_none_or(|f| p.to_string_lossy().contains(f)))
        .collect();
    files.sort();
    files
}

#[tokio::main]
async fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let tree = common::tree();
    let goldens = common::goldens_dir();
    let files = slt_files(filter.as_deref());
    assert!(!files.is_empty(), "no .slt files matched");
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let ctx = SessionBuilder::with_tree(tree.clone()).build();
        // The spec's goldens, as tables `gemm_goldens` and
        // `engine_step_goldens`, `serving_point_goldens`, `serving_options_goldens`
        // (the .slt files need no path).
        for table in ["gemm_goldens", "engine_step_goldens", "serving_point_goldens", "serving_options_goldens"] {
            let file = goldens.join(format!("{table}.parquet"));
            ctx.register_parquet(table, file.to_string_lossy().as_ref(), ParquetReadOptions::default())
                .await
                .unwrap_or_else(|e| panic!("cannot register {}: {e}", file.display()));
        }
        // The spec's `cli default` frames of the Llama-3.1-8B search golden,
        // as `llama_search_agg` / `llama_search_disagg`.
        for mode in ["agg", "disagg"] {
            let file = goldens.join(format!("search/llama31_8b_h200_vllm_4gpu/{mode}.candidates.parquet"));
            ctx.register_parquet(
                format!("llama_search_{mode}"),
                file.to_string_lossy().as_ref(),
                ParquetReadOptions::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("cannot register {}: {e}", file.display()));
        }
        let mut runner = sqllogictest::Runner::new(|| {
            let ctx = ctx.clone();
            let name = PathBuf::from(&name);
            async move { Ok(DataFusion::new(ctx, name, ProgressBar::hidden())) }
        });
        runner.with_column_validator(strict_column_validator);
        runner.with_normalizer(value_normalizer);
        runner.with_validator(df_value_validator);
        match runner.run_file_async(path).await {
            Ok(()) => println!("ok      {name}"),
            Err(e) => {
                println!("FAILED  {name}\n{e}");
                failures.push(name);
            }
        }
    }
    if !failures.is_empty() {
        eprintln!("{} of {} sqllogictest files failed: {}", failures.len(), files.len(), failures.join(", "));
        std::process::exit(1);
    }
    println!("{} sqllogictest files passed", files.len());
}
