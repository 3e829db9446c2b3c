//! The messages of a scalar-only round and their byte encodings.
//!
//! A round is: the server broadcasts a [`RoundPlan`]; each participant receives a [`CatchUp`]
//! and answers with a [`Reply`]. Client ids are `u32` on the wire; [`Server::new`] bounds them.
//!
//! Every message names the server's session (a random id per server run), so a message of
//! another run is refused rather than applied along another run's directions. A catch-up is
//! addressed to one client and carries its [`Ticket`] for the round, which its reply must
//! return: a client cannot reply under another's id without having seen that client's
//! catch-up (which the transport delivers to that client alone).
//!
//! [`Server::new`]: super::Server::new

use super::state::{ModelState, RoundRecord};
use crate::wire::{DecodeError, Message, Method, Reader, Writer};

/// Bytes of a seed on the wire.
pub const SEED_BYTES: u64 = 8;
/// Bytes of a scalar on the wire (`f32`).
pub const SCALAR_BYTES: u64 = 4;
/// Bytes of a parameter of a full-model catch-up: `f64`, so the client's copy is exact.
pub const FULL_PARAM_BYTES: u64 = 8;

/// A participant's proof, in its reply, that it received its own catch-up of the round: a MAC
/// of (session, round, client) under a key only the server holds.
pub type Ticket = [u8; 16];

/// The start of a round, broadcast to its participants.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundPlan {
    /// The server run.
    pub session: u64,
    /// The round.
    pub round: u64,
    /// One seed per local step.
    pub seeds: Vec<u64>,
    /// The participating clients, ascending.
    pub clients: Vec<usize>,
}

/// What one participant receives: the round's session, its id, its reply ticket, and what it
/// needs to hold the round's starting state.
#[derive(Clone, Debug, PartialEq)]
pub struct CatchUp {
    /// The server run.
    pub session: u64,
    /// The participant it is addressed to.
    pub client: usize,
    /// What its reply must carry.
    pub ticket: Ticket,
    /// The model's length (parameters): a client whose model has another length refuses
    /// the catch-up before applying anything, rather than replaying onto the wrong shape.
    pub dim: usize,
    /// The state update.
    pub update: Update,
}

impl CatchUp {
    /// Payload bytes (seeds, scalars, or full vectors; the addressing is not counted).
    pub fn bytes(&self) -> u64 {
        self.update.bytes()
    }
}

/// How a participant reaches the round's starting state.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
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

impl Update {
    /// Payload bytes (seeds, scalars, or full vectors).
    pub fn bytes(&self) -> u64 {
        match self {
            Update::UpToDate { .. } => 0,
            Update::Replay(records) => records
                .iter()
                .map(|r| SEED_BYTES * r.seeds.len() as u64 + SCALAR_BYTES * r.scalars.len() as u64)
                .sum(),
            Update::Full(s) => {
                let vectors = 1 + u64::from(s.h.is_some());
                FULL_PARAM_BYTES * vectors * s.x.len() as u64
            }
        }
    }
}

/// A participant's answer: its `τ·P` scalars for the round.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The server run.
    pub session: u64,
    /// The sender.
    pub client: usize,
    /// The ticket of the sender's catch-up.
    pub ticket: Ticket,
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

impl Message for RoundPlan {
    const METHOD: Method = Method::ScalarFl;
    const KIND: u8 = 1;
    const NAME: &'static str = "scalar_fl round plan";

    fn write_fields(&self, w: &mut Writer) {
        w.u64(self.session);
        w.u64(self.round);
        w.u64s(&self.seeds);
        w.len(self.clients.len());
        self.clients.iter().for_each(|&c| w.len(c));
    }

    fn read_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let session = r.u64()?;
        let round = r.u64()?;
        let seeds = r.u64s()?;
        let n = r.count(4)?;
        let clients = (0..n).map(|_| r.index()).collect::<Result<Vec<_>, _>>()?;
        if clients.windows(2).any(|w| w[0] >= w[1]) {
            return Err(r.invalid("participants are not strictly ascending"));
        }
        Ok(Self {
            session,
            round,
            seeds,
            clients,
        })
    }
}

impl Message for Reply {
    const METHOD: Method = Method::ScalarFl;
    const KIND: u8 = 3;
    const NAME: &'static str = "scalar_fl reply";

    fn write_fields(&self, w: &mut Writer) {
        w.u64(self.session);
        w.len(self.client);
        w.raw(&self.ticket);
        w.u64(self.round);
        w.f32s(&self.scalars);
    }

    fn read_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            session: r.u64()?,
            client: r.index()?,
            ticket: r.array()?,
            round: r.u64()?,
            scalars: r.f32s()?,
        })
    }
}

const UP_TO_DATE: u8 = 0;
const REPLAY: u8 = 1;
const FULL: u8 = 2;

impl Message for CatchUp {
    const METHOD: Method = Method::ScalarFl;
    const KIND: u8 = 2;
    const NAME: &'static str = "scalar_fl catch-up";

    fn write_fields(&self, w: &mut Writer) {
        w.u64(self.session);
        w.len(self.client);
        w.raw(&self.ticket);
        w.u64(self.dim as u64);
        match &self.update {
            Update::UpToDate { round } => {
                w.u8(UP_TO_DATE);
                w.u64(*round);
            }
            Update::Replay(records) => {
                w.u8(REPLAY);
                w.len(records.len());
                for rec in records {
                    w.u64(rec.round);
                    w.u64s(&rec.seeds);
                    w.f32s(&rec.scalars);
                }
            }
            Update::Full(state) => {
                w.u8(FULL);
                w.u64(state.round);
                w.f64s(&state.x);
                w.u8(u8::from(state.h.is_some()));
                if let Some(h) = &state.h {
                    w.f64s(h);
                }
            }
        }
    }

    fn read_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let session = r.u64()?;
        let client = r.index()?;
        let ticket = r.array()?;
        let dim = usize::try_from(r.u64()?)
            .ok()
            .filter(|&d| d > 0)
            .ok_or_else(|| r.invalid("the model length is 0 or too large"))?;
        let update = update(r)?;
        if let Update::Full(state) = &update
            && state.x.len() != dim
        {
            return Err(r.invalid(format!(
                "a full state of {} parameters for a model of {dim}",
                state.x.len()
            )));
        }
        Ok(Self {
            session,
            client,
            ticket,
            dim,
            update,
        })
    }
}

fn update(r: &mut Reader<'_>) -> Result<Update, DecodeError> {
    match r.u8()? {
        UP_TO_DATE => Ok(Update::UpToDate { round: r.u64()? }),
        REPLAY => {
            // A record is at least its round and two counts.
            let n = r.count(16)?;
            let mut records: Vec<RoundRecord> = Vec::with_capacity(n);
            for _ in 0..n {
                let rec = RoundRecord {
                    round: r.u64()?,
                    seeds: r.u64s()?,
                    scalars: r.f32s()?,
                };
                if let Some(prev) = records.last()
                    && prev.round.checked_add(1) != Some(rec.round)
                {
                    return Err(r.invalid(format!(
                        "replayed rounds are not consecutive ({} then {})",
                        prev.round, rec.round
                    )));
                }
                records.push(rec);
            }
            Ok(Update::Replay(records))
        }
        FULL => {
            let round = r.u64()?;
            let x = r.f64s()?;
            let h = if r.bool()? {
                let h = r.f64s()?;
                if h.len() != x.len() || h.iter().any(|&v| v <= 0.0) {
                    return Err(r.invalid(
                        "the Hessian diagonal is not positive or not the model's length",
                    ));
                }
                Some(h)
            } else {
                None
            };
            Ok(Update::Full(ModelState { x, h, round }))
        }
        tag => Err(r.invalid(format!("unknown catch-up variant {tag}"))),
    }
}
