//! The peer libraries beside privopt: figures recorded by hand, and peers run live in a
//! Python given with `--peer-python`, compared per operation.

use std::path::Path;

use anyhow::{Context, Result};

use super::{Measurement, human_ns, stdout_of};

/// Peer figures recorded on this machine by hand (the peer does not install with pip):
/// `(case, peer, seconds, peak GB, bits)`. OpenFHE 1.5.1's full-slot bootstrap at ring 2^15,
/// one thread, from issue 24 (docs/ckks-eval.md).
const RECORDED_PEERS: &[(&str, &str, f64, f64, f64)] = &[(
    "ckks/n32768/bootstrap",
    "OpenFHE 1.5.1 (recorded)",
    31.9,
    7.5,
    11.2,
)];

/// The recorded peer figures next to the cases that ran.
pub(super) fn print_recorded_peers(ours: &[Measurement]) -> Result<()> {
    for (case, peer, seconds, gb, bits) in RECORDED_PEERS {
        if let Some(o) = ours.iter().find(|o| o.name == *case) {
            outln!(
                "{case}: privopt {} vs {peer} {seconds:.1} s, {gb:.1} GB, {bits:.1} bits \
                 ({:.2}× the peer's speed)",
                human_ns(o.median_ns),
                seconds * 1e9 / o.median_ns
            )?;
        }
    }
    Ok(())
}

/// Peer libraries timed side by side with a suite: (suite, Python module, script). The script
/// prints one `{"name", "median_ns"}` JSON object per line, named like privopt's cases.
const PEERS: &[(&str, &str, &str)] =
    &[("paillier", "phe", include_str!("../../peers/paillier.py"))];

/// Runs the peer script of `suite` with `python`, or says in one line why it was skipped.
pub(super) fn run_peer(suite: &str, python: &Path, runs: usize) -> Result<Vec<Measurement>> {
    let Some((_, module, script)) = PEERS.iter().find(|(s, _, _)| *s == suite) else {
        return Ok(Vec::new());
    };
    let probe = std::process::Command::new(python)
        .args(["-c", &format!("import {module}")])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        outln!(
            "peer skipped: `{}` cannot import `{module}` (e.g. `python3 -m venv /tmp/peer && \
             /tmp/peer/bin/pip install phe gmpy2`, then --peer-python /tmp/peer/bin/python)",
            python.display()
        )?;
        return Ok(Vec::new());
    }
    let mut cmd = std::process::Command::new(python);
    cmd.args(["-c", script, &runs.to_string()]);
    let stdout = stdout_of(cmd, "the peer script")?;
    #[derive(serde::Deserialize)]
    struct Line {
        name: String,
        median_ns: f64,
    }
    stdout
        .lines()
        .map(|l| {
            let line: Line = serde_json::from_str(l).context("peer output")?;
            Ok(Measurement::timed(line.name, line.median_ns, runs))
        })
        .collect()
}

/// Prints privopt's figure beside the peer's for every peer case, with the ratio
/// (peer / privopt: above 1 means privopt is faster). privopt cases whose name starts with the
/// peer's are compared too (e.g. `decrypt_2threads` against the peer's `decrypt`).
pub(super) fn print_comparison(ours: &[Measurement], peer: &[Measurement]) -> Result<()> {
    if peer.is_empty() {
        return Ok(());
    }
    outln!(
        "\n{:<48} {:>12} {:>14} {:>8}",
        "side by side",
        "privopt",
        "peer",
        "ratio"
    )?;
    for p in peer {
        // `encrypt_online` (a pooled obfuscator) has no counterpart in the peer.
        let matching = ours
            .iter()
            .filter(|o| o.name.starts_with(&p.name) && !o.name.ends_with("_online"));
        for o in matching {
            // A `batchN` case times N operations: compare per operation.
            let (per_op, label) = match batch_size(&o.name) {
                Some(n) => (o.median_ns / n as f64, format!("{} (per op)", o.name)),
                None => (o.median_ns, o.name.clone()),
            };
            outln!(
                "{label:<48} {:>12} {:>14} {:>7.2}×",
                human_ns(per_op),
                human_ns(p.median_ns),
                p.median_ns / per_op
            )?;
        }
    }
    Ok(())
}

/// `N` of a case named `…batchN…`: how many operations one sample of it times.
fn batch_size(name: &str) -> Option<usize> {
    let rest = &name[name.find("batch")? + "batch".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_cases_are_compared_per_operation() {
        assert_eq!(
            batch_size("paillier/2048/decrypt_batch32_2threads"),
            Some(32)
        );
        assert_eq!(batch_size("paillier/2048/decrypt"), None);
        assert_eq!(batch_size("x/batch/y"), None);
        assert_eq!(batch_size("x/batch0"), None);
    }
}
