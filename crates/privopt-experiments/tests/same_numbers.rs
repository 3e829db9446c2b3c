//! Refactors must not move a number: a small smoke version of every reproduction gives the
//! `summary.json` values (and each metrics column's last value and sum) recorded in
//! `tests/golden/summaries.tsv`, bit for bit on the recording machine's processor and to 1e-12
//! relative on others (see `common::golden::same`). Timings are left out. The shipped
//! quickstart configs are held to the same file by privopt-cli's quickstart test.
//!
//! `PRIVOPT_BLESS=1 cargo test --release --test same_numbers` rewrites the file from the
//! current code; do that only for a change that is meant to move numbers, and say why in the
//! commit. The real-data cases are one test, marked ignored (with the command that fetches
//! them) until their datasets are fetched; under CI it always runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::golden::{check_or_bless, numbers as golden_numbers};
use privopt_experiments::runner::RunOutcome;

/// The comparable numbers of an in-process run.
fn numbers(out: &RunOutcome) -> BTreeMap<String, f64> {
    let columns =
        (out.metrics.columns().iter()).map(|c| (c.clone(), out.metrics.column(c).unwrap()));
    golden_numbers(out.summary.iter().map(|(k, v)| (k.clone(), *v)), columns)
}

/// `(label, config, replacements)`.
type Case = (
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
);

/// Cases that need no fetched data: `(label, config, replacements)`. The shipped quickstart
/// configs (labels `dome`, `dpfhe`, `eezofl`, `eezofl-digital`, `hiso`, `pdsgd`, `sgd`,
/// `zo_sgd`) are checked against the same file by privopt-cli's quickstart test, from what
/// `privopt quickstart` writes: each runs once per test suite.
fn synthetic_cases() -> Vec<Case> {
    vec![
        (
            "smoke-eezofl-table3",
            "eezofl-table3",
            common::SMOKE_EEZOFL_TABLE3.to_vec(),
        ),
        (
            "smoke-pdsgd-fig3",
            "pdsgd-fig3",
            common::SMOKE_PDSGD_FIG3.to_vec(),
        ),
    ]
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
