//! Experiment configuration: the TOML schema, its parser with one-line errors that name the
//! offending key, and range validation.

use privopt_ml::model::ModelSpec;
use privopt_ml::partition::Partition;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, ensure};
use crate::methods::MethodConfig;
use crate::problem::{DataConfig, SYNTHETIC_DATASETS};

/// A whole experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// Identifier, used in result folder names (`[a-z0-9_-]`).
    pub name: String,
    /// One line saying what the experiment shows.
    #[serde(default)]
    pub description: String,
    /// Master seed of every random stream in the run.
    #[serde(default)]
    pub seed: u64,
    /// The data and its split across clients.
    pub data: DataConfig,
    /// The model.
    pub model: ModelSpec,
    /// The method and its parameters.
    pub method: MethodConfig,
}

impl ExperimentConfig {
    /// Parses and validates a config; `source` names the file in error messages, which are one
    /// line: `source:LINE: [table] message`.
    pub fn from_toml(text: &str, source: &str) -> Result<Self> {
        let cfg: ExperimentConfig = toml::from_str(text)
            .map_err(|e| Error::Config(describe_toml_error(&e, text, source)))?;
        cfg.validate()
            .map_err(|e| Error::Config(format!("{source}: {e}")))?;
        Ok(cfg)
    }

    /// The config as TOML (what a run writes to `config.toml`, seed included).
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::Config(format!("cannot serialize config: {e}")))
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
        let d = &self.data;
        let known = privopt_ml::data::catalog::lookup(&d.dataset).is_ok();
        ensure(d.is_synthetic() || known, || {
            format!(
                "data.dataset: unknown dataset `{}` (synthetic: {}; fetchable: {})",
                d.dataset,
                SYNTHETIC_DATASETS.join(", "),
                privopt_ml::data::catalog::CATALOG
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        ensure(d.dataset != "minilm", || {
            "data.dataset: `minilm` is a model, not a dataset".into()
        })?;
        if !d.is_synthetic() {
            for (key, set) in [
                ("n_train", d.n_train.is_some()),
                ("n_test", d.n_test.is_some()),
                ("dim", d.dim.is_some()),
                ("noise", d.noise.is_some()),
            ] {
                ensure(!set, || {
                    format!("data.{key} applies only to synthetic datasets")
                })?;
            }
        }
        ensure(d.dataset == "synthetic_linear" || d.noise.is_none(), || {
            "data.noise applies only to synthetic_linear".into()
        })?;
        ensure(d.test_fraction > 0.0 && d.test_fraction < 1.0, || {
            format!(
                "data.test_fraction must be in (0, 1), got {}",
                d.test_fraction
            )
        })?;
        for (key, v) in [
            ("n_train", d.n_train),
            ("n_test", d.n_test),
            ("dim", d.dim),
            ("pca", d.pca),
            ("max_train", d.max_train),
        ] {
            ensure(v != Some(0), || format!("data.{key} must be >= 1"))?;
        }
        ensure(d.noise.is_none_or(|n| n >= 0.0 && n.is_finite()), || {
            "data.noise must be >= 0".into()
        })?;
        ensure(d.clients >= 1, || "data.clients must be >= 1".into())?;
        if let Some(c) = &d.classes {
            ensure(c.len() >= 2, || {
                "data.classes must list at least 2 classes".into()
            })?;
            let mut s = c.clone();
            s.sort_unstable();
            s.dedup();
            ensure(s.len() == c.len(), || {
                "data.classes has a repeated class".into()
            })?;
        }
        match d.partition {
            Partition::Dirichlet { alpha } => ensure(alpha > 0.0 && alpha.is_finite(), || {
                format!("data.partition.alpha must be > 0, got {alpha}")
            })?,
            Partition::Shards { shards_per_client } => ensure(shards_per_client >= 1, || {
                "data.partition.shards_per_client must be >= 1".into()
            })?,
            Partition::Iid => {}
        }
        self.method.validate()
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
        assert_eq!(c.data.clients, 4);
        assert_eq!(c.data.partition, Partition::Dirichlet { alpha: 0.5 });
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
}
