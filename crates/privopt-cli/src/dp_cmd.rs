//! `privopt dp`: the privacy accountant from the command line.

use anyhow::Result;
use clap::{Args, ValueEnum};
use privopt_dp::{Accountant, GaussianRun, Sampling};

/// How each step's batch is drawn.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SamplingArg {
    /// Each record independently with probability q (add/remove-one neighbours).
    Poisson,
    /// A fixed-size batch q·N drawn without replacement (replace-one neighbours).
    Wor,
}

/// Which accountant converts the run to (ε, δ).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AccountantArg {
    /// Rényi DP, improved conversion.
    Rdp,
    /// Rényi DP, classic conversion.
    RdpClassic,
    /// zCDP (full batches only, q = 1).
    Zcdp,
}

/// The mechanism every `dp` subcommand describes.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Sampling rate (batch size / dataset size); 1 for full batches.
    #[arg(long, default_value_t = 1.0)]
    q: f64,
    /// Number of noisy steps.
    #[arg(long)]
    steps: u64,
    /// Target δ.
    #[arg(long, default_value_t = 1e-5)]
    delta: f64,
    /// How batches are drawn.
    #[arg(long, value_enum, default_value_t = SamplingArg::Poisson)]
    sampling: SamplingArg,
    /// Which accountant.
    #[arg(long, value_enum, default_value_t = AccountantArg::Rdp)]
    accountant: AccountantArg,
}

impl RunArgs {
    fn sampling(&self) -> Sampling {
        match self.sampling {
            _ if self.q == 1.0 => Sampling::Full,
            SamplingArg::Poisson => Sampling::Poisson { q: self.q },
            SamplingArg::Wor => Sampling::WithoutReplacement { q: self.q },
        }
    }

    fn accountant(&self) -> Accountant {
        match self.accountant {
            AccountantArg::Rdp => Accountant::Rdp,
            AccountantArg::RdpClassic => Accountant::RdpClassic,
            AccountantArg::Zcdp => Accountant::Zcdp,
        }
    }
}

/// Prints ε for noise multiplier `sigma`; ε alone is on the last line.
pub fn epsilon(sigma: f64, run: &RunArgs, quiet: bool) -> Result<()> {
    let eps = GaussianRun {
        sigma,
        sampling: run.sampling(),
        steps: run.steps,
    }
    .epsilon(run.delta, run.accountant())?;
    if !quiet {
        outln!("σ = {sigma}, {}:", run.describe())?;
    }
    outln!("{eps}")?;
    Ok(())
}

impl RunArgs {
    /// `q = …, T = …, δ = …, … sampling, … accountant` (the header line of both commands).
    fn describe(&self) -> String {
        format!(
            "q = {}, T = {}, δ = {}, {:?} sampling, {:?} accountant",
            self.q, self.steps, self.delta, self.sampling, self.accountant
        )
    }
}

/// Prints the smallest σ that meets `epsilon`; σ alone is on the last line.
pub fn sigma(epsilon: f64, run: &RunArgs, quiet: bool) -> Result<()> {
    let sigma = GaussianRun::calibrate(
        epsilon,
        run.delta,
        run.sampling(),
        run.steps,
        run.accountant(),
    )?;
    if !quiet {
        outln!("ε = {epsilon}, {}:", run.describe())?;
    }
    outln!("{sigma}")?;
    Ok(())
}
