//! The papers' reproduction suites. A suite is not a method: it runs methods of
//! `privopt-sim` many times (seeds, sweeps, baselines, audits) and records the paper's tables
//! and figures. Each is a module with a config struct implementing [`Suite`]; [`SuiteConfig`]
//! selects one by the `name` key of the `[suite]` table.

pub mod dome;
pub mod dome_seeds;
pub mod dpfhe;
pub mod eezofl;
pub mod hiso;

use privopt_sim::Result;
use privopt_sim::context::RunContext;
use privopt_sim::metrics::Summary;
use serde::{Deserialize, Serialize};

/// A reproduction suite: validated from its config, then run against a [`RunContext`].
pub trait Suite {
    /// Checks the suite's parameters; errors name the key (`suite.seeds …`).
    fn validate(&self) -> Result<()>;
    /// Runs every job of the suite, recording its curves through `ctx`, and returns what it
    /// found.
    fn run(&self, ctx: &mut RunContext<'_>) -> Result<SuiteReport>;
    /// Whether the suite trains on the experiment's `[data]` and `[model]` (false for a suite
    /// that loads its own datasets).
    fn uses_data(&self) -> bool {
        true
    }
}

/// The `[suite]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum SuiteConfig {
    /// EEZOFL (the EEZOFL paper) §VI: Table III, Fig. 2/3, Table II and the audits.
    Eezofl(eezofl::EezoflSuiteConfig),
    /// DP training under FHE (the FHE paper): Table 3, Table 4, Fig. 4/5, the encrypted runs and
    /// the accuracy-gap diagnosis.
    Dpfhe(dpfhe::DpfheSuiteConfig),
    /// Scalar-only FL (the HiSo paper) §6: HiSo vs DeComFL, Fig. 5/8, the baselines.
    Hiso(hiso::HisoSuiteConfig),
    /// DOME (the DOME paper): every method over ε and k.
    Dome(dome::DomeSuiteConfig),
    /// DOME (the DOME paper) at one ε: step sizes chosen on validation, seeds, dropouts.
    DomeSeeds(dome_seeds::DomeSeedsSuiteConfig),
}

/// What a suite found.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum SuiteReport {
    /// See [`dome::DomeSuiteReport`].
    Dome(dome::DomeSuiteReport),
    /// See [`dome_seeds::DomeSeedsSuiteReport`].
    DomeSeeds(dome_seeds::DomeSeedsSuiteReport),
    /// See [`hiso::HisoSuiteReport`].
    Hiso(Box<hiso::HisoSuiteReport>),
    /// See [`eezofl::EezoflSuiteReport`].
    Eezofl(Box<eezofl::EezoflSuiteReport>),
    /// See [`dpfhe::DpfheSuiteReport`].
    Dpfhe(dpfhe::DpfheSuiteReport),
}

impl SuiteReport {
    /// Adds the report's numbers to `summary.json`'s flat keys.
    pub fn write_summary(&self, summary: &mut Summary) {
        match self {
            SuiteReport::Dome(r) => r.write_summary(summary),
            SuiteReport::DomeSeeds(r) => r.write_summary(summary),
            SuiteReport::Hiso(r) => r.write_summary(summary),
            SuiteReport::Eezofl(r) => r.write_summary(summary),
            SuiteReport::Dpfhe(r) => r.write_summary(summary),
        }
    }
}

/// Command-line overrides of a suite's settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SuiteOverrides {
    /// Repeated runs.
    pub runs: Option<usize>,
    /// Datasets.
    pub datasets: Option<Vec<String>>,
    /// Training steps (a cap; the encrypted suite runs exactly this many).
    pub iterations: Option<u64>,
    /// Worker threads (the encrypted suite times exactly this count).
    pub threads: Option<usize>,
}

impl SuiteOverrides {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Refuses counts of zero and an empty dataset list, naming the flag.
    pub fn validate(&self) -> Result<()> {
        let zero = [
            ("--runs", self.runs.map(|n| n as u64)),
            ("--iterations", self.iterations),
            ("--threads", self.threads.map(|n| n as u64)),
        ];
        for (flag, value) in zero {
            if value == Some(0) {
                return Err(privopt_sim::SimError::Config(format!(
                    "{flag} must be >= 1, got 0"
                )));
            }
        }
        if self.datasets.as_ref().is_some_and(Vec::is_empty) {
            return Err(privopt_sim::SimError::Config(
                "--datasets must name at least one dataset".into(),
            ));
        }
        Ok(())
    }
}

impl SuiteConfig {
    fn suite(&self) -> &dyn Suite {
        match self {
            SuiteConfig::Eezofl(c) => c,
            SuiteConfig::Dpfhe(c) => c,
            SuiteConfig::Hiso(c) => c,
            SuiteConfig::Dome(c) => c,
            SuiteConfig::DomeSeeds(c) => c,
        }
    }

    /// The suite's config name.
    pub fn name(&self) -> &'static str {
        match self {
            SuiteConfig::Eezofl(_) => "eezofl",
            SuiteConfig::Dpfhe(_) => "dpfhe",
            SuiteConfig::Hiso(_) => "hiso",
            SuiteConfig::Dome(_) => "dome",
            SuiteConfig::DomeSeeds(_) => "dome_seeds",
        }
    }

    /// The privacy mechanism and its parameters, in a few words (for one-line summaries).
    pub fn privacy(&self) -> String {
        match self {
            SuiteConfig::Dpfhe(c) => {
                let dp = c
                    .experiment
                    .privacy()
                    .map(|p| format!("(ε={}, δ={:e})-DP", p.epsilon, p.delta));
                match &c.experiment {
                    dpfhe::Experiment::Encrypted(s) => format!(
                        "CKKS {} 128-bit, {}",
                        match s.bootstrap {
                            None => "n=2^15",
                            Some(dpfhe::BootstrapChoice::N15) => "n=2^15 bootstrapped",
                            Some(dpfhe::BootstrapChoice::N16) => "n=2^16 bootstrapped",
                            Some(dpfhe::BootstrapChoice::N16StcFirst) => {
                                "n=2^16 bootstrapped, SlotsToCoeffs first"
                            }
                        },
                        dp.unwrap_or_default()
                    ),
                    _ => dp.unwrap_or_else(|| "none (no DP noise)".into()),
                }
            }
            SuiteConfig::Eezofl(_) => "xMK-CKKS over the air (suite)".into(),
            SuiteConfig::Hiso(_) => "seeds and scalars only (suite)".into(),
            SuiteConfig::Dome(_) => "SecAgg+ and DP over ε (suite)".into(),
            SuiteConfig::DomeSeeds(c) => format!(
                "SecAgg+ and (ε={}, δ={:e})-DP (suite)",
                c.base.epsilon, c.base.delta
            ),
        }
    }

    /// See [`Suite::validate`].
    pub fn validate(&self) -> Result<()> {
        self.suite().validate()
    }

    /// See [`Suite::uses_data`].
    pub fn uses_data(&self) -> bool {
        self.suite().uses_data()
    }

    /// See [`Suite::run`].
    pub fn run(&self, ctx: &mut RunContext<'_>) -> Result<SuiteReport> {
        self.suite().run(ctx)
    }
}

/// Checks a suite's `base` method settings, naming their keys `suite.base.…`.
pub(crate) fn validate_base(base: &dyn privopt_sim::methods::Method) -> Result<()> {
    base.validate().map_err(|e| match e {
        privopt_sim::SimError::Config(m) => {
            privopt_sim::SimError::Config(m.replace("method.", "suite.base."))
        }
        e => e,
    })
}
