//! Minibatches.

use rand::Rng;
use rand::seq::index::sample;

/// A minibatch of `batch` indices drawn without replacement from `pool` (all of it when
/// `batch` is 0 or at least the pool size).
pub fn minibatch(pool: &[usize], batch: usize, rng: &mut impl Rng) -> Vec<usize> {
    if batch == 0 || batch >= pool.len() {
        return pool.to_vec();
    }
    sample(rng, pool.len(), batch)
        .into_iter()
        .map(|k| pool[k])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn a_batch_is_distinct_members_of_the_pool_and_a_large_one_is_the_pool() {
        let pool: Vec<usize> = (100..140).collect();
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let mut b = minibatch(&pool, 10, &mut rng);
        assert_eq!(b.len(), 10);
        assert!(b.iter().all(|i| pool.contains(i)));
        b.sort_unstable();
        b.dedup();
        assert_eq!(b.len(), 10, "drawn without replacement");
        assert_eq!(minibatch(&pool, 0, &mut rng), pool);
        assert_eq!(minibatch(&pool, 40, &mut rng), pool);
        assert_eq!(minibatch(&pool, 99, &mut rng), pool);
    }
}
