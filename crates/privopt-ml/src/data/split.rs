//! Seeded train/test splits. The test part is held out: no example is in both.

use rand::Rng;
use rand::seq::SliceRandom;

use crate::error::{Result, ensure};

/// Splits `0..n` at random into (train, test) index lists with `round(n * test_fraction)`
/// test examples; both parts are non-empty.
pub fn train_test_indices(
    n: usize,
    test_fraction: f64,
    rng: &mut impl Rng,
) -> Result<(Vec<usize>, Vec<usize>)> {
    ensure(test_fraction > 0.0 && test_fraction < 1.0, || {
        format!("test fraction must be in (0, 1), got {test_fraction}")
    })?;
    let n_test = ((n as f64) * test_fraction).round() as usize;
    ensure(n_test >= 1 && n_test < n, || {
        format!("cannot split {n} examples with test fraction {test_fraction}")
    })?;
    let mut idx: Vec<usize> = (0..n).collect();
    idx.shuffle(rng);
    let test = idx.split_off(n - n_test);
    Ok((idx, test))
}

#[cfg(test)]
mod tests {
    use super::*;
    use privopt_math::SeedTree;

    #[test]
    fn split_is_a_partition_and_seeded() {
        let mut r = SeedTree::new(1).stream("split", &[]);
        let (train, test) = train_test_indices(1000, 0.2, &mut r).unwrap();
        assert_eq!((train.len(), test.len()), (800, 200));
        let mut all: Vec<usize> = train.iter().chain(&test).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
        let mut r2 = SeedTree::new(1).stream("split", &[]);
        assert_eq!(train_test_indices(1000, 0.2, &mut r2).unwrap().1, test);
        assert!(train_test_indices(1000, 0.0, &mut r2).is_err());
        assert!(train_test_indices(1, 0.5, &mut r2).is_err());
    }
}
