//! The communication graph: who masks with whom and who holds whose shares.
//!
//! SecAgg+ places clients on a ring in a random order and connects each to its `k` nearest ring
//! neighbours (a Harary graph H_{k,n}, which is k-connected). With `k = n − 1` it is the complete
//! graph of the original SecAgg. The order comes from a public seed, so server and clients
//! derive the same graph.

use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::{ClientId, SecAggError};

/// Most neighbour entries a graph holds (`n · k`, 256 MiB of ids): the complete graph on 8192
/// clients fits, the complete graph on 10^5 (40 GB) does not.
pub const MAX_NEIGHBOUR_ENTRIES: usize = 1 << 26;

/// An undirected k-regular graph on clients `0..n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    neighbours: Vec<Vec<ClientId>>,
    degree: usize,
}

impl Graph {
    /// The complete graph on `n` clients (original SecAgg).
    pub fn complete(n: usize) -> Result<Self, SecAggError> {
        Self::harary(n, n.saturating_sub(1), [0; 32])
    }

    /// A Harary graph H_{k,n} over a random ring order drawn from `order_seed`. `k` must be
    /// even, or odd with `n` even (then each client also links to the client opposite it).
    pub fn harary(n: usize, k: usize, order_seed: [u8; 32]) -> Result<Self, SecAggError> {
        if n < 2 || n > u32::MAX as usize {
            return Err(SecAggError::Parameters(format!(
                "a graph needs 2..2^32 clients, got {n}"
            )));
        }
        if k == 0 || k >= n {
            return Err(SecAggError::Parameters(format!(
                "degree {k} is impossible with {n} clients (1 ≤ k ≤ n − 1)"
            )));
        }
        if n.saturating_mul(k) > MAX_NEIGHBOUR_ENTRIES {
            return Err(SecAggError::Parameters(format!(
                "a graph of {n} clients of degree {k} holds more than {MAX_NEIGHBOUR_ENTRIES} \
                 neighbour entries; use a Harary graph of lower degree"
            )));
        }
        let complete = k == n - 1;
        if !complete && k % 2 == 1 && n % 2 == 1 {
            return Err(SecAggError::Parameters(format!(
                "an odd degree ({k}) needs an even number of clients, got {n}"
            )));
        }
        let mut order: Vec<usize> = (0..n).collect();
        if !complete {
            order.shuffle(&mut rand_chacha::ChaCha20Rng::from_seed(order_seed));
        }
        let mut position = vec![0usize; n];
        for (p, &c) in order.iter().enumerate() {
            position[c] = p;
        }
        let half = k / 2;
        let neighbours = (0..n)
            .map(|c| {
                let mut list: Vec<ClientId> = if complete {
                    (0..n).filter(|&o| o != c).map(|o| o as ClientId).collect()
                } else {
                    let p = position[c];
                    let mut l: Vec<ClientId> = (1..=half)
                        .flat_map(|j| [order[(p + j) % n], order[(p + n - j) % n]])
                        .map(|o| o as ClientId)
                        .collect();
                    if k % 2 == 1 {
                        l.push(order[(p + n / 2) % n] as ClientId);
                    }
                    l
                };
                list.sort_unstable();
                list
            })
            .collect();
        Ok(Self {
            neighbours,
            degree: k,
        })
    }

    /// Number of clients.
    pub fn len(&self) -> usize {
        self.neighbours.len()
    }

    /// Always false: a graph has at least two clients.
    pub fn is_empty(&self) -> bool {
        self.neighbours.is_empty()
    }

    /// Every client's number of neighbours.
    pub fn degree(&self) -> usize {
        self.degree
    }

    /// `client`'s neighbours in increasing order.
    pub fn neighbours(&self, client: ClientId) -> &[ClientId] {
        self.neighbours
            .get(client as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// Whether `a` and `b` are neighbours.
    pub fn adjacent(&self, a: ClientId, b: ClientId) -> bool {
        self.neighbours(a).binary_search(&b).is_ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn harary_is_regular_symmetric_and_simple() {
        for (n, k) in [(10, 4), (50, 11), (51, 10), (100, 2), (7, 6)] {
            let g = Graph::harary(n, k, [n as u8; 32]).unwrap();
            for c in 0..n as ClientId {
                let nb = g.neighbours(c);
                assert_eq!(nb.len(), k, "n={n} k={k}");
                assert!(!nb.contains(&c));
                assert!(nb.windows(2).all(|w| w[0] < w[1]), "no repeated neighbour");
                assert!(nb.iter().all(|&o| g.adjacent(o, c)), "symmetric");
            }
        }
        assert!(Graph::harary(51, 11, [0; 32]).is_err());
        assert!(Graph::harary(10, 10, [0; 32]).is_err());
        // Finding 5 of the third adversarial pass: the complete graph on 10^5 clients grew
        // past 14 GB; it is refused before any allocation, and sparse large graphs still build.
        assert!(Graph::complete(100_000).is_err());
        assert!(Graph::harary(1 << 20, 64, [0; 32]).is_ok());
    }

    #[test]
    fn removing_fewer_than_k_clients_keeps_harary_connected() {
        // Harary graphs are k-connected: drop k − 1 clients around one client's ring position.
        let (n, k) = (40, 6);
        let g = Graph::harary(n, k, [1; 32]).unwrap();
        let removed: Vec<ClientId> = g.neighbours(0)[..k - 1].to_vec();
        let mut seen = vec![false; n];
        let mut stack = vec![0 as ClientId];
        seen[0] = true;
        while let Some(c) = stack.pop() {
            for &o in g.neighbours(c) {
                if !seen[o as usize] && !removed.contains(&o) {
                    seen[o as usize] = true;
                    stack.push(o);
                }
            }
        }
        assert_eq!(seen.iter().filter(|&&s| s).count(), n - (k - 1));
    }
}
