//! Where the serving tests find the published data and the goldens.

#![allow(dead_code)] // each test binary uses a part

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The data cache the fetch step fills: `$AICSQL_DATA`, else
/// `$XDG_CACHE_HOME/aicsql`, else `~/.cache/aicsql`.
pub fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"))
}

/// `$AICSQL_GOLDENS`, else the repository's own copy, `tests/goldens`.
pub fn goldens_dir() -> PathBuf {
    std::env::var_os("AICSQL_GOLDENS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/goldens"))
}

/// A frame as rows of `column -> value` (numbers as f64, text as text).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Num(f64),
    Text(String),
    Null,
}

/// How one column gives a row's cell.
type CellOf = Box<dyn Fn(usize) -> Cell>;

pub fn frame(path: &PathBuf) -> Vec<BTreeMap<String, Cell>> {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let schema = batch.schema();
        let mut columns: Vec<(String, CellOf)> = Vec::new();
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            let name = field.name().clone();
            if column.data_type().is_numeric() {
                let c = arrow::compute::cast(column, &DataType::Float64).unwrap_or_else(|e| panic!("{name}: {e}"));
                let a = c.as_primitive::<Float64Type>().clone();
                columns.push((name, Box::new(move |i| if a.is_null(i) { Cell::Null } else { Cell::Num(a.value(i)) })));
            } else if matches!(column.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
                let c = arrow::compute::cast(column, &DataType::Utf8).unwrap_or_else(|e| panic!("{name}: {e}"));
                let a = c.as_string::<i32>().clone();
                columns.push((
                    name,
                    Box::new(move |i| if a.is_null(i) { Cell::Null } else { Cell::Text(a.value(i).to_string()) }),
                ));
            }
        }
        for i in 0..batch.num_rows() {
            rows.push(columns.iter().map(|(n, f)| (n.clone(), f(i))).collect());
        }
    }
    rows
}

pub fn num(row: &BTreeMap<String, Cell>, name: &str) -> f64 {
    match row.get(name) {
        Some(Cell::Num(v)) => *v,
        other => panic!("column {name}: {other:?}"),
    }
}

pub fn int(row: &BTreeMap<String, Cell>, name: &str) -> u32 {
    let v = num(row, name);
    assert!(v >= 0.0 && v.fract() == 0.0, "{name} = {v}");
    v as u32
}

pub fn text<'r>(row: &'r BTreeMap<String, Cell>, name: &str) -> &'r str {
    match row.get(name) {
        Some(Cell::Text(v)) => v,
        other => panic!("column {name}: {other:?}"),
    }
}

/// A search case's server: its model on its database, with the MTP options
/// its `meta.json` args set (`nextn`: a depth or 'auto'; `nextn_accepted`;
/// `image_height`, `image_width`, `num_images`, `enable_encoder_dp`).
pub fn case_server<'a>(tree: &'a aicsql_tables::DataTree, args: &serde_json::Value) -> aicsql_serving::Server<'a> {
    let system = args["system"].as_str().unwrap_or_else(|| panic!("meta args.system"));
    role_server(tree, args, system, None)
}

/// The decode role's server of a case with `decode_system` (its own
/// latest version when the case's version is 'latest', else the case's).
pub fn case_decode_server<'a>(
    tree: &'a aicsql_tables::DataTree,
    args: &serde_json::Value,
) -> Option<aicsql_serving::Server<'a>> {
    args["decode_system"].as_str().map(|system| role_server(tree, args, system, None))
}

/// A case's server on `system`, with `backend` in place of the case's (a
/// `--backend auto` case's experiments).
pub fn role_server<'a>(
    tree: &'a aicsql_tables::DataTree,
    args: &serde_json::Value,
    system: &str,
    backend: Option<&str>,
) -> aicsql_serving::Server<'a> {
    use aicsql_serving::{NextN, Server};
    let s = |k: &str| args[k].as_str().unwrap_or_else(|| panic!("meta args.{k}")).to_string();
    let (model, system, mut version) = (s("model"), system.to_string(), s("version"));
    let backend = backend.map_or_else(|| s("backend"), str::to_string);
    if version == "latest" {
        let entry = tree.databases().latest(&system, &backend).expect("sidecars read").expect("a latest version");
        version = entry.version.clone();
    }
    let nextn = match &args["nextn"] {
        serde_json::Value::Null => NextN::Off,
        serde_json::Value::String(t) => NextN::parse(t).unwrap_or_else(|e| panic!("meta args.nextn: {e}")),
        v => NextN::from_number(v.as_f64().unwrap_or(f64::NAN), &v.to_string())
            .unwrap_or_else(|e| panic!("meta args.nextn: {e}")),
    };
    let count = |k: &str, default: u32| args[k].as_u64().map_or(default, |n| u32::try_from(n).expect("fits u32"));
    let images = aicsql_serving::Images {
        height: count("image_height", 0),
        width: count("image_width", 0),
        count: count("num_images", 1),
        encoder_dp: args["enable_encoder_dp"].as_bool().unwrap_or(true),
    };
    Server::new(tree, &model, &system, &backend, &version, true)
        .and_then(|server| server.with_mtp(nextn, args["nextn_accepted"].as_f64()))
        .and_then(|server| server.with_images(images))
        .unwrap_or_else(|e| panic!("{model} on {system}/{backend}/{version}: {e}"))
}

/// A search case's TRT-LLM KV-cache knobs and chunked-prefill flag from its
/// meta.json `args` (`free_gpu_memory_fraction`, `max_seq_len`,
/// `enable_chunked_prefill`; absent: the spec's defaults).
pub fn case_kv_options(args: &serde_json::Value) -> (aicsql_serving::KvSizing, bool) {
    let kv = aicsql_serving::KvSizing {
        max_seq_len: args["max_seq_len"].as_u64().map(|n| u32::try_from(n).expect("max_seq_len fits u32")),
        free_gpu_memory_fraction: args["free_gpu_memory_fraction"].as_f64(),
    };
    (kv, args["enable_chunked_prefill"].as_bool().unwrap_or(false))
}
