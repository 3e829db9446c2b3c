//! The server of the scalar-only framework (Alg. 2): samples clients and seeds, catches
//! clients up, averages their scalars, and keeps the history only as far back as the stalest
//! client that may still replay it.

use std::collections::VecDeque;

use privopt_math::sample::secret_rng;
use rand::seq::index::sample;
use rand::{Rng, RngCore};
use zeroize::Zeroizing;

use super::messages::{CatchUp, Reply, RoundPlan, Ticket, Update};
use super::private::Privacy;
use super::state::{ModelState, ReplaySpec, RoundRecord, Scratch};
use crate::error::{Misbehavior, Peer, ProtocolError, Result, check_param, misbehaved};

/// Most clients a server tracks (its per-client state is 8 bytes each).
pub const MAX_CLIENTS: usize = 1 << 24;

/// The default bound on a reply's scalars ([`Server::set_scalar_bound`]): directional
/// derivatives of a sane loss are far below it, while one huge scalar would move the model
/// along its direction for good.
pub const DEFAULT_SCALAR_BOUND: f32 = 1e6;

/// Server state. A clone is a checkpoint (the same session and ticket key).
#[derive(Clone)]
pub struct Server {
    /// This run's id, in every message (drawn from OS randomness: it changes no number).
    session: u64,
    /// The key of the participants' tickets (OS randomness).
    ticket_key: Zeroizing<[u8; 32]>,
    scalar_bound: f32,
    spec: ReplaySpec,
    state: ModelState,
    history: VecDeque<RoundRecord>,
    /// For each client, the round whose starting state it holds.
    synced: Vec<u64>,
    /// Participants of the open round sent a catch-up, with the round they held before it:
    /// one whose reply never comes may never have received it, so it falls back to that round
    /// (a client skips replayed records it already holds, so delivery may repeat).
    sent: Vec<(usize, u64)>,
    staleness_bound: Option<u64>,
    /// Client-level DP: rounds close only with the secure sum.
    privacy: Option<Privacy>,
    open: Option<RoundPlan>,
    full_downloads: u64,
    scratch: Scratch,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("session", &self.session)
            .field("round", &self.state.round)
            .field("clients", &self.synced.len())
            .field("open", &self.open.is_some())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server for `clients` clients that all start from `initial` (round 0). A client more
    /// than `staleness_bound` rounds behind is sent the full state instead of a replay.
    pub fn new(
        spec: ReplaySpec,
        initial: ModelState,
        clients: usize,
        staleness_bound: Option<u64>,
    ) -> Result<Self> {
        check_param((1..=MAX_CLIENTS).contains(&clients), || {
            format!("clients must be in 1..={MAX_CLIENTS}, got {clients}")
        })?;
        spec.validate()?;
        let mut os = secret_rng(None);
        let mut ticket_key = Zeroizing::new([0u8; 32]);
        os.fill_bytes(&mut *ticket_key);
        Ok(Self {
            session: os.next_u64(),
            ticket_key,
            scalar_bound: DEFAULT_SCALAR_BOUND,
            spec,
            synced: vec![initial.round; clients],
            sent: Vec::new(),
            state: initial,
            history: VecDeque::new(),
            staleness_bound,
            privacy: None,
            open: None,
            full_downloads: 0,
            scratch: Scratch::default(),
        })
    }

    /// Refuses replies with a scalar beyond `±bound` (naming the client) instead of averaging
    /// it in; `DEFAULT_SCALAR_BOUND` until set.
    pub fn set_scalar_bound(&mut self, bound: f32) -> Result<()> {
        check_param(bound.is_finite() && bound > 0.0, || {
            format!("the scalar bound must be finite and > 0, got {bound}")
        })?;
        self.scalar_bound = bound;
        Ok(())
    }

    /// This server run's session id.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// The ticket of `client` for `round`.
    fn ticket(&self, round: u64, client: usize) -> Ticket {
        let mut h = blake3::Hasher::new_keyed(&self.ticket_key);
        h.update(b"privopt scalar_fl ticket");
        h.update(&self.session.to_le_bytes());
        h.update(&round.to_le_bytes());
        h.update(&(client as u64).to_le_bytes());
        let mut ticket = [0u8; 16];
        ticket.copy_from_slice(&h.finalize().as_bytes()[..16]);
        ticket
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
        self.begin_round_among(per_round, None, rng)
    }

    /// [`Self::begin_round`] sampling only among `eligible` clients (all when `None`), e.g.
    /// those a privacy budget still admits. The draw over all clients is `begin_round`'s.
    pub fn begin_round_among(
        &mut self,
        per_round: usize,
        eligible: Option<&[usize]>,
        rng: &mut impl Rng,
    ) -> Result<RoundPlan> {
        if self.open.is_some() {
            return Err(ProtocolError::OutOfOrder(format!(
                "round {} is still open",
                self.state.round
            )));
        }
        let n = self.synced.len();
        if let Some(pool) = eligible
            && let Some(bad) = pool.windows(2).find(|w| w[0] >= w[1])
        {
            return Err(ProtocolError::Parameters(format!(
                "eligible clients must be strictly increasing, got {} then {}",
                bad[0], bad[1]
            )));
        }
        if let Some(&c) = eligible.and_then(|pool| pool.last())
            && c >= n
        {
            return Err(ProtocolError::Parameters(format!(
                "eligible client {c} is not below the {n} clients"
            )));
        }
        let pool = eligible.map_or(n, <[usize]>::len);
        if per_round == 0 || per_round > pool {
            return Err(ProtocolError::Parameters(format!(
                "cannot sample {per_round} of {pool} eligible clients per round"
            )));
        }
        let mut clients: Vec<usize> = sample(rng, pool, per_round)
            .into_iter()
            .map(|i| eligible.map_or(i, |e| e[i]))
            .collect();
        clients.sort_unstable();
        let plan = RoundPlan {
            session: self.session,
            round: self.state.round,
            seeds: (0..self.spec.local_steps).map(|_| rng.random()).collect(),
            clients,
        };
        self.open = Some(plan.clone());
        Ok(plan)
    }

    /// What participant `client` of the open round needs to hold the round's start state.
    pub fn catch_up(&mut self, client: usize) -> Result<CatchUp> {
        let plan = self.open.as_ref().ok_or_else(|| {
            ProtocolError::OutOfOrder("catch-up requested with no round open".into())
        })?;
        if plan.clients.binary_search(&client).is_err() {
            return Err(misbehaved(
                Peer::Party(client as u64),
                Misbehavior::NotParticipant,
                format!(
                    "asked to catch up for round {}, which it is not in",
                    plan.round
                ),
            ));
        }
        let now = self.state.round;
        let from = self.synced[client];
        let within_bound = self.staleness_bound.is_none_or(|b| now - from <= b);
        let kept_from = self.history.front().map_or(now, |r| r.round);
        let update = if from == now {
            Update::UpToDate { round: now }
        } else if within_bound && from >= kept_from {
            Update::Replay(
                self.history
                    .iter()
                    .skip((from - kept_from) as usize)
                    .cloned()
                    .collect(),
            )
        } else {
            self.full_downloads += 1;
            Update::Full(self.state.clone())
        };
        let msg = CatchUp {
            session: self.session,
            client,
            ticket: self.ticket(now, client),
            dim: self.state.x.len(),
            update,
        };
        if !self.sent.iter().any(|&(c, _)| c == client) {
            self.sent.push((client, from));
        }
        self.synced[client] = now;
        Ok(msg)
    }

    /// Client `client` says it holds the start of `round`, older than the server thought (it
    /// restarted and lost state it never saved): its next catch-up starts there, by replay while
    /// the history reaches back that far, else by the full state. A client cannot be ahead of
    /// the server, nor rewind during a round it is in.
    pub fn rewind(&mut self, client: usize, round: u64) -> Result<()> {
        let n = self.synced.len();
        if client >= n {
            return Err(misbehaved(
                Peer::Party(client as u64),
                Misbehavior::NotParticipant,
                format!("is not among the {n} clients"),
            ));
        }
        if round > self.state.round {
            return Err(misbehaved(
                Peer::Party(client as u64),
                Misbehavior::WrongRound,
                format!(
                    "says it holds round {round}; the server is at round {}",
                    self.state.round
                ),
            ));
        }
        if self.sent.iter().any(|&(c, _)| c == client) {
            return Err(ProtocolError::OutOfOrder(format!(
                "client {client} cannot rewind during a round it has been sent"
            )));
        }
        self.synced[client] = self.synced[client].min(round);
        Ok(())
    }

    /// Checks one reply against the open round: refused if it is for another session or
    /// round, from a non-participant, without the ticket of the client it names, already
    /// among `accepted` (the clients whose replies were taken), of the wrong length, not
    /// finite, or beyond the scalar bound; a private server refuses every clear reply. A
    /// driver that receives replies one at a time calls this on each before keeping it.
    pub fn check_reply(&self, reply: &Reply, accepted: &[usize]) -> Result<()> {
        if self.privacy.is_some() {
            return Err(misbehaved(
                Peer::Party(reply.client as u64),
                Misbehavior::Malformed,
                "sent clear scalars to a private run (its scalars go into SecAgg+ only)",
            ));
        }
        let plan = self
            .open
            .as_ref()
            .ok_or_else(|| ProtocolError::OutOfOrder("no round is open".into()))?;
        let want = self.spec.scalars_per_round();
        let peer = Peer::Party(reply.client as u64);
        if reply.session != self.session {
            return Err(misbehaved(
                peer,
                Misbehavior::WrongRound,
                "replied for another server session (a message of another run)",
            ));
        }
        if reply.round != plan.round {
            return Err(misbehaved(
                peer,
                Misbehavior::WrongRound,
                format!(
                    "replied for round {}, the open round is {}",
                    reply.round, plan.round
                ),
            ));
        }
        if plan.clients.binary_search(&reply.client).is_err() {
            return Err(misbehaved(
                peer,
                Misbehavior::NotParticipant,
                format!("replied in round {}, which it is not in", plan.round),
            ));
        }
        // Compared in constant time: every byte is looked at whatever the first difference.
        let expected = self.ticket(plan.round, reply.client);
        let difference =
            (reply.ticket.iter().zip(&expected)).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if difference != 0 {
            return Err(misbehaved(
                peer,
                Misbehavior::Misaddressed,
                "replied without the ticket of its own catch-up (another client's reply?)",
            ));
        }
        if accepted.contains(&reply.client) {
            return Err(misbehaved(
                peer,
                Misbehavior::Duplicate,
                format!("replied twice in round {}", plan.round),
            ));
        }
        if reply.scalars.len() != want || reply.scalars.iter().any(|s| !s.is_finite()) {
            return Err(misbehaved(
                peer,
                Misbehavior::Malformed,
                format!(
                    "sent {} scalars (expected {want} finite ones)",
                    reply.scalars.len()
                ),
            ));
        }
        if let Some(s) = reply.scalars.iter().find(|s| s.abs() > self.scalar_bound) {
            return Err(misbehaved(
                peer,
                Misbehavior::OutOfBounds,
                format!(
                    "sent the scalar {s:e}, beyond the bound ±{:e}",
                    self.scalar_bound
                ),
            ));
        }
        Ok(())
    }

    /// Closes the open round with the replies that arrived (clients that dropped out are
    /// simply absent): averages the scalars in client order, advances the global state,
    /// records the round and collects history nobody can need. If any reply fails
    /// [`Server::check_reply`], the round stays open and nothing changes. A private server
    /// ([`Self::set_privacy`]) refuses clear replies: it closes rounds with
    /// [`Self::finish_round_secure`] only.
    pub fn finish_round(&mut self, replies: &[Reply]) -> Result<RoundRecord> {
        if self.privacy.is_some() {
            return Err(ProtocolError::OutOfOrder(
                "this server runs with privacy: it closes rounds with the secure sum of the \
                 scalars, never with clear replies"
                    .into(),
            ));
        }
        let mut seen = Vec::with_capacity(replies.len());
        for r in replies {
            self.check_reply(r, &seen)?;
            seen.push(r.client);
        }
        let want = self.spec.scalars_per_round();
        let mut order: Vec<&Reply> = replies.iter().collect();
        order.sort_by_key(|r| r.client);
        let scalars: Vec<f32> = (0..want)
            .map(|j| {
                let sum: f64 = order.iter().map(|r| f64::from(r.scalars[j])).sum();
                // With no survivors the round moves nothing (every scalar 0).
                (sum / order.len().max(1) as f64) as f32
            })
            .collect();
        self.close(scalars, &seen)
    }

    /// Runs with client-level DP: rounds close only with [`Self::finish_round_secure`].
    pub fn set_privacy(&mut self, privacy: Privacy) -> Result<()> {
        privacy.validate()?;
        self.privacy = Some(privacy);
        Ok(())
    }

    /// The privacy settings, if any.
    pub fn privacy(&self) -> Option<Privacy> {
        self.privacy
    }

    /// Closes the open round of a private server with SecAgg+'s `sum` of the quantized, noised
    /// scalars of `contributors` (the participants whose vectors are in the sum, increasing):
    /// their mean is the round's scalars. Fewer contributors than the noise floor admits, a
    /// contributor outside the plan or a sum of the wrong length is refused, and the round
    /// stays open (the sum is never applied).
    pub fn finish_round_secure(
        &mut self,
        sum: &[u32],
        contributors: &[usize],
    ) -> Result<RoundRecord> {
        let privacy = self.privacy.ok_or_else(|| {
            ProtocolError::OutOfOrder("a secure sum needs a server with privacy settings".into())
        })?;
        let plan = self
            .open
            .as_ref()
            .ok_or_else(|| ProtocolError::OutOfOrder("no round is open".into()))?;
        if let Some(w) = contributors.windows(2).find(|w| w[0] >= w[1]) {
            return Err(ProtocolError::Parameters(format!(
                "contributors must be strictly increasing, got {} then {}",
                w[0], w[1]
            )));
        }
        if let Some(c) = (contributors.iter()).find(|c| plan.clients.binary_search(c).is_err()) {
            return Err(ProtocolError::Parameters(format!(
                "client {c} is in the sum but not in round {}",
                plan.round
            )));
        }
        let want = self.spec.scalars_per_round();
        check_param(sum.len() == want, || {
            format!("a sum of {} words for {want} scalars", sum.len())
        })?;
        let mean = privacy.decode_mean(sum, plan.clients.len(), contributors.len())?;
        let scalars = mean.into_iter().map(|m| m as f32).collect();
        self.close(scalars, contributors)
    }

    /// Closes the open round without any contribution (its secure sum failed, or too few
    /// survived to release it): the model does not move, the round's seeds are recorded with
    /// zero scalars so every client's replay stays in step, and participants fall back to the
    /// round they held.
    pub fn skip_round(&mut self) -> Result<RoundRecord> {
        self.close(vec![0.0; self.spec.scalars_per_round()], &[])
    }

    /// Applies the round's `scalars`, records it; participants not in `seen` fall back to the
    /// round they held.
    fn close(&mut self, scalars: Vec<f32>, seen: &[usize]) -> Result<RoundRecord> {
        let Some(plan) = self.open.as_ref() else {
            return Err(ProtocolError::OutOfOrder("no round is open".into()));
        };
        let record = RoundRecord {
            round: plan.round,
            seeds: plan.seeds.clone(),
            scalars,
        };
        self.state.apply(&record, &self.spec, &mut self.scratch)?;
        if self.state.x.iter().any(|v| !v.is_finite()) {
            return Err(ProtocolError::Diverged {
                round: record.round,
                what: "the global model".into(),
            });
        }
        for &(client, from) in &self.sent {
            if !seen.contains(&client) {
                self.synced[client] = from;
            }
        }
        self.sent.clear();
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
