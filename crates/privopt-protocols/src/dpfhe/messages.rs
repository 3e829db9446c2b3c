//! DP-under-FHE messages and their byte encodings: leveled CKKS ciphertexts and evaluation
//! keys keep `privopt-ckks`'s encodings (parameter fingerprint, level, residues checked)
//! inside this crate's frame. Evaluation keys travel one Galois key per message, so each
//! message stays under the size limit (one key at n = 2^15 is about 55 MB).

use std::sync::Arc;

use privopt_ckks::eval::{Ciphertext, EncapsulationKeys, EvalContext, GaloisKeys, RelinKey};

use crate::wire::{self, DecodeError, Method, Reader, Writer};

const KIND_STEP: u8 = 1;
const KIND_REFRESH: u8 = 2;
const KIND_WEIGHTS: u8 = 3;
const KIND_RELIN_KEY: u8 = 4;
const KIND_GALOIS_KEY: u8 = 5;
pub(super) const KIND_OWNER_STATE: u8 = 6;
const KIND_ENCAPSULATION_KEYS: u8 = 7;

/// The data owner's inputs of one step: features, labels and scaled noise, encrypted.
#[derive(Clone, Debug)]
pub struct EncryptedStep {
    /// The step.
    pub step: u64,
    /// Features, example `i` in block `i`.
    pub x: Ciphertext,
    /// Labels at block starts.
    pub y: Ciphertext,
    /// `η·χ_t`, replicated.
    pub noise: Ciphertext,
}

/// A ciphertext to refresh (server → owner) or refreshed (owner → server).
#[derive(Clone, Debug)]
pub struct Refresh {
    /// The step it belongs to.
    pub step: u64,
    /// The ciphertext.
    pub ct: Ciphertext,
}

/// Encrypted weights: the owner's initial `w₀`, or the server's result after `step` steps.
#[derive(Clone, Debug)]
pub struct Weights {
    /// Steps taken.
    pub step: u64,
    /// `w`, replicated in every block.
    pub w: Ciphertext,
}

fn ct(w: &mut Writer, c: &Ciphertext, ctx: &EvalContext) {
    w.bytes(&c.to_bytes(ctx.params()));
}

fn read_ct(r: &mut Reader<'_>, ctx: &EvalContext) -> Result<Ciphertext, DecodeError> {
    let inner = r.bytes()?;
    Ciphertext::from_bytes(ctx.params(), inner).map_err(|e| r.invalid(e.to_string()))
}

impl EncryptedStep {
    /// The framed bytes.
    pub fn to_bytes(&self, ctx: &EvalContext) -> Vec<u8> {
        wire::encode(Method::Dpfhe, KIND_STEP, |w| {
            w.u64(self.step);
            for c in [&self.x, &self.y, &self.noise] {
                ct(w, c, ctx);
            }
        })
    }

    /// Parses a step's inputs made under `ctx`'s parameters.
    pub fn from_bytes(ctx: &EvalContext, bytes: &[u8]) -> Result<Self, DecodeError> {
        wire::decode(bytes, "dpfhe step inputs", Method::Dpfhe, KIND_STEP, |r| {
            Ok(Self {
                step: r.u64()?,
                x: read_ct(r, ctx)?,
                y: read_ct(r, ctx)?,
                noise: read_ct(r, ctx)?,
            })
        })
    }
}

/// A step number and one ciphertext, framed as `kind`.
fn step_ct_to_bytes(kind: u8, step: u64, c: &Ciphertext, ctx: &EvalContext) -> Vec<u8> {
    wire::encode(Method::Dpfhe, kind, |w| {
        w.u64(step);
        ct(w, c, ctx);
    })
}

/// Reads what [`step_ct_to_bytes`] wrote.
fn step_ct_from_bytes(
    ctx: &EvalContext,
    bytes: &[u8],
    what: &'static str,
    kind: u8,
) -> Result<(u64, Ciphertext), DecodeError> {
    wire::decode(bytes, what, Method::Dpfhe, kind, |r| {
        Ok((r.u64()?, read_ct(r, ctx)?))
    })
}

impl Refresh {
    /// The framed bytes.
    pub fn to_bytes(&self, ctx: &EvalContext) -> Vec<u8> {
        step_ct_to_bytes(KIND_REFRESH, self.step, &self.ct, ctx)
    }

    /// Parses a refresh request or reply made under `ctx`'s parameters.
    pub fn from_bytes(ctx: &EvalContext, bytes: &[u8]) -> Result<Self, DecodeError> {
        let (step, ct) = step_ct_from_bytes(ctx, bytes, "dpfhe refresh", KIND_REFRESH)?;
        Ok(Self { step, ct })
    }
}

impl Weights {
    /// The framed bytes.
    pub fn to_bytes(&self, ctx: &EvalContext) -> Vec<u8> {
        step_ct_to_bytes(KIND_WEIGHTS, self.step, &self.w, ctx)
    }

    /// Parses encrypted weights made under `ctx`'s parameters.
    pub fn from_bytes(ctx: &EvalContext, bytes: &[u8]) -> Result<Self, DecodeError> {
        let (step, w) = step_ct_from_bytes(ctx, bytes, "dpfhe weights", KIND_WEIGHTS)?;
        Ok(Self { step, w })
    }
}

/// The relinearization key, framed.
pub fn relin_key_to_bytes(key: &RelinKey, ctx: &EvalContext) -> Vec<u8> {
    wire::encode(Method::Dpfhe, KIND_RELIN_KEY, |w| {
        w.bytes(&key.to_bytes(ctx.params()))
    })
}

/// Parses a framed relinearization key for `ctx`'s parameters.
pub fn relin_key_from_bytes(ctx: &EvalContext, bytes: &[u8]) -> Result<RelinKey, DecodeError> {
    wire::decode(
        bytes,
        "dpfhe relinearization key",
        Method::Dpfhe,
        KIND_RELIN_KEY,
        |r| {
            let inner = r.bytes()?;
            RelinKey::from_bytes(ctx.params(), inner).map_err(|e| r.invalid(e.to_string()))
        },
    )
}

/// A bootstrapping server's encapsulation keys, framed.
pub fn encapsulation_keys_to_bytes(keys: &EncapsulationKeys, ctx: &EvalContext) -> Vec<u8> {
    wire::encode(Method::Dpfhe, KIND_ENCAPSULATION_KEYS, |w| {
        w.bytes(&keys.to_bytes(ctx.params()))
    })
}

/// Parses framed encapsulation keys for `ctx`'s parameters.
pub fn encapsulation_keys_from_bytes(
    ctx: &EvalContext,
    bytes: &[u8],
) -> Result<EncapsulationKeys, DecodeError> {
    wire::decode(
        bytes,
        "dpfhe encapsulation keys",
        Method::Dpfhe,
        KIND_ENCAPSULATION_KEYS,
        |r| {
            let inner = r.bytes()?;
            EncapsulationKeys::from_bytes(ctx.params(), inner).map_err(|e| r.invalid(e.to_string()))
        },
    )
}

/// The Galois keys as messages of one key each.
pub fn galois_keys_to_messages(keys: GaloisKeys, ctx: &EvalContext) -> Vec<Vec<u8>> {
    keys.split()
        .into_iter()
        .map(|k| {
            wire::encode(Method::Dpfhe, KIND_GALOIS_KEY, |w| {
                w.bytes(&k.to_bytes(ctx.params()))
            })
        })
        .collect()
}

/// Parses one Galois-key message for `ctx` (merge them with [`GaloisKeys::merge`]).
pub fn galois_key_from_bytes(
    ctx: &Arc<EvalContext>,
    bytes: &[u8],
) -> Result<GaloisKeys, DecodeError> {
    wire::decode(
        bytes,
        "dpfhe Galois key",
        Method::Dpfhe,
        KIND_GALOIS_KEY,
        |r| {
            let inner = r.bytes()?;
            let keys = GaloisKeys::from_bytes(ctx, inner).map_err(|e| r.invalid(e.to_string()))?;
            if keys.elements().count() != 1 {
                return Err(r.invalid("a Galois-key message carries exactly one key"));
            }
            Ok(keys)
        },
    )
}
