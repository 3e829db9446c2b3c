//! Choosing the graph degree `k` and the Shamir threshold `t` (Bell et al. 2020, §4–5).
//!
//! For a random Harary graph with `n` clients, a fraction `corrupt_rate` of which may collude
//! with a semi-honest server and a fraction `dropout_rate` of which may drop out, we look for the
//! smallest even `k` such that
//! - **security** (each event ≤ 2^−41, together ≤ 2^−40): the honest survivors stay connected
//!   (union bound over pairs of ring gaps of `k/2` consecutive bad clients), and no client has
//!   `t` or more corrupt neighbours (hypergeometric tail, union bound over clients);
//! - **correctness** (≤ 2^−20): every client keeps at least `t` surviving neighbours, so its
//!   secrets can be reconstructed.
//!
//! If no `k < n − 1` works, the complete graph (original SecAgg) is checked the same way.

use privopt_math::special::ln_binomial;

use crate::SecAggError;

/// log2 of the statistical security target per bad event (two events: 2^−40 in total).
const SECURITY_BITS_PER_EVENT: f64 = 41.0;
/// log2 of the allowed failure probability.
const CORRECTNESS_BITS: f64 = 20.0;

/// What the parameters must withstand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThreatModel {
    /// Fraction of clients that may drop out during a round, in [0, 1).
    pub dropout_rate: f64,
    /// Fraction of clients that may collude with the (semi-honest) server, in [0, 1).
    pub corrupt_rate: f64,
}

/// A degree and threshold that meet the targets for a number of clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphParameters {
    /// Number of clients.
    pub clients: usize,
    /// Neighbours per client (`clients − 1` means the complete graph).
    pub degree: usize,
    /// Shares needed to reconstruct a secret.
    pub threshold: usize,
}

/// Hypergeometric P(X = x): `draws` from `population` holding `marked` marked items.
fn hypergeometric_pmf(population: usize, marked: usize, draws: usize, x: usize) -> f64 {
    if x > marked || x > draws || draws - x > population - marked {
        return 0.0;
    }
    let (n, m, d, x) = (population as f64, marked as f64, draws as f64, x as f64);
    (ln_binomial(m, x) + ln_binomial(n - m, d - x) - ln_binomial(n, d)).exp()
}

/// ln of a union bound on the probability that removing `bad` random clients disconnects a
/// random Harary graph of degree `k`: that needs two disjoint runs of k/2 consecutive bad clients.
fn ln_disconnect_bound(n: usize, k: usize, bad: usize) -> f64 {
    if k > bad || k + 1 >= n {
        return f64::NEG_INFINITY;
    }
    let (nf, kf, bf) = (n as f64, k as f64, bad as f64);
    let ln_gap_pairs = nf.ln() + (nf - kf - 1.0).ln() - 2f64.ln();
    ln_gap_pairs + libm::lgamma(bf + 1.0) + libm::lgamma(nf - kf + 1.0)
        - libm::lgamma(nf + 1.0)
        - libm::lgamma(bf - kf + 1.0)
}

/// Longest vector one round sums: 2^28 entries (1 GiB per copy of `u32`s); longer asks are
/// refused instead of aborting on allocation.
pub const MAX_VECTOR_LEN: usize = 1 << 28;

/// Checks a round's threshold against its degree and its vector length. The threshold must
/// exceed half the degree: otherwise a server that tells half of a client's neighbours that
/// it dropped and the other half that it survived collects `t` shares of both its masking key
/// and its self-mask seed, and unmasks its input alone.
pub fn check_round(threshold: usize, degree: usize, vector_len: usize) -> Result<(), SecAggError> {
    if threshold < 2 || threshold > degree || 2 * threshold <= degree {
        return Err(SecAggError::Parameters(format!(
            "threshold {threshold} with degree {degree}: need degree/2 < t ≤ degree and t ≥ 2 \
             (a threshold of half the degree or less lets a server that lies about dropouts \
             rebuild both a client's masking key and its self-mask seed)"
        )));
    }
    if vector_len == 0 || vector_len > MAX_VECTOR_LEN {
        return Err(SecAggError::Parameters(format!(
            "vector length {vector_len}: must be in 1..={MAX_VECTOR_LEN}"
        )));
    }
    Ok(())
}

/// The threshold for degree `k`, if one meets both targets.
fn threshold_for(n: usize, k: usize, threat: ThreatModel) -> Option<usize> {
    let corrupt = (threat.corrupt_rate * n as f64 + 1e-12).floor() as usize;
    let dropouts = (threat.dropout_rate * n as f64 + 1e-12).floor() as usize;
    let security = 2f64.powf(-SECURITY_BITS_PER_EVENT);
    if ln_disconnect_bound(n, k, corrupt + dropouts) >= security.ln() {
        return None;
    }
    // Smallest t with P(corrupt neighbours ≥ t) ≤ 2^−41 / n. The tail is summed from the top:
    // 1 − (lower sum) would drown a 1e-16 tail in rounding.
    let per_client_security = security / n as f64;
    let mut tail = 0.0;
    let mut t_secure = k + 1;
    while t_secure > 0 {
        let next = tail + hypergeometric_pmf(n, corrupt, k, t_secure - 1);
        if next > per_client_security {
            break;
        }
        tail = next;
        t_secure -= 1;
    }
    if t_secure > k {
        return None;
    }
    // Largest t with P(surviving neighbours < t) ≤ 2^−20 / n.
    let per_client_failure = 2f64.powf(-CORRECTNESS_BITS) / n as f64;
    let survivors = n - dropouts;
    let mut below = 0.0;
    let mut t_correct = 0;
    while t_correct < k {
        let next = below + hypergeometric_pmf(n, survivors, k, t_correct);
        if next > per_client_failure {
            break;
        }
        below = next;
        t_correct += 1;
    }
    // Above half the degree in any case (see `check_round`).
    let t = t_secure.max(2).max(k / 2 + 1);
    (t <= t_correct).then_some(t)
}

/// The smallest even degree (or the complete graph) and its threshold that meet the targets.
pub fn find_parameters(
    clients: usize,
    threat: ThreatModel,
) -> Result<GraphParameters, SecAggError> {
    let valid = |r: f64| (0.0..1.0).contains(&r);
    if clients < 3 || !valid(threat.dropout_rate) || !valid(threat.corrupt_rate) {
        return Err(SecAggError::Parameters(format!(
            "need ≥ 3 clients and rates in [0, 1); got {clients} clients, {threat:?}"
        )));
    }
    let candidates = (2..clients - 1)
        .step_by(2)
        .chain(std::iter::once(clients - 1));
    for degree in candidates {
        if let Some(threshold) = threshold_for(clients, degree, threat) {
            return Ok(GraphParameters {
                clients,
                degree,
                threshold,
            });
        }
    }
    Err(SecAggError::Parameters(format!(
        "no degree and threshold give 2^-40 security and 2^-20 failure for {clients} clients \
         with {threat:?}; lower the dropout or corrupt rate or add clients"
    )))
}

/// The threshold for a given degree, checked against the same targets.
pub fn threshold_for_degree(
    clients: usize,
    degree: usize,
    threat: ThreatModel,
) -> Result<usize, SecAggError> {
    threshold_for(clients, degree, threat).ok_or_else(|| {
        SecAggError::Parameters(format!(
            "degree {degree} with {clients} clients cannot meet 2^-40 security and 2^-20 \
             failure under {threat:?}"
        ))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const THREAT: ThreatModel = ThreatModel {
        dropout_rate: 0.1,
        corrupt_rate: 0.05,
    };

    #[test]
    fn hypergeometric_sums_to_one() {
        let total: f64 = (0..=20).map(|x| hypergeometric_pmf(100, 30, 20, x)).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert!((hypergeometric_pmf(10, 5, 1, 1) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn sparse_graphs_for_many_clients_and_the_targets_hold() {
        let p = find_parameters(1000, THREAT).unwrap();
        assert!(p.degree < 150, "{p:?}");
        assert!(p.threshold > 1 && p.threshold <= p.degree);
        // The chosen threshold meets both tails; one less degree would not.
        let corrupt = 50;
        let tail: f64 = (p.threshold..=p.degree)
            .map(|x| hypergeometric_pmf(1000, corrupt, p.degree, x))
            .sum();
        assert!(tail <= 2f64.powi(-41) / 1000.0, "tail {tail}");
        let below: f64 = (0..p.threshold)
            .map(|x| hypergeometric_pmf(1000, 900, p.degree, x))
            .sum();
        assert!(below <= 2f64.powi(-20) / 1000.0, "below {below}");
        assert!(threshold_for(1000, p.degree - 2, THREAT).is_none());
        // Degree grows more slowly than the number of clients.
        let big = find_parameters(100_000, THREAT).unwrap();
        assert!(big.degree < 2 * p.degree, "{big:?} vs {p:?}");
    }

    #[test]
    fn small_or_hostile_settings_fall_back_or_fail() {
        // Two corrupt clients among ten: the threshold must exceed two.
        let small = find_parameters(
            10,
            ThreatModel {
                dropout_rate: 0.1,
                corrupt_rate: 0.2,
            },
        )
        .unwrap();
        assert_eq!((small.degree, small.threshold), (4, 3), "{small:?}");
        // Many bad clients among few: only the complete graph is connected enough.
        let hostile = ThreatModel {
            dropout_rate: 0.3,
            corrupt_rate: 0.4,
        };
        let dense = find_parameters(7, hostile).unwrap();
        // t = 4 > 6/2: a threshold of half the degree would let a lying server unmask.
        assert_eq!((dense.degree, dense.threshold), (6, 4), "{dense:?}");
        assert!(
            find_parameters(
                50,
                ThreatModel {
                    dropout_rate: 0.6,
                    corrupt_rate: 0.45
                }
            )
            .is_err()
        );
        assert!(
            find_parameters(
                50,
                ThreatModel {
                    dropout_rate: 1.0,
                    corrupt_rate: 0.0
                }
            )
            .is_err()
        );
    }
}
