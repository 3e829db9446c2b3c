//! Refactors must not move a number: every shipped quickstart config and a small smoke version
//! of every reproduction gives the `summary.json` values (and each metrics column's last value
//! and sum) recorded in `tests/golden/summaries.tsv`, bit for bit on the recording machine's
//! processor and to 1e-12 relative on others (see [`same`]). Timings are left out.
//!
//! `PRIVOPT_BLESS=1 cargo test --release --test same_numbers` rewrites the file from the
//! current code; do that only for a change that is meant to move numbers, and say why in the
//! commit. The real-data cases are one test, marked ignored (with the command that fetches
//! them) until their datasets are fetched; under CI it always runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use privopt_experiments::runner::RunOutcome;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/summaries.tsv");

/// A timing (machine-dependent) rather than a result; `alg4_over_alg5` is a ratio of times.
fn is_timing(key: &str) -> bool {
    ["time", "seconds", "sec_", "_ms", "wall", "alg4_over_alg5"]
        .iter()
        .any(|t| key.contains(t))
}

/// The comparable numbers of a run, keyed `summary/KEY`, `last/COLUMN`, `sum/COLUMN`.
fn numbers(out: &RunOutcome) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for (k, v) in &out.summary {
        if !is_timing(k) {
            m.insert(format!("summary/{k}"), *v);
        }
    }
    for c in out.metrics.columns() {
        if is_timing(c) {
            continue;
        }
        let col = out.metrics.column(c).unwrap();
        m.insert(format!("last/{c}"), *col.last().unwrap());
        m.insert(format!("sum/{c}"), col.iter().sum());
    }
    m
}

type Case = (
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
);

/// Cases that need no fetched data: `(label, config, replacements)`.
fn synthetic_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = [
        ("dome", "quickstart/dome"),
        ("dpfhe", "quickstart/dpfhe"),
        ("eezofl", "quickstart/eezofl"),
        ("eezofl-digital", "quickstart/eezofl-digital"),
        ("hiso", "quickstart/hiso"),
        ("pdsgd", "quickstart/pdsgd"),
        ("sgd", "quickstart/sgd"),
        ("zo_sgd", "quickstart/zo_sgd"),
    ]
    .into_iter()
    .map(|(label, cfg)| (label, cfg, Vec::new()))
    .collect();
    cases.push((
        "smoke-eezofl-table3",
        "eezofl-table3",
        common::SMOKE_EEZOFL_TABLE3.to_vec(),
    ));
    cases.push((
        "smoke-pdsgd-fig3",
        "pdsgd-fig3",
        common::SMOKE_PDSGD_FIG3.to_vec(),
    ));
    cases
}

/// Cases on fetched data: `(label, config, replacements, datasets)`.
fn real_data_cases() -> Vec<(Case, &'static [&'static str])> {
    vec![
        (
            (
                "smoke-dome-mnist",
                "dome-mnist",
                common::SMOKE_DOME_MNIST.to_vec(),
            ),
            &["mnist"],
        ),
        (
            (
                "smoke-hiso-mnist",
                "hiso-mnist",
                common::SMOKE_HISO_MNIST.to_vec(),
            ),
            &["mnist"],
        ),
        (
            (
                "smoke-dpfhe-table4",
                "dpfhe-table4",
                vec![
                    (
                        "datasets = [\"mnist\", \"adult\", \"compas\", \"credit\"]",
                        "datasets = [\"compas\"]",
                    ),
                    ("runs = 100", "runs = 2\nmax_steps = 100\nrelease_d = true"),
                ],
            ),
            &["compas"],
        ),
        (
            (
                "smoke-dpfhe-table4-maxabs",
                "dpfhe-table4-maxabs",
                vec![
                    (
                        "datasets = [\"mnist\", \"adult\", \"compas\", \"credit\"]",
                        "datasets = [\"compas\"]",
                    ),
                    ("runs = 100", "runs = 2\nmax_steps = 100\nrelease_d = true"),
                ],
            ),
            &["compas"],
        ),
        (
            (
                "smoke-dpfhe-gap",
                "dpfhe-gap",
                vec![
                    (
                        "datasets = [\"mnist\", \"adult\", \"compas\", \"credit\"]",
                        "datasets = [\"compas\"]",
                    ),
                    ("runs = 10", "runs = 2"),
                    ("gap_steps = [100, 300, 1000]", "gap_steps = [100, 300]"),
                    (
                        "gap_lrs = [0.01, 0.03, 0.1, 0.3, 1.0, 2.0]",
                        "gap_lrs = [0.1, 1.0]",
                    ),
                ],
            ),
            &["compas"],
        ),
    ]
}

fn render(label: &str, nums: &BTreeMap<String, f64>, out: &mut String) {
    for (k, v) in nums {
        // `{:?}` is the shortest text that parses back to the same f64 (NaN and inf too).
        writeln!(out, "{label}\t{k}\t{v:?}").unwrap();
    }
}

/// Equal bit for bit on the machine that recorded them; across processors, libm's FMA variants
/// and faer's SIMD paths (AVX-512 or AVX2, picked at run time) round differently in the last
/// bits, so values within 1e-12 relative (thousands of ulps, far below any change a refactor
/// that alters the arithmetic makes after a training run) count as the same.
fn same(recorded: f64, now: f64) -> bool {
    recorded.to_bits() == now.to_bits()
        || (recorded.is_nan() && now.is_nan())
        || (recorded - now).abs() <= 1e-12 * recorded.abs().max(now.abs())
}

fn parse_golden(text: &str) -> BTreeMap<(String, String), f64> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split('\t');
            let (label, key, v) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
            ((label.into(), key.into()), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn every_synthetic_reproduction_gives_the_recorded_numbers() {
    let runs = synthetic_cases()
        .into_iter()
        .map(|(label, cfg, repl)| {
            let nums = numbers(&common::run_shipped_config(cfg, &repl));
            (label.to_string(), nums)
        })
        .collect();
    check_or_bless(runs);
}

#[test]
#[cfg_attr(
    not(all(data_mnist, data_compas)),
    ignore = "needs mnist, compas: privopt data fetch mnist compas"
)]
fn every_real_data_reproduction_gives_the_recorded_numbers() {
    let runs = real_data_cases()
        .into_iter()
        .map(|((label, cfg, repl), datasets)| {
            let dir =
                privopt_data::testing::real_data_dir(datasets).expect("fetched (the cfg says so)");
            let nums = numbers(&common::run_shipped_config_with_data(cfg, &repl, &dir));
            (label.to_string(), nums)
        })
        .collect();
    check_or_bless(runs);
}

/// Compares `runs` with the recorded numbers, or (`PRIVOPT_BLESS=1`) records them in place of
/// their labels' old lines, keeping every other label's.
fn check_or_bless(runs: Vec<(String, BTreeMap<String, f64>)>) {
    if std::env::var_os("PRIVOPT_BLESS").is_some() {
        // The two tests bless concurrently: one at a time through the file.
        static FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = FILE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let golden_text = std::fs::read_to_string(GOLDEN).unwrap_or_default();
        let ours = |line: &str| runs.iter().any(|(l, _)| line.split('\t').next() == Some(l));
        let mut text = String::from(
            "# label\tkey\tvalue — written by PRIVOPT_BLESS=1 cargo test --release --test same_numbers\n",
        );
        for line in golden_text.lines() {
            if !line.starts_with('#') && !line.is_empty() && !ours(line) {
                writeln!(text, "{line}").unwrap();
            }
        }
        for (label, nums) in &runs {
            render(label, nums, &mut text);
        }
        std::fs::create_dir_all(std::path::Path::new(GOLDEN).parent().unwrap()).unwrap();
        std::fs::write(GOLDEN, text).unwrap();
        return;
    }
    let golden_text = std::fs::read_to_string(GOLDEN).unwrap_or_default();
    let golden = parse_golden(&golden_text);
    assert!(!golden.is_empty(), "{GOLDEN} is missing; bless it first");
    let mut diffs = Vec::new();
    for (label, nums) in &runs {
        let recorded: BTreeMap<&str, f64> = golden
            .iter()
            .filter(|((l, _), _)| l == label)
            .map(|((_, k), v)| (k.as_str(), *v))
            .collect();
        assert!(!recorded.is_empty(), "no recorded numbers for {label}");
        for (k, v) in nums {
            match recorded.get(k.as_str()) {
                Some(r) if same(*r, *v) => {}
                Some(r) => diffs.push(format!("{label} {k}: recorded {r:?}, now {v:?}")),
                None => diffs.push(format!("{label} {k}: new key ({v:?})")),
            }
        }
        for k in recorded.keys() {
            if !nums.contains_key(*k) {
                diffs.push(format!("{label} {k}: key disappeared"));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "{} numbers moved:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
