//! The data directory: where each catalog dataset lives, whether it is completely fetched,
//! and its pinned SHA-256 sums, checked before anything is parsed.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::catalog::{DatasetSpec, lookup};
use crate::error::{DataError, Result};

/// Name of the marker written after a verified fetch.
pub(crate) const COMPLETE_MARKER: &str = ".complete";

/// The folder of `spec` inside `data_dir`.
pub fn dataset_dir(data_dir: &Path, spec: &DatasetSpec) -> PathBuf {
    data_dir.join(spec.name)
}

/// Whether `spec` has been completely fetched into `data_dir`.
pub fn is_present(data_dir: &Path, spec: &DatasetSpec) -> bool {
    let dir = dataset_dir(data_dir, spec);
    dir.join(COMPLETE_MARKER).is_file() && spec.files.iter().all(|f| dir.join(f.file).is_file())
}

/// The folder of dataset `name`, or [`DataError::Missing`] if it has not been fetched. Every file
/// is checked against its pinned SHA-256 first (about 0.1 s for MNIST), so only the published
/// files are ever parsed: files put there by hand, edited or damaged are a checksum error.
pub fn require(data_dir: &Path, name: &str) -> Result<PathBuf> {
    let spec = lookup(name)?;
    if is_present(data_dir, spec) {
        let dir = dataset_dir(data_dir, spec);
        verify_files(&dir, spec)?;
        Ok(dir)
    } else {
        Err(DataError::Missing {
            name: name.to_owned(),
            dir: data_dir.to_owned(),
        })
    }
}

/// Lower-case hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| DataError::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks every file of `spec` in `dir` against its pinned sum.
pub fn verify_files(dir: &Path, spec: &DatasetSpec) -> Result<()> {
    for f in spec.files {
        let path = dir.join(f.file);
        let actual = sha256_file(&path)?;
        if actual != f.sha256 {
            return Err(DataError::Checksum {
                path,
                expected: f.sha256.to_owned(),
                actual,
            });
        }
    }
    Ok(())
}

/// Whether process `pid` is running (on Linux, `/proc/PID` exists); `None` where that cannot
/// be told.
pub fn process_alive(pid: u32) -> Option<bool> {
    cfg!(target_os = "linux").then(|| Path::new(&format!("/proc/{pid}")).exists())
}

/// Removes the folders in `dir` named `PREFIX` + a process id (+ anything after a `-`) whose
/// process is gone: work folders of interrupted runs. Where liveness cannot be told, an entry
/// a day old counts as gone.
pub fn remove_dead_process_dirs(dir: &Path, prefix: &str) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        let alive = match pid.and_then(process_alive) {
            Some(alive) => alive,
            None => entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() < 24 * 3600),
        };
        if !alive {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dataset_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = require(dir.path(), "mnist").unwrap_err().to_string();
        assert!(e.contains("privopt data fetch mnist"), "{e}");
    }

    #[test]
    fn files_without_marker_or_with_wrong_sum_do_not_count() {
        let dir = tempfile::tempdir().unwrap();
        let spec = lookup("credit").unwrap();
        let ds = dataset_dir(dir.path(), spec);
        std::fs::create_dir_all(&ds).unwrap();
        std::fs::write(ds.join("UCI_Credit_Card.csv"), "ID\n1\n").unwrap();
        // A partial fetch (no marker) is not present.
        assert!(!is_present(dir.path(), spec));
        // And its content fails verification with a checksum error naming the file.
        let e = verify_files(&ds, spec).unwrap_err().to_string();
        assert!(
            e.contains("UCI_Credit_Card.csv") && e.contains("SHA-256"),
            "{e}"
        );
    }

    /// A folder with the completion marker but files that are not the published ones (a fake
    /// 50-image MNIST trained and reported) is a checksum error at load.
    #[test]
    fn loading_checks_the_pinned_sums() {
        let dir = tempfile::tempdir().unwrap();
        let spec = lookup("credit").unwrap();
        let ds = dataset_dir(dir.path(), spec);
        std::fs::create_dir_all(&ds).unwrap();
        for f in spec.files {
            std::fs::write(ds.join(f.file), "ID\n1\n").unwrap();
        }
        std::fs::write(ds.join(COMPLETE_MARKER), "").unwrap();
        assert!(is_present(dir.path(), spec));
        let e = require(dir.path(), "credit").unwrap_err().to_string();
        assert!(e.contains("SHA-256"), "{e}");
    }

    #[test]
    fn sha256_matches_known_vector() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abc");
        std::fs::write(&p, "abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
