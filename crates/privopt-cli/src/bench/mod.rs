//! `privopt bench SUITE`: micro-benchmarks with warm-up and repeated timed samples; the
//! reported figure is the median time of one operation.
//!
//! Benchmark names follow `SUITE/PARAMS/OP`. This module is the runner (timing, the table, the
//! JSON); each crate's workloads are a file of their own (`math`, `ml`, `ckks`, `paillier`,
//! `secagg`), registered in [`SUITES`]; `peers` runs and prints the peer libraries beside them.

mod ckks;
mod math;
mod ml;
mod paillier;
mod peers;
mod secagg;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

pub use ckks::{BootstrapVariant, bootstrap_child};

/// One benchmark: a name and the operation to time.
pub struct Case {
    name: String,
    op: Op,
}

/// Named durations measured by a self-timed operation.
type Parts = Vec<(&'static str, Duration)>;

/// How a case is timed.
enum Op {
    /// Timed from outside, repeated to fill a sample.
    Timed(Box<dyn FnMut()>),
    /// A long operation that times its own parts (e.g. a protocol round: whole, per client,
    /// server); each part is reported as `NAME/PART`.
    SelfTimed(Box<dyn FnMut() -> Result<Parts>>),
    /// Run in a child process that times itself (given the samples wanted) and reports its
    /// own peak memory.
    Child(Box<dyn FnMut(usize) -> Result<Measurement>>),
}

impl Case {
    fn new(name: impl Into<String>, op: impl FnMut() + 'static) -> Self {
        Self {
            name: name.into(),
            op: Op::Timed(Box::new(op)),
        }
    }

    fn self_timed(name: impl Into<String>, op: impl FnMut() -> Result<Parts> + 'static) -> Self {
        Self {
            name: name.into(),
            op: Op::SelfTimed(Box::new(op)),
        }
    }
}

/// Wall-time budget of one self-timed case's samples: long rounds get fewer samples.
const SELF_TIMED_BUDGET: Duration = Duration::from_secs(60);

/// Runs a self-timed op once to warm up, then up to `runs` times within the budget, and
/// returns each part's median and the samples taken.
fn measure_parts(
    op: &mut dyn FnMut() -> Result<Parts>,
    runs: usize,
) -> Result<(Vec<(&'static str, f64)>, usize)> {
    let start = Instant::now();
    op()?;
    let first = start.elapsed().as_secs_f64().max(1e-9);
    let runs = ((SELF_TIMED_BUDGET.as_secs_f64() / first) as usize).clamp(1, runs.max(1));
    let samples: Vec<Parts> = (0..runs).map(|_| op()).collect::<Result<_>>()?;
    let parts = samples.first().map_or(0, Vec::len);
    let medians = (0..parts)
        .map(|i| {
            let mut v: Vec<f64> = samples.iter().map(|s| s[i].1.as_nanos() as f64).collect();
            (samples[0][i].0, median(&mut v))
        })
        .collect();
    Ok((medians, runs))
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    let m = samples.len();
    if m == 0 {
        f64::NAN
    } else if m % 2 == 1 {
        samples[m / 2]
    } else {
        0.5 * (samples[m / 2 - 1] + samples[m / 2])
    }
}

/// One measured result, as written to `--json`.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Measurement {
    /// `SUITE/PARAMS/OP`.
    pub name: String,
    /// Median nanoseconds per operation.
    pub median_ns: f64,
    /// Timed samples taken.
    pub runs: usize,
    /// Peak resident memory of the process that ran it (cases run in a process of their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mb: Option<f64>,
    /// What else the case measured (precision, levels, setup), in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Measurement {
    fn timed(name: String, median_ns: f64, runs: usize) -> Self {
        Self {
            name,
            median_ns,
            runs,
            peak_rss_mb: None,
            detail: None,
        }
    }
}

type Suite = (&'static str, &'static str, fn() -> Result<Vec<Case>>);

/// Every suite: name, description, constructor.
const SUITES: &[Suite] = &[
    (
        "ml",
        "model gradients and zeroth-order perturbation generation",
        ml::ml_suite,
    ),
    (
        "zo",
        "scalar-only FL: d-dim direction generation, one replayed HiSo round, CNN batch loss",
        ml::zo_suite,
    ),
    (
        "prg",
        "seed-tree stream derivation and ChaCha20 output",
        math::prg_suite,
    ),
    (
        "ntt",
        "the NTT backend at n = 2^16 for primes of 30 to 60 bits (AVX-512 IFMA's 52-bit lanes serve primes below 2^51, the 64-bit path the rest): forward, inverse, pointwise product-accumulate",
        math::ntt_suite,
    ),
    (
        "mkckks",
        "xMK-CKKS with 10 parties, both paper parameter sets, one thread",
        ckks::mkckks_suite,
    ),
    (
        "ckks",
        "leveled CKKS (n8192, n32768, seal8192), one thread: encode … rotate; 128-bit bootstrapping at 2^15 and 2^16, full and compact (keys and transforms), each in its own process with its peak RSS (minutes and ~6 GB per process; --skip bootstrap leaves it out)",
        ckks::ckks_suite,
    ),
    (
        "secagg",
        "SecAgg+ rounds in simulation: N ∈ {10, 50, 100, 1000}, d ∈ {1e5, 1e6}, complete and sparse graphs",
        secagg::secagg_suite,
    ),
    (
        "paillier",
        "Paillier at 2048 and 3072 bits, one thread (plus a two-thread batch decryption)",
        paillier::paillier_suite,
    ),
];

/// Time of one timed sample; short operations are repeated to fill it.
const SAMPLE_TARGET: Duration = Duration::from_millis(20);
/// Warm-up time before sampling.
const WARM_UP: Duration = Duration::from_millis(200);

/// Times `op`: warm-up, calibration of iterations per sample, then `runs` samples.
pub fn measure(op: &mut dyn FnMut(), runs: usize) -> f64 {
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < WARM_UP || calls == 0 {
        op();
        calls += 1;
    }
    let per_call = start.elapsed().as_secs_f64() / calls as f64;
    let iters = ((SAMPLE_TARGET.as_secs_f64() / per_call).ceil() as u64).max(1);
    let mut samples: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                op();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    median(&mut samples)
}

/// The standard output of `cmd`, or an error with the last line of its standard error.
fn stdout_of(mut cmd: std::process::Command, what: &str) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Peak resident memory of this process (Linux `VmHWM`), in MB.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// `privopt bench SUITE`: runs `suite` (or lists suites for `list`), prints a table,
/// optionally writes JSON; `peer_python` runs the suite's peer library beside it.
pub fn run(
    suite: &str,
    json: Option<&Path>,
    runs: usize,
    peer_python: Option<&Path>,
    skip: &[String],
    quiet: bool,
) -> Result<()> {
    if suite == "list" {
        for (name, desc, _) in SUITES {
            outln!("{name:<10} {desc}")?;
        }
        return Ok(());
    }
    let Some((_, _, make)) = SUITES.iter().find(|(n, _, _)| *n == suite) else {
        bail!(
            "unknown bench suite `{suite}`; known: {}",
            SUITES.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
        );
    };
    if runs == 0 {
        bail!("--runs must be >= 1");
    }
    let mut results = Vec::new();
    if !quiet {
        outln!("{:<48} {:>14} {:>6}", "benchmark", "median", "runs")?;
    }
    for case in make()? {
        if skip.iter().any(|s| case.name.contains(s.as_str())) {
            continue;
        }
        let measured = match case.op {
            Op::Timed(mut op) => vec![Measurement::timed(case.name, measure(&mut op, runs), runs)],
            Op::SelfTimed(mut op) => {
                let (parts, taken) = measure_parts(&mut op, runs)?;
                parts
                    .into_iter()
                    .map(|(part, ns)| {
                        Measurement::timed(format!("{}/{part}", case.name), ns, taken)
                    })
                    .collect()
            }
            Op::Child(mut op) => vec![Measurement {
                name: case.name,
                ..op(runs)?
            }],
        };
        for m in measured {
            if !quiet {
                outln!("{:<48} {:>14} {:>6}", m.name, human_ns(m.median_ns), m.runs)?;
                if let Some(rss) = m.peak_rss_mb {
                    outln!(
                        "    peak RSS {rss:.0} MB; {}",
                        m.detail.as_deref().unwrap_or("")
                    )?;
                }
            }
            results.push(m);
        }
    }
    if !quiet {
        peers::print_recorded_peers(&results)?;
    }
    if let Some(python) = peer_python {
        let peer = peers::run_peer(suite, python, runs)?;
        peers::print_comparison(&results, &peer)?;
        results.extend(peer.into_iter().map(|m| Measurement {
            name: format!("peer/{}", m.name),
            ..m
        }));
    }
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&results)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn human_ns(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.3} s", n / 1e9),
        n if n >= 1e6 => format!("{:.3} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.3} µs", n / 1e3),
        n => format!("{n:.1} ns"),
    }
}

/// Deterministic, non-degenerate parameters of size `n` and magnitude `scale` (timing only).
fn bench_weights(n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|i| ((i as f64) * 0.37).sin() * scale).collect()
}
