//! Fetching the published perf data: two wheels, hash-pinned, downloaded by
//! the ordinary Python package client and unpacked (only `systems/` and
//! `model_configs/`) into the cache.
//!
//! Each release lands in `<cache>/<name>-<version>/` with a `RELEASE`
//! marker; it is written to a temporary directory first and renamed into
//! place, so an interrupted fetch leaves nothing half-written. A release
//! whose directory exists is not fetched again (no network I/O).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use aicsql_tables::RELEASE_MARKER;

/// A published wheel carrying perf data.
#[derive(Debug, Clone, Copy)]
pub struct Wheel {
    pub name: &'static str,
    pub version: &'static str,
    /// sha256 of the wheel file (`--require-hashes`).
    pub sha256: &'static str,
}

impl Wheel {
    /// `aiconfigurator-core==0.12.0`, the label of the release in the catalog.
    pub fn label(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }

    fn dir_name(&self) -> String {
        format!("{}-{}", self.name, self.version)
    }
}

/// The releases aicsql reads. The legacy-layout 0.10.0 wheel and the
/// family-layout core 0.12.0 wheel together hold every table of the spec's
/// goldens (see `docs/spec/engine_step.md` section 4.3).
pub const WHEELS: [Wheel; 2] = [
    Wheel {
        name: "aiconfigurator",
        version: "0.10.0",
        sha256: "4abed631f3a6eef9b74cefb8f0a23f90bce467c2e2fc52ae76519a2b27bcdce3",
    },
    Wheel {
        name: "aiconfigurator-core",
        version: "0.12.0",
        sha256: "aadc4aad0a00bf8a61c477c62bef43de479849c3aa0b1c3078068e08309eccc4",
    },
];

/// What a fetch did.
#[derive(Debug, Default)]
pub struct FetchReport {
    pub fetched: Vec<String>,
    pub present: Vec<String>,
}

/// An error of the fetch step, with what to do about it.
#[derive(Debug)]
pub struct FetchError(pub String);

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FetchError {}

fn io_err(what: &str, path: &Path, e: io::Error) -> FetchError {
    FetchError(format!("{what} {}: {e}", path.display()))
}

/// True when every release is already unpacked under `dir`.
pub fn is_complete(dir: &Path) -> bool {
    WHEELS.iter().all(|w| dir.join(w.dir_name()).join(RELEASE_MARKER).is_file())
}

/// Makes sure every release is unpacked under `dir`, fetching what is missing.
/// `log` receives one line per step.
pub fn ensure_data(dir: &Path, log: &mut dyn FnMut(&str)) -> Result<FetchReport, FetchError> {
    fs::create_dir_all(dir).map_err(|e| io_err("cannot create data directory", dir, e))?;
    let mut report = FetchReport::default();
    for wheel in WHEELS {
        let target = dir.join(wheel.dir_name());
        if target.join(RELEASE_MARKER).is_file() {
            report.present.push(wheel.label());
            continue;
        }
        if target.exists() {
            return Err(FetchError(format!(
                "{} exists but has no {RELEASE_MARKER} marker (an unfinished copy?); remove it and fetch again",
                target.display()
            )));
        }
        log(&format!("fetching {} into {}", wheel.label(), target.display()));
        let staging = dir.join(format!(".fetch-{}-{}", wheel.dir_name(), std::process::id()));
        let result = fetch_one(&wheel, &staging, &target);
        // Whatever happened, leave no staging directory behind.
        let _ = fs::remove_dir_all(&staging);
        result?;
        report.fetched.push(wheel.label());
    }
    Ok(report)
}

fn python() -> String {
    std::env::var("AICSQL_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into())
}

fn fetch_one(wheel: &Wheel, staging: &Path, target: &Path) -> Result<(), FetchError> {
    let downloads = staging.join("download");
    let tree = staging.join("tree");
    fs::create_dir_all(&downloads).map_err(|e| io_err("cannot create", &downloads, e))?;
    let requirements = staging.join("requirements.txt");
    fs::write(&requirements, format!("{}=={} --hash=sha256:{}\n", wheel.name, wheel.version, wheel.sha256))
        .map_err(|e| io_err("cannot write", &requirements, e))?;

    let python = python();
    let output = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes"])
        .args(["--disable-pip-version-check", "--no-input", "--progress-bar", "off"])
        .arg("-r")
        .arg(&requirements)
        .arg("-d")
        .arg(&downloads)
        .output()
        .map_err(|e| {
            FetchError(format!(
                "cannot run `{python} -m pip` ({e}); aicsql fetches its data with pip: install Python 3 \
                 with pip, or set AICSQL_PYTHON to a Python that has it"
            ))
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(FetchError(format!(
            "`{python} -m pip download {}` failed ({}): is the package index reachable?\n{}",
            wheel.label(),
            output.status,
            tail.join("\n")
        )));
    }
    let wheel_file = fs::read_dir(&downloads)
        .map_err(|e| io_err("cannot list", &downloads, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| FetchError(format!("pip reported success but left no wheel in {}", downloads.display())))?;

    let files = unpack_data(&wheel_file, &tree)?;
    if files == 0 {
        return Err(FetchError(format!("{} holds no systems/ or model_configs/ data", wheel_file.display())));
    }
    fs::write(tree.join(RELEASE_MARKER), format!("{}\n", wheel.label()))
        .map_err(|e| io_err("cannot write", &tree.join(RELEASE_MARKER), e))?;
    fs::rename(&tree, target).map_err(|e| io_err("cannot move the unpacked data to", target, e))?;
    Ok(())
}

/// True for `<package>/systems/...` and `<package>/model_configs/...`.
fn is_data_entry(path: &Path) -> bool {
    let mut parts = path.components();
    matches!(parts.next(), Some(Component::Normal(_)))
        && matches!(parts.next(), Some(Component::Normal(p)) if p == "systems" || p == "model_configs")
}

/// Unpacks the data folders of a wheel into `into`; returns the file count.
fn unpack_data(wheel: &Path, into: &Path) -> Result<usize, FetchError> {
    let file = fs::File::open(wheel).map_err(|e| io_err("cannot open", wheel, e))?;
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|e| FetchError(format!("{} is not a readable wheel: {e}", wheel.display())))?;
    let mut count = 0;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(|e| FetchError(format!("{}: entry {i}: {e}", wheel.display())))?;
        let Some(relative) = entry.enclosed_name() else { continue };
        if entry.is_dir() || !is_data_entry(&relative) {
            continue;
        }
        let out: PathBuf = into.join(&relative);
        if let Some(parent) = out.parent() {
            fs::create_dir_all(parent).map_err(|e| io_err("cannot create", parent, e))?;
        }
        let mut writer = fs::File::create(&out).map_err(|e| io_err("cannot create", &out, e))?;
        io::copy(&mut entry, &mut writer).map_err(|e| io_err("cannot unpack", &out, e))?;
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::is_data_entry;
    use std::path::Path;

    #[test]
    fn keeps_only_data_folders() {
        assert!(is_data_entry(Path::new("aiconfigurator/systems/h200_sxm.yaml")));
        assert!(is_data_entry(Path::new("aiconfigurator_core/model_configs/Qwen--Qwen3-8B_config.json")));
        assert!(!is_data_entry(Path::new("aiconfigurator/sdk/models.py")));
        assert!(!is_data_entry(Path::new("systems/h200_sxm.yaml")));
        assert!(!is_data_entry(Path::new("aiconfigurator-0.10.0.dist-info/RECORD")));
    }
}
