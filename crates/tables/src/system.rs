//! GPU and node constants from `systems/<system>.yaml`.
//!
//! Numbers keep their YAML type ([`Num`]): the spec divides Python ints by
//! Python ints (an exactly rounded quotient), which is not the same as
//! dividing two `f64`s once products exceed 2^53.

use std::fs;

use serde_yaml_ng::Value;

use crate::discovery::{DataTree, DocFile};
use crate::error::{Result, TablesError};

/// A YAML number as written: integer or float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// The constants of one system that the estimators use (docs/spec section 5).
#[derive(Debug, Clone)]
pub struct SystemSpec {
    pub system: String,
    /// `data_dir` as written (`data/h200_sxm`).
    pub data_dir: Option<String>,
    pub mem_bw: Num,
    pub mem_bw_empirical_scaling_factor: Num,
    pub mem_empirical_constant_latency: Num,
    pub mem_capacity: Option<Num>,
    pub bfloat16_tc_flops: Num,
    pub fp8_tc_flops: Option<Num>,
    pub fp4_tc_flops: Option<Num>,
    pub int8_tc_flops: Option<Num>,
    pub sm_version: Option<i64>,
    pub num_gpus_per_node: i64,
    pub num_gpus_per_rack: Option<i64>,
    pub intra_node_bw: Num,
    pub inter_node_bw: Num,
    pub inter_rack_bw: Option<Num>,
    pub p2p_latency: Num,
    pub nccl_version: Option<String>,
    /// `misc.nccl_mem`: NCCL's memory per GPU (bytes) by tp size.
    pub nccl_mem: Vec<(i64, Num)>,
    /// `misc.other_mem`: CUDA context, cuBLAS and the like (bytes per GPU).
    pub other_mem: Option<Num>,
}

impl SystemSpec {
    /// `misc.nccl_mem[tp]`.
    pub fn nccl_mem_for(&self, tp: i64) -> Option<Num> {
        self.nccl_mem.iter().find(|(k, _)| *k == tp).map(|(_, v)| *v)
    }
}

/// Reads a YAML under `systems/`. `Ok(None)` when the document is not a
/// system description (the manifests living beside them have no `gpu:`).
pub fn read_system_yaml(doc: &DocFile) -> Result<Option<SystemSpec>> {
    let text = fs::read_to_string(&doc.path).map_err(|e| TablesError::io(&doc.path, e))?;
    let value: Value =
        serde_yaml_ng::from_str(&text).map_err(|e| TablesError::document(&doc.path, format!("invalid YAML: {e}")))?;
    if value.get("gpu").is_none() && value.get("node").is_none() {
        return Ok(None);
    }
    let fields = Fields { doc, value: &value };
    let nccl_mem = match value.get("misc").and_then(|m| m.get("nccl_mem")) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Mapping(map)) => {
            let mut out = Vec::with_capacity(map.len());
            for (k, v) in map {
                let key = k.as_i64().ok_or_else(|| {
                    TablesError::document(&doc.path, format!("misc.nccl_mem: expected integer tp sizes, found {k:?}"))
                })?;
                let bytes = match v {
                    Value::Number(n) => n.as_i64().map(|i| Num::Int(i128::from(i))).or(n.as_f64().map(Num::Float)),
                    _ => None,
                }
                .ok_or_else(|| {
                    TablesError::document(&doc.path, format!("misc.nccl_mem[{key}]: expected a number, found {v:?}"))
                })?;
                out.push((key, bytes));
            }
            out
        }
        Some(other) => {
            return Err(TablesError::document(
                &doc.path,
                format!("misc.nccl_mem: expected a mapping of tp size to bytes, found {other:?}"),
            ));
        }
    };
    Ok(Some(SystemSpec {
        nccl_mem,
        other_mem: fields.opt_num("misc", "other_mem")?,
        system: doc.stem.clone(),
        data_dir: value.get("data_dir").and_then(Value::as_str).map(str::to_string),
        mem_bw: fields.num("gpu", "mem_bw")?,
        mem_bw_empirical_scaling_factor: fields.num("gpu", "mem_bw_empirical_scaling_factor")?,
        mem_empirical_constant_latency: fields.num("gpu", "mem_empirical_constant_latency")?,
        mem_capacity: fields.opt_num("gpu", "mem_capacity")?,
        bfloat16_tc_flops: fields.num("gpu", "bfloat16_tc_flops")?,
        fp8_tc_flops: fields.opt_num("gpu", "fp8_tc_flops")?,
        fp4_tc_flops: fields.opt_num("gpu", "fp4_tc_flops")?,
        int8_tc_flops: fields.opt_num("gpu", "int8_tc_flops")?,
        sm_version: fields.opt_int("gpu", "sm_version")?,
        num_gpus_per_node: fields.int("node", "num_gpus_per_node")?,
        num_gpus_per_rack: fields.opt_int("node", "num_gpus_per_rack")?,
        intra_node_bw: fields.num("node", "intra_node_bw")?,
        inter_node_bw: fields.num("node", "inter_node_bw")?,
        inter_rack_bw: fields.opt_num("node", "inter_rack_bw")?,
        p2p_latency: fields.num("node", "p2p_latency")?,
        nccl_version: match value.get("misc").and_then(|m| m.get("nccl_version")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(other) => {
                return Err(TablesError::document(
                    &doc.path,
                    format!("misc.nccl_version: expected a version string, found {other:?}"),
                ));
            }
        },
    }))
}

/// The constants of `system` from the mounted `systems/<system>.yaml`, with
/// the file they came from (for error context); read once per tree.
pub fn system_spec(tree: &DataTree, system: &str) -> Result<(SystemSpec, std::path::PathBuf)> {
    let loaded = tree.cache().systems.get(system.to_string(), || {
        let doc = tree.system_yamls().iter().find(|d| d.stem == system).ok_or_else(|| {
            TablesError::NotFound(format!("unknown system '{system}': no systems/{system}.yaml in the mounted data"))
        })?;
        let spec = read_system_yaml(doc)?
            .ok_or_else(|| TablesError::document(&doc.path, "not a system description (no `gpu:` section)"))?;
        Ok((spec, doc.path.clone()))
    })?;
    Ok((loaded.0.clone(), loaded.1.clone()))
}

struct Fields<'a> {
    doc: &'a DocFile,
    value: &'a Value,
}

impl Fields<'_> {
    fn raw(&self, section: &str, key: &str) -> Option<&Value> {
        self.value.get(section).and_then(|s| s.get(key)).filter(|v| !v.is_null())
    }

    fn missing(&self, section: &str, key: &str) -> TablesError {
        TablesError::document(&self.doc.path, format!("missing required field `{section}.{key}`"))
    }

    fn opt_num(&self, section: &str, key: &str) -> Result<Option<Num>> {
        let Some(v) = self.raw(section, key) else { return Ok(None) };
        let n = match v {
            Value::Number(n) => n,
            other => {
                return Err(TablesError::document(
                    &self.doc.path,
                    format!("`{section}.{key}`: expected a number, found {other:?}"),
                ));
            }
        };
        Ok(Some(if let Some(i) = n.as_i64() {
            Num::Int(i as i128)
        } else if let Some(u) = n.as_u64() {
            Num::Int(u as i128)
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }))
    }

    fn num(&self, section: &str, key: &str) -> Result<Num> {
        self.opt_num(section, key)?.ok_or_else(|| self.missing(section, key))
    }

    fn opt_int(&self, section: &str, key: &str) -> Result<Option<i64>> {
        match self.opt_num(section, key)? {
            None => Ok(None),
            Some(Num::Int(i)) => i64::try_from(i)
                .map(Some)
                .map_err(|_| TablesError::document(&self.doc.path, format!("`{section}.{key}`: {i} is out of range"))),
            Some(Num::Float(f)) => {
                Err(TablesError::document(&self.doc.path, format!("`{section}.{key}`: expected an integer, found {f}")))
            }
        }
    }

    fn int(&self, section: &str, key: &str) -> Result<i64> {
        self.opt_int(section, key)?.ok_or_else(|| self.missing(section, key))
    }
}
