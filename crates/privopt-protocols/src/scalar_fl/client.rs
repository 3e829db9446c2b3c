//! A client of the scalar-only framework: catches up (Alg. 2a) and runs its local steps,
//! returning only scalars (Alg. 2b).

use privopt_ml::zo::{Difference, gaussian_fill};

use super::messages::{CatchUp, Reply, RoundPlan, Ticket, Update};
use super::state::{
    ModelState, ReplaySpec, RoundRecord, Scratch, add_scaled_direction, direction_key,
};
use crate::error::{Misbehavior, Peer, ProtocolError, Result, misbehaved};

/// How a client estimates its directional derivatives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe {
    /// Smoothing radius μ.
    pub mu: f64,
    /// Forward (`OneSided`) or central (`TwoPoint`) differences.
    pub difference: Difference,
}

impl Probe {
    /// The loss at `x` that forward differences share across a step's perturbations (central
    /// differences need none).
    pub fn base(&self, f: impl Fn(&[f64]) -> f64, x: &[f64]) -> f64 {
        match self.difference {
            Difference::OneSided => f(x),
            Difference::TwoPoint => 0.0,
        }
    }

    /// The finite-difference derivative of `f` at `x` along `s ⊙ u`; `base` is
    /// [`Probe::base`] and `point` is scratch of `x`'s length.
    pub fn derivative(
        &self,
        f: impl Fn(&[f64]) -> f64,
        x: &[f64],
        base: f64,
        s: &[f64],
        u: &[f64],
        point: &mut [f64],
    ) -> f64 {
        shift(point, x, self.mu, s, u);
        let plus = f(point);
        match self.difference {
            Difference::OneSided => (plus - base) / self.mu,
            Difference::TwoPoint => {
                shift(point, x, -self.mu, s, u);
                (plus - f(point)) / (2.0 * self.mu)
            }
        }
    }
}

/// The protocol half of a client: its id, the round whose starting state it holds, the
/// invitation (session, round, ticket) of its last catch-up, and the checks on every message.
/// [`Client`] pairs it with a [`ModelState`]; a model held elsewhere (a PyTorch module's
/// tensors) pairs it with its own storage and applies what [`Participant::receive`] returns.
#[derive(Clone, Debug)]
pub struct Participant {
    id: usize,
    round: u64,
    /// The session, round and ticket of the last catch-up received: the round it may train.
    invited: Option<(u64, u64, Ticket)>,
}

/// What a client must do to its state to hold a catch-up's round.
#[derive(Clone, Debug, PartialEq)]
pub enum Catch {
    /// Nothing: it holds the round already.
    UpToDate,
    /// Apply these records, in order (those it held already are skipped).
    Replay(Vec<RoundRecord>),
    /// Replace the state.
    Full(ModelState),
}

/// The round a checked plan asks a participant to train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invitation {
    /// The server's session.
    pub session: u64,
    /// The round.
    pub round: u64,
    /// The ticket the reply must carry.
    pub ticket: Ticket,
    /// How many clients the plan invited (what a private reply's noise share is sized by).
    pub participants: usize,
}

impl Participant {
    /// Client `id` holding the start of `round`.
    pub fn new(id: usize, round: u64) -> Self {
        Self {
            id,
            round,
            invited: None,
        }
    }

    /// The client's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The round whose starting state the client holds.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// The session and ticket of the last catch-up if it was for the held round, else zeros:
    /// what a saved state carries so that a restored client can still reply.
    pub fn held_invitation(&self) -> (u64, Ticket) {
        match self.invited {
            Some((session, round, ticket)) if round == self.round => (session, ticket),
            _ => (0, [0; 16]),
        }
    }

    /// Checks a catch-up against the held round and a state of `dim` parameters (with a
    /// Hessian iff `hiso`) and returns what to apply; the caller must apply it, as the
    /// participant now holds the catch-up's round and keeps its session and ticket for the
    /// reply. Records must continue exactly where the client stands (those already held are
    /// skipped); a catch-up addressed to another client, or of the wrong shape, is refused and
    /// changes nothing.
    pub fn receive(
        &mut self,
        msg: CatchUp,
        spec: &ReplaySpec,
        dim: usize,
        hiso: bool,
    ) -> Result<Catch> {
        if msg.client != self.id {
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::Misaddressed,
                format!(
                    "sent client {} the catch-up of client {}",
                    self.id, msg.client
                ),
            ));
        }
        if msg.dim != dim {
            return Err(ProtocolError::Parameters(format!(
                "the server's model has {} parameters; client {}'s has {dim} (build both from \
                 the same model and parameter selection)",
                msg.dim, self.id
            )));
        }
        let (catch, round) = self.check(msg.update, spec, dim, hiso)?;
        self.round = round;
        self.invited = Some((msg.session, round, msg.ticket));
        Ok(catch)
    }

    fn check(
        &self,
        update: Update,
        spec: &ReplaySpec,
        dim: usize,
        hiso: bool,
    ) -> Result<(Catch, u64)> {
        match update {
            Update::UpToDate { round } if round == self.round => Ok((Catch::UpToDate, round)),
            Update::UpToDate { round } => Err(misbehaved(
                Peer::Server,
                Misbehavior::WrongRound,
                format!(
                    "said client {} is up to date at round {round}; it is at round {}",
                    self.id, self.round
                ),
            )),
            Update::Replay(mut records) => {
                // A replay may start before the held round (the server resends what it cannot
                // know arrived): skip what is held, then the records must continue exactly.
                let held = records.iter().take_while(|r| r.round < self.round).count();
                let first_round = records.first().map_or(self.round, |r| r.round);
                if held > 0 && first_round + held as u64 != self.round {
                    return Err(misbehaved(
                        Peer::Server,
                        Misbehavior::Malformed,
                        format!(
                            "replay for client {} (at round {}) starts at round {first_round} \
                             with a gap",
                            self.id, self.round
                        ),
                    ));
                }
                records.drain(..held);
                // Check every record before applying any, so a bad replay changes nothing.
                for (k, rec) in records.iter().enumerate() {
                    let round = self.round + k as u64;
                    if rec.round != round
                        || rec.seeds.len() != spec.local_steps
                        || rec.scalars.len() != spec.scalars_per_round()
                    {
                        return Err(misbehaved(
                            Peer::Server,
                            Misbehavior::Malformed,
                            format!(
                                "replay record {k} for client {} (at round {}) is round {} with \
                                 {} seeds and {} scalars",
                                self.id,
                                self.round,
                                rec.round,
                                rec.seeds.len(),
                                rec.scalars.len()
                            ),
                        ));
                    }
                }
                let round = self.round + records.len() as u64;
                Ok((Catch::Replay(records), round))
            }
            Update::Full(state) => {
                if state.x.len() != dim || state.h.as_ref().map(Vec::len) != hiso.then_some(dim) {
                    return Err(misbehaved(
                        Peer::Server,
                        Misbehavior::Malformed,
                        format!("sent client {} a full state of the wrong shape", self.id),
                    ));
                }
                let round = state.round;
                Ok((Catch::Full(state), round))
            }
        }
    }

    /// Checks that `plan` asks this client to train the round of its last catch-up, in that
    /// catch-up's session, with one seed per local step; returns the invitation to reply to.
    pub fn accept(&self, plan: &RoundPlan, spec: &ReplaySpec) -> Result<Invitation> {
        if plan.round != self.round {
            return Err(ProtocolError::OutOfOrder(format!(
                "client {} holds round {} but was asked to train round {} (catch up first)",
                self.id, self.round, plan.round
            )));
        }
        let Some((session, round, ticket)) = self.invited else {
            return Err(ProtocolError::OutOfOrder(format!(
                "client {} has received no catch-up for round {} (catch up first)",
                self.id, plan.round
            )));
        };
        if plan.session != session || plan.round != round {
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::WrongRound,
                format!(
                    "planned round {} of session {:#x}; client {}'s catch-up was for round \
                     {round} of session {session:#x}",
                    plan.round, plan.session, self.id
                ),
            ));
        }
        if plan.clients.binary_search(&self.id).is_err() {
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::NotParticipant,
                format!(
                    "asked client {} to train round {}, whose plan leaves it out",
                    self.id, plan.round
                ),
            ));
        }
        if plan.seeds.len() != spec.local_steps {
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::Malformed,
                format!(
                    "planned {} seeds for {} local steps",
                    plan.seeds.len(),
                    spec.local_steps
                ),
            ));
        }
        Ok(Invitation {
            session,
            round,
            ticket,
            participants: plan.clients.len(),
        })
    }

    /// The reply to `invitation` carrying `scalars`.
    pub fn reply(&self, invitation: Invitation, scalars: Vec<f32>) -> Reply {
        Reply {
            session: invitation.session,
            client: self.id,
            ticket: invitation.ticket,
            round: invitation.round,
            scalars,
        }
    }
}

/// One client's replicated state.
#[derive(Debug)]
pub struct Client {
    participant: Participant,
    state: ModelState,
    scratch: Scratch,
}

impl Client {
    /// Client `id`, holding the common starting state.
    pub fn new(id: usize, initial: ModelState) -> Self {
        Self {
            participant: Participant::new(id, initial.round),
            state: initial,
            scratch: Scratch::default(),
        }
    }

    /// The client's index.
    pub fn id(&self) -> usize {
        self.participant.id()
    }

    /// The state the client holds.
    pub fn state(&self) -> &ModelState {
        &self.state
    }

    /// The held state as a full catch-up addressed to this client, with the session and
    /// ticket of the last catch-up it received (zeros if none): what a fresh client of the
    /// same spec receives to resume where this one stands, reply included.
    pub fn saved(&self) -> CatchUp {
        let (session, ticket) = self.participant.held_invitation();
        CatchUp {
            session,
            client: self.id(),
            ticket,
            dim: self.state.x.len(),
            update: Update::Full(self.state.clone()),
        }
    }

    /// Brings the state to the round the server says, by replay or replacement, and keeps the
    /// catch-up's session and ticket for the reply ([`Participant::receive`]).
    pub fn receive(&mut self, msg: CatchUp, spec: &ReplaySpec) -> Result<()> {
        let dim = self.state.x.len();
        let hiso = self.state.h.is_some();
        match self.participant.receive(msg, spec, dim, hiso)? {
            Catch::UpToDate => {}
            Catch::Replay(records) => {
                for rec in &records {
                    self.state.apply(rec, spec, &mut self.scratch)?;
                }
            }
            Catch::Full(state) => self.state = state,
        }
        Ok(())
    }

    /// The local steps of `plan`'s round from the held state. `batch_loss(k, x)` is the loss
    /// of local step `k`'s minibatch at `x`. The local iterate is discarded afterwards
    /// (Alg. 1 line 13): only the scalars leave. The plan must be of the session and round of
    /// the last catch-up received, and name this client.
    pub fn local_update(
        &mut self,
        plan: &RoundPlan,
        spec: &ReplaySpec,
        probe: Probe,
        batch_loss: &(dyn Fn(usize, &[f64]) -> f64 + Sync),
    ) -> Result<Reply> {
        let invitation = self.participant.accept(plan, spec)?;
        let d = self.state.x.len();
        let s = &mut self.scratch;
        s.ensure(d);
        self.state.load_preconditioner(s);
        let mut x = self.state.x.clone();
        let mut probe_point = vec![0.0; d];
        let mut scalars = Vec::with_capacity(spec.scalars_per_round());
        let inv_p = 1.0 / spec.perturbations as f64;
        for (k, &seed) in plan.seeds.iter().enumerate() {
            let f = |point: &[f64]| batch_loss(k, point);
            let base = probe.base(f, &x);
            s.delta.fill(0.0);
            for p in 0..spec.perturbations {
                gaussian_fill(
                    &direction_key(seed, plan.round, k as u64, p as u64),
                    &mut s.u,
                );
                let g = probe.derivative(f, &x, base, &s.h_inv_sqrt, &s.u, &mut probe_point);
                if !g.is_finite() {
                    return Err(ProtocolError::Diverged {
                        round: plan.round,
                        what: format!("client {}'s directional derivative", self.id()),
                    });
                }
                let g = g as f32;
                scalars.push(g);
                add_scaled_direction(&mut s.delta, f64::from(g) * inv_p, &s.h_inv_sqrt, &s.u);
            }
            spec.step(&mut x, &s.delta);
        }
        Ok(self.participant.reply(invitation, scalars))
    }
}

/// `out = x + t · s ⊙ u`.
fn shift(out: &mut [f64], x: &[f64], t: f64, s: &[f64], u: &[f64]) {
    for (((o, xj), sj), uj) in out.iter_mut().zip(x).zip(s).zip(u) {
        *o = xj + t * sj * uj;
    }
}
