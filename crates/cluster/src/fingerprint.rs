//! What identifies a mounted data tree across processes.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use aicsql_tables::DataTree;

/// A 64-bit FNV-1a hash of what the tree serves, its contents rather than
/// its whereabouts:
///
/// * every winning perf file's (system, backend, version, table), its
///   release (a published release's `name==version`; a local tree's
///   directory is left out), its size and its parquet footer -- the schema,
///   the row groups' row counts and column statistics -- which changes with
///   any change of the rows without reading them;
/// * every system YAML's and model config's bytes, with the model's
///   `_hf_quant_config.json` companion when there is one (they are small and
///   each byte can move a number).
///
/// So two machines that mount the same data under different directories
/// agree, and a process that mounts other data (another release, a missing
/// database, an edited YAML or table) does not. The support matrices are
/// not hashed: their table travels with its rows.
pub fn fingerprint(tree: &DataTree) -> u64 {
    let mut hash = Fnv::new();
    let release = |root: usize| {
        let release = &tree.roots()[root].release;
        if release.is_local() { "local" } else { release.label.as_str() }
    };
    for file in tree.perf_files() {
        for part in [&file.system, &file.backend, &file.version, &file.table] {
            hash.text(part);
        }
        hash.text(release(file.root));
        hash.file(&file.path, Part::ParquetFooter);
    }
    for doc in tree.system_yamls().iter().chain(tree.model_configs()) {
        hash.text(&doc.stem);
        hash.text(release(doc.root));
        hash.file(&doc.path, Part::Whole);
        if let Some(base) = doc.stem.strip_suffix("_config") {
            let companion = doc.path.with_file_name(format!("{base}_hf_quant_config.json"));
            if companion.is_file() {
                hash.file(&companion, Part::Whole);
            }
        }
    }
    hash.0
}

/// How much of a file identifies it.
#[derive(Clone, Copy)]
enum Part {
    Whole,
    /// A parquet file's footer (its metadata); the whole file when it is
    /// not parquet.
    ParquetFooter,
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

    /// The file's size and contents (all or its footer). A file that cannot
    /// be read hashes as its error's kind: the fingerprint differs from a
    /// process that reads it, and the read error itself surfaces when the
    /// file is queried.
    fn file(&mut self, path: &Path, part: Part) {
        match read_part(path, part) {
            Ok((size, bytes)) => {
                self.number(size);
                self.number(bytes.len() as u64);
                self.bytes(&bytes);
            }
            Err(e) => {
                self.number(u64::MAX);
                self.text(&format!("{:?}", e.kind()));
            }
        }
    }
}

const PARQUET_MAGIC: &[u8; 4] = b"PAR1";

/// `(file size, the bytes that identify it)`.
fn read_part(path: &Path, part: Part) -> std::io::Result<(u64, Vec<u8>)> {
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    if let Part::ParquetFooter = part
        && size >= 12
    {
        // A parquet file ends with its footer, the footer's length (u32 LE)
        // and the magic.
        let mut tail = [0u8; 8];
        file.seek(SeekFrom::End(-8))?;
        file.read_exact(&mut tail)?;
        let footer_len = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        if &tail[4..] == PARQUET_MAGIC && u64::from(footer_len) + 8 <= size {
            let mut footer = vec![0u8; footer_len as usize];
            file.seek(SeekFrom::End(-8 - i64::from(footer_len)))?;
            file.read_exact(&mut footer)?;
            return Ok((size, footer));
        }
        file.seek(SeekFrom::Start(0))?;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok((size, bytes))
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
