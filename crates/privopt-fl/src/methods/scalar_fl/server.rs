//! The server of the scalar-only framework (Alg. 2): samples clients and seeds, catches
//! clients up, averages their scalars, and keeps the history only as far back as the stalest
//! client that may still replay it.

use std::collections::VecDeque;

use rand::Rng;
use rand::seq::index::sample;

use super::state::{ModelState, ReplaySpec, RoundRecord, Scratch};
use crate::error::{Error, Result};

/// Bytes of a seed on the wire.
pub const SEED_BYTES: u64 = 8;
/// Bytes of a scalar on the wire (`f32`).
pub const SCALAR_BYTES: u64 = 4;
/// Bytes of a parameter of a full-model catch-up: `f64`, so the client's copy is exact.
pub const FULL_PARAM_BYTES: u64 = 8;

/// The start of a round, broadcast to its participants.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundPlan {
    /// The round.
    pub round: u64,
    /// One seed per local step.
    pub seeds: Vec<u64>,
    /// The participating clients, ascending.
    pub clients: Vec<usize>,
}

/// What a participant receives to hold the round's starting state.
#[derive(Clone, Debug, PartialEq)]
pub enum CatchUp {
    /// The client already holds the state of this round.
    UpToDate {
        /// The round.
        round: u64,
    },
    /// The records of the rounds the client missed, oldest first.
    Replay(Vec<RoundRecord>),
    /// The whole state (the client was staler than the bound, or new).
    Full(ModelState),
}

impl CatchUp {
    /// Payload bytes (seeds, scalars, or full vectors).
    pub fn bytes(&self) -> u64 {
        match self {
            CatchUp::UpToDate { .. } => 0,
            CatchUp::Replay(records) => records
                .iter()
                .map(|r| SEED_BYTES * r.seeds.len() as u64 + SCALAR_BYTES * r.scalars.len() as u64)
                .sum(),
            CatchUp::Full(s) => {
                let vectors = 1 + u64::from(s.h.is_some());
                FULL_PARAM_BYTES * vectors * s.x.len() as u64
            }
        }
    }
}

/// A participant's answer: its `τ·P` scalars for the round.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The sender.
    pub client: usize,
    /// The round the scalars are for.
    pub round: u64,
    /// Step-major scalars.
    pub scalars: Vec<f32>,
}

impl Reply {
    /// Payload bytes.
    pub fn bytes(&self) -> u64 {
        SCALAR_BYTES * self.scalars.len() as u64
    }
}

/// Server state.
#[derive(Debug)]
pub struct Server {
    spec: ReplaySpec,
    state: ModelState,
    history: VecDeque<RoundRecord>,
    /// For each client, the round whose starting state it holds.
    synced: Vec<u64>,
    staleness_bound: Option<u64>,
    open: Option<RoundPlan>,
    full_downloads: u64,
    scratch: Scratch,
}

impl Server {
    /// A server for `clients` clients that all start from `initial` (round 0). A client more
    /// than `staleness_bound` rounds behind is sent the full state instead of a replay.
    pub fn new(
        spec: ReplaySpec,
        initial: ModelState,
        clients: usize,
        staleness_bound: Option<u64>,
    ) -> Self {
        Self {
            spec,
            synced: vec![initial.round; clients],
            state: initial,
            history: VecDeque::new(),
            staleness_bound,
            open: None,
            full_downloads: 0,
            scratch: Scratch::default(),
        }
    }

    /// The global state (the start of the next round).
    pub fn state(&self) -> &ModelState {
        &self.state
    }

    /// Rounds still replayable, oldest first.
    pub fn history(&self) -> impl Iterator<Item = &RoundRecord> {
        self.history.iter()
    }

    /// The round whose starting state each client holds.
    pub fn synced_rounds(&self) -> &[u64] {
        &self.synced
    }

    /// Full-state catch-ups sent so far.
    pub fn full_downloads(&self) -> u64 {
        self.full_downloads
    }

    /// Opens the next round: `per_round` clients sampled uniformly without replacement and
    /// one fresh seed per local step.
    pub fn begin_round(&mut self, per_round: usize, rng: &mut impl Rng) -> Result<RoundPlan> {
        if self.open.is_some() {
            return Err(Error::Protocol(format!(
                "round {} is still open",
                self.state.round
            )));
        }
        let n = self.synced.len();
        if per_round == 0 || per_round > n {
            return Err(Error::Config(format!(
                "cannot sample {per_round} of {n} clients per round"
            )));
        }
        let mut clients = sample(rng, n, per_round).into_vec();
        clients.sort_unstable();
        let plan = RoundPlan {
            round: self.state.round,
            seeds: (0..self.spec.local_steps).map(|_| rng.random()).collect(),
            clients,
        };
        self.open = Some(plan.clone());
        Ok(plan)
    }

    /// What participant `client` of the open round needs to hold the round's start state.
    pub fn catch_up(&mut self, client: usize) -> Result<CatchUp> {
        let plan = self
            .open
            .as_ref()
            .ok_or_else(|| Error::Protocol("catch-up requested with no round open".into()))?;
        if plan.clients.binary_search(&client).is_err() {
            return Err(Error::Protocol(format!(
                "client {client} does not take part in round {}",
                plan.round
            )));
        }
        let now = self.state.round;
        let from = self.synced[client];
        let within_bound = self.staleness_bound.is_none_or(|b| now - from <= b);
        let kept_from = self.history.front().map_or(now, |r| r.round);
        let msg = if from == now {
            CatchUp::UpToDate { round: now }
        } else if within_bound && from >= kept_from {
            CatchUp::Replay(
                self.history
                    .iter()
                    .skip((from - kept_from) as usize)
                    .cloned()
                    .collect(),
            )
        } else {
            self.full_downloads += 1;
            CatchUp::Full(self.state.clone())
        };
        self.synced[client] = now;
        Ok(msg)
    }

    /// Closes the open round with the replies that arrived (clients that dropped out are
    /// simply absent): averages the scalars in client order, advances the global state,
    /// records the round and collects history nobody can need. A reply for another round,
    /// from a non-participant, duplicated, of the wrong length or not finite is rejected and
    /// nothing changes.
    pub fn finish_round(&mut self, replies: &[Reply]) -> Result<RoundRecord> {
        let plan = self
            .open
            .as_ref()
            .ok_or_else(|| Error::Protocol("no round is open".into()))?;
        let want = self.spec.scalars_per_round();
        let mut seen = Vec::with_capacity(replies.len());
        for r in replies {
            if r.round != plan.round {
                return Err(Error::Protocol(format!(
                    "reply of client {} is for round {}, the open round is {}",
                    r.client, r.round, plan.round
                )));
            }
            if plan.clients.binary_search(&r.client).is_err() {
                return Err(Error::Protocol(format!(
                    "client {} does not take part in round {}",
                    r.client, plan.round
                )));
            }
            if seen.contains(&r.client) {
                return Err(Error::Protocol(format!(
                    "client {} replied twice in round {}",
                    r.client, plan.round
                )));
            }
            if r.scalars.len() != want || r.scalars.iter().any(|s| !s.is_finite()) {
                return Err(Error::Protocol(format!(
                    "client {} sent {} scalars (expected {want} finite ones)",
                    r.client,
                    r.scalars.len()
                )));
            }
            seen.push(r.client);
        }
        let mut order: Vec<&Reply> = replies.iter().collect();
        order.sort_by_key(|r| r.client);
        let scalars: Vec<f32> = (0..want)
            .map(|j| {
                let sum: f64 = order.iter().map(|r| f64::from(r.scalars[j])).sum();
                // With no survivors the round moves nothing (every scalar 0).
                (sum / order.len().max(1) as f64) as f32
            })
            .collect();
        let record = RoundRecord {
            round: plan.round,
            seeds: plan.seeds.clone(),
            scalars,
        };
        self.state.apply(&record, &self.spec, &mut self.scratch)?;
        self.open = None;
        self.history.push_back(record.clone());
        self.collect_garbage();
        Ok(record)
    }

    /// Drops records older than the stalest client that may still replay (one within the
    /// staleness bound); clients past the bound will get the full state.
    fn collect_garbage(&mut self) {
        let now = self.state.round;
        let keep_from = self
            .synced
            .iter()
            .copied()
            .filter(|&s| self.staleness_bound.is_none_or(|b| now - s <= b))
            .min()
            .unwrap_or(now);
        while self.history.front().is_some_and(|r| r.round < keep_from) {
            self.history.pop_front();
        }
    }
}
