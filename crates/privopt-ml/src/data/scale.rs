//! Per-feature maps into `[−1, 1]`, fitted on the training part and applied to both parts.
//!
//! The FHE paper's analysis (Theorem 3) only needs every feature in `[−1, 1]`; *which* map
//! gets them there is a preprocessing choice that changes accuracy a lot when a feature has a
//! heavy tail (one extreme example sets a max-abs scale and squeezes everyone else). Test rows
//! are clamped to the box like training rows, since a model is evaluated on the same inputs
//! it was trained for.

use serde::{Deserialize, Serialize};

use crate::data::{Dataset, TrainTest};
use crate::error::{MlError, Result};

/// How each feature is mapped into `[−1, 1]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FeatureScaling {
    /// `x / max|x|` over the training rows (keeps zero at zero).
    MaxAbs,
    /// `2 (x − min) / (max − min) − 1` over the training rows: the FHE paper's authors' code
    /// (`data_preprocess_2`).
    MinMax,
    /// `clamp(x / Q_q(|x|), −1, 1)` with `Q_q` the `q`-quantile of `|x|` over the training
    /// rows: the few rows beyond it are clipped to the box instead of setting the scale.
    Quantile(f64),
}

impl FeatureScaling {
    /// Refuses a quantile outside `(0, 1]`.
    pub fn validate(&self) -> Result<()> {
        match *self {
            FeatureScaling::Quantile(q) if !(q > 0.0 && q <= 1.0) => Err(MlError::Invalid(
                format!("quantile scaling needs q in (0, 1], got {q}"),
            )),
            _ => Ok(()),
        }
    }

    /// Short label for tables and file names (`max_abs`, `min_max`, `quantile_0.95`).
    pub fn label(&self) -> String {
        match self {
            FeatureScaling::MaxAbs => "max_abs".into(),
            FeatureScaling::MinMax => "min_max".into(),
            FeatureScaling::Quantile(q) => format!("quantile_{q}"),
        }
    }

    /// Fits the map on `tt.train` and applies it to both parts. A feature constant in
    /// training (no scale) maps to 0, as in the tabular encoder.
    pub fn apply(&self, tt: &TrainTest) -> Result<TrainTest> {
        self.validate()?;
        let maps = self.fit(&tt.train);
        let d = tt.train.n_features();
        let transform = |ds: &Dataset| {
            ds.map_rows(d, |row, out| {
                for ((o, &x), &(shift, scale)) in out.iter_mut().zip(row).zip(&maps) {
                    *o = if scale > 0.0 {
                        ((x - shift) / scale).clamp(-1.0, 1.0)
                    } else {
                        0.0
                    };
                }
            })
        };
        Ok(TrainTest {
            train: transform(&tt.train)?,
            test: transform(&tt.test)?,
        })
    }

    /// Per feature `(shift, scale)` with the map `x ↦ (x − shift) / scale`.
    fn fit(&self, train: &Dataset) -> Vec<(f64, f64)> {
        let (n, d) = (train.len(), train.n_features());
        let column = |j: usize| (0..n).map(move |i| train.row(i)[j]);
        (0..d)
            .map(|j| match *self {
                FeatureScaling::MaxAbs => (0.0, column(j).fold(0.0_f64, |m, x| m.max(x.abs()))),
                FeatureScaling::MinMax => {
                    let (lo, hi) = column(j)
                        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
                            (l.min(x), h.max(x))
                        });
                    if hi > lo {
                        ((hi + lo) / 2.0, (hi - lo) / 2.0)
                    } else {
                        (0.0, 0.0)
                    }
                }
                FeatureScaling::Quantile(q) => {
                    let mut abs: Vec<f64> = column(j).map(f64::abs).collect();
                    (0.0, quantile(&mut abs, q))
                }
            })
            .collect()
    }
}

/// The `q`-quantile of `values` (the order statistic at rank `⌈q·n⌉`, no interpolation), 0
/// for an empty slice. Reorders `values`.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    let (_, nth, _) = values.select_nth_unstable_by(rank - 1, f64::total_cmp);
    *nth
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(rows: &[[f64; 2]]) -> Dataset {
        let x: Vec<f64> = rows.iter().flatten().copied().collect();
        Dataset::new(x, vec![0.0; rows.len()], 2, Some(2)).unwrap()
    }

    fn split(train: &[[f64; 2]], test: &[[f64; 2]]) -> TrainTest {
        TrainTest {
            train: data(train),
            test: data(test),
        }
    }

    #[test]
    fn max_abs_and_min_max_fit_on_train_and_clamp_test() {
        let tt = split(&[[-2.0, 5.0], [1.0, 5.0], [4.0, 5.0]], &[[8.0, 7.0]]);
        let a = FeatureScaling::MaxAbs.apply(&tt).unwrap();
        assert_eq!(a.train.features(), &[-0.5, 1.0, 0.25, 1.0, 1.0, 1.0]);
        assert_eq!(a.test.features(), &[1.0, 1.0]);
        let m = FeatureScaling::MinMax.apply(&tt).unwrap();
        // Column 0 spans [−2, 4]; column 1 is constant and carries nothing.
        assert_eq!(m.train.features(), &[-1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        assert_eq!(m.test.features(), &[1.0, 0.0]);
    }

    #[test]
    fn quantile_scaling_ignores_one_extreme_row() {
        // 99 rows at |x| ≤ 1 and one at 100: max-abs squeezes the bulk into ±0.01,
        // the 0.95-quantile keeps it at full range and clips only the outlier.
        let mut rows: Vec<[f64; 2]> = (1..=99)
            .map(|i| [i as f64 / 99.0 * if i % 2 == 0 { 1.0 } else { -1.0 }, 1.0])
            .collect();
        rows.push([100.0, 1.0]);
        let tt = split(&rows, &[[0.5, 1.0]]);
        let q = FeatureScaling::Quantile(0.95).apply(&tt).unwrap();
        let col: Vec<f64> = (0..100).map(|i| q.train.row(i)[0]).collect();
        assert_eq!(col[99], 1.0, "the outlier is clamped");
        assert!(col.iter().all(|x| (-1.0..=1.0).contains(x)));
        let bulk_max = col[..99].iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        assert!(bulk_max == 1.0, "the bulk spans the box, got {bulk_max}");
        // Q_0.95 of |x| is the 95th smallest, 95/99; 0.5 maps to 0.5 · 99/95.
        assert!((q.test.row(0)[0] - 0.5 * 99.0 / 95.0).abs() < 1e-12);
        let m = FeatureScaling::MaxAbs.apply(&tt).unwrap();
        assert!((m.test.row(0)[0] - 0.005).abs() < 1e-12);
        // q = 1 is max-abs.
        let one = FeatureScaling::Quantile(1.0).apply(&tt).unwrap();
        assert_eq!(one.train.features(), m.train.features());
    }

    #[test]
    fn bad_quantiles_are_refused() {
        let tt = split(&[[1.0, 1.0]], &[[1.0, 1.0]]);
        for q in [0.0, -0.1, 1.5, f64::NAN] {
            let err = FeatureScaling::Quantile(q).apply(&tt).unwrap_err();
            assert!(err.to_string().contains("quantile"), "{err}");
        }
    }

    #[test]
    fn config_spelling() {
        let parse = |t: &str| serde_json::from_str::<FeatureScaling>(t).unwrap();
        assert_eq!(parse(r#""max_abs""#), FeatureScaling::MaxAbs);
        assert_eq!(parse(r#""min_max""#), FeatureScaling::MinMax);
        assert_eq!(parse(r#"{"quantile": 0.9}"#), FeatureScaling::Quantile(0.9));
        assert!(serde_json::from_str::<FeatureScaling>(r#""median""#).is_err());
    }
}
