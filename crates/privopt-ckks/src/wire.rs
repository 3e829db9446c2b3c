//! Byte encodings of xMK-CKKS messages, with size and parameter checks.
//!
//! Layout (little-endian): `"PVMK"`, version (1 byte), kind (1 byte), two zero bytes, the
//! 32-byte parameter fingerprint, a tag (8 bytes): the session for multiparty messages, the
//! [`crate::eval::KeyId`] of the secret for leveled ones (0 for parties and an empty Galois key
//! set), then
//! - shares: party (4), binding digest (32), one polynomial;
//! - threshold secret shares (secret: the transport encrypts them to their recipient): a
//!   share of the sharing round (dealer, committee binding, polynomial), then the recipient (4);
//! - active sets: the ciphertext's digest (32), number of members `k` (4), `k` sorted ids;
//! - dealing checks (tagged with the setup's session): the seed (32), number of sets `s` (4),
//!   set size `k` (4), then `s` sets of `k` sorted ids; dealing answers: party (4), the
//!   check's digest (32), blocks `b` (4), coefficients per block `m` (4), then `b` blocks of
//!   `m` residues per prime, prime-major;
//! - a threshold member's state (its owner's storage only): id (4), threshold (4), `k` (4),
//!   `k` sorted committee ids, the common polynomial's digest (32), the `k` shares dealt to
//!   it (in committee order), the number of ciphertexts answered `a` (4) and their `a` sorted
//!   digests (32 each);
//! - ciphertexts: count (4), number of members `k` (4), `k` sorted member ids (4 each), `c0`, `c1`;
//!   a sum of secret-key encryptions (kind 16) has, after the members, the common
//!   polynomial's digest (32), its chunk (4), the number of contributors `c` (4, the count),
//!   `c` sorted contributor ids, and `c0` only (`c1` is expanded from the digest, session
//!   and chunk);
//! - encrypted models: length (8), chunks (4), count (4), `k` (4), `k` member ids, then each
//!   chunk's `c0` and `c1`; secret-key ones (kind 17): length (8), chunks (4), `k` (4), `k`
//!   member ids, digest (32), `c` (4), `c` contributor ids, then each chunk's `c0` only;
//! - leveled ([`crate::eval`]) ciphertexts: level (4), scale (8, an `f64`), then `c0`
//!   and `c1` over the first `level + 1` primes;
//! - evaluation keys: the public key is `b`, `a` over `Q`; a switching key is its
//!   level `l` (4), the 32-byte seed every `a_j` is expanded from, and one `b_j` over `Q_l·P`
//!   per digit starting at or below `l` (so a key is half the bytes of its `(b_j, a_j)` pairs);
//!   a relinearization key is one switching key; Galois keys are a count (4) and, per key in
//!   increasing order, its Galois element (8) and its switching key. The
//!   evaluation-form permutation of a Galois key is derived from its element on load; a
//!   secret key is `s` over `Q·P` (for its owner's storage only: it never goes on the wire);
//!   encapsulation keys (tagged with the dense secret) are the sparse weight (4), the sparse
//!   secret's key id (8), the dense-to-sparse key's seed and `b` over `q_0, p_e`, and the
//!   sparse-to-dense switching key.
//!
//! A polynomial is `L · n` residues of 8 bytes, prime-major, each below its prime. Decoding
//! refuses anything else: wrong magic, version or kind, other parameters, a length that is
//! not exactly the expected one (truncated or oversized), residues out of range, unsorted or
//! duplicate members.

use std::marker::PhantomData;
use std::sync::Arc;

use privopt_math::rns::{Eval, Poly};

use crate::error::CkksError;
use crate::eval::{
    EncapsulationKeys, EvalContext, GaloisKeys, KeyId, PublicKey, RelinKey, SecretKey, SwitchingKey,
};
use crate::multiparty::SecretKey as PartySecret;
use crate::multiparty::cipher::Seeded;
use crate::multiparty::{
    ActiveSet, Ciphertext, Committee, DealingAnswer, DealingCheck, DecryptionShare, MAX_ANSWERED,
    Party, Round, SecretShare, Share, SharingRound, ThresholdParty,
};
use crate::params::CkksParams;

const MAGIC: &[u8; 4] = b"PVMK";
/// Version 5: a threshold member's state keeps every dealer's share (for sums of secret-key
/// encryptions); version 4: leveled ciphertexts and keys carry their secret's key id in the
/// header's tag (version 3 made switching keys carry the seed of their `a` halves instead of the halves;
/// version 2 added the keys' level; version 1's keys were all at the top level).
const VERSION: u8 = 5;
// Kinds 1, 2 and 11 are shares: their round's `Round::TAG` (key, decryption, sharing).
const KIND_CIPHERTEXT: u8 = 3;
const KIND_EVAL_CIPHERTEXT: u8 = 4;
const KIND_PUBLIC_KEY: u8 = 5;
const KIND_RELIN_KEY: u8 = 6;
const KIND_GALOIS_KEYS: u8 = 7;
const KIND_SECRET_KEY: u8 = 8;
const KIND_PARTY: u8 = 9;
const KIND_ENCAPSULATION_KEYS: u8 = 10;
const KIND_ACTIVE_SET: u8 = 12;
const KIND_THRESHOLD_PARTY: u8 = 13;
const KIND_ENCRYPTED_MODEL: u8 = 14;
const KIND_SHARE_BATCH: u8 = 15;
const KIND_SEEDED_CIPHERTEXT: u8 = 16;
const KIND_SEEDED_MODEL: u8 = 17;
const KIND_DEALING_CHECK: u8 = 18;
const KIND_DEALING_ANSWER: u8 = 19;

/// Most ciphertexts in one encrypted model (2^24 values at n = 2^12 is 4 096).
pub const MAX_MODEL_CHUNKS: usize = 1 << 16;
const HEADER: usize = 4 + 1 + 1 + 2 + 32 + 8;
/// Most members a ciphertext may name.
pub const MAX_MEMBERS: usize = 1 << 16;

fn poly_bytes(params: &CkksParams) -> usize {
    8 * params.n() * params.basis().moduli().len()
}

fn header(out: &mut Vec<u8>, kind: u8, params: &CkksParams, session: u64) {
    tagged_header(out, kind, params.fingerprint(), session);
}

fn tagged_header(out: &mut Vec<u8>, kind: u8, fingerprint: &[u8; 32], session: u64) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[VERSION, kind, 0, 0]);
    out.extend_from_slice(fingerprint);
    out.extend_from_slice(&session.to_le_bytes());
}

fn put_poly(out: &mut Vec<u8>, p: &Poly<Eval>) {
    put_residues(out, p.as_slice());
}

/// The members' count and ids.
fn put_members(out: &mut Vec<u8>, members: &[u32]) {
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for m in members {
        out.extend_from_slice(&m.to_le_bytes());
    }
}

/// A sum of secret-key encryptions' common-polynomial digest and contributors.
fn put_seeded(out: &mut Vec<u8>, seeded: &Seeded) {
    out.extend_from_slice(&seeded.crs);
    put_members(out, &seeded.contributors);
}

/// The message kind of `bytes` (the byte after magic and version), if there is one.
fn kind_of(bytes: &[u8]) -> Option<u8> {
    bytes.get(5).copied()
}

fn put_residues(out: &mut Vec<u8>, residues: &[u64]) {
    for x in residues {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

fn put_switching_key(out: &mut Vec<u8>, key: &SwitchingKey) {
    out.extend_from_slice(&(key.level as u32).to_le_bytes());
    put_key_halves(out, key);
}

/// A switching key's mask seed and `b` halves.
fn put_key_halves(out: &mut Vec<u8>, key: &SwitchingKey) {
    out.extend_from_slice(&key.mask_seed);
    for b in &key.b {
        put_residues(out, b);
    }
}

/// The digits and rows (`Q_l·P`) of a switching key at `level`.
fn switching_key_shape(params: &CkksParams, level: usize) -> (usize, usize) {
    let digits = params
        .digit_ranges()
        .iter()
        .take_while(|d| d.start <= level)
        .count();
    (digits, level + 1 + params.special_count())
}

/// Bytes of one switching key at `level` (its level field, seed and `b` halves).
fn switching_key_bytes(params: &CkksParams, level: usize) -> usize {
    let (digits, rows) = switching_key_shape(params, level);
    4 + 32 + digits * 8 * params.n() * rows
}

/// Bytes of encapsulation keys whose sparse-to-dense key is at `level`.
fn encapsulation_bytes(params: &CkksParams, level: usize) -> usize {
    HEADER + 4 + 8 + 32 + 2 * 8 * params.n() + switching_key_bytes(params, level)
}

/// A cursor over untrusted bytes that turns every shortfall into a `Malformed` error.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn bad(&self, reason: impl Into<String>) -> CkksError {
        CkksError::Malformed {
            what: self.what,
            reason: reason.into(),
        }
    }

    fn take(&mut self, k: usize) -> Result<&'a [u8], CkksError> {
        let end = self.pos.checked_add(k).filter(|&e| e <= self.bytes.len());
        match end {
            Some(e) => {
                let s = &self.bytes[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            None => Err(self.bad(format!(
                "truncated: {} bytes, needs more than {}",
                self.bytes.len(),
                self.pos
            ))),
        }
    }

    fn u32(&mut self) -> Result<u32, CkksError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, CkksError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A member count in `1..=MAX_MEMBERS`.
    fn member_count(&mut self) -> Result<usize, CkksError> {
        let k = self.u32()? as usize;
        if k == 0 || k > MAX_MEMBERS {
            return Err(self.bad(format!("{k} members is outside 1..={MAX_MEMBERS}")));
        }
        Ok(k)
    }

    /// `k` member ids, strictly increasing.
    fn members(&mut self, k: usize) -> Result<Vec<u32>, CkksError> {
        let members = (0..k).map(|_| self.u32()).collect::<Result<Vec<_>, _>>()?;
        if members.windows(2).any(|w| w[0] >= w[1]) {
            return Err(self.bad("member ids are not sorted and unique"));
        }
        Ok(members)
    }

    /// A seeded sum's digest and contributors (`1..=members.len()` of `members`).
    fn seeded(&mut self, members: &[u32]) -> Result<([u8; 32], Vec<u32>), CkksError> {
        let crs = self.digest()?;
        let c = self.u32()? as usize;
        if c == 0 || c > members.len() {
            return Err(self.bad(format!("{c} contributors of {} members", members.len())));
        }
        let contributors = self.members(c)?;
        if let Some(p) = contributors
            .iter()
            .find(|p| members.binary_search(p).is_err())
        {
            return Err(self.bad(format!("contributor {p} is not a member")));
        }
        Ok((crs, contributors))
    }

    fn digest(&mut self) -> Result<[u8; 32], CkksError> {
        let mut d = [0u8; 32];
        d.copy_from_slice(self.take(32)?);
        Ok(d)
    }

    /// Refuses input whose total length is not `expected`.
    fn expect_len(&self, expected: usize) -> Result<(), CkksError> {
        if self.bytes.len() == expected {
            return Ok(());
        }
        let which = if self.bytes.len() < expected {
            "truncated"
        } else {
            "oversized"
        };
        Err(self.bad(format!(
            "{which}: {} bytes, expected {expected}",
            self.bytes.len()
        )))
    }

    /// Rows of `n` residues, row `r` below `moduli[r]`.
    fn residues(&mut self, moduli: &[u64], n: usize) -> Result<Vec<u64>, CkksError> {
        let mut v = Vec::with_capacity(n * moduli.len());
        for &q in moduli {
            for _ in 0..n {
                let x = self.u64()?;
                if x >= q {
                    return Err(self.bad(format!("residue {x} is not below its prime {q}")));
                }
                v.push(x);
            }
        }
        Ok(v)
    }

    /// A switching key to the secret `target`: its level, then its digit pairs over `Q_l·P`
    /// (the whole key must be present before anything is allocated for it).
    fn switching_key(
        &mut self,
        params: &CkksParams,
        target: KeyId,
    ) -> Result<SwitchingKey, CkksError> {
        let level = self.u32()? as usize;
        if level > params.max_level() {
            return Err(self.bad(format!(
                "key level {level} above the parameters' {}",
                params.max_level()
            )));
        }
        let need = switching_key_bytes(params, level) - 4;
        if self.bytes.len() - self.pos < need {
            return Err(self.bad(format!(
                "truncated: a level-{level} key needs {need} more bytes, {} are left",
                self.bytes.len() - self.pos
            )));
        }
        let all = params.key_basis().moduli();
        let q_count = params.basis().moduli().len();
        let rows: Vec<usize> = (0..=level).chain(q_count..all.len()).collect();
        let (digits, _) = switching_key_shape(params, level);
        self.key_halves(all, &rows, digits, params.n(), level, target)
    }

    /// A switching key's seed and `digits` `b` halves over the primes `rows` of the chain
    /// `all`; the `a` halves are expanded from the seed, so the key is ready to use.
    fn key_halves(
        &mut self,
        all: &[u64],
        rows: &[usize],
        digits: usize,
        n: usize,
        level: usize,
        target: KeyId,
    ) -> Result<SwitchingKey, CkksError> {
        let mask_seed: [u8; 32] = self.take(32)?.try_into().map_err(|_| self.bad("seed"))?;
        let moduli: Vec<u64> = rows.iter().map(|&i| all[i]).collect();
        let b = (0..digits)
            .map(|_| self.residues(&moduli, n))
            .collect::<Result<Vec<_>, CkksError>>()?;
        let mut key = SwitchingKey {
            b,
            a: None,
            mask_seed,
            level,
            target,
        };
        key.a = Some(
            (0..digits)
                .map(|j| key.expand_mask(all, j, rows, n))
                .collect(),
        );
        Ok(key)
    }

    /// Checks the header and returns its tag (the session, or the key id).
    fn header(
        &mut self,
        kind: u8,
        params: &CkksParams,
        expected_len: Option<usize>,
    ) -> Result<u64, CkksError> {
        if let Some(len) = expected_len {
            self.expect_len(len)?;
        }
        if self.take(4)? != MAGIC {
            return Err(self.bad("bad magic"));
        }
        let meta = self.take(4)?;
        if meta[0] != VERSION {
            return Err(self.bad(format!("unsupported version {}", meta[0])));
        }
        if meta[1] != kind {
            return Err(self.bad(format!(
                "message kind {} where {kind} was expected",
                meta[1]
            )));
        }
        // Reserved for later versions: a version-1 message carries zeros there.
        if meta[2..] != [0, 0] {
            return Err(self.bad("reserved header bytes are not zero"));
        }
        if self.digest()? != *params.fingerprint() {
            return Err(self.bad("made under other parameters (fingerprint mismatch)"));
        }
        self.u64()
    }

    /// The header of a message of kind `plain` or of its secret-key form `seeded`: whether it
    /// is the latter, and the session.
    fn header_either(
        &mut self,
        plain: u8,
        seeded: u8,
        params: &CkksParams,
    ) -> Result<(bool, u64), CkksError> {
        let is_seeded = kind_of(self.bytes) == Some(seeded);
        let kind = if is_seeded { seeded } else { plain };
        Ok((is_seeded, self.header(kind, params, None)?))
    }

    fn poly(&mut self, params: &CkksParams) -> Result<Poly<Eval>, CkksError> {
        let raw = self.take(poly_bytes(params))?;
        let data = raw
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .collect();
        params
            .basis()
            .from_residues(data)
            .map_err(|e| self.bad(e.to_string()))
    }
}

impl<R: Round> Share<R> {
    /// Encoded length of a share under `params`.
    pub fn encoded_len(params: &CkksParams) -> usize {
        HEADER + 4 + 32 + poly_bytes(params)
    }

    /// The share as bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::encoded_len(params));
        header(&mut out, R::TAG, params, self.session);
        out.extend_from_slice(&self.party.to_le_bytes());
        out.extend_from_slice(&self.binding);
        put_poly(&mut out, &self.poly);
        out
    }

    /// Parses a share of round `R` under `params`.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: R::NAME,
        };
        let session = r.header(R::TAG, params, Some(Self::encoded_len(params)))?;
        let party = r.u32()?;
        let binding = r.digest()?;
        let poly = r.poly(params)?;
        Ok(Share {
            party,
            session,
            binding,
            poly,
            round: PhantomData,
        })
    }
}

impl SecretShare {
    /// Encoded length under `params`: the dealer's share, then the recipient.
    pub fn encoded_len(params: &CkksParams) -> usize {
        Share::<SharingRound>::encoded_len(params) + 4
    }

    /// The share as bytes, wiped when dropped: encrypt them to [`SecretShare::to`] before
    /// they leave the dealer.
    pub fn to_bytes(&self, params: &CkksParams) -> zeroize::Zeroizing<Vec<u8>> {
        let mut out = zeroize::Zeroizing::new(self.share.to_bytes(params));
        out.extend_from_slice(&self.to.to_le_bytes());
        out
    }

    /// Parses a secret share under `params`.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let (share, to) = match bytes.split_last_chunk::<4>() {
            Some((share, to)) if bytes.len() == Self::encoded_len(params) => (share, to),
            _ => {
                return Err(CkksError::Malformed {
                    what: SharingRound::NAME,
                    reason: format!(
                        "{} bytes, expected {}",
                        bytes.len(),
                        Self::encoded_len(params)
                    ),
                });
            }
        };
        Ok(SecretShare {
            to: u32::from_le_bytes(*to),
            share: Share::from_bytes(params, share)?,
        })
    }
}

impl ActiveSet {
    /// The set as bytes (under the parameters of its ciphertext).
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + 36 + 4 * self.members.len());
        header(&mut out, KIND_ACTIVE_SET, params, self.session);
        out.extend_from_slice(&self.ciphertext);
        out.extend_from_slice(&(self.members.len() as u32).to_le_bytes());
        for m in &self.members {
            out.extend_from_slice(&m.to_le_bytes());
        }
        out
    }

    /// Parses an active set; a member checks it against its committee when asked for a share.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "active set",
        };
        let session = r.header(KIND_ACTIVE_SET, params, None)?;
        let ciphertext = r.digest()?;
        let k = r.member_count()?;
        r.expect_len(HEADER + 36 + 4 * k)?;
        let members = r.members(k)?;
        Ok(ActiveSet {
            session,
            ciphertext,
            members,
        })
    }
}

impl DealingCheck {
    /// The check as bytes (under the key's parameters).
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let k = self.sets.first().map_or(0, Vec::len);
        let mut out = Vec::with_capacity(HEADER + 40 + 4 * k * self.sets.len());
        header(&mut out, KIND_DEALING_CHECK, params, self.session);
        out.extend_from_slice(&self.seed);
        out.extend_from_slice(&(self.sets.len() as u32).to_le_bytes());
        out.extend_from_slice(&(k as u32).to_le_bytes());
        for set in &self.sets {
            for m in set {
                out.extend_from_slice(&m.to_le_bytes());
            }
        }
        out
    }

    /// Parses a check; a member checks its sets against its committee when it answers.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "dealing check",
        };
        let session = r.header(KIND_DEALING_CHECK, params, None)?;
        let seed = r.digest()?;
        let count = r.member_count()?;
        let k = r.member_count()?;
        r.expect_len(HEADER + 40 + 4 * k * count)?;
        let sets = (0..count)
            .map(|_| r.members(k))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DealingCheck {
            session,
            seed,
            sets,
        })
    }
}

impl DealingAnswer {
    /// The answer as bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let primes = params.basis().moduli().len();
        let m = self.coefficients;
        let blocks = self.residues.len() / (m * primes).max(1);
        let mut out = Vec::with_capacity(HEADER + 44 + 8 * self.residues.len());
        header(&mut out, KIND_DEALING_ANSWER, params, 0);
        out.extend_from_slice(&self.party.to_le_bytes());
        out.extend_from_slice(&self.check);
        out.extend_from_slice(&(blocks as u32).to_le_bytes());
        out.extend_from_slice(&(m as u32).to_le_bytes());
        put_residues(&mut out, &self.residues);
        out
    }

    /// Parses an answer: every residue below its prime, the length exact.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "dealing answer",
        };
        r.header(KIND_DEALING_ANSWER, params, None)?;
        let party = r.u32()?;
        let check = r.digest()?;
        let blocks = r.member_count()?;
        let m = r.u32()? as usize;
        if m == 0 || m > params.n() {
            return Err(r.bad(format!("{m} coefficients per block, 1..={}", params.n())));
        }
        let moduli = params.basis().moduli();
        r.expect_len(HEADER + 44 + 8 * blocks * m * moduli.len())?;
        let mut residues = Vec::with_capacity(blocks * m * moduli.len());
        for _ in 0..blocks {
            residues.extend(r.residues(moduli, m)?);
        }
        Ok(DealingAnswer {
            party,
            check,
            coefficients: m,
            residues,
        })
    }
}

impl Ciphertext {
    /// The ciphertext as bytes (a sum of secret-key encryptions without its `c1`).
    pub fn to_bytes(&self) -> Vec<u8> {
        let params = &self.params;
        let mut out =
            Vec::with_capacity(HEADER + 48 + 4 * 2 * self.members.len() + 2 * poly_bytes(params));
        let kind = match self.seeded {
            None => KIND_CIPHERTEXT,
            Some(_) => KIND_SEEDED_CIPHERTEXT,
        };
        header(&mut out, kind, params, self.session);
        out.extend_from_slice(&self.count.to_le_bytes());
        put_members(&mut out, &self.members);
        put_poly(&mut out, &self.c0);
        match &self.seeded {
            None => put_poly(&mut out, &self.c1),
            Some(seeded) => {
                out.extend_from_slice(&seeded.chunk.to_le_bytes());
                put_seeded(&mut out, seeded);
            }
        }
        out
    }

    /// Parses a ciphertext under `params`.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "ciphertext",
        };
        let (seeded, session) = r.header_either(KIND_CIPHERTEXT, KIND_SEEDED_CIPHERTEXT, params)?;
        let count = r.u32()?;
        let k = r.member_count()?;
        if !seeded {
            r.expect_len(HEADER + 8 + 4 * k + 2 * poly_bytes(params))?;
        }
        let members = r.members(k)?;
        if count == 0 {
            return Err(r.bad("a ciphertext sums at least one encryption"));
        }
        let c0 = r.poly(params)?;
        if !seeded {
            let c1 = r.poly(params)?;
            return Ok(Ciphertext {
                params: Arc::clone(params),
                session,
                members,
                count,
                c0,
                c1,
                seeded: None,
            });
        }
        let chunk = r.u32()?;
        let (crs, contributors) = r.seeded(&members)?;
        r.expect_len(HEADER + 8 + 4 * k + poly_bytes(params) + 40 + 4 * contributors.len())?;
        if contributors.len() != count as usize {
            return Err(r.bad(format!(
                "a count of {count} with {} contributors",
                contributors.len()
            )));
        }
        let seeded = Seeded {
            crs,
            chunk,
            contributors,
        };
        Ok(seeded.ciphertext(params, session, members, c0))
    }
}

impl crate::multiparty::EncryptedModel {
    /// The model as bytes: its length, its key's members and sum count once, then every
    /// chunk's two polynomials (`c0` only for secret-key encryptions, with their contributors
    /// once).
    pub fn to_bytes(&self) -> Vec<u8> {
        let first = &self.cts[0];
        let params = &first.params;
        let per_chunk = match first.seeded {
            None => 2 * poly_bytes(params),
            Some(_) => poly_bytes(params),
        };
        let mut out = Vec::with_capacity(
            HEADER + 52 + 4 * 2 * first.members.len() + self.cts.len() * per_chunk,
        );
        let kind = match first.seeded {
            None => KIND_ENCRYPTED_MODEL,
            Some(_) => KIND_SEEDED_MODEL,
        };
        header(&mut out, kind, params, first.session);
        out.extend_from_slice(&(self.len as u64).to_le_bytes());
        out.extend_from_slice(&(self.cts.len() as u32).to_le_bytes());
        if first.seeded.is_none() {
            out.extend_from_slice(&first.count.to_le_bytes());
        }
        put_members(&mut out, &first.members);
        if let Some(seeded) = &first.seeded {
            put_seeded(&mut out, seeded);
        }
        for ct in &self.cts {
            put_poly(&mut out, &ct.c0);
            if ct.seeded.is_none() {
                put_poly(&mut out, &ct.c1);
            }
        }
        out
    }

    /// Parses a model under `params`: its chunk count must be `⌈len / n⌉` and every byte
    /// present before anything is allocated for it.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "encrypted model",
        };
        let (seeded, session) = r.header_either(KIND_ENCRYPTED_MODEL, KIND_SEEDED_MODEL, params)?;
        let len = usize::try_from(r.u64()?).map_err(|_| r.bad("length overflows"))?;
        let chunks = r.u32()? as usize;
        if len == 0 || chunks > MAX_MODEL_CHUNKS || chunks != len.div_ceil(params.n()) {
            return Err(r.bad(format!(
                "{chunks} chunks for {len} values (at most {MAX_MODEL_CHUNKS} chunks of {})",
                params.n()
            )));
        }
        if seeded {
            let k = r.member_count()?;
            let members = r.members(k)?;
            let (crs, contributors) = r.seeded(&members)?;
            r.expect_len(
                HEADER + 52 + 4 * k + 4 * contributors.len() + chunks * poly_bytes(params),
            )?;
            let cts = (0..chunks)
                .map(|k| {
                    let seeded = Seeded {
                        crs,
                        chunk: k as u32, // below MAX_MODEL_CHUNKS
                        contributors: contributors.clone(),
                    };
                    Ok(seeded.ciphertext(params, session, members.clone(), r.poly(params)?))
                })
                .collect::<Result<Vec<_>, CkksError>>()?;
            return Ok(Self { len, cts });
        }
        let count = r.u32()?;
        if count == 0 {
            return Err(r.bad("a ciphertext sums at least one encryption"));
        }
        let k = r.member_count()?;
        r.expect_len(HEADER + 20 + 4 * k + chunks * 2 * poly_bytes(params))?;
        let members = r.members(k)?;
        let cts = (0..chunks)
            .map(|_| {
                Ok(Ciphertext {
                    params: Arc::clone(params),
                    session,
                    members: members.clone(),
                    count,
                    c0: r.poly(params)?,
                    c1: r.poly(params)?,
                    seeded: None,
                })
            })
            .collect::<Result<Vec<_>, CkksError>>()?;
        Ok(Self { len, cts })
    }
}

/// One member's decryption shares of a batch (an encrypted model's chunks) as bytes.
pub fn share_batch_to_bytes(params: &CkksParams, shares: &[DecryptionShare]) -> Vec<u8> {
    let session = shares.first().map_or(0, |s| s.session);
    let party = shares.first().map_or(0, |s| s.party);
    let mut out = Vec::with_capacity(HEADER + 8 + shares.len() * (32 + poly_bytes(params)));
    header(&mut out, KIND_SHARE_BATCH, params, session);
    out.extend_from_slice(&party.to_le_bytes());
    out.extend_from_slice(&(shares.len() as u32).to_le_bytes());
    for s in shares {
        out.extend_from_slice(&s.binding);
        put_poly(&mut out, &s.poly);
    }
    out
}

/// Parses what [`share_batch_to_bytes`] wrote: one member's shares, all of one session.
pub fn share_batch_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
) -> Result<Vec<DecryptionShare>, CkksError> {
    let mut r = Reader {
        bytes,
        pos: 0,
        what: "decryption share batch",
    };
    let session = r.header(KIND_SHARE_BATCH, params, None)?;
    let party = r.u32()?;
    let k = r.u32()? as usize;
    if k == 0 || k > MAX_MODEL_CHUNKS {
        return Err(r.bad(format!("{k} shares, 1..={MAX_MODEL_CHUNKS} expected")));
    }
    r.expect_len(HEADER + 8 + k * (32 + poly_bytes(params)))?;
    (0..k)
        .map(|_| {
            let binding = r.digest()?;
            Ok(Share {
                party,
                session,
                binding,
                poly: r.poly(params)?,
                round: PhantomData,
            })
        })
        .collect()
}

impl crate::eval::Ciphertext {
    /// Encoded length of a leveled ciphertext at `level`.
    pub fn encoded_len(params: &CkksParams, level: usize) -> usize {
        HEADER + 4 + 8 + 2 * 8 * params.n() * (level + 1)
    }

    /// The ciphertext as bytes, tagged with the parameters it was made under (`params` only
    /// sizes the buffer).
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::encoded_len(params, self.level));
        tagged_header(&mut out, KIND_EVAL_CIPHERTEXT, &self.params, self.key.get());
        out.extend_from_slice(&(self.level as u32).to_le_bytes());
        out.extend_from_slice(&self.scale.to_le_bytes());
        put_residues(&mut out, &self.c0);
        put_residues(&mut out, &self.c1);
        out
    }

    /// Parses a leveled ciphertext under `params`: refuses other parameters, a level above
    /// the chain, a scale that is not a positive finite number, a length other than the
    /// level's, and residues not below their primes.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "leveled ciphertext",
        };
        let key = KeyId(r.header(KIND_EVAL_CIPHERTEXT, params, None)?);
        let level = r.u32()? as usize;
        if level > params.max_level() {
            return Err(r.bad(format!(
                "level {level} is above the top level {}",
                params.max_level()
            )));
        }
        let scale = f64::from_bits(r.u64()?);
        if !(scale.is_finite() && scale > 0.0) {
            return Err(r.bad(format!("scale {scale} is not a positive number")));
        }
        r.expect_len(Self::encoded_len(params, level))?;
        let moduli = &params.basis().moduli()[..=level];
        let c0 = r.residues(moduli, params.n())?;
        let c1 = r.residues(moduli, params.n())?;
        Ok(Self {
            c0,
            c1,
            level,
            scale,
            params: *params.fingerprint(),
            key,
        })
    }
}

impl PublicKey {
    /// The key as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let params = self.ctx.params();
        let mut out = Vec::with_capacity(HEADER + 2 * poly_bytes(params));
        header(&mut out, KIND_PUBLIC_KEY, params, self.key.get());
        put_residues(&mut out, &self.b);
        put_residues(&mut out, &self.a);
        out
    }

    /// Parses a public key for `ctx`'s parameters.
    pub fn from_bytes(ctx: &Arc<EvalContext>, bytes: &[u8]) -> Result<Self, CkksError> {
        let params = ctx.params();
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "public key",
        };
        let key = KeyId(r.header(
            KIND_PUBLIC_KEY,
            params,
            Some(HEADER + 2 * poly_bytes(params)),
        )?);
        let b = r.residues(params.basis().moduli(), params.n())?;
        let a = r.residues(params.basis().moduli(), params.n())?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            b,
            a,
            key,
        })
    }
}

impl SecretKey {
    /// The key as bytes, for its owner's own storage. The buffer holds the secret: wipe it
    /// (e.g. with `zeroize`) when done.
    pub fn to_bytes(&self) -> Vec<u8> {
        let params = self.ctx.params();
        let mut out = Vec::with_capacity(HEADER + 8 * self.s.len());
        header(&mut out, KIND_SECRET_KEY, params, self.id.get());
        put_residues(&mut out, &self.s);
        out
    }

    /// Parses a secret key for `ctx`'s parameters.
    pub fn from_bytes(ctx: &Arc<EvalContext>, bytes: &[u8]) -> Result<Self, CkksError> {
        let params = ctx.params();
        let moduli = params.key_basis().moduli();
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "secret key",
        };
        let id = KeyId(r.header(
            KIND_SECRET_KEY,
            params,
            Some(HEADER + 8 * moduli.len() * params.n()),
        )?);
        Ok(Self {
            ctx: Arc::clone(ctx),
            s: r.residues(moduli, params.n())?,
            id,
        })
    }
}

impl Party {
    /// The party (id, secret `s_i`, key share `b_i`, common-polynomial binding) as bytes, for
    /// its owner's own storage between sessions or processes. The buffer holds the secret:
    /// wipe it when done; it never goes on the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        let params = &self.params;
        let mut out = Vec::with_capacity(HEADER + 4 + 32 + 2 * poly_bytes(params));
        header(&mut out, KIND_PARTY, params, 0);
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.crs_digest);
        put_poly(&mut out, &self.sk.s);
        put_poly(&mut out, &self.b);
        out
    }

    /// Parses a party saved under `params`.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "party",
        };
        r.header(
            KIND_PARTY,
            params,
            Some(HEADER + 4 + 32 + 2 * poly_bytes(params)),
        )?;
        let id = r.u32()?;
        let crs_digest = r.digest()?;
        let s = r.poly(params)?;
        let b = r.poly(params)?;
        Ok(Party {
            id,
            params: Arc::clone(params),
            sk: PartySecret { s },
            b,
            crs_digest,
        })
    }
}

impl ThresholdParty {
    /// The member (the shares dealt to it, committee, the ciphertexts it answered for) as
    /// bytes, for its owner's storage between processes: store them before a share leaves,
    /// and never restore an older copy (docs/security.md, single-use answers). The buffer
    /// holds the secret shares and is wiped when dropped.
    pub fn to_bytes(&self) -> zeroize::Zeroizing<Vec<u8>> {
        let params = &self.params;
        let k = self.committee.members.len();
        let mut answered: Vec<&[u8; 32]> = self.answered.iter().collect();
        answered.sort_unstable();
        let len = HEADER + 12 + 4 * k + 32 + k * poly_bytes(params) + 4 + 32 * answered.len();
        let mut out = zeroize::Zeroizing::new(Vec::with_capacity(len));
        header(&mut out, KIND_THRESHOLD_PARTY, params, 0);
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&(self.committee.threshold as u32).to_le_bytes());
        put_members(&mut out, &self.committee.members);
        out.extend_from_slice(&self.crs_digest);
        for share in &self.dealt {
            put_poly(&mut out, share);
        }
        out.extend_from_slice(&(answered.len() as u32).to_le_bytes());
        for d in answered {
            out.extend_from_slice(d);
        }
        out
    }

    /// Parses a member saved under `params`.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "threshold party",
        };
        r.header(KIND_THRESHOLD_PARTY, params, None)?;
        let id = r.u32()?;
        let threshold = r.u32()? as usize;
        let k = r.member_count()?;
        let members = r.members(k)?;
        let committee = Committee::new(threshold, &members).map_err(|e| r.bad(e.to_string()))?;
        if !members.contains(&id) {
            return Err(r.bad("the committee does not include the party"));
        }
        // Every share present before any is allocated.
        let fixed = HEADER + 12 + 4 * k + 32 + k * poly_bytes(params) + 4;
        if bytes.len() < fixed {
            return Err(r.bad(format!(
                "truncated: {} bytes, at least {fixed}",
                bytes.len()
            )));
        }
        let crs_digest = r.digest()?;
        let dealt = (0..k)
            .map(|_| r.poly(params))
            .collect::<Result<Vec<_>, _>>()?;
        let a = r.u32()? as usize;
        if a > MAX_ANSWERED {
            return Err(r.bad(format!("{a} answered ciphertexts, at most {MAX_ANSWERED}")));
        }
        r.expect_len(fixed + 32 * a)?;
        let digests = (0..a).map(|_| r.digest()).collect::<Result<Vec<_>, _>>()?;
        if digests.windows(2).any(|w| w[0] >= w[1]) {
            return Err(r.bad("answered digests are not sorted and unique"));
        }
        Ok(ThresholdParty {
            id,
            params: Arc::clone(params),
            committee,
            crs_digest,
            dealt,
            answered: digests.into_iter().collect(),
        })
    }
}

impl RelinKey {
    /// The key as bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + switching_key_bytes(params, self.0.level));
        header(&mut out, KIND_RELIN_KEY, params, self.0.target.get());
        put_switching_key(&mut out, &self.0);
        out
    }

    /// Parses a relinearization key under `params`.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "relinearization key",
        };
        let owner = KeyId(r.header(KIND_RELIN_KEY, params, None)?);
        let key = r.switching_key(params, owner)?;
        r.expect_len(HEADER + switching_key_bytes(params, key.level))?;
        Ok(Self(key))
    }
}

impl GaloisKeys {
    /// The keys as bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let body: usize = self
            .keys
            .values()
            .map(|k| 8 + switching_key_bytes(params, k.key.level))
            .sum();
        let mut out = Vec::with_capacity(HEADER + 4 + body);
        let owner = self.key_id().map_or(0, KeyId::get);
        header(&mut out, KIND_GALOIS_KEYS, params, owner);
        out.extend_from_slice(&(self.keys.len() as u32).to_le_bytes());
        for (&g, key) in &self.keys {
            out.extend_from_slice(&(g as u64).to_le_bytes());
            put_switching_key(&mut out, &key.key);
        }
        out
    }

    /// Parses Galois keys for `ctx`'s parameters: elements must be odd, below `2n`, not 1,
    /// and strictly increasing.
    pub fn from_bytes(ctx: &EvalContext, bytes: &[u8]) -> Result<Self, CkksError> {
        let params = ctx.params();
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "Galois keys",
        };
        let owner = KeyId(r.header(KIND_GALOIS_KEYS, params, None)?);
        let count = r.u32()? as usize;
        if count > params.n() {
            return Err(r.bad(format!("{count} keys for ring degree {}", params.n())));
        }
        let mut keys = GaloisKeys::default();
        let mut last = 1;
        for _ in 0..count {
            let g = r.u64()?;
            let g = usize::try_from(g).map_err(|_| r.bad(format!("element {g}")))?;
            if g % 2 == 0 || g >= 2 * params.n() || g <= last {
                return Err(r.bad(format!(
                    "Galois element {g} is not odd, below 2n and above the previous one"
                )));
            }
            last = g;
            let key = r.switching_key(params, owner)?;
            keys.keys.insert(
                g,
                crate::eval::keys::GaloisKey {
                    perm: ctx.galois_permutation(g),
                    key,
                },
            );
        }
        if r.pos != bytes.len() {
            return Err(r.bad(format!(
                "oversized: {} bytes after the last key",
                bytes.len() - r.pos
            )));
        }
        Ok(keys)
    }
}

impl EncapsulationKeys {
    /// The keys as bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let len = encapsulation_bytes(params, self.to_dense.level);
        let mut out = Vec::with_capacity(len);
        header(
            &mut out,
            KIND_ENCAPSULATION_KEYS,
            params,
            self.key_id().get(),
        );
        out.extend_from_slice(&(self.weight as u32).to_le_bytes());
        out.extend_from_slice(&self.to_sparse.target.get().to_le_bytes());
        put_key_halves(&mut out, &self.to_sparse);
        put_switching_key(&mut out, &self.to_dense);
        out
    }

    /// Parses encapsulation keys under `params` (the weight must be in `1..=n`; whether it is
    /// certified is checked where the keys are made, as the security of a received key is
    /// its maker's claim).
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "encapsulation keys",
        };
        let owner = KeyId(r.header(KIND_ENCAPSULATION_KEYS, params, None)?);
        let weight = r.u32()? as usize;
        let sparse = KeyId(r.u64()?);
        if !(1..=params.n()).contains(&weight) {
            return Err(r.bad(format!("weight {weight} is not in 1..={}", params.n())));
        }
        let all = params.key_basis().moduli();
        let q_count = params.basis().moduli().len();
        if all.len() <= q_count {
            return Err(r.bad("the parameters have no key-switching prime"));
        }
        let prime = crate::eval::keys::encapsulation_prime(params, weight);
        let to_sparse = r.key_halves(all, &[0, prime], 1, params.n(), 0, sparse)?;
        let to_dense = r.switching_key(params, owner)?;
        r.expect_len(encapsulation_bytes(params, to_dense.level))?;
        Ok(Self {
            to_sparse,
            prime,
            to_dense,
            weight,
        })
    }
}
