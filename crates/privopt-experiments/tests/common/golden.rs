//! The recorded numbers of `privopt-experiments/tests/golden/summaries.tsv`: what a run's
//! comparable numbers are, when two are the same, and the check (or, with `PRIVOPT_BLESS=1`,
//! the rewrite) of a set of labelled runs against the file. Shared by `same_numbers` (the
//! reproductions' smoke configs, run in process) and privopt-cli's `quickstart` test (the
//! quickstart configs, from the files the command writes), so each config runs once.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The file, from either crate's manifest directory (both sit in `crates/`).
pub const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../privopt-experiments/tests/golden/summaries.tsv"
);

/// A timing (machine-dependent) rather than a result; `alg4_over_alg5` is a ratio of times.
pub fn is_timing(key: &str) -> bool {
    ["time", "seconds", "sec_", "_ms", "wall", "alg4_over_alg5"]
        .iter()
        .any(|t| key.contains(t))
}

/// The comparable numbers of a run, keyed `summary/KEY`, `last/COLUMN`, `sum/COLUMN`: its
/// summary values and each metrics column's last value and sum, timings left out.
pub fn numbers(
    summary: impl IntoIterator<Item = (String, f64)>,
    columns: impl IntoIterator<Item = (String, Vec<f64>)>,
) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for (k, v) in summary {
        if !is_timing(&k) {
            m.insert(format!("summary/{k}"), v);
        }
    }
    for (c, col) in columns {
        if is_timing(&c) {
            continue;
        }
        m.insert(format!("last/{c}"), *col.last().unwrap());
        m.insert(format!("sum/{c}"), col.iter().sum());
    }
    m
}

pub fn render(label: &str, nums: &BTreeMap<String, f64>, out: &mut String) {
    for (k, v) in nums {
        // `{:?}` is the shortest text that parses back to the same f64 (NaN and inf too).
        writeln!(out, "{label}\t{k}\t{v:?}").unwrap();
    }
}

/// Equal bit for bit on the machine that recorded them; across processors, libm's FMA variants
/// and faer's SIMD paths (AVX-512 or AVX2, picked at run time) round differently in the last
/// bits, so values within 1e-12 relative (thousands of ulps, far below any change a refactor
/// that alters the arithmetic makes after a training run) count as the same.
pub fn same(recorded: f64, now: f64) -> bool {
    recorded.to_bits() == now.to_bits()
        || (recorded.is_nan() && now.is_nan())
        || (recorded - now).abs() <= 1e-12 * recorded.abs().max(now.abs())
}

pub fn parse_golden(text: &str) -> BTreeMap<(String, String), f64> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split('\t');
            let (label, key, v) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
            ((label.into(), key.into()), v.parse().unwrap())
        })
        .collect()
}

/// Compares `runs` with the recorded numbers, or (`PRIVOPT_BLESS=1`) records them in place of
/// their labels' old lines, keeping every other label's.
pub fn check_or_bless(runs: Vec<(String, BTreeMap<String, f64>)>) {
    if std::env::var_os("PRIVOPT_BLESS").is_some() {
        // The two tests bless concurrently: one at a time through the file.
        static FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = FILE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let golden_text = std::fs::read_to_string(GOLDEN).unwrap_or_default();
        let ours = |line: &str| runs.iter().any(|(l, _)| line.split('\t').next() == Some(l));
        let mut text = String::from(
            "# label\tkey\tvalue — written by PRIVOPT_BLESS=1 cargo test --release --test same_numbers (and privopt-cli's --test cli for the quickstart labels)\n",
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
