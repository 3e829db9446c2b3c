//! Experiment configuration: the TOML schema, its parser with one-line errors that name the
//! offending key, and range validation.

use privopt_data::problem::DataConfig;
use privopt_ml::model::ModelSpec;
use privopt_sim::methods::MethodConfig;
use serde::{Deserialize, Serialize};

use crate::error::{ExperimentError, Result, ensure};
use crate::suites::{SuiteConfig, SuiteOverrides};

/// A whole experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ConfigFile", into = "ConfigFile")]
pub struct ExperimentConfig {
    /// Identifier, used in result folder names (`[a-z0-9_-]`).
    pub name: String,
    /// One line saying what the experiment shows.
    pub description: String,
    /// Master seed of every random stream in the run.
    pub seed: u64,
    /// The data and its split across clients (for a method or suite that trains on them).
    pub data: Option<DataConfig>,
    /// The model (default: the `[model]` defaults).
    pub model: Option<ModelSpec>,
    /// What runs: one method or a paper's suite.
    pub job: Job,
}

/// What an experiment runs: the config's `[method]` or its `[suite]` table.
#[derive(Clone, Debug, PartialEq)]
pub enum Job {
    /// One run of a method.
    Method(MethodConfig),
    /// A paper's reproduction suite.
    Suite(SuiteConfig),
}

/// The file form of [`ExperimentConfig`]: TOML tables, where `[method]` and `[suite]` are two
/// optional tables of which exactly one must be given. Parsing into it keeps the TOML spans
/// that the one-line errors point at; the choice between the two tables is checked after.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<DataConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<ModelSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    method: Option<MethodConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    suite: Option<SuiteConfig>,
}

impl TryFrom<ConfigFile> for ExperimentConfig {
    type Error = String;

    fn try_from(f: ConfigFile) -> std::result::Result<Self, String> {
        let job = match (f.method, f.suite) {
            (Some(m), None) => Job::Method(m),
            (None, Some(s)) => Job::Suite(s),
            (Some(_), Some(_)) => {
                return Err("give either a [method] or a [suite] table, not both".into());
            }
            (None, None) => {
                return Err(
                    "missing a [method] table (one run) or a [suite] table (a reproduction)".into(),
                );
            }
        };
        Ok(ExperimentConfig {
            name: f.name,
            description: f.description,
            seed: f.seed,
            data: f.data,
            model: f.model,
            job,
        })
    }
}

impl From<ExperimentConfig> for ConfigFile {
    fn from(c: ExperimentConfig) -> Self {
        let (method, suite) = match c.job {
            Job::Method(m) => (Some(m), None),
            Job::Suite(s) => (None, Some(s)),
        };
        ConfigFile {
            name: c.name,
            description: c.description,
            seed: c.seed,
            data: c.data,
            model: c.model,
            method,
            suite,
        }
    }
}

impl ExperimentConfig {
    /// Parses and validates a config; `source` names the file in error messages, which are one
    /// line: `source:LINE: [table] message`.
    pub fn from_toml(text: &str, source: &str) -> Result<Self> {
        let cfg: ExperimentConfig = toml::from_str(text)
            .map_err(|e| ExperimentError::Config(describe_toml_error(&e, text, source)))?;
        cfg.validate()
            .map_err(|e| ExperimentError::Config(format!("{source}: {e}")))?;
        Ok(cfg)
    }

    /// The config as TOML (what a run writes to `config.toml`, seed included).
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self)
            .map_err(|e| ExperimentError::Config(format!("cannot serialize config: {e}")))
    }

    /// Checks every value against its range; errors name the key.
    pub fn validate(&self) -> Result<()> {
        ensure(
            !self.name.is_empty()
                && self.name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                }),
            || {
                format!(
                    "name must be non-empty and use only [a-z0-9_-], got {:?}",
                    self.name
                )
            },
        )?;
        let what = self.job_name();
        if self.uses_data() {
            for (table, given) in [
                ("data", self.data.is_some()),
                ("model", self.model.is_some()),
            ] {
                ensure(given, || {
                    format!("{what} trains on a problem: the config needs a [{table}] table")
                })?;
            }
            if let Some(d) = &self.data {
                d.validate()?;
            }
        } else {
            for (table, given) in [
                ("data", self.data.is_some()),
                ("model", self.model.is_some()),
            ] {
                ensure(!given, || {
                    format!("[{table}] is unused by {what}, which makes its own problem: remove it")
                })?;
            }
        }
        match &self.job {
            Job::Method(m) => Ok(m.validate()?),
            Job::Suite(s) => Ok(s.validate()?),
        }
    }

    /// Applies command-line overrides (`privopt reproduce … --runs/--datasets/--iterations/
    /// --threads`): all four for the dpfhe suites, `--runs` (seeds) and `--threads` for
    /// `dome_seeds`.
    pub fn apply_overrides(&mut self, o: &SuiteOverrides) -> Result<()> {
        if o.is_empty() {
            return Ok(());
        }
        let job = self.job_name();
        o.validate()?;
        match &mut self.job {
            Job::Suite(SuiteConfig::Dpfhe(c)) => {
                c.apply_overrides(o);
                // An overridden suite must still be one `privopt run` accepts (its
                // config.toml is written with the results).
                self.validate()
            }
            Job::Suite(SuiteConfig::DomeSeeds(c))
                if o.datasets.is_none() && o.iterations.is_none() =>
            {
                c.seeds = o.runs.map_or(c.seeds, |n| n as u64);
                c.threads = o.threads.unwrap_or(c.threads);
                self.validate()
            }
            Job::Suite(SuiteConfig::DomeSeeds(_)) => Err(ExperimentError::Config(format!(
                "--datasets and --iterations do not apply to {job}; --runs sets its seeds"
            ))),
            _ => Err(ExperimentError::Config(format!(
                "--runs, --datasets, --iterations and --threads apply to the dpfhe and dome_seeds \
                 suites, not to {job}"
            ))),
        }
    }

    /// `method `NAME`` or `suite `NAME`` (for messages).
    pub fn job_name(&self) -> String {
        match &self.job {
            Job::Method(m) => format!("method `{}`", m.name()),
            Job::Suite(s) => format!("suite `{}`", s.name()),
        }
    }

    /// Whether the method or suite trains on `[data]` and `[model]`.
    pub fn uses_data(&self) -> bool {
        match &self.job {
            Job::Method(m) => m.uses_data(),
            Job::Suite(s) => s.uses_data(),
        }
    }

    /// The privacy mechanism and its parameters, in a few words (for one-line summaries).
    pub fn privacy(&self) -> String {
        match &self.job {
            Job::Method(m) => m.privacy(),
            Job::Suite(s) => s.privacy(),
        }
    }
}

/// Turns a TOML/serde error into `source:LINE: [table] message`.
fn describe_toml_error(e: &toml::de::Error, text: &str, source: &str) -> String {
    let message = e.message().trim().replace('\n', " ");
    let Some(span) = e.span() else {
        return format!("{source}: {message}");
    };
    let (start, end) = (span.start.min(text.len()), span.end.min(text.len()));
    // Tagged tables (`[method]`) are reported with the span of the whole table: point at the
    // unknown key itself when the message names one.
    let at = unknown_field(&message)
        .and_then(|key| find_key_line(text, start, end, key))
        .unwrap_or(start);
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    // The innermost table header at or above that line tells which table the key belongs to.
    let line_end = text[at..].find('\n').map_or(text.len(), |k| at + k);
    let table = text[..line_end]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|h| format!("{h} "))
        .unwrap_or_default();
    format!("{source}:{line}: {table}{message}")
}

/// The `X` of serde's "unknown field `X`, expected …".
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// Byte offset of the line that assigns `key`, searching from `start` to the end of the
/// table that contains `start..end` (the span may cover only the table's header).
fn find_key_line(text: &str, start: usize, end: usize, key: &str) -> Option<usize> {
    let mut offset = start;
    for line in text.get(start..)?.split_inclusive('\n') {
        let t = line.trim_start();
        if offset >= end && t.starts_with('[') {
            break;
        }
        if let Some(rest) = t.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use privopt_ml::partition::Partition;

    use super::*;

    const GOOD: &str = r#"
name = "t"
seed = 3
[data]
dataset = "synthetic_logistic"
n_train = 100
n_test = 50
dim = 5
clients = 4
partition = { kind = "dirichlet", alpha = 0.5 }
[model]
kind = "logistic"
[method]
name = "sgd"
steps = 10
lr = 0.1
batch_size = 8
"#;

    #[test]
    fn parses_and_round_trips() {
        let c = ExperimentConfig::from_toml(GOOD, "good.toml").unwrap();
        let data = c.data.as_ref().unwrap();
        assert_eq!(data.clients, 4);
        assert_eq!(data.partition, Partition::Dirichlet { alpha: 0.5 });
        assert!(matches!(&c.job, Job::Method(m) if m.name() == "sgd"));
        let again = ExperimentConfig::from_toml(&c.to_toml().unwrap(), "again").unwrap();
        assert_eq!(c, again);
    }

    #[test]
    fn unknown_key_is_one_line_naming_key_line_and_table() {
        let bad = GOOD.replace("lr = 0.1", "lerning_rate = 0.1");
        let e = ExperimentConfig::from_toml(&bad, "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(
            e.contains("bad.toml:16: [method]") && e.contains("lerning_rate"),
            "{e}"
        );
        let bad = GOOD.replace("dim = 5", "dimm = 5");
        let e = ExperimentConfig::from_toml(&bad, "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bad.toml:8: [data]") && e.contains("dimm"),
            "{e}"
        );
        let bad = GOOD.replace("kind = \"logistic\"", "kind = \"logistc\"");
        let e = ExperimentConfig::from_toml(&bad, "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("logistc"), "{e}");
        let bad = GOOD.replace("name = \"sgd\"", "name = \"sdg\"");
        let e = ExperimentConfig::from_toml(&bad, "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sdg"), "{e}");
    }

    #[test]
    fn out_of_range_values_name_the_key() {
        for (from, to, key) in [
            ("lr = 0.1", "lr = -0.1", "method.lr"),
            ("batch_size = 8", "batch_size = 0", "method.batch_size"),
            ("clients = 4", "clients = 0", "data.clients"),
            ("alpha = 0.5", "alpha = 0.0", "data.partition.alpha"),
            (
                "dataset = \"synthetic_logistic\"",
                "dataset = \"cifar\"",
                "data.dataset",
            ),
            ("name = \"t\"", "name = \"T T\"", "name"),
        ] {
            let bad = GOOD.replace(from, to);
            assert_ne!(bad, GOOD);
            let e = ExperimentConfig::from_toml(&bad, "x.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{to}: {e}");
        }
        let bad = GOOD.replace("dataset = \"synthetic_logistic\"", "dataset = \"mnist\"");
        let e = ExperimentConfig::from_toml(&bad, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("data.n_train applies only"), "{e}");
    }

    /// Sizes and counts that aborted on allocation or ran until killed, and pdsgd values that
    /// ran to a meaningless summary (λ0 = inf printed a log10 MSE of −300), are refused by
    /// validation with the key and the bound.
    #[test]
    fn sizes_counts_and_non_finite_values_are_bounded() {
        let pdsgd = |line: &str| {
            format!(
                "name = \"p\"\nseed = 0\n[method]\nname = \"pdsgd\"\ntrials = 1\n\
                 iterations = 10\ndelta = 0.01\nmeasurements = 2\np = 2\nd = 2\n{line}\n"
            )
        };
        let ok = pdsgd("lambda0 = 0.1");
        ExperimentConfig::from_toml(&ok, "x.toml").unwrap();
        let cases = [
            (
                GOOD.replace("steps = 10", "steps = 1000000000000"),
                "method.steps must be in 1..=100000000",
            ),
            (
                GOOD.replace("n_train = 100", "n_train = 100000000000"),
                "data.n_train × data.dim",
            ),
            (GOOD.replace("dim = 5", "dim = 100000000000000"), "data.dim"),
            (
                GOOD.replace("clients = 4", "clients = 1000000000000"),
                "data.clients",
            ),
            (pdsgd("lambda0 = inf"), "method.lambda0 must be finite"),
            (pdsgd("lambda0 = nan"), "method.lambda0 must be finite"),
            (ok.replace("delta = 0.01", "delta = 1e-300"), "method.delta"),
            (ok.replace("p = 2", "p = 1000000000"), "method.p must be in"),
            (ok.replace("p = 2", "p = 100000000"), "method.p × d"),
            (
                ok.replace("iterations = 10", "iterations = 1000000000000"),
                "method.iterations",
            ),
            (
                ok.replace("trials = 1", "trials = 100000000000000"),
                "method.trials",
            ),
            (pdsgd("lambda0 = 0.1\nomega = inf"), "method.omega"),
            // Weak security settings need the explicit opt-in.
            (
                pdsgd("lambda0 = 0.1\npaillier_bits = 1024"),
                "method.insecure = true",
            ),
        ];
        for (text, want) in cases {
            let e = ExperimentConfig::from_toml(&text, "x.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "want `{want}`: {e}");
        }
        let weak = pdsgd("lambda0 = 0.1\npaillier_bits = 1024\ninsecure = true");
        ExperimentConfig::from_toml(&weak, "x.toml").unwrap();
        let eezofl = |extra: &str| {
            format!(
                "name = \"e\"\nseed = 0\n[data]\ndataset = \"synthetic_logistic\"\n[model]\n\
                 kind = \"logistic\"\n[method]\nname = \"eezofl\"\nsmudging_log2 = 0.0\n{extra}"
            )
        };
        let e = ExperimentConfig::from_toml(&eezofl(""), "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("method.smudging_log2 = 0 is below 20"), "{e}");
        ExperimentConfig::from_toml(&eezofl("insecure = true\n"), "x.toml").unwrap();
    }

    #[test]
    fn a_config_runs_exactly_one_method_or_suite_and_carries_no_unused_table() {
        let err = |text: &str| {
            ExperimentConfig::from_toml(text, "x.toml")
                .unwrap_err()
                .to_string()
        };
        let both = format!(
            "{GOOD}[suite]\nname = \"dpfhe\"\nexperiment = \"table3\"\ndatasets = [\"adult\"]\n"
        );
        assert!(err(&both).contains("not both"), "{}", err(&both));
        let neither = GOOD.split("[method]").next().unwrap();
        assert!(
            err(neither).contains("missing a [method]"),
            "{}",
            err(neither)
        );
        let (head, tail) = GOOD.split_once("[data]").unwrap();
        let no_data = format!("{head}{}", &tail[tail.find("[model]").unwrap()..]);
        assert!(
            err(&no_data).contains("needs a [data] table"),
            "{}",
            err(&no_data)
        );
        let no_model = GOOD.replace("[model]\nkind = \"logistic\"\n", "");
        assert!(
            err(&no_model).contains("needs a [model] table"),
            "{}",
            err(&no_model)
        );
        // pdsgd makes its own problem: a [data] table would be silently ignored, so it is refused.
        let pdsgd =
            "name = \"p\"\n[data]\ndataset = \"synthetic_linear\"\n[method]\nname = \"pdsgd\"\n";
        assert!(
            err(pdsgd).contains("[data] is unused by method `pdsgd`"),
            "{}",
            err(pdsgd)
        );
        let pdsgd = "name = \"p\"\n[method]\nname = \"pdsgd\"\n";
        let c = ExperimentConfig::from_toml(pdsgd, "p.toml").unwrap();
        assert!(c.data.is_none() && !c.uses_data());
        assert_eq!(
            ExperimentConfig::from_toml(&c.to_toml().unwrap(), "again").unwrap(),
            c
        );
    }

    #[test]
    fn a_dpfhe_key_of_another_experiment_is_refused_by_name_and_the_typed_suite_round_trips() {
        let suite = |experiment: &str, extra: &str| {
            format!(
                "name = \"d\"\n[suite]\nname = \"dpfhe\"\nexperiment = \"{experiment}\"\n\
                 datasets = [\"adult\"]\n{extra}"
            )
        };
        let err = |text: &str| {
            ExperimentConfig::from_toml(text, "x.toml")
                .unwrap_err()
                .to_string()
        };
        let e = err(&suite("table3", "epsilon = 2.0\ngap_lrs = [0.1]\n"));
        assert!(
            e.contains("suite.epsilon, suite.gap_lrs do not apply to experiment = \"table3\""),
            "{e}"
        );
        let e = err(&suite("table4", "encrypted_steps = 3\n"));
        assert!(e.contains("suite.encrypted_steps does not apply"), "{e}");
        assert!(err(&suite("gap", "gap_steps = []\n")).contains("suite.gap_steps must list"));
        // δ is Fig. 4/5's too; the defaults fill in what a file leaves out, once, when read.
        let fig4 =
            ExperimentConfig::from_toml(&suite("divergence", "delta = 1e-6\n"), "x.toml").unwrap();
        let Job::Suite(SuiteConfig::Dpfhe(c)) = &fig4.job else {
            panic!("not the dpfhe suite");
        };
        let crate::suites::dpfhe::Experiment::Divergence(spec) = &c.experiment else {
            panic!("not fig. 4/5: {:?}", c.experiment);
        };
        assert_eq!((spec.delta, spec.degree, spec.steps), (1e-6, 7, 2000));
        for (experiment, extra) in [
            ("divergence", "delta = 1e-6\n"),
            ("table3", "[suite.rho]\nadult = 0.1\n"),
            (
                "table4",
                "runs = 3\n[suite.table4.adult]\nsteps = 10\nlr_dpgd = 1.0\n",
            ),
            (
                "encrypted",
                "encrypted_bootstrap = \"n16\"\nencrypted_threads = [1]\n",
            ),
            ("gap", "gap_lrs = [0.5]\n"),
        ] {
            let c = ExperimentConfig::from_toml(&suite(experiment, extra), "x.toml").unwrap();
            let again = ExperimentConfig::from_toml(&c.to_toml().unwrap(), "again").unwrap();
            assert_eq!(again, c, "{experiment}");
        }
    }
}
