use crate::error::{Result, ensure};

/// A labelled dataset held in memory: `n` rows of `d` features, row-major.
///
/// For classification, `y[i]` holds the class index `0..num_classes` as a float; for
/// regression, `num_classes` is `None` and `y` holds real targets.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    x: Vec<f64>,
    y: Vec<f64>,
    n_features: usize,
    num_classes: Option<usize>,
}

/// A training set and its held-out test set.
#[derive(Clone, Debug)]
pub struct TrainTest {
    /// Examples the model may learn from.
    pub train: Dataset,
    /// Examples used only for evaluation.
    pub test: Dataset,
}

impl Dataset {
    /// Builds a dataset, checking that shapes agree and class labels are in range.
    pub fn new(
        x: Vec<f64>,
        y: Vec<f64>,
        n_features: usize,
        num_classes: Option<usize>,
    ) -> Result<Self> {
        ensure(n_features > 0, || {
            "a dataset needs at least one feature".into()
        })?;
        ensure(x.len() == y.len() * n_features, || {
            format!(
                "feature matrix has {} values, expected {} rows x {} features",
                x.len(),
                y.len(),
                n_features
            )
        })?;
        if let Some(c) = num_classes {
            ensure(c >= 2, || {
                format!("classification needs >= 2 classes, got {c}")
            })?;
            ensure(
                y.iter()
                    .all(|&v| v >= 0.0 && v.fract() == 0.0 && (v as usize) < c),
                || format!("labels must be integers in 0..{c}"),
            )?;
        }
        Ok(Self {
            x,
            y,
            n_features,
            num_classes,
        })
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// Whether the dataset has no examples.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Number of features per example.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Number of classes, or `None` for regression targets.
    pub fn num_classes(&self) -> Option<usize> {
        self.num_classes
    }

    /// Features of example `i`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.n_features..(i + 1) * self.n_features]
    }

    /// Label (or target) of example `i`.
    pub fn label(&self, i: usize) -> f64 {
        self.y[i]
    }

    /// All labels.
    pub fn labels(&self) -> &[f64] {
        &self.y
    }

    /// The row-major feature matrix.
    pub fn features(&self) -> &[f64] {
        &self.x
    }

    /// Mean Euclidean norm of the feature rows (0 for an empty dataset).
    pub fn mean_row_norm(&self) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        let total: f64 = (0..self.len())
            .map(|i| self.row(i).iter().map(|x| x * x).sum::<f64>().sqrt())
            .sum();
        total / self.len() as f64
    }

    /// Count of examples per class (empty for regression data).
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.num_classes.unwrap_or(0)];
        if self.num_classes.is_some() {
            for &v in &self.y {
                counts[v as usize] += 1;
            }
        }
        counts
    }

    /// The examples at `indices`, in that order.
    pub fn select(&self, indices: &[usize]) -> Dataset {
        let mut x = Vec::with_capacity(indices.len() * self.n_features);
        let mut y = Vec::with_capacity(indices.len());
        for &i in indices {
            x.extend_from_slice(self.row(i));
            y.push(self.y[i]);
        }
        Dataset { x, y, ..*self }
    }

    /// The examples of the listed classes only, relabelled `0..classes.len()` in the order given:
    /// `class_subset(&[3, 8])` keeps threes (label 0) and eights (label 1).
    pub fn class_subset(&self, classes: &[usize]) -> Result<Dataset> {
        let c = self
            .num_classes
            .ok_or_else(|| crate::MlError::Invalid("class subset of regression data".into()))?;
        ensure(classes.len() >= 2, || {
            "a class subset needs >= 2 classes".into()
        })?;
        ensure(classes.iter().all(|&k| k < c), || {
            format!("class subset {classes:?} has a class >= {c}")
        })?;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..self.len() {
            if let Some(pos) = classes.iter().position(|&k| k == self.y[i] as usize) {
                x.extend_from_slice(self.row(i));
                y.push(pos as f64);
            }
        }
        Dataset::new(x, y, self.n_features, Some(classes.len()))
    }

    /// A copy whose features are transformed row by row by `f`, producing `new_d` features.
    pub fn map_rows(&self, new_d: usize, mut f: impl FnMut(&[f64], &mut [f64])) -> Result<Dataset> {
        let mut x = vec![0.0; self.len() * new_d];
        for i in 0..self.len() {
            f(self.row(i), &mut x[i * new_d..(i + 1) * new_d]);
        }
        Dataset::new(x, self.y.clone(), new_d, self.num_classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> Dataset {
        Dataset::new(
            vec![0., 1., 2., 3., 4., 5., 6., 7.],
            vec![0., 2., 1., 2.],
            2,
            Some(3),
        )
        .unwrap()
    }

    #[test]
    fn shapes_are_checked() {
        assert!(Dataset::new(vec![1.0; 5], vec![0.0; 2], 2, Some(2)).is_err());
        assert!(Dataset::new(vec![1.0; 4], vec![0.0, 2.0], 2, Some(2)).is_err());
        assert!(Dataset::new(vec![1.0; 4], vec![0.5, 1.0], 2, Some(2)).is_err());
        assert!(Dataset::new(vec![1.0; 4], vec![0.5, 1.0], 2, None).is_ok());
    }

    #[test]
    fn class_subset_relabels_in_given_order() {
        let s = toy().class_subset(&[2, 0]).unwrap();
        assert_eq!(s.labels(), &[1., 0., 0.]);
        assert_eq!(s.row(0), &[0., 1.]);
        assert_eq!(s.row(1), &[2., 3.]);
        assert_eq!(s.class_counts(), vec![2, 1]);
    }

    #[test]
    fn select_keeps_rows_and_labels_together() {
        let s = toy().select(&[3, 0]);
        assert_eq!(s.row(0), &[6., 7.]);
        assert_eq!(s.labels(), &[2., 0.]);
    }
}
