//! DOME's downlink and its byte encodings (the uplink is SecAgg+, [`crate::secagg`]).
//!
//! Each round the server sends a [`RoundBroadcast`] (the mean `m̂`, the noise level, the
//! clipping norm, the quantizer) and the sketch `S` as [`BasisChunk`]s of whole columns, each
//! small enough for one message; a client puts them together with a [`BasisAssembler`].

use faer::Mat;

use crate::error::{ProtocolError, Result};
use crate::wire::{DecodeError, MAX_MESSAGE_BYTES, Message, Method, Reader, Writer};

/// What every participant needs to privatize its gradient this round.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundBroadcast {
    /// The round.
    pub round: u64,
    /// Participants `B` (the quantizer's summand count).
    pub participants: u32,
    /// Standard deviation `a` of each participant's noise.
    pub noise_std: f64,
    /// Clipping norm `C`.
    pub clip: f64,
    /// The quantizer's clipping bound.
    pub quantizer_bound: f64,
    /// The server's `m̂`, removed from each gradient before projection.
    pub m_hat: Vec<f64>,
}

impl Message for RoundBroadcast {
    const METHOD: Method = Method::Dome;
    const KIND: u8 = 1;
    const NAME: &'static str = "DOME round broadcast";

    fn write_fields(&self, w: &mut Writer) {
        w.u64(self.round);
        w.u32(self.participants);
        w.f64(self.noise_std);
        w.f64(self.clip);
        w.f64(self.quantizer_bound);
        w.f64s(&self.m_hat);
    }

    fn read_fields(r: &mut Reader<'_>) -> std::result::Result<Self, DecodeError> {
        let round = r.u64()?;
        let participants = r.u32()?;
        let (noise_std, clip, quantizer_bound) = (r.f64()?, r.f64()?, r.f64()?);
        if participants == 0 || noise_std < 0.0 || clip <= 0.0 || quantizer_bound <= 0.0 {
            return Err(r.invalid(
                "participants, clip and quantizer bound must be positive, noise non-negative",
            ));
        }
        Ok(Self {
            round,
            participants,
            noise_std,
            clip,
            quantizer_bound,
            m_hat: r.f64s()?,
        })
    }
}

/// Columns `first..first + count` of the round's sketch `S` (d × k), column-major.
#[derive(Clone, Debug, PartialEq)]
pub struct BasisChunk {
    /// The round.
    pub round: u64,
    /// Rows `d`.
    pub d: u32,
    /// Columns `k` of the whole sketch.
    pub k: u32,
    /// The first column carried.
    pub first: u32,
    /// `d · count` values.
    pub values: Vec<f64>,
}

impl Message for BasisChunk {
    const METHOD: Method = Method::Dome;
    const KIND: u8 = 2;
    const NAME: &'static str = "DOME sketch columns";

    fn write_fields(&self, w: &mut Writer) {
        w.u64(self.round);
        w.u32(self.d);
        w.u32(self.k);
        w.u32(self.first);
        w.f64s(&self.values);
    }

    fn read_fields(r: &mut Reader<'_>) -> std::result::Result<Self, DecodeError> {
        let (round, d, k, first) = (r.u64()?, r.u32()?, r.u32()?, r.u32()?);
        let values = r.f64s()?;
        let count = if d == 0 { 0 } else { values.len() / d as usize };
        if d == 0
            || count == 0
            || values.len() % d as usize != 0
            || first as usize + count > k as usize
        {
            return Err(r.invalid(format!(
                "{} values are not whole columns {first}.. of a {d} × {k} sketch",
                values.len()
            )));
        }
        Ok(Self {
            round,
            d,
            k,
            first,
            values,
        })
    }
}

/// Splits `s` (d × k) into chunks of whole columns of at most half the message limit each.
pub fn basis_chunks(round: u64, s: faer::MatRef<'_, f64>) -> Vec<BasisChunk> {
    let (d, k) = (s.nrows(), s.ncols());
    let per = ((MAX_MESSAGE_BYTES / 2) / (8 * d.max(1))).max(1);
    (0..k)
        .step_by(per)
        .map(|first| {
            let count = per.min(k - first);
            let values = (first..first + count)
                .flat_map(|c| (0..d).map(move |i| s[(i, c)]))
                .collect();
            BasisChunk {
                round,
                d: d as u32,
                k: k as u32,
                first: first as u32,
                values,
            }
        })
        .collect()
}

/// Encoded bytes of all of [`basis_chunks`]' messages for a d × k sketch, without building
/// them (for traffic accounting).
pub fn basis_wire_bytes(d: usize, k: usize) -> u64 {
    let per = ((MAX_MESSAGE_BYTES / 2) / (8 * d.max(1))).max(1);
    let chunks = k.div_ceil(per) as u64;
    // One column of one row: the framing and fixed fields, plus 8 bytes.
    let framing = BasisChunk {
        round: 0,
        d: 1,
        k: 1,
        first: 0,
        values: vec![0.0],
    }
    .to_bytes()
    .len() as u64
        - 8;
    chunks * framing + 8 * (d as u64) * (k as u64)
}

/// Puts a round's sketch together from its chunks, in any order.
#[derive(Debug)]
pub struct BasisAssembler {
    round: u64,
    s: Mat<f64>,
    filled: Vec<bool>,
}

impl BasisAssembler {
    /// Waits for the `d × k` sketch of `round`.
    pub fn new(round: u64, d: usize, k: usize) -> Self {
        Self {
            round,
            s: Mat::zeros(d, k),
            filled: vec![false; k],
        }
    }

    /// Adds a chunk; refuses one of another round or shape, or one that repeats a column.
    pub fn add(&mut self, chunk: &BasisChunk) -> Result<()> {
        let (d, k) = (self.s.nrows(), self.s.ncols());
        let count = chunk.values.len() / d.max(1);
        let first = chunk.first as usize;
        if chunk.round != self.round
            || chunk.d as usize != d
            || chunk.k as usize != k
            || first + count > k
            || self.filled[first..first + count].iter().any(|&f| f)
        {
            return Err(crate::error::misbehaved(
                crate::error::Peer::Server,
                crate::error::Misbehavior::Malformed,
                format!(
                    "sent sketch columns {first}..{} of round {} ({} × {}), expected round {} ({d} × {k}) without repeats",
                    first + count,
                    chunk.round,
                    chunk.d,
                    chunk.k,
                    self.round
                ),
            ));
        }
        for c in 0..count {
            for i in 0..d {
                self.s[(i, first + c)] = chunk.values[c * d + i];
            }
            self.filled[first + c] = true;
        }
        Ok(())
    }

    /// The sketch, once every column has arrived.
    pub fn finish(self) -> Result<Mat<f64>> {
        match self.filled.iter().position(|f| !f) {
            None => Ok(self.s),
            Some(c) => Err(ProtocolError::Incomplete(format!(
                "sketch column {c} never arrived"
            ))),
        }
    }
}
