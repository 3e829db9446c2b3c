//! For the tests of any crate that need fetched datasets (behind the `testing` feature; mark
//! them with the `cfg(data_NAME)` flags of `build/datasets.rs` as well).

use std::path::PathBuf;

use crate::store::COMPLETE_MARKER;

/// Where the fetched datasets `names` are: `PRIVOPT_DATA`, else the workspace's `data/`.
/// `None` (the caller returns early and says it skipped) when one is not fetched; under
/// `CI=true`, where `.ci/run` fetches first, a missing dataset panics instead.
pub fn real_data_dir(names: &[&str]) -> Option<PathBuf> {
    let dir = std::env::var_os("PRIVOPT_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data")));
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !dir.join(n).join(COMPLETE_MARKER).is_file())
        .collect();
    if missing.is_empty() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must fetch {missing:?} into {} before testing",
        dir.display()
    );
    eprintln!(
        "SKIPPED: {missing:?} not fetched into {} (run `privopt data fetch`)",
        dir.display()
    );
    None
}
