//! The seeded streams of a reproducible run: a server and its clients given the run's
//! [`SeedTree`] draw from these the round plans and minibatches the simulator (`privopt run`)
//! draws, so a run driven from elsewhere (the Python roles, a Flower app) can be replayed.
//! A deployment that wants unpredictable plans passes its own randomness instead.

use privopt_math::SeedTree;
use privopt_ml::data::minibatch;
use rand::Rng;

/// The randomness of round `round`'s plan (participants and seeds) for
/// [`Server::begin_round`](super::Server::begin_round): a stream of its own per round.
pub fn plan_rng(seeds: &SeedTree, round: u64) -> impl Rng + use<> {
    seeds.stream("scalar_fl/round", &[round])
}

/// The minibatch of local step `k` of `round` for `client`, drawn from `pool` (the client's
/// training examples; `batch_size` 0: all of them).
pub fn local_batch(
    pool: &[usize],
    batch_size: usize,
    seeds: &SeedTree,
    round: u64,
    client: usize,
    k: usize,
) -> Vec<usize> {
    let mut rng = seeds.stream("scalar_fl/batch", &[round, client as u64, k as u64]);
    minibatch(pool, batch_size, &mut rng)
}
