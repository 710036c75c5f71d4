//! What identifies a mounted data tree across processes.

use aicsql_tables::DataTree;

/// A 64-bit FNV-1a hash of what the tree serves: every winning perf file's
/// (system, backend, version, table, release, size), the system YAMLs' and
/// model configs' names. Paths are left out, so two machines that mount the
/// same data under different directories agree; a process that mounts other
/// data (another release, a missing database) does not.
pub fn fingerprint(tree: &DataTree) -> u64 {
    let mut hash = Fnv::new();
    for file in tree.perf_files() {
        for part in [&file.system, &file.backend, &file.version, &file.table] {
            hash.text(part);
        }
        hash.text(tree.release_label(file.root));
        hash.number(std::fs::metadata(&file.path).map(|m| m.len()).unwrap_or(u64::MAX));
    }
    for doc in tree.system_yamls().iter().chain(tree.model_configs()) {
        hash.text(&doc.stem);
        hash.text(tree.release_label(doc.root));
    }
    hash.0
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
    fn text(&mut self, text: &str) {
        self.number(text.len() as u64);
        self.bytes(text.as_bytes());
    }

    fn number(&mut self, n: u64) {
        self.bytes(&n.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_reference_vectors() {
        let mut h = Fnv::new();
        h.bytes(b"");
        assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
        let mut h = Fnv::new();
        h.bytes(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
        let mut h = Fnv::new();
        h.bytes(b"foobar");
        assert_eq!(h.0, 0x8594_4171_f739_67e8);
    }

    #[test]
    fn texts_are_length_prefixed() {
        let (mut a, mut b) = (Fnv::new(), Fnv::new());
        a.text("ab");
        a.text("c");
        b.text("a");
        b.text("bc");
        assert_ne!(a.0, b.0);
    }
}
