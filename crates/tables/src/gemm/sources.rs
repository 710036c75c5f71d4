//! Which files make up a database's GEMM table (docs/spec section 4.2): the
//! generic source union of [`crate::sources`] for `gemm_perf`.

use crate::discovery::DataTree;
use crate::error::Result;
use crate::sources::GEMM_FILE;

pub use crate::sources::{SourceRole, TableSource as GemmSource};

/// The files of the table in priority order.
pub(crate) fn plan(
    tree: &DataTree,
    system: &str,
    backend: &str,
    version: &str,
    shared: bool,
) -> Result<Vec<GemmSource>> {
    crate::sources::plan(tree, &GEMM_FILE, system, backend, version, shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec's source order for the golden databases (section 4.2 table),
    /// on the published data when it is present.
    #[test]
    fn older_versions_nearest_first_by_pep440() {
        let tree = crate::test_data::tree();
        let versions = |system: &str, backend: &str, version: &str| -> Vec<String> {
            plan(tree, system, backend, version, true)
                .map(|s| s.into_iter().map(|s| s.version).collect())
                .unwrap_or_default()
        };
        assert_eq!(versions("h200_sxm", "vllm", "0.19.0"), ["0.19.0", "0.18.0", "0.14.0"]);
        // 0.5.10 sorts after 0.5.9 (PEP 440, not lexical); 0.5.6.post2 after both.
        assert_eq!(versions("h200_sxm", "sglang", "0.5.14"), ["0.5.14", "0.5.10", "0.5.9", "0.5.6.post2"]);
        assert_eq!(versions("h100_sxm", "trtllm", "1.3.0rc10"), ["1.3.0rc10", "1.2.0rc5"]);
        assert_eq!(versions("gb200", "vllm", "0.19.0"), ["0.19.0", "0.14.0"]);
        // Reuse-only version dir: the donor first, then older versions.
        assert_eq!(versions("gb200", "trtllm", "1.3.0rc23"), ["1.3.0rc20", "1.3.0rc10"]);
        let own_only = plan(tree, "h200_sxm", "vllm", "0.19.0", false).map(|s| s.len()).unwrap_or(0);
        assert_eq!(own_only, 1);
    }

    #[test]
    fn unknown_database_lists_what_exists() {
        let tree = crate::test_data::tree();
        let err = plan(tree, "h200_sxm", "vllm", "9.9.9", true).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("unknown database 'h200_sxm/vllm/9.9.9'") && err.contains("0.19.0, 0.22.0"), "{err}");
        // A database the shared layer serves (its dir holds SHARED_LAYER_REUSE.txt only).
        let err = plan(tree, "h200_sxm", "vllm", "0.22.0", false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("come from the shared layer"), "{err}");
        assert_eq!(plan(tree, "h200_sxm", "vllm", "0.22.0", true).map(|s| s.len()).unwrap_or(0), 3);
        let err = plan(tree, "gb200", "trtllm", "1.3.0rc23", false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("reuses 1.3.0rc20"), "{err}");
    }
}
