//! `privopt bench SUITE`: micro-benchmarks with warm-up and repeated timed samples; the
//! reported figure is the median time of one operation.
//!
//! Benchmark names follow `SUITE/PARAMS/OP`. Later suites (ckks, paillier, secagg, …) add a
//! function to [`SUITES`].

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use privopt_math::SeedTree;
use privopt_ml::data::Dataset;
use privopt_ml::model::{Logistic, Mlp, Model};
use privopt_ml::zo::{Difference, Direction, ZoAddress, ZoEstimator};
use privopt_secagg::simulation::{Dropouts, run_round};
use privopt_secagg::{
    Context as SecAggContext, Graph, SessionId, Stage, ThreatModel, find_parameters,
};
use rand::RngCore;
use serde::Serialize;

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
        ml_suite,
    ),
    (
        "zo",
        "scalar-only FL: d-dim direction generation, one replayed HiSo round, CNN batch loss",
        zo_suite,
    ),
    (
        "prg",
        "seed-tree stream derivation and ChaCha20 output",
        prg_suite,
    ),
    (
        "ntt",
        "the NTT backend at n = 2^16 for primes of 30 to 60 bits (AVX-512 IFMA's 52-bit lanes serve primes below 2^51, the 64-bit path the rest): forward, inverse, pointwise product-accumulate",
        ntt_suite,
    ),
    (
        "mkckks",
        "xMK-CKKS with 10 parties, both paper parameter sets, one thread",
        mkckks_suite,
    ),
    (
        "ckks",
        "leveled CKKS (n8192, n32768, seal8192), one thread: encode … rotate; 128-bit bootstrapping at 2^15 and 2^16, full and compact (keys and transforms), each in its own process with its peak RSS (minutes and ~6 GB per process; --skip bootstrap leaves it out)",
        ckks_suite,
    ),
    (
        "secagg",
        "SecAgg+ rounds in simulation: N ∈ {10, 50, 100, 1000}, d ∈ {1e5, 1e6}, complete and sparse graphs",
        secagg_suite,
    ),
    (
        "paillier",
        "Paillier at 2048 and 3072 bits, one thread (plus a two-thread batch decryption)",
        paillier_suite,
    ),
];

/// The period of the sparse-packing bootstrapping cases.
const SPARSE_CASE_SLOTS: usize = 1024;

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

/// How a bootstrapping case departs from its preset.
#[derive(Clone, Copy, Debug, Default)]
pub struct BootstrapVariant {
    /// Compact keys and transforms (`BootstrapConfig::compact`).
    pub compact: bool,
    /// CoeffsToSlots' baby rotations this many at a time (`BabySteps::Grouped`); `None`: all
    /// hoisted. SlotsToCoeffs' stay hoisted: its keys are made at its low level and are
    /// small, and a chain there runs on the 57- and 60-bit primes (measured at N15: +0.25 s
    /// for 0.27 GB).
    pub baby_group: Option<usize>,
    /// Sparse packing of this period.
    pub slots: Option<usize>,
}

/// `ckks/n<n>/bootstrap`, `…/bootstrap-compact` with compact keys and transforms,
/// `…/bootstrap-g<M>` with CoeffsToSlots' baby rotations `M` at a time, and `…/bootstrap-s<S>` for sparse
/// packing of period `S`.
fn bootstrap_case_name(n: usize, v: BootstrapVariant) -> String {
    let compact = if v.compact { "-compact" } else { "" };
    let group = v.baby_group.map(|m| format!("-g{m}")).unwrap_or_default();
    let sparse = v.slots.map(|s| format!("-s{s}")).unwrap_or_default();
    format!("ckks/n{n}/bootstrap{compact}{group}{sparse}")
}

/// Runs `privopt bench-bootstrap PRESET` as a child process and reads its one JSON line.
fn run_child_case(preset: &str, runs: usize, v: BootstrapVariant) -> Result<Measurement> {
    let exe = std::env::current_exe().context("cannot find the privopt executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench-bootstrap", preset, "--runs", &runs.to_string()]);
    if v.compact {
        cmd.arg("--compact");
    }
    if let Some(m) = v.baby_group {
        cmd.args(["--baby-group", &m.to_string()]);
    }
    if let Some(s) = v.slots {
        cmd.args(["--slots", &s.to_string()]);
    }
    let text = stdout_of(cmd, &format!("the bootstrapping case {preset}"))?;
    let line = text
        .lines()
        .last()
        .context("the bootstrapping case printed nothing")?;
    serde_json::from_str(line).context("the bootstrapping case's output")
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

/// `privopt bench-bootstrap PRESET`: one preset's bootstrap timed in this process (one warm-up,
/// then up to `runs` samples within about a minute), printed as one JSON [`Measurement`] line
/// with the peak RSS and the precision.
pub fn bootstrap_child(preset: &str, runs: usize, v: BootstrapVariant) -> Result<()> {
    use privopt_ckks::bench_support::BootstrapFixture;
    use privopt_ckks::eval::BabySteps;
    use privopt_ckks::eval::bootstrap::BootstrapPreset;
    let Some(p) = BootstrapPreset::ALL
        .into_iter()
        .find(|p| p.name() == preset)
    else {
        bail!("unknown bootstrapping preset `{preset}`; known: n15, n16");
    };
    if v.baby_group == Some(0) {
        bail!("--baby-group needs at least one baby rotation per group");
    }
    let babies = v.baby_group.map_or(BabySteps::Hoisted, BabySteps::Grouped);
    let f = BootstrapFixture::new(p, v.compact, [babies, BabySteps::Hoisted], v.slots)?;
    let clock = Instant::now();
    let mut out = f.bootstrap()?;
    let first = clock.elapsed().as_secs_f64().max(1e-9);
    let runs = ((SELF_TIMED_BUDGET.as_secs_f64() / first) as usize).clamp(1, runs.max(1));
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let clock = Instant::now();
        out = f.bootstrap()?;
        samples.push(clock.elapsed().as_nanos() as f64);
    }
    let (bits, level) = f.precision_bits(&out)?;
    let m = Measurement {
        name: bootstrap_case_name(p.n(), v),
        median_ns: median(&mut samples),
        runs,
        peak_rss_mb: peak_rss_mb(),
        detail: Some(format!(
            "{bits:.1} bits, {level} levels left, {} Galois keys of {:.0} MB, setup {:.1} s, \
             keygen {:.1} s, one thread",
            f.galois_keys,
            f.galois_bytes as f64 / 1e6,
            f.setup_seconds,
            f.keygen_seconds
        )),
    };
    outln!("{}", serde_json::to_string(&m)?)?;
    Ok(())
}

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
fn print_recorded_peers(ours: &[Measurement]) -> Result<()> {
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
const PEERS: &[(&str, &str, &str)] = &[("paillier", "phe", include_str!("../peers/paillier.py"))];

/// Runs the peer script of `suite` with `python`, or says in one line why it was skipped.
fn run_peer(suite: &str, python: &Path, runs: usize) -> Result<Vec<Measurement>> {
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
fn print_comparison(ours: &[Measurement], peer: &[Measurement]) -> Result<()> {
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
        print_recorded_peers(&results)?;
    }
    if let Some(python) = peer_python {
        let peer = run_peer(suite, python, runs)?;
        print_comparison(&results, &peer)?;
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

/// Random features in [0, 1) and labels in `0..classes` (for timing only).
fn random_data(n: usize, d: usize, classes: usize) -> Result<Dataset> {
    let mut r = SeedTree::new(0).stream("bench/data", &[]);
    let x = (0..n * d)
        .map(|_| (r.next_u32() as f64) / (u32::MAX as f64 + 1.0))
        .collect();
    let y = (0..n)
        .map(|_| (r.next_u32() as usize % classes) as f64)
        .collect();
    Ok(Dataset::new(x, y, d, Some(classes))?)
}

/// Deterministic, non-degenerate parameters of size `n` and magnitude `scale` (timing only).
fn bench_weights(n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|i| ((i as f64) * 0.37).sin() * scale).collect()
}

fn grad_case(name: &str, model: Box<dyn Model>, data: Dataset, batch: usize) -> Case {
    let w = bench_weights(model.num_params(), 0.01);
    let idx: Vec<usize> = (0..batch.min(data.len())).collect();
    let mut g = vec![0.0; w.len()];
    Case::new(name, move || {
        black_box(model.loss_grad(black_box(&w), &data, Some(&idx), &mut g));
    })
}

fn zo_case(name: &str, direction: Direction, d: usize) -> Case {
    let e = ZoEstimator {
        direction,
        difference: Difference::TwoPoint,
        mu: 1e-3,
        perturbations: 1,
    };
    let seeds = SeedTree::new(1);
    let mut u = vec![0.0; d];
    let mut k = 0u64;
    Case::new(name, move || {
        k += 1;
        e.perturbation(&seeds, ZoAddress { round: k, step: 0 }, 0, &mut u);
        black_box(&u);
    })
}

fn ml_suite() -> Result<Vec<Case>> {
    Ok(vec![
        grad_case(
            "ml/logistic-d784-b256/loss_grad",
            Box::new(Logistic::new(784, 0.0)),
            random_data(256, 784, 2)?,
            256,
        ),
        grad_case(
            "ml/mlp-d784-h64-c10-b64/loss_grad",
            Box::new(Mlp::new(784, 64, 10, 0.0)),
            random_data(64, 784, 10)?,
            64,
        ),
        zo_case(
            "ml/gaussian-d100000/zo_perturbation",
            Direction::Gaussian,
            100_000,
        ),
        zo_case(
            "ml/rademacher-d100000/zo_perturbation",
            Direction::Rademacher,
            100_000,
        ),
        zo_case(
            "ml/sphere-d100000/zo_perturbation",
            Direction::Sphere,
            100_000,
        ),
    ])
}

/// Perturbation directions and replayed rounds at `d = 10^6` and `10^7`; a plain memory write
/// of the same size is the bandwidth yardstick (GB/s = 8·d bytes / time).
fn zo_suite() -> Result<Vec<Case>> {
    use privopt_ml::zo::gaussian_fill;
    use privopt_protocols::scalar_fl::{ModelState, ReplaySpec, RoundRecord, Rule, Scratch};
    let mut cases = Vec::new();
    for d in [1_000_000usize, 10_000_000] {
        let mut u = vec![0.0; d];
        let mut k = 0u64;
        cases.push(Case::new(format!("zo/d{d}/direction"), move || {
            k += 1;
            gaussian_fill(&SeedTree::new(k).key("bench/zo", &[]), &mut u);
            black_box(&u);
        }));
        let mut w = vec![0.0; d];
        let mut v = 0.0;
        cases.push(Case::new(format!("zo/d{d}/memory_write"), move || {
            v += 1.0;
            w.fill(v);
            black_box(&w);
        }));
        for (label, rule) in [
            (
                "replay_round",
                Rule::Hiso {
                    nu: 0.01,
                    eps: 1e-8,
                },
            ),
            ("replay_round_decomfl", Rule::Decomfl),
        ] {
            let spec = ReplaySpec {
                lr: 1e-3,
                local_steps: 1,
                perturbations: 1,
                weight_decay: 0.0,
                rule,
            };
            let mut state = ModelState::initial(vec![0.0; d], rule);
            let mut scratch = Scratch::default();
            cases.push(Case::new(format!("zo/d{d}/{label}"), move || {
                let rec = RoundRecord {
                    round: state.round,
                    seeds: vec![state.round],
                    scalars: vec![0.5],
                };
                // The record always continues the state, so this cannot fail.
                let _ = state.apply(&rec, &spec, &mut scratch);
                black_box(&state.x);
            }));
        }
    }
    cases.push(grad_free_case(
        "zo/cnn-mnist-b64/batch_loss",
        Box::new(privopt_ml::model::Cnn::mnist(0.0)?),
        random_data(64, 784, 10)?,
    ));
    Ok(cases)
}

/// The loss of one minibatch (what a zeroth-order client evaluates per probe).
fn grad_free_case(name: &str, model: Box<dyn Model>, data: Dataset) -> Case {
    let w = bench_weights(model.num_params(), 0.1);
    let idx: Vec<usize> = (0..data.len()).collect();
    Case::new(name, move || {
        black_box(model.loss(black_box(&w), &data, Some(&idx)));
    })
}

fn prg_suite() -> Result<Vec<Case>> {
    let seeds = SeedTree::new(7);
    let mut k = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut stream = seeds.stream("bench", &[]);
    Ok(vec![
        Case::new("prg/sha256-chacha20/derive_stream", move || {
            k += 1;
            black_box(seeds.stream("bench/derive", &[k, 0, 1]));
        }),
        Case::new("prg/chacha20-1MiB/fill", move || {
            stream.fill_bytes(&mut buf);
            black_box(&buf);
        }),
    ])
}

/// The NTT suite's prime sizes: below 2^51 (the IFMA path where the CPU has it), just above,
/// and the sizes the N16 bootstrapping preset's CtS, EvalMod and key-switching primes take.
const NTT_CASE_BITS: [i32; 6] = [30, 45, 50, 52, 58, 60];

fn ntt_suite() -> Result<Vec<Case>> {
    use privopt_math::modarith::ntt_prime_near;
    use privopt_math::ntt::{FastNtt, Ntt};
    use std::rc::Rc;

    let n = 1usize << 16;
    let mut cases = Vec::new();
    for bits in NTT_CASE_BITS {
        // Just below 2^bits, so that 50 bits stays under IFMA's 2^51 and 52 bits above it.
        let q = ntt_prime_near(n, 2f64.powi(bits) * 0.9, &[])?;
        let ntt = Rc::new(FastNtt::new(n, q)?);
        let row = |salt: u64| -> Vec<u64> {
            (0..n as u64)
                .map(|i| (i.wrapping_mul(0x9e37_79b9) ^ salt) % q)
                .collect()
        };
        let name = |op: &str| format!("ntt/n{n}/q{bits}/{op}");
        let (t, mut a) = (Rc::clone(&ntt), row(1));
        cases.push(Case::new(name("forward"), move || {
            t.forward(black_box(&mut a))
        }));
        let (t, mut a) = (Rc::clone(&ntt), row(2));
        cases.push(Case::new(name("inverse"), move || {
            t.inverse(black_box(&mut a))
        }));
        let (mut acc, x, y) = (row(3), row(4), row(5));
        cases.push(Case::new(name("mul_acc"), move || {
            ntt.mul_acc(black_box(&mut acc), &x, &y)
        }));
    }
    Ok(cases)
}

fn ckks_suite() -> Result<Vec<Case>> {
    use std::cell::RefCell;
    use std::rc::Rc;

    use privopt_ckks::bench_support::{EVAL_BENCH_SETS, EvalFixture};

    let mut cases = Vec::new();
    for set in EVAL_BENCH_SETS.iter().map(|s| s.name) {
        let f = EvalFixture::new(set, 1)?;
        let err = f.product_error()?;
        if err > 1e-3 {
            bail!("ckks/{set}: a product decrypts {err:e} off; refusing to time a broken engine");
        }
        let f = Rc::new(RefCell::new(f));
        let name = |op: &str| format!("ckks/{set}/{op}");
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encode"), move || {
            black_box(g.borrow().encode().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encrypt"), move || {
            black_box(g.borrow_mut().encrypt().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("decrypt"), move || {
            black_box(g.borrow().decrypt().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("add"), move || {
            black_box(g.borrow().add().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("mul_relin_rescale"), move || {
            black_box(g.borrow().mul_relin_rescale().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("rotate"), move || {
            black_box(g.borrow().rotate().ok());
        }));
    }
    // Full, compact and with CoeffsToSlots' baby rotations one at a time at full packing;
    // sparse packing of 1024 slots (the dpfhe MNIST weights' period).
    for preset in privopt_ckks::eval::bootstrap::BootstrapPreset::ALL {
        for v in [
            BootstrapVariant::default(),
            BootstrapVariant {
                compact: true,
                ..BootstrapVariant::default()
            },
            BootstrapVariant {
                baby_group: Some(1),
                ..BootstrapVariant::default()
            },
            BootstrapVariant {
                slots: Some(SPARSE_CASE_SLOTS),
                ..BootstrapVariant::default()
            },
        ] {
            cases.push(Case {
                name: bootstrap_case_name(preset.n(), v),
                op: Op::Child(Box::new(move |runs| run_child_case(preset.name(), runs, v))),
            });
        }
    }
    Ok(cases)
}

fn mkckks_suite() -> Result<Vec<Case>> {
    use std::cell::RefCell;
    use std::rc::Rc;

    use privopt_ckks::CkksParams;
    use privopt_ckks::bench_support::MkCkksFixture;

    let mut cases = Vec::new();
    for params in [CkksParams::paper_n4096()?, CkksParams::paper_n8192()?] {
        let f = Rc::new(RefCell::new(MkCkksFixture::new(params, 10)?));
        let label = f.borrow().label();
        let parties = f.borrow().parties();
        let name = |op: &str| format!("mkckks/{label}/{op}");
        // Each closure reports a failure of the measured operation by printing once; the
        // fixture is valid by construction, so this does not happen in practice.
        let g = Rc::clone(&f);
        cases.push(Case::new(name("keygen"), move || {
            black_box(g.borrow_mut().keygen());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encrypt_scalar"), move || {
            black_box(g.borrow_mut().encrypt_scalar().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encrypt_vector"), move || {
            black_box(g.borrow_mut().encrypt_vector().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name(&format!("aggregate{parties}")), move || {
            black_box(g.borrow().aggregate().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("partial_decrypt"), move || {
            black_box(g.borrow_mut().partial_decrypt().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name(&format!("fusion{parties}")), move || {
            black_box(g.borrow().fusion().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(
            name(&format!("fusion{parties}_scalar")),
            move || {
                black_box(g.borrow().fusion_scalar().ok());
            },
        ));
    }
    Ok(cases)
}

fn paillier_suite() -> Result<Vec<Case>> {
    use std::rc::Rc;

    use privopt_paillier::{BigInt as Integer, KeyPair};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// Ciphertexts per batch in the two-thread decryption throughput case.
    const BATCH: usize = 32;

    let mut cases = Vec::new();
    for bits in [2048u32, 3072] {
        let name = |op: &str| format!("paillier/{bits}/{op}");
        let mut rng = ChaCha20Rng::seed_from_u64(u64::from(bits));
        let kp = Rc::new(KeyPair::generate(bits, &mut rng)?);
        let m = Integer::from(-123_456_789i64);
        let c = kp.public.encrypt(&m, &mut rng)?;
        let c2 = kp.public.encrypt(&Integer::from(42), &mut rng)?;
        let obf = kp.public.obfuscator_djn(&mut rng);

        let mut r = ChaCha20Rng::seed_from_u64(1);
        cases.push(Case::new(name("keygen"), move || {
            black_box(KeyPair::generate(bits, &mut r).ok());
        }));
        let (k, mm, mut r) = (Rc::clone(&kp), m.clone(), ChaCha20Rng::seed_from_u64(2));
        cases.push(Case::new(name("encrypt"), move || {
            black_box(k.public.encrypt(&mm, &mut r).ok());
        }));
        let (k, mm, mut r) = (Rc::clone(&kp), m.clone(), ChaCha20Rng::seed_from_u64(3));
        cases.push(Case::new(name("encrypt_owner"), move || {
            black_box(k.encrypt_owner(&mm, &mut r).ok());
        }));
        let (k, mm, mut r) = (Rc::clone(&kp), m.clone(), ChaCha20Rng::seed_from_u64(4));
        cases.push(Case::new(name("encrypt_textbook"), move || {
            black_box(k.public.encrypt_textbook(&mm, &mut r).ok());
        }));
        let (k, mm) = (Rc::clone(&kp), m.clone());
        cases.push(Case::new(name("encrypt_online"), move || {
            black_box(k.public.encrypt_with(&mm, &obf).ok());
        }));
        let (k, cc) = (Rc::clone(&kp), c.clone());
        cases.push(Case::new(name("decrypt"), move || {
            black_box(k.decrypt(&cc));
        }));
        let (k, cc) = (Rc::clone(&kp), c.clone());
        cases.push(Case::new(name("decrypt_2threads"), move || {
            black_box(k.decrypt_parallel(&cc));
        }));
        let batch: Vec<_> = (0..BATCH).map(|_| c.clone()).collect();
        let k = Rc::clone(&kp);
        cases.push(Case::new(name("decrypt_batch32_2threads"), move || {
            // A batch of 32 split over both cores: divide by 32 for throughput per ciphertext.
            let (a, b) = batch.split_at(BATCH / 2);
            let key: &KeyPair = &k;
            std::thread::scope(|s| {
                let h = s.spawn(|| a.iter().for_each(|x| drop(black_box(key.decrypt(x)))));
                b.iter().for_each(|x| drop(black_box(key.decrypt(x))));
                black_box(h.join().ok());
            });
        }));
        let (k, a, b) = (Rc::clone(&kp), c.clone(), c2.clone());
        cases.push(Case::new(name("add"), move || {
            black_box(k.public.add(&a, &b));
        }));
        for (label, scalar) in [
            ("mul16", Integer::from(-40_000i32)),
            ("mul64", Integer::from(-0x7edc_ba98_7654_3210i64)),
        ] {
            let (k, a) = (Rc::clone(&kp), c.clone());
            cases.push(Case::new(name(label), move || {
                black_box(k.public.mul_scalar(&a, &scalar));
            }));
        }
    }
    Ok(cases)
}

/// One simulated SecAgg round per sample: `round` is its wall time with every client and the
/// server in this process (clients spread over the cores), `client` one client's mean compute,
/// `server` the server's compute.
fn secagg_case(name: String, graph: Graph, threshold: usize, d: usize, drop_rate: f64) -> Case {
    let n = graph.len();
    let input: Vec<u32> = bench_weights(d, 1.0)
        .iter()
        .map(|x| (x * 1e6) as i32 as u32)
        .collect();
    // A fixed set of clients drops before sending masked inputs (the server then rebuilds
    // their masking keys and removes their pairwise masks).
    let dropped = (n as f64 * drop_rate).round() as usize;
    let dropouts: Dropouts = (0..n)
        .map(|c| (c < dropped).then_some(Stage::MaskedInput))
        .collect();
    let mut round = 0u64;
    Case::self_timed(name, move || {
        round += 1;
        let inputs = vec![input.as_slice(); n];
        let context = SecAggContext {
            session: SessionId([1; 16]),
            round,
        };
        let start = Instant::now();
        let (aggregate, timings) = run_round(context, &graph, threshold, &inputs, &dropouts, round)
            .context("a benchmarked SecAgg round failed")?;
        let wall = start.elapsed();
        black_box(aggregate);
        let finishers = (n - dropped).max(1) as u32;
        Ok(vec![
            ("round", wall),
            ("client", timings.clients_total / finishers),
            ("server", timings.server),
        ])
    })
}

fn secagg_suite() -> Result<Vec<Case>> {
    let threat = ThreatModel {
        dropout_rate: 0.1,
        corrupt_rate: 0.05,
    };
    let mut cases = Vec::new();
    for d in [100_000usize, 1_000_000] {
        // Complete graph (original SecAgg): every pair masks; threshold ⌊n/2⌋ + 1.
        for n in [10usize, 50, 100] {
            let graph = Graph::complete(n)?;
            cases.push(secagg_case(
                format!("secagg/n{n}/d{d}"),
                graph,
                n / 2 + 1,
                d,
                0.0,
            ));
        }
        // Flower's SecAgg+ comparison point: 50 clients, 11 neighbours.
        let graph = Graph::harary(50, 11, [2; 32])?;
        cases.push(secagg_case(format!("secagg/n50k11/d{d}"), graph, 6, d, 0.0));
        // Degree and threshold from the parameter finder.
        for n in [100usize, 1000] {
            let p = find_parameters(n, threat)?;
            let graph = Graph::harary(n, p.degree, [3; 32])?;
            let k = p.degree;
            cases.push(secagg_case(
                format!("secagg/n{n}k{k}/d{d}"),
                graph.clone(),
                p.threshold,
                d,
                0.0,
            ));
            if n == 1000 {
                cases.push(secagg_case(
                    format!("secagg/n{n}k{k}drop10/d{d}"),
                    graph,
                    p.threshold,
                    d,
                    0.1,
                ));
            }
        }
    }
    Ok(cases)
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
