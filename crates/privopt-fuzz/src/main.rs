//! `privopt-fuzz [--seconds S | --inputs N] [--seed X] [TARGET-PREFIX ...]`: fuzzes every
//! target (or those whose names start with a given prefix) and prints one line each; exits
//! non-zero if any target failed, writing each first failing input to `fuzz-failures/`.

use std::process::ExitCode;
use std::time::Duration;

use privopt_fuzz::{Budget, PEAK_RSS_BOUND_KIB, all_targets, fuzz};

fn main() -> ExitCode {
    let mut budget = Budget::Time(Duration::from_secs(10));
    let mut seed = 0u64;
    let mut filters = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = |flag: &str| -> Option<u64> {
            let v = args.next().and_then(|v| v.parse().ok());
            if v.is_none() {
                eprintln!("error: {flag} needs a whole number");
            }
            v
        };
        match a.as_str() {
            "--seconds" => match number("--seconds") {
                Some(s) => budget = Budget::Time(Duration::from_secs(s)),
                None => return ExitCode::FAILURE,
            },
            "--inputs" => match number("--inputs") {
                Some(n) => budget = Budget::Inputs(n),
                None => return ExitCode::FAILURE,
            },
            "--seed" => match number("--seed") {
                Some(s) => seed = s,
                None => return ExitCode::FAILURE,
            },
            "-h" | "--help" => {
                println!("privopt-fuzz [--seconds S | --inputs N] [--seed X] [TARGET-PREFIX ...]");
                return ExitCode::SUCCESS;
            }
            other => filters.push(other.to_owned()),
        }
    }
    let targets = match all_targets() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: making the fuzz fixtures: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = 0;
    println!(
        "{:<28} {:>10} {:>8} {:>6} {:>6} {:>12}",
        "target", "inputs", "seconds", "panics", "slow", "peak RSS MiB"
    );
    for t in targets
        .iter()
        .filter(|t| filters.is_empty() || filters.iter().any(|f| t.name.starts_with(f.as_str())))
    {
        let r = fuzz(t, budget, seed);
        println!(
            "{:<28} {:>10} {:>8.1} {:>6} {:>6} {:>12.0}",
            t.name,
            r.inputs,
            r.seconds,
            r.panics,
            r.slow,
            r.peak_rss_kib as f64 / 1024.0
        );
        if !r.clean() {
            failed += 1;
            if let Some((input, what)) = &r.first_failure {
                let path = format!("fuzz-failures/{}.bin", t.name.replace('/', "-"));
                let saved = std::fs::create_dir_all("fuzz-failures")
                    .and_then(|()| std::fs::write(&path, input));
                eprintln!(
                    "{}: {what} (input {})",
                    t.name,
                    if saved.is_ok() {
                        path.as_str()
                    } else {
                        "not saved"
                    }
                );
            }
        }
    }
    println!("peak RSS bound {} MiB", PEAK_RSS_BOUND_KIB / 1024);
    if failed > 0 {
        eprintln!("error: {failed} target(s) failed");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
