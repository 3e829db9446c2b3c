//! Partitions of a dataset's examples across federated clients.
//!
//! Every scheme assigns each example to exactly one client and gives every client at least
//! one example.

use rand::Rng;
use rand::seq::SliceRandom;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

use crate::error::{MlError, Result, ensure};

/// How examples are spread across clients.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Partition {
    /// Uniformly at random, in near-equal parts.
    #[default]
    Iid,
    /// Per class, client shares drawn from Dirichlet(α, …, α): small α gives each client few
    /// classes, large α approaches IID.
    Dirichlet {
        /// Concentration, > 0.
        alpha: f64,
    },
    /// Examples sorted by label, cut into `clients * shards_per_client` equal shards, and each
    /// client given `shards_per_client` shards at random (the FedAvg paper's pathological split).
    Shards {
        /// Shards per client, >= 1.
        shards_per_client: usize,
    },
}

/// Attempts at a Dirichlet draw in which every client receives an example.
const DIRICHLET_ATTEMPTS: usize = 100;

/// Assigns the examples with the given class `labels` to `clients` clients.
pub fn partition(
    labels: &[f64],
    clients: usize,
    scheme: &Partition,
    rng: &mut impl Rng,
) -> Result<Vec<Vec<usize>>> {
    let n = labels.len();
    ensure(clients >= 1, || "need at least one client".into())?;
    ensure(n >= clients, || {
        format!("{n} examples cannot cover {clients} clients")
    })?;
    match *scheme {
        Partition::Iid => {
            let mut idx: Vec<usize> = (0..n).collect();
            idx.shuffle(rng);
            Ok(chunks(&idx, clients))
        }
        Partition::Shards { shards_per_client } => {
            let shards = clients * shards_per_client;
            ensure(shards_per_client >= 1 && shards <= n, || {
                format!("shards_per_client must be in 1..={}", n / clients)
            })?;
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by(|&a, &b| labels[a].total_cmp(&labels[b]).then(a.cmp(&b)));
            let mut pieces = chunks(&idx, shards);
            pieces.shuffle(rng);
            Ok(pieces
                .chunks(shards_per_client)
                .map(|group| group.concat())
                .collect())
        }
        Partition::Dirichlet { alpha } => {
            ensure(alpha > 0.0 && alpha.is_finite(), || {
                format!("dirichlet alpha must be > 0, got {alpha}")
            })?;
            let gamma = Gamma::new(alpha, 1.0)
                .map_err(|e| MlError::Invalid(format!("dirichlet alpha {alpha}: {e}")))?;
            let classes = labels
                .iter()
                .map(|&v| v as usize)
                .max()
                .map_or(0, |m| m + 1);
            let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); classes];
            for (i, &v) in labels.iter().enumerate() {
                by_class[v as usize].push(i);
            }
            for _ in 0..DIRICHLET_ATTEMPTS {
                let mut parts = vec![Vec::new(); clients];
                for members in &by_class {
                    let mut members = members.clone();
                    members.shuffle(rng);
                    let w: Vec<f64> = (0..clients).map(|_| gamma.sample(rng)).collect();
                    let total: f64 = w.iter().sum();
                    // Cut points at the rounded cumulative proportions: every member lands once.
                    let mut start = 0;
                    let mut cum = 0.0;
                    for (c, wc) in w.iter().enumerate() {
                        cum += wc;
                        let end = if c + 1 == clients {
                            members.len()
                        } else {
                            ((cum / total) * members.len() as f64).round() as usize
                        };
                        let end = end.clamp(start, members.len());
                        parts[c].extend_from_slice(&members[start..end]);
                        start = end;
                    }
                }
                if parts.iter().all(|p| !p.is_empty()) {
                    return Ok(parts);
                }
            }
            Err(MlError::Invalid(format!(
                "dirichlet(alpha = {alpha}) left a client empty in {DIRICHLET_ATTEMPTS} draws; \
                 use fewer clients or a larger alpha"
            )))
        }
    }
}

/// Cuts `idx` into `k` contiguous parts whose sizes differ by at most one.
fn chunks(idx: &[usize], k: usize) -> Vec<Vec<usize>> {
    let (q, r) = (idx.len() / k, idx.len() % k);
    let mut out = Vec::with_capacity(k);
    let mut start = 0;
    for c in 0..k {
        let len = q + usize::from(c < r);
        out.push(idx[start..start + len].to_vec());
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use privopt_math::SeedTree;

    fn labels(n: usize, classes: usize) -> Vec<f64> {
        (0..n).map(|i| (i % classes) as f64).collect()
    }

    fn assert_exact_cover(parts: &[Vec<usize>], n: usize) {
        let mut seen = vec![0u32; n];
        for p in parts {
            assert!(!p.is_empty());
            for &i in p {
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "every example exactly once");
    }

    fn class_fraction(part: &[usize], y: &[f64], class: f64) -> f64 {
        part.iter().filter(|&&i| y[i] == class).count() as f64 / part.len() as f64
    }

    #[test]
    fn iid_is_balanced_in_size_and_classes() {
        let y = labels(10_000, 10);
        let mut r = SeedTree::new(5).stream("p", &[]);
        let parts = partition(&y, 10, &Partition::Iid, &mut r).unwrap();
        assert_exact_cover(&parts, y.len());
        for p in &parts {
            assert_eq!(p.len(), 1000);
            // Hypergeometric class count: sd of the fraction ~ sqrt(.1*.9/1000) ~ 0.0095; 5 sd.
            assert!((class_fraction(p, &y, 3.0) - 0.1).abs() < 0.05);
        }
    }

    #[test]
    fn dirichlet_small_alpha_is_skewed_large_alpha_is_not() {
        let y = labels(10_000, 10);
        let mut r = SeedTree::new(6).stream("p", &[]);
        let skewed = partition(&y, 10, &Partition::Dirichlet { alpha: 0.1 }, &mut r).unwrap();
        assert_exact_cover(&skewed, y.len());
        // With alpha = 0.1 a typical client is dominated by one or two classes.
        let max_share: f64 = skewed
            .iter()
            .map(|p| {
                (0..10)
                    .map(|c| class_fraction(p, &y, c as f64))
                    .fold(0.0, f64::max)
            })
            .sum::<f64>()
            / 10.0;
        assert!(max_share > 0.4, "mean dominant-class share {max_share}");
        let flat = partition(&y, 10, &Partition::Dirichlet { alpha: 1000.0 }, &mut r).unwrap();
        assert_exact_cover(&flat, y.len());
        for p in &flat {
            assert!((class_fraction(p, &y, 0.0) - 0.1).abs() < 0.05);
        }
    }

    #[test]
    fn shards_give_few_classes_per_client() {
        let y = labels(1000, 10);
        let mut r = SeedTree::new(7).stream("p", &[]);
        let parts = partition(
            &y,
            10,
            &Partition::Shards {
                shards_per_client: 2,
            },
            &mut r,
        )
        .unwrap();
        assert_exact_cover(&parts, y.len());
        for p in &parts {
            let mut classes: Vec<u64> = p.iter().map(|&i| y[i] as u64).collect();
            classes.sort_unstable();
            classes.dedup();
            assert!(classes.len() <= 2, "{classes:?}");
        }
    }

    #[test]
    fn seeded_and_validated() {
        let y = labels(500, 5);
        let a = partition(
            &y,
            5,
            &Partition::Dirichlet { alpha: 0.5 },
            &mut SeedTree::new(9).stream("p", &[]),
        )
        .unwrap();
        let b = partition(
            &y,
            5,
            &Partition::Dirichlet { alpha: 0.5 },
            &mut SeedTree::new(9).stream("p", &[]),
        )
        .unwrap();
        assert_eq!(a, b);
        let mut r = SeedTree::new(1).stream("p", &[]);
        assert!(partition(&y, 0, &Partition::Iid, &mut r).is_err());
        assert!(partition(&y, 501, &Partition::Iid, &mut r).is_err());
        assert!(partition(&y, 5, &Partition::Dirichlet { alpha: 0.0 }, &mut r).is_err());
        assert!(
            partition(
                &y,
                5,
                &Partition::Shards {
                    shards_per_client: 0
                },
                &mut r
            )
            .is_err()
        );
    }
}
