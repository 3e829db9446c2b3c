//! Per-round metrics, communication counters and run summaries.

use std::collections::BTreeMap;

use crate::error::{Result, SimError};

/// A table of numbers with one row per evaluation point; the first row fixes the columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsTable {
    columns: Vec<String>,
    rows: Vec<Vec<f64>>,
}

impl MetricsTable {
    /// Appends a row of `(column, value)` pairs; every row must have the first row's columns,
    /// in the same order.
    pub fn push(&mut self, row: &[(&str, f64)]) -> Result<()> {
        if self.columns.is_empty() {
            self.columns = row.iter().map(|(k, _)| (*k).to_owned()).collect();
        } else if row.len() != self.columns.len()
            || row.iter().zip(&self.columns).any(|((k, _), c)| k != c)
        {
            return Err(SimError::Metrics(format!(
                "metrics row {:?} does not match columns {:?}",
                row.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
                self.columns
            )));
        }
        self.rows.push(row.iter().map(|(_, v)| *v).collect());
        Ok(())
    }

    /// Column names.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row was recorded.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// All values of column `name`.
    pub fn column(&self, name: &str) -> Option<Vec<f64>> {
        let j = self.columns.iter().position(|c| c == name)?;
        Some(self.rows.iter().map(|r| r[j]).collect())
    }

    /// The last row as `(column, value)` pairs.
    pub fn last(&self) -> Vec<(&str, f64)> {
        self.rows
            .last()
            .map(|r| {
                self.columns
                    .iter()
                    .map(String::as_str)
                    .zip(r.iter().copied())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// CSV text with a header line. Numbers use Rust's shortest round-trip form, so equal
    /// runs give byte-identical files.
    pub fn to_csv(&self) -> String {
        let mut out = self.columns.join(",");
        out.push('\n');
        for r in &self.rows {
            let cells: Vec<String> = r.iter().map(|v| v.to_string()).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }
}

impl MetricsTable {
    /// Parses the text [`MetricsTable::to_csv`] writes (for re-plotting a results folder);
    /// errors name the line.
    pub fn from_csv(text: &str) -> Result<Self> {
        let mut lines = text.lines();
        let header = lines
            .next()
            .ok_or_else(|| SimError::Metrics("metrics.csv is empty".into()))?;
        let columns: Vec<String> = header.split(',').map(str::to_owned).collect();
        let mut rows = Vec::new();
        for (i, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
            let row = line
                .split(',')
                .map(str::parse::<f64>)
                .collect::<std::result::Result<Vec<f64>, _>>()
                .map_err(|e| SimError::Metrics(format!("metrics.csv line {}: {e}", i + 2)))?;
            if row.len() != columns.len() {
                return Err(SimError::Metrics(format!(
                    "metrics.csv line {}: {} values for {} columns",
                    i + 2,
                    row.len(),
                    columns.len()
                )));
            }
            rows.push(row);
        }
        Ok(Self { columns, rows })
    }
}

/// Bytes sent so far, by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Comm {
    /// Client-to-server (or agent-to-neighbour) bytes.
    pub up_bytes: u64,
    /// Server-to-client bytes.
    pub down_bytes: u64,
}

/// Sample mean and variance (normalized by n − 1; 0 for fewer than two values).
pub fn mean_variance(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var)
}

/// The two-sided 95% Student-t interval of the mean: `(mean, half-width)`; the half-width is
/// NaN for fewer than two values.
pub fn mean_ci95(xs: &[f64]) -> (f64, f64) {
    let (mean, var) = mean_variance(xs);
    let n = xs.len();
    if n < 2 {
        return (mean, f64::NAN);
    }
    (mean, t975(n - 1) * (var / n as f64).sqrt())
}

/// Spearman's rank correlation of `a` and `b` (ties get their average rank; NaN when the
/// lengths differ, there are fewer than two pairs, or one side is constant).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() || a.len() < 2 {
        return f64::NAN;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let (ma, mb) = (mean_variance(&ra).0, mean_variance(&rb).0);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    sab / (saa * sbb).sqrt()
}

/// Ranks 1..=n of `v` (total order on f64; tied values share their average rank).
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut r = vec![0.0; v.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && v[order[end]] == v[order[start]] {
            end += 1;
        }
        let average = (start + end + 1) as f64 / 2.0;
        for &i in &order[start..end] {
            r[i] = average;
        }
        start = end;
    }
    r
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom (tabulated to 30, then the
/// Cornish–Fisher expansion to second order, `z + (z³ + z)/(4·df) + (5z⁵ + 16z³ + 3z)/(96·df²)`,
/// within 1e-4 of the exact quantile from df = 31 on).
fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => TABLE[df - 1],
        _ => {
            let z = 1.959_964;
            let (z3, df) = (z * z * z, df as f64);
            z + (z3 + z) / (4.0 * df) + (5.0 * z3 * z * z + 16.0 * z3 + 3.0 * z) / (96.0 * df * df)
        }
    }
}

/// A flat map of named numbers (`summary.json`).
pub type Summary = BTreeMap<String, f64>;

/// Quantiles of a vector's finite entries (nearest rank; NaN when there are none).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Quantiles {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Quantiles {
    /// The quantiles of `v`'s finite entries.
    pub fn of(v: &[f64]) -> Self {
        let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        s.sort_by(f64::total_cmp);
        let at = |q: f64| {
            if s.is_empty() {
                f64::NAN
            } else {
                s[((s.len() - 1) as f64 * q).round() as usize]
            }
        };
        Self {
            min: at(0.0),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: at(1.0),
        }
    }

    /// `(name, value)` pairs: `min`, `p50`, `p90`, `p99`, `max`.
    pub fn named(&self) -> [(&'static str, f64); 5] {
        [
            ("min", self.min),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("max", self.max),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_ranks_ties_by_their_average() {
        // Monotone but non-linear: 1; reversed: −1.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!((spearman(&a, &[1.0, 8.0, 27.0, 64.0, 125.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[5.0, 4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        // Ties: ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4]; against [1, 2, 3, 4] the Pearson
        // correlation of the ranks is 4.5/√(4.5·5) = 0.9487.
        let r = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 3.0, 4.0]);
        assert!((r - 4.5 / (4.5f64 * 5.0).sqrt()).abs() < 1e-12, "{r}");
        assert!(spearman(&a, &[1.0; 5]).is_nan());
        assert!(spearman(&a, &a[..4]).is_nan());
    }

    #[test]
    fn the_t_interval_has_the_textbook_width() {
        // n = 5, sd = 1: half-width t(4)·1/√5 = 2.776/2.236.
        let xs = [-1.2649, -0.6325, 0.0, 0.6325, 1.2649];
        let (m, h) = mean_ci95(&xs);
        assert!(m.abs() < 1e-12);
        assert!((h - 2.776 / 5f64.sqrt()).abs() < 1e-3, "{h}");
        assert!(mean_ci95(&[1.0]).1.is_nan());
        // The expansion meets the table at 30 and tends to z.
        // Exact: t(31) = 2.03951, t(60) = 2.00030, t(10⁴) = 1.96020.
        assert!((t975(31) - 2.03951).abs() < 2e-4, "{}", t975(31));
        assert!((t975(60) - 2.00030).abs() < 1e-4, "{}", t975(60));
        assert!((t975(10_000) - 1.96020).abs() < 1e-4);
    }

    #[test]
    fn rows_must_match_columns_and_csv_is_exact() {
        let mut t = MetricsTable::default();
        t.push(&[("round", 0.0), ("loss", 0.1 + 0.2)]).unwrap();
        t.push(&[("round", 1.0), ("loss", 1e-20)]).unwrap();
        assert!(t.push(&[("loss", 1.0), ("round", 2.0)]).is_err());
        assert!(t.push(&[("round", 2.0)]).is_err());
        assert_eq!(
            t.to_csv(),
            "round,loss\n0,0.30000000000000004\n1,0.00000000000000000001\n"
        );
        assert_eq!(t.column("loss").unwrap(), vec![0.1 + 0.2, 1e-20]);
        assert_eq!(t.last(), vec![("round", 1.0), ("loss", 1e-20)]);
        // The CSV reads back to the same table, NaN and infinities included.
        t.push(&[("round", 2.0), ("loss", f64::INFINITY)]).unwrap();
        let back = MetricsTable::from_csv(&t.to_csv()).unwrap();
        assert_eq!(back.to_csv(), t.to_csv());
        let with_nan = "round,acc\n0,NaN\n";
        assert!(
            MetricsTable::from_csv(with_nan)
                .unwrap()
                .column("acc")
                .unwrap()[0]
                .is_nan()
        );
        let err = MetricsTable::from_csv("round,acc\n0,1\n1\n").unwrap_err();
        assert!(err.to_string().contains("line 3"), "{err}");
        assert!(MetricsTable::from_csv("round\nx\n").is_err());
        assert!(MetricsTable::from_csv("").is_err());
    }
}
