//! The one cache of a [`DataTree`](crate::DataTree): every table, system
//! description and model config it serves, loaded once on first use and
//! then shared by every caller and thread that holds the tree.
//!
//! The cache is owned by the tree, so it lives exactly as long as the tree:
//! a session built over a freshly opened tree (after `aicsql data fetch`,
//! say) sees the new files, and nothing outlives the tree that loaded it.
//! It is typed per kind, one map each, so no entry can be read as another
//! type.

use std::collections::HashMap;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Result, TablesError};
use crate::gemm::GemmTable;
use crate::kernels::{
    AllReduceTable, ComputeScaleTable, ContextAttentionTable, ContextDsaTable, ContextDsv4Table, ContextMlaModuleTable,
    ContextMlaTable, Dsv4CpTable, Dsv4TopkCalib, Dsv32SparseTable, EncoderAttentionTable, GdnTable,
    GenerationAttentionTable, GenerationDsaTable, GenerationDsv4Table, GenerationMlaModuleTable, GenerationMlaTable,
    Glm5SparseTable, Mamba2Table, MhcTable, MlaBmmTable, MoeTable, NcclTable, ScaleMatrixTable,
};
use crate::model::ModelConfig;
use crate::op_sol::OpSol;
use crate::quant::GemmQuant;
use crate::system::SystemSpec;

/// `(system, backend, version)`.
pub type DbKey = (String, String, String);

pub fn db_key(system: &str, backend: &str, version: &str) -> DbKey {
    (system.to_string(), backend.to_string(), version.to_string())
}

/// One slot per key. The map lock is held only to find the slot; the slot
/// lock is held while loading, so different keys load in parallel and
/// concurrent callers of the same key wait for the single load.
type Slot<V> = Arc<Mutex<Option<Loaded<V>>>>;

/// What a load left in its slot. An absent table or name is a fact of the
/// opened tree (its file list is fixed when it opens), so it is kept: a step
/// that probes a table its database lacks (a fallback op's first choice,
/// say) must not re-plan the sources on every lookup. Every other failure
/// (I/O, a corrupt file) is not kept, and the next call retries.
#[derive(Debug)]
enum Loaded<V> {
    Value(Arc<V>),
    Missing(String),
    NotFound(String),
}

/// The loaded values of one kind.
#[derive(Debug)]
pub struct Slots<K, V> {
    map: Mutex<HashMap<K, Slot<V>>>,
}

impl<K, V> Default for Slots<K, V> {
    fn default() -> Self {
        Self { map: Mutex::default() }
    }
}

impl<K: Eq + Hash, V> Slots<K, V> {
    /// The value for `key`, produced by `load` on first use.
    pub fn get(&self, key: K, load: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        // A panic elsewhere while holding a lock leaves the data consistent
        // (slots are only ever filled with complete values), so poisoning is ignored.
        let slot = Arc::clone(self.map.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default());
        let mut entry = slot.lock().unwrap_or_else(PoisonError::into_inner);
        match entry.as_ref() {
            Some(Loaded::Value(value)) => return Ok(Arc::clone(value)),
            Some(Loaded::Missing(message)) => return Err(TablesError::Missing(message.clone())),
            Some(Loaded::NotFound(message)) => return Err(TablesError::NotFound(message.clone())),
            None => {}
        }
        match load() {
            Ok(value) => {
                let value = Arc::new(value);
                *entry = Some(Loaded::Value(Arc::clone(&value)));
                Ok(value)
            }
            Err(TablesError::Missing(message)) => {
                *entry = Some(Loaded::Missing(message.clone()));
                Err(TablesError::Missing(message))
            }
            Err(TablesError::NotFound(message)) => {
                *entry = Some(Loaded::NotFound(message.clone()));
                Err(TablesError::NotFound(message))
            }
            Err(other) => Err(other),
        }
    }

    /// How many values are loaded (a slot whose load is under way, failed
    /// or found nothing does not count).
    fn loaded(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.values()
            .filter(|slot| matches!(*slot.lock().unwrap_or_else(PoisonError::into_inner), Some(Loaded::Value(_))))
            .count()
    }
}

/// Everything a tree has loaded, by kind.
#[derive(Debug, Default)]
pub struct TableCache {
    pub(crate) gemm: Slots<(DbKey, GemmQuant, bool), GemmTable>,
    pub(crate) context_attention: Slots<(DbKey, bool), ContextAttentionTable>,
    pub(crate) generation_attention: Slots<(DbKey, bool), GenerationAttentionTable>,
    pub(crate) encoder_attention: Slots<(DbKey, bool), EncoderAttentionTable>,
    pub(crate) custom_allreduce: Slots<(DbKey, bool), AllReduceTable>,
    pub(crate) nccl: Slots<String, NcclTable>,
    pub(crate) moe: Slots<(DbKey, bool), MoeTable>,
    pub(crate) compute_scale: Slots<(DbKey, bool), ComputeScaleTable>,
    pub(crate) scale_matrix: Slots<(DbKey, bool), ScaleMatrixTable>,
    pub(crate) context_mla: Slots<(DbKey, bool), ContextMlaTable>,
    pub(crate) generation_mla: Slots<(DbKey, bool), GenerationMlaTable>,
    pub(crate) mla_bmm: Slots<(DbKey, bool), MlaBmmTable>,
    pub(crate) mla_context_module: Slots<(DbKey, bool), ContextMlaModuleTable>,
    pub(crate) mla_generation_module: Slots<(DbKey, bool), GenerationMlaModuleTable>,
    pub(crate) gdn: Slots<(DbKey, bool), GdnTable>,
    pub(crate) mamba2: Slots<(DbKey, bool), Mamba2Table>,
    pub(crate) dsa_context_module: Slots<(DbKey, bool), ContextDsaTable>,
    pub(crate) dsa_generation_module: Slots<(DbKey, bool), GenerationDsaTable>,
    pub(crate) dsv4_mhc: Slots<(DbKey, bool), MhcTable>,
    pub(crate) dsv4_context: Slots<(DbKey, bool), ContextDsv4Table>,
    pub(crate) dsv4_generation: Slots<(DbKey, bool), GenerationDsv4Table>,
    pub(crate) dsv4_topk_calib: Slots<(DbKey, bool), Dsv4TopkCalib>,
    pub(crate) glm5_sparse: Slots<(DbKey, bool), Glm5SparseTable>,
    pub(crate) dsv32_sparse: Slots<(DbKey, bool), Dsv32SparseTable>,
    pub(crate) dsv4_cp: Slots<(DbKey, bool), Dsv4CpTable>,
    /// `op_kernel_source_manifest.yaml`, parsed once.
    pub(crate) manifests: Slots<PathBuf, serde_yaml_ng::Value>,
    pub(crate) systems: Slots<String, (SystemSpec, PathBuf)>,
    pub(crate) op_sol: Slots<String, OpSol>,
    pub(crate) model_configs: Slots<String, ModelConfig>,
}

/// How many entries of each kind a tree has loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    pub gemm: usize,
    pub context_attention: usize,
    pub generation_attention: usize,
    pub custom_allreduce: usize,
    pub nccl: usize,
    pub moe: usize,
    pub systems: usize,
    pub model_configs: usize,
}

impl TableCache {
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            gemm: self.gemm.loaded(),
            context_attention: self.context_attention.loaded(),
            generation_attention: self.generation_attention.loaded(),
            custom_allreduce: self.custom_allreduce.loaded(),
            nccl: self.nccl.loaded(),
            moe: self.moe.loaded(),
            systems: self.systems.loaded(),
            model_configs: self.model_configs.loaded(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_once_and_retries_after_a_failure() {
        let slots: Slots<u8, u32> = Slots::default();
        let io = std::io::Error::new(std::io::ErrorKind::Interrupted, "not yet");
        let failed = slots.get(1, || Err(TablesError::io("/tmp/x", io)));
        assert!(failed.is_err());
        assert_eq!(slots.loaded(), 0);
        let mut calls = 0;
        for _ in 0..3 {
            let v = slots.get(1, || {
                calls += 1;
                Ok(7)
            });
            assert_eq!(v.ok().as_deref(), Some(&7));
        }
        assert_eq!((calls, slots.loaded()), (1, 1));
    }

    #[test]
    fn an_absent_table_is_remembered_with_its_message() {
        let slots: Slots<u8, u32> = Slots::default();
        let mut calls = 0;
        for _ in 0..3 {
            let got = slots.get(1, || {
                calls += 1;
                Err(TablesError::Missing("db x has no table y".into()))
            });
            assert!(matches!(got, Err(TablesError::Missing(ref m)) if m == "db x has no table y"), "{got:?}");
            let got = slots.get(2, || {
                calls += 1;
                Err(TablesError::NotFound("no database z".into()))
            });
            assert!(matches!(got, Err(TablesError::NotFound(ref m)) if m == "no database z"), "{got:?}");
        }
        assert_eq!((calls, slots.loaded()), (2, 0));
    }
}
