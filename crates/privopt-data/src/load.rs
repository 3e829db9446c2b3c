//! Loaders for the catalog datasets, with the preprocessing the papers use.

use std::path::Path;

use privopt_math::SeedTree;

use crate::error::{DataError, Result};
use crate::idx;
use crate::store::require;
use crate::tabular::{Column, CsvOptions, RawTable, TabularEncoder, TabularSchema};
use privopt_ml::data::TrainTest;
use privopt_ml::data::split::train_test_indices;

/// How to split datasets that ship without an official test set (COMPAS, credit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitOptions {
    /// Seed of the split.
    pub seed: u64,
    /// Fraction of examples held out for testing.
    pub test_fraction: f64,
}

impl Default for SplitOptions {
    fn default() -> Self {
        Self {
            seed: 0,
            test_fraction: 0.2,
        }
    }
}

/// How the categorical columns of a tabular dataset become features.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CategoricalEncoding {
    /// One feature per category (Adult: 108 features, credit: 32).
    #[default]
    OneHot,
    /// One feature per column holding the category's index (pandas' `LabelEncoder`; the FHE
    /// paper's authors' encoding: Adult 14 features, credit 23).
    Label,
}

/// Loads catalog dataset `name` from `data_dir`.
///
/// MNIST and Fashion-MNIST keep their official 60000/10000 split, pixels in `[0, 1]`, 10
/// classes. Adult keeps its official split. COMPAS and credit are split by `split`. Tabular
/// data is one-hot encoded and min-max scaled to `[-1, 1]` with statistics of the training part.
pub fn load(name: &str, data_dir: &Path, split: SplitOptions) -> Result<TrainTest> {
    load_with(name, data_dir, split, CategoricalEncoding::OneHot)
}

/// [`load`] with a choice of categorical encoding (ignored by datasets without categories).
pub fn load_with(
    name: &str,
    data_dir: &Path,
    split: SplitOptions,
    encoding: CategoricalEncoding,
) -> Result<TrainTest> {
    let dir = require(data_dir, name)?;
    match name {
        "mnist" => load_idx_dir(&dir, ""),
        "fashion-mnist" => load_idx_dir(&dir, ".gz"),
        "adult" => load_adult(&dir, encoding),
        "compas" => load_compas(&dir, split, encoding),
        "credit" => load_credit(&dir, split, encoding),
        "movie-snippets" => load_movie_snippets(&dir, &require(data_dir, "minilm")?, split),
        other => Err(DataError::Invalid(format!(
            "`{other}` is not a tabular or image dataset and has no loader"
        ))),
    }
}

fn load_idx_dir(dir: &Path, ext: &str) -> Result<TrainTest> {
    let f = |stem: &str| dir.join(format!("{stem}{ext}"));
    Ok(TrainTest {
        train: idx::load_images(
            &f("train-images-idx3-ubyte"),
            &f("train-labels-idx1-ubyte"),
            10,
        )?,
        test: idx::load_images(
            &f("t10k-images-idx3-ubyte"),
            &f("t10k-labels-idx1-ubyte"),
            10,
        )?,
    })
}

/// Token ids per movie-snippet row (`[CLS]` and `[SEP]` included; longer snippets are cut).
pub const SNIPPET_TOKENS: usize = 64;

/// Movie-review snippets as rows of MiniLM token ids (`-1`-padded to [`SNIPPET_TOKENS`]),
/// labelled 1 when the mean human rating is positive and 0 when negative; the 37 snippets
/// rated exactly 0 are dropped. Split by `split`.
fn load_movie_snippets(dir: &Path, minilm: &Path, split: SplitOptions) -> Result<TrainTest> {
    let path = dir.join("movieReviewSnippets_GroundTruth.txt");
    let text = std::fs::read_to_string(&path).map_err(|e| DataError::io(&path, e))?;
    let vocab = privopt_ml::text::WordPiece::from_vocab_file(&minilm.join("vocab.txt"))?;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        let mut cols = line.splitn(3, '\t');
        let (_, rating, snippet) = match (cols.next(), cols.next(), cols.next()) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => {
                return Err(DataError::corrupt(
                    &path,
                    format!("line {}: expected 3 tab-separated fields", n + 1),
                ));
            }
        };
        let rating: f64 = rating.trim().parse().map_err(|_| {
            DataError::corrupt(
                &path,
                format!("line {}: rating `{rating}` is not a number", n + 1),
            )
        })?;
        if rating == 0.0 {
            continue;
        }
        let mut row: Vec<f64> = vocab
            .encode(snippet, SNIPPET_TOKENS)
            .into_iter()
            .map(f64::from)
            .collect();
        row.resize(SNIPPET_TOKENS, -1.0);
        x.extend(row);
        y.push(f64::from(u8::from(rating > 0.0)));
    }
    let all = privopt_ml::data::Dataset::new(x, y, SNIPPET_TOKENS, Some(2))?;
    let mut rng = SeedTree::new(split.seed).stream("data/split/movie-snippets", &[]);
    let (train, test) = train_test_indices(all.len(), split.test_fraction, &mut rng)?;
    Ok(TrainTest {
        train: all.select(&train),
        test: all.select(&test),
    })
}

const ADULT_COLUMNS: [&str; 15] = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
];

fn numeric(names: &[&str]) -> Vec<Column> {
    names.iter().map(|n| Column::Numeric((*n).into())).collect()
}

fn categorical(names: &[&str], encoding: CategoricalEncoding) -> Vec<Column> {
    names
        .iter()
        .map(|n| match encoding {
            CategoricalEncoding::OneHot => Column::Categorical((*n).into()),
            CategoricalEncoding::Label => Column::Coded((*n).into()),
        })
        .collect()
}

fn load_adult(dir: &Path, encoding: CategoricalEncoding) -> Result<TrainTest> {
    let names = Some(ADULT_COLUMNS.iter().map(|s| (*s).to_owned()).collect());
    let train = RawTable::read_csv(
        &dir.join("adult.data"),
        &CsvOptions {
            names: names.clone(),
            skip_lines: 0,
        },
    )?;
    // adult.test opens with a `|1x3 Cross validator` line and ends labels with a period.
    let test = RawTable::read_csv(
        &dir.join("adult.test"),
        &CsvOptions {
            names,
            skip_lines: 1,
        },
    )?;
    let mut features = numeric(&[
        "age",
        "fnlwgt",
        "education-num",
        "capital-gain",
        "capital-loss",
        "hours-per-week",
    ]);
    features.extend(categorical(
        &[
            "workclass",
            "education",
            "marital-status",
            "occupation",
            "relationship",
            "race",
            "sex",
            "native-country",
        ],
        encoding,
    ));
    let schema = TabularSchema {
        features,
        label: "income".into(),
        positive: vec![">50K".into()],
    };
    let enc = TabularEncoder::fit(&schema, &train)?;
    Ok(TrainTest {
        train: enc.transform(&train)?,
        test: enc.transform(&test)?,
    })
}

/// Splits raw rows, fits preprocessing on the training rows only, and encodes both parts.
fn split_and_encode(
    table: &RawTable,
    schema: &TabularSchema,
    split: SplitOptions,
) -> Result<TrainTest> {
    let mut rng = SeedTree::new(split.seed).stream("data/split", &[]);
    let (tr, te) = train_test_indices(table.rows.len(), split.test_fraction, &mut rng)?;
    let (train, test) = (table.select(&tr), table.select(&te));
    let enc = TabularEncoder::fit(schema, &train)?;
    Ok(TrainTest {
        train: enc.transform(&train)?,
        test: enc.transform(&test)?,
    })
}

/// ProPublica's analysis filter: screening within 30 days of arrest, a known recidivism
/// outcome, an ordinary charge degree, and a score present (7214 rows -> 6172).
fn load_compas(
    dir: &Path,
    split: SplitOptions,
    encoding: CategoricalEncoding,
) -> Result<TrainTest> {
    let raw = RawTable::read_csv(
        &dir.join("compas-scores-two-years.csv"),
        &CsvOptions::default(),
    )?;
    let days = raw.column("days_b_screening_arrest")?;
    let recid = raw.column("is_recid")?;
    let degree = raw.column("c_charge_degree")?;
    let score = raw.column("score_text")?;
    let table = raw.filter(|r| {
        r[days]
            .parse::<f64>()
            .is_ok_and(|d| (-30.0..=30.0).contains(&d))
            && r[recid] != "-1"
            && r[degree] != "O"
            && r[score] != "N/A"
    });
    let mut features = numeric(&[
        "age",
        "juv_fel_count",
        "juv_misd_count",
        "juv_other_count",
        "priors_count",
    ]);
    features.extend(categorical(&["sex", "race", "c_charge_degree"], encoding));
    let schema = TabularSchema {
        features,
        label: "two_year_recid".into(),
        positive: vec!["1".into()],
    };
    split_and_encode(&table, &schema, split)
}

/// Default of credit card clients: every column but `ID` and the label is a feature (the
/// packaged CSV already one-hot encodes EDUCATION and MARRIAGE; the label encoding folds them
/// back into the original UCI code columns).
fn load_credit(
    dir: &Path,
    split: SplitOptions,
    encoding: CategoricalEncoding,
) -> Result<TrainTest> {
    let mut table = RawTable::read_csv(&dir.join("UCI_Credit_Card.csv"), &CsvOptions::default())?;
    if encoding == CategoricalEncoding::Label {
        for column in ["EDUCATION", "MARRIAGE"] {
            table = fold_one_hot(&table, column)?;
        }
    }
    let label = "default-payment-next-month";
    table.column(label)?;
    let features = table
        .header
        .iter()
        .filter(|h| *h != "ID" && *h != label)
        .map(|h| Column::Numeric(h.clone()))
        .collect();
    let schema = TabularSchema {
        features,
        label: label.into(),
        positive: vec!["1".into()],
    };
    split_and_encode(&table, &schema, split)
}

/// Replaces the one-hot columns `{name}_{code}` by one column `name` holding the code of the
/// column that is 1 in each row (an error names a row where not exactly one is).
fn fold_one_hot(table: &RawTable, name: &str) -> Result<RawTable> {
    let prefix = format!("{name}_");
    let parts: Vec<(usize, &str)> = table
        .header
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.strip_prefix(&prefix).map(|code| (i, code)))
        .collect();
    if parts.is_empty() {
        return Err(DataError::corrupt(
            &table.source,
            format!("no `{prefix}*` columns to fold into `{name}`"),
        ));
    }
    let keep: Vec<usize> = (0..table.header.len())
        .filter(|i| !parts.iter().any(|(p, _)| p == i))
        .collect();
    let mut header: Vec<String> = keep.iter().map(|&i| table.header[i].clone()).collect();
    header.push(name.to_owned());
    let rows = table
        .rows
        .iter()
        .enumerate()
        .map(|(r, row)| {
            let mut hot = parts.iter().filter(|(i, _)| row[*i] == "1");
            match (hot.next(), hot.next()) {
                (Some((_, code)), None) => {
                    let mut out: Vec<String> = keep.iter().map(|&i| row[i].clone()).collect();
                    out.push((*code).to_owned());
                    Ok(out)
                }
                _ => Err(DataError::corrupt(
                    &table.source,
                    format!("row {}: not exactly one `{prefix}*` column is 1", r + 1),
                )),
            }
        })
        .collect::<Result<_>>()?;
    Ok(RawTable {
        header,
        rows,
        source: table.source.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hot_columns_fold_into_their_code() {
        let raw = |rows: &[[&str; 4]]| RawTable {
            header: ["ID", "E_1", "E_2", "y"].map(String::from).to_vec(),
            rows: rows.iter().map(|r| r.map(String::from).to_vec()).collect(),
            source: "mem.csv".into(),
        };
        let folded =
            fold_one_hot(&raw(&[["7", "0", "1", "1"], ["8", "1", "0", "0"]]), "E").unwrap();
        assert_eq!(folded.header, ["ID", "y", "E"]);
        assert_eq!(folded.rows, [["7", "1", "2"], ["8", "0", "1"]]);
        let bad = fold_one_hot(&raw(&[["7", "1", "1", "1"]]), "E").unwrap_err();
        assert!(bad.to_string().contains("row 1"), "{bad}");
        let none = fold_one_hot(&raw(&[["7", "0", "1", "1"]]), "X").unwrap_err();
        assert!(none.to_string().contains("X_"), "{none}");
    }

    fn snippets(dir: &Path, text: &str) -> Result<TrainTest> {
        std::fs::write(dir.join("movieReviewSnippets_GroundTruth.txt"), text).unwrap();
        std::fs::write(
            dir.join("vocab.txt"),
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\ngood\nbad\nfilm\n",
        )
        .unwrap();
        load_movie_snippets(
            dir,
            dir,
            SplitOptions {
                seed: 1,
                test_fraction: 0.5,
            },
        )
    }

    #[test]
    fn movie_snippets_become_labelled_token_rows_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let tt = snippets(
            dir.path(),
            "1\t2.5\tgood film\n2\t-1.0\tbad film\n3\t0\tfilm\n4\t-0.2\tbad\n",
        )
        .unwrap();
        // The zero-rated snippet is dropped; rows are [CLS] ids [SEP] then -1 padding.
        assert_eq!(tt.train.len() + tt.test.len(), 3);
        let rows: Vec<(Vec<f64>, f64)> = [&tt.train, &tt.test]
            .iter()
            .flat_map(|d| (0..d.len()).map(move |i| (d.row(i)[..5].to_vec(), d.label(i))))
            .collect();
        assert!(rows.contains(&(vec![2.0, 4.0, 6.0, 3.0, -1.0], 1.0)));
        assert!(rows.contains(&(vec![2.0, 5.0, 6.0, 3.0, -1.0], 0.0)));
        let e = snippets(dir.path(), "1\t2.5\tgood\n2\tbad film\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = snippets(dir.path(), "1\tx\tgood\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("rating `x`"), "{e}");
    }
}
