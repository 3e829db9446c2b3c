//! CSV tables and the preprocessing the papers apply to them: missing values, one-hot
//! categorical encoding, and min-max scaling of every feature to `[-1, 1]`.
//!
//! Everything is *fitted on the training table only* (categories, imputation means, ranges)
//! and then applied unchanged to the test table, so no test statistic leaks into training.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::{DataError, Result};
use privopt_ml::data::Dataset;

/// Cell values treated as missing.
const MISSING: &[&str] = &["", "?", "NA", "N/A", "nan", "NaN"];

/// A CSV file read as strings, with its header.
#[derive(Clone, Debug)]
pub struct RawTable {
    /// Column names.
    pub header: Vec<String>,
    /// Cells, trimmed, one `Vec` per row with exactly `header.len()` cells.
    pub rows: Vec<Vec<String>>,
    /// The file it came from (for error messages).
    pub source: PathBuf,
}

/// How to read a CSV file.
#[derive(Clone, Debug, Default)]
pub struct CsvOptions {
    /// Column names to use when the file has no header row.
    pub names: Option<Vec<String>>,
    /// Lines to skip at the top (e.g. the `|1x3 Cross validator` line of `adult.test`).
    pub skip_lines: usize,
}

impl RawTable {
    /// Reads `path`. Blank lines are skipped; a row with the wrong number of cells is an error
    /// naming the file and line.
    pub fn read_csv(path: &Path, opts: &CsvOptions) -> Result<RawTable> {
        let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
        Self::parse_csv(&text, opts, path)
    }

    /// Parses CSV `text` as [`RawTable::read_csv`] does; `path` only names it in errors.
    pub fn parse_csv(text: &str, opts: &CsvOptions, path: &Path) -> Result<RawTable> {
        let body: String = text
            .lines()
            .skip(opts.skip_lines)
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(body.as_bytes());
        let mut records = rdr.records();
        let header: Vec<String> = match &opts.names {
            Some(n) => n.clone(),
            None => match records.next() {
                Some(r) => r
                    .map_err(|e| DataError::corrupt(path, format!("bad CSV header: {e}")))?
                    .iter()
                    .map(str::to_owned)
                    .collect(),
                None => return Err(DataError::corrupt(path, "empty CSV file")),
            },
        };
        // A trailing comma in the header (COMPAS) yields one empty name; keep widths consistent.
        let mut rows = Vec::new();
        for (i, rec) in records.enumerate() {
            let rec =
                rec.map_err(|e| DataError::corrupt(path, format!("bad CSV row {}: {e}", i + 1)))?;
            if rec.len() != header.len() {
                return Err(DataError::corrupt(
                    path,
                    format!(
                        "row {} has {} cells, header has {}",
                        i + 1,
                        rec.len(),
                        header.len()
                    ),
                ));
            }
            rows.push(rec.iter().map(str::to_owned).collect());
        }
        Ok(RawTable {
            header,
            rows,
            source: path.to_owned(),
        })
    }

    /// Index of the first column called `name`.
    pub fn column(&self, name: &str) -> Result<usize> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| DataError::corrupt(&self.source, format!("no column named `{name}`")))
    }

    /// The rows for which `keep` returns true.
    pub fn filter(&self, mut keep: impl FnMut(&[String]) -> bool) -> RawTable {
        RawTable {
            header: self.header.clone(),
            rows: self.rows.iter().filter(|r| keep(r)).cloned().collect(),
            source: self.source.clone(),
        }
    }

    /// The rows at `indices`.
    pub fn select(&self, indices: &[usize]) -> RawTable {
        RawTable {
            header: self.header.clone(),
            rows: indices.iter().map(|&i| self.rows[i].clone()).collect(),
            source: self.source.clone(),
        }
    }
}

/// One input column of a table and how it becomes features.
#[derive(Clone, Debug)]
pub enum Column {
    /// A number; missing cells are imputed with the training mean.
    Numeric(String),
    /// A category, one-hot encoded over the categories seen in training (missing is its own
    /// category); a category unseen in training encodes as all zeros before scaling.
    Categorical(String),
    /// A category replaced by its index among the training categories in sorted order (one
    /// feature instead of one per category: pandas' `LabelEncoder`, what the FHE paper's
    /// authors used). An unseen category takes the middle code, which scales to 0.
    Coded(String),
}

/// Which columns are features and which is the binary label.
#[derive(Clone, Debug)]
pub struct TabularSchema {
    /// Feature columns in output order.
    pub features: Vec<Column>,
    /// The label column.
    pub label: String,
    /// Label values (after trimming a trailing `.`) that count as class 1; all others are 0.
    pub positive: Vec<String>,
}

/// A preprocessing pipeline fitted on a training table.
#[derive(Clone, Debug)]
pub struct TabularEncoder {
    schema: TabularSchema,
    /// Per feature column: the categories seen in training (categorical) or the training mean.
    fitted: Vec<Fitted>,
    /// Per output feature: training minimum and maximum before scaling.
    ranges: Vec<(f64, f64)>,
    names: Vec<String>,
}

#[derive(Clone, Debug)]
enum Fitted {
    Numeric { mean: f64 },
    Categorical { categories: Vec<String> },
    Coded { categories: Vec<String> },
}

fn is_missing(cell: &str) -> bool {
    MISSING.contains(&cell)
}

/// Largest magnitude of a numeric cell: beyond it the scaling's range `max − min` (and the
/// imputation mean's sum) could overflow to infinity and every feature become NaN, which a
/// run reported as divergence.
const MAX_ABS_VALUE: f64 = 1e150;

/// Most distinct values a categorical column may have in training: each becomes a feature.
const MAX_CATEGORIES: usize = 1000;

fn parse_number(table: &RawTable, row: usize, col: usize) -> Result<Option<f64>> {
    let cell = &table.rows[row][col];
    if is_missing(cell) {
        return Ok(None);
    }
    let bad = |why: &str| {
        DataError::corrupt(
            &table.source,
            format!(
                "row {}, column `{}`: `{cell}` {why}",
                row + 1,
                table.header[col]
            ),
        )
    };
    let v = cell
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| bad("is not a number"))?;
    if v.abs() > MAX_ABS_VALUE {
        return Err(bad(&format!(
            "is outside ±{MAX_ABS_VALUE:e}, too large to scale"
        )));
    }
    Ok(Some(v))
}

/// The sorted distinct values of column `name` (at most [`MAX_CATEGORIES`]).
fn categories_of(train: &RawTable, name: &str) -> Result<Vec<String>> {
    let c = train.column(name)?;
    let set: BTreeSet<&str> = train.rows.iter().map(|r| r[c].as_str()).collect();
    if set.len() > MAX_CATEGORIES {
        return Err(DataError::corrupt(
            &train.source,
            format!(
                "column `{name}` has {} distinct values, more than the \
                 {MAX_CATEGORIES} a categorical feature may have",
                set.len()
            ),
        ));
    }
    Ok(set.into_iter().map(str::to_owned).collect())
}

impl TabularEncoder {
    /// Learns categories, imputation means and feature ranges from `train`.
    pub fn fit(schema: &TabularSchema, train: &RawTable) -> Result<Self> {
        if train.rows.is_empty() {
            return Err(DataError::corrupt(
                &train.source,
                "no rows to fit preprocessing on",
            ));
        }
        let mut fitted = Vec::new();
        let mut names = Vec::new();
        for col in &schema.features {
            match col {
                Column::Numeric(name) => {
                    let c = train.column(name)?;
                    let (mut sum, mut count) = (0.0, 0usize);
                    for r in 0..train.rows.len() {
                        if let Some(v) = parse_number(train, r, c)? {
                            sum += v;
                            count += 1;
                        }
                    }
                    let mean = if count > 0 { sum / count as f64 } else { 0.0 };
                    fitted.push(Fitted::Numeric { mean });
                    names.push(name.clone());
                }
                Column::Categorical(name) | Column::Coded(name) => {
                    let categories = categories_of(train, name)?;
                    if matches!(col, Column::Coded(_)) {
                        names.push(name.clone());
                        fitted.push(Fitted::Coded { categories });
                    } else {
                        names.extend(categories.iter().map(|k| format!("{name}={k}")));
                        fitted.push(Fitted::Categorical { categories });
                    }
                }
            }
        }
        let mut enc = TabularEncoder {
            schema: schema.clone(),
            fitted,
            ranges: Vec::new(),
            names,
        };
        let raw = enc.expand(train)?;
        let d = enc.names.len();
        let mut ranges = vec![(f64::INFINITY, f64::NEG_INFINITY); d];
        for row in raw.chunks_exact(d) {
            for (r, &v) in ranges.iter_mut().zip(row) {
                r.0 = r.0.min(v);
                r.1 = r.1.max(v);
            }
        }
        enc.ranges = ranges;
        Ok(enc)
    }

    /// Names of the output features (`col` or `col=category`).
    pub fn feature_names(&self) -> &[String] {
        &self.names
    }

    /// Encodes `table` into a binary-classification dataset with features in `[-1, 1]` (test
    /// rows may fall slightly outside when they exceed the training range).
    pub fn transform(&self, table: &RawTable) -> Result<Dataset> {
        let mut x = self.expand(table)?;
        let d = self.names.len();
        for row in x.chunks_exact_mut(d) {
            for (v, &(lo, hi)) in row.iter_mut().zip(&self.ranges) {
                // A feature constant in training carries no information: map it to 0.
                *v = if hi > lo {
                    2.0 * (*v - lo) / (hi - lo) - 1.0
                } else {
                    0.0
                };
            }
        }
        let lc = table.column(&self.schema.label)?;
        let y = table
            .rows
            .iter()
            .map(|r| {
                let v = r[lc].trim_end_matches('.');
                f64::from(u8::from(self.schema.positive.iter().any(|p| p == v)))
            })
            .collect();
        Ok(Dataset::new(x, y, d, Some(2))?)
    }

    /// Imputation and one-hot encoding, before scaling.
    fn expand(&self, table: &RawTable) -> Result<Vec<f64>> {
        let d = self.names.len();
        let cols: Vec<usize> = self
            .schema
            .features
            .iter()
            .map(|c| match c {
                Column::Numeric(n) | Column::Categorical(n) | Column::Coded(n) => table.column(n),
            })
            .collect::<Result<_>>()?;
        let mut x = Vec::with_capacity(table.rows.len() * d);
        for r in 0..table.rows.len() {
            for (f, &c) in self.fitted.iter().zip(&cols) {
                match f {
                    Fitted::Numeric { mean } => x.push(parse_number(table, r, c)?.unwrap_or(*mean)),
                    Fitted::Categorical { categories } => {
                        let cell = table.rows[r][c].as_str();
                        x.extend(categories.iter().map(|k| f64::from(u8::from(k == cell))));
                    }
                    Fitted::Coded { categories } => {
                        let cell = table.rows[r][c].as_str();
                        let code = categories.binary_search_by(|k| k.as_str().cmp(cell));
                        let middle = (categories.len() as f64 - 1.0) / 2.0;
                        x.push(code.map_or(middle, |i| i as f64));
                    }
                }
            }
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[&[&str]]) -> RawTable {
        RawTable {
            header: vec!["age".into(), "job".into(), "flat".into(), "y".into()],
            rows: rows
                .iter()
                .map(|r| r.iter().map(|s| s.to_string()).collect())
                .collect(),
            source: "mem.csv".into(),
        }
    }

    fn schema() -> TabularSchema {
        TabularSchema {
            features: vec![
                Column::Numeric("age".into()),
                Column::Categorical("job".into()),
                Column::Numeric("flat".into()),
            ],
            label: "y".into(),
            positive: vec![">50K".into()],
        }
    }

    #[test]
    fn fits_on_train_and_scales_to_unit_interval() {
        let train = table(&[
            &["20", "a", "5", ">50K"],
            &["40", "b", "5", "<=50K"],
            &["?", "?", "5", ">50K."],
        ]);
        let enc = TabularEncoder::fit(&schema(), &train).unwrap();
        assert_eq!(
            enc.feature_names(),
            &["age", "job=?", "job=a", "job=b", "flat"]
        );
        let ds = enc.transform(&train).unwrap();
        assert_eq!(ds.labels(), &[1.0, 0.0, 1.0]);
        // age: 20 -> -1, 40 -> 1, missing -> mean 30 -> 0; constant column -> 0.
        assert_eq!(ds.row(0), &[-1.0, -1.0, 1.0, -1.0, 0.0]);
        assert_eq!(ds.row(1), &[1.0, -1.0, -1.0, 1.0, 0.0]);
        assert_eq!(ds.row(2), &[0.0, 1.0, -1.0, -1.0, 0.0]);
        for v in ds.features() {
            assert!((-1.0..=1.0).contains(v));
        }
        // Test rows use training statistics; an unseen category is all-zero before scaling.
        let test = table(&[&["60", "c", "9", "<=50K"]]);
        let t = enc.transform(&test).unwrap();
        assert_eq!(t.row(0), &[3.0, -1.0, -1.0, -1.0, 0.0]);
    }

    #[test]
    fn label_encoding_is_one_sorted_code_per_column() {
        let mut schema = schema();
        schema.features[1] = Column::Coded("job".into());
        let train = table(&[
            &["20", "b", "5", ">50K"],
            &["40", "a", "5", "<=50K"],
            &["30", "c", "5", ">50K"],
        ]);
        let enc = TabularEncoder::fit(&schema, &train).unwrap();
        assert_eq!(enc.feature_names(), &["age", "job", "flat"]);
        let ds = enc.transform(&train).unwrap();
        // Codes a = 0, b = 1, c = 2, scaled to −1, 0, 1.
        let job: Vec<f64> = (0..3).map(|i| ds.row(i)[1]).collect();
        assert_eq!(job, [0.0, -1.0, 1.0]);
        // An unseen category takes the middle code.
        let t = enc
            .transform(&table(&[&["30", "z", "5", "<=50K"]]))
            .unwrap();
        assert_eq!(t.row(0)[1], 0.0);
    }

    /// ±1e308 made the feature range infinite and every feature NaN (reported as a diverged
    /// run); a unique category per row grew memory with the square of the rows. Both are
    /// errors naming the column.
    #[test]
    fn huge_values_and_too_many_categories_are_refused() {
        for huge in ["1e308", "-1e308", "1e151"] {
            let train = table(&[&["20", "a", "5", "x"], &[huge, "a", "5", "x"]]);
            let e = TabularEncoder::fit(&schema(), &train)
                .unwrap_err()
                .to_string();
            assert!(e.contains("`age`") && e.contains("too large"), "{e}");
        }
        let rows: Vec<[String; 4]> = (0..1001)
            .map(|i| ["1".into(), format!("job{i}"), "5".into(), "x".into()])
            .collect();
        let refs: Vec<Vec<&str>> = rows
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
        let e = TabularEncoder::fit(&schema(), &table(&slices))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`job`") && e.contains("1001 distinct"), "{e}");
    }

    #[test]
    fn non_numeric_cell_is_an_error_naming_row_and_column() {
        let train = table(&[&["20", "a", "5", "x"], &["zz", "a", "5", "x"]]);
        let e = TabularEncoder::fit(&schema(), &train)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mem.csv") && e.contains("row 2") && e.contains("`age`"),
            "{e}"
        );
    }

    #[test]
    fn ragged_csv_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        std::fs::write(&p, "a,b\n1,2\n3\n").unwrap();
        let e = RawTable::read_csv(&p, &CsvOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 2 has 1 cells"), "{e}");
        std::fs::write(&p, "junk line\na,b\n1,2\n\n").unwrap();
        let t = RawTable::read_csv(
            &p,
            &CsvOptions {
                skip_lines: 1,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(t.rows, vec![vec!["1".to_string(), "2".into()]]);
    }
}
