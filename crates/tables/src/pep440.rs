//! Version ordering as PEP 440 defines it, for the version names that occur
//! in the perf trees (`0.19.0`, `1.3.0rc10`, `0.5.6.post2`, `0.1.dev19262`).
//!
//! The spec unions a table with *strictly older* versions of the same backend
//! in PEP 440 order and skips names that do not parse; a lexical order would
//! put `0.5.10` before `0.5.9` and silently change which rows win.

use std::cmp::Ordering;

/// A parsed PEP 440 version (epoch, release, pre, post, dev; local labels ignored).
#[derive(Debug, Clone)]
pub struct Version {
    epoch: u64,
    release: Vec<u64>,
    /// (phase, number) with phase 0 = a, 1 = b, 2 = rc.
    pre: Option<(u8, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
}

impl Version {
    /// Parses a version name; `None` when it is not a PEP 440 version.
    pub fn parse(text: &str) -> Option<Version> {
        let mut s = text.trim().to_ascii_lowercase();
        if let Some(rest) = s.strip_prefix('v') {
            s = rest.to_string();
        }
        if let Some(pos) = s.find('+') {
            s.truncate(pos);
        }
        let (epoch, rest) = match s.split_once('!') {
            Some((e, r)) => (e.parse().ok()?, r.to_string()),
            None => (0, s),
        };
        let bytes = rest.as_bytes();
        let mut i = 0;
        let mut release = Vec::new();
        loop {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if start == i {
                return None;
            }
            release.push(rest[start..i].parse().ok()?);
            if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                i += 1;
            } else {
                break;
            }
        }
        let mut version = Version { epoch, release, pre: None, post: None, dev: None };
        let mut tail = &rest[i..];
        while !tail.is_empty() {
            tail = tail.trim_start_matches(['.', '-', '_']);
            let (label, after) = split_label(tail)?;
            let (number, after) = split_number(after);
            match label {
                "a" | "alpha" if version.pre.is_none() && version.post.is_none() => version.pre = Some((0, number)),
                "b" | "beta" if version.pre.is_none() && version.post.is_none() => version.pre = Some((1, number)),
                "rc" | "c" | "pre" | "preview" if version.pre.is_none() && version.post.is_none() => {
                    version.pre = Some((2, number))
                }
                "post" | "rev" | "r" if version.post.is_none() && version.dev.is_none() => version.post = Some(number),
                "dev" if version.dev.is_none() => version.dev = Some(number),
                _ => return None,
            }
            tail = after;
        }
        Some(version)
    }

    /// Sort key of the pre-release part: dev-only releases sort before any
    /// pre-release, final releases after.
    fn pre_key(&self) -> (i8, u64) {
        match (self.pre, self.post, self.dev) {
            (None, None, Some(_)) => (-1, 0),
            (Some((phase, n)), _, _) => (phase as i8, n),
            _ => (3, 0),
        }
    }
}

fn split_label(s: &str) -> Option<(&str, &str)> {
    let end = s.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(s.len());
    (end > 0).then(|| (&s[..end], &s[end..]))
}

fn split_number(s: &str) -> (u64, &str) {
    let s = s.trim_start_matches(['.', '-', '_']);
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    (s[..end].parse().unwrap_or(0), &s[end..])
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.release.len().max(other.release.len());
        let at = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| {
                (0..len)
                    .map(|i| at(&self.release, i).cmp(&at(&other.release, i)))
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            })
            .then_with(|| self.pre_key().cmp(&other.pre_key()))
            .then_with(|| {
                // No post release sorts before any post release.
                self.post.map(|p| p as i128).unwrap_or(-1).cmp(&other.post.map(|p| p as i128).unwrap_or(-1))
            })
            .then_with(|| {
                // A dev release sorts before the same version without one.
                self.dev.map(|d| d as i128).unwrap_or(i128::MAX).cmp(&other.dev.map(|d| d as i128).unwrap_or(i128::MAX))
            })
    }
}

/// Equality is PEP 440 equality: `1.0 == 1.0.0`.
impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    #[test]
    fn orders_like_pep440() {
        let ordered = [
            "0.1.dev19262",
            "0.5.6",
            "0.5.6.post2",
            "0.5.9",
            "0.5.10rc0",
            "0.5.10",
            "0.14.0",
            "0.18.0",
            "0.19.0",
            "1.2.0rc5",
            "1.3.0rc10",
            "1.3.0rc15",
            "1.3.0",
            "1.3.0.post1",
        ];
        for pair in ordered.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(v("1.0"), v("1.0.0"));
        assert!(v("1.0.dev1") < v("1.0a1"));
        assert!(v("1.0a1.dev1") < v("1.0a1"));
    }

    #[test]
    fn rejects_non_versions() {
        for s in ["", "latest", "main", "1.x", "abc1.0"] {
            assert!(Version::parse(s).is_none(), "{s}");
        }
    }
}
