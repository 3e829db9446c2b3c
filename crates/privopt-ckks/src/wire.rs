//! Byte encodings of xMK-CKKS messages, with size and parameter checks.
//!
//! Layout (little-endian): `"PVMK"`, version (1 byte), kind (1 byte), two zero bytes, the
//! 32-byte parameter fingerprint, the session (8 bytes), then
//! - shares: party (4), binding digest (32), one polynomial;
//! - ciphertexts: count (4), number of members `k` (4), `k` sorted member ids (4 each), `c0`, `c1`;
//! - leveled ([`crate::eval`]) ciphertexts: session 0, level (4), scale (8, an `f64`), then `c0`
//!   and `c1` over the first `level + 1` primes.
//!
//! A polynomial is `L · n` residues of 8 bytes, prime-major, each below its prime. Decoding
//! refuses anything else: wrong magic, version or kind, other parameters, a length that is
//! not exactly the expected one (truncated or oversized), residues out of range, unsorted or
//! duplicate members.

use std::marker::PhantomData;
use std::sync::Arc;

use privopt_math::rns::{Eval, Poly};

use crate::error::CkksError;
use crate::multiparty::{Ciphertext, Round, Share};
use crate::params::CkksParams;

const MAGIC: &[u8; 4] = b"PVMK";
const VERSION: u8 = 1;
const KIND_CIPHERTEXT: u8 = 3;
const KIND_EVAL_CIPHERTEXT: u8 = 4;
const HEADER: usize = 4 + 1 + 1 + 2 + 32 + 8;
/// Most members a ciphertext may name.
pub const MAX_MEMBERS: usize = 1 << 16;

fn poly_bytes(params: &CkksParams) -> usize {
    8 * params.n() * params.basis().moduli().len()
}

fn header(out: &mut Vec<u8>, kind: u8, params: &CkksParams, session: u64) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[VERSION, kind, 0, 0]);
    out.extend_from_slice(params.fingerprint());
    out.extend_from_slice(&session.to_le_bytes());
}

fn put_poly(out: &mut Vec<u8>, p: &Poly<Eval>) {
    for x in p.as_slice() {
        out.extend_from_slice(&x.to_le_bytes());
    }
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

    /// Checks the header and returns the session.
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
        if self.digest()? != *params.fingerprint() {
            return Err(self.bad("made under other parameters (fingerprint mismatch)"));
        }
        self.u64()
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

impl Ciphertext {
    /// The ciphertext as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let params = &self.params;
        let mut out =
            Vec::with_capacity(HEADER + 8 + 4 * self.members.len() + 2 * poly_bytes(params));
        header(&mut out, KIND_CIPHERTEXT, params, self.session);
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&(self.members.len() as u32).to_le_bytes());
        for m in &self.members {
            out.extend_from_slice(&m.to_le_bytes());
        }
        put_poly(&mut out, &self.c0);
        put_poly(&mut out, &self.c1);
        out
    }

    /// Parses a ciphertext under `params`.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = Reader {
            bytes,
            pos: 0,
            what: "ciphertext",
        };
        let session = r.header(KIND_CIPHERTEXT, params, None)?;
        let count = r.u32()?;
        let k = r.u32()? as usize;
        if k == 0 || k > MAX_MEMBERS {
            return Err(r.bad(format!("{k} members is outside 1..={MAX_MEMBERS}")));
        }
        r.expect_len(HEADER + 8 + 4 * k + 2 * poly_bytes(params))?;
        let members = (0..k).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
        if members.windows(2).any(|w| w[0] >= w[1]) {
            return Err(r.bad("member ids are not sorted and unique"));
        }
        if count == 0 {
            return Err(r.bad("a ciphertext sums at least one encryption"));
        }
        let c0 = r.poly(params)?;
        let c1 = r.poly(params)?;
        Ok(Ciphertext {
            params: Arc::clone(params),
            session,
            members,
            count,
            c0,
            c1,
        })
    }
}

impl crate::eval::Ciphertext {
    /// Encoded length of a leveled ciphertext at `level`.
    pub fn encoded_len(params: &CkksParams, level: usize) -> usize {
        HEADER + 4 + 8 + 2 * 8 * params.n() * (level + 1)
    }

    /// The ciphertext as bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::encoded_len(params, self.level));
        header(&mut out, KIND_EVAL_CIPHERTEXT, params, 0);
        out.extend_from_slice(&(self.level as u32).to_le_bytes());
        out.extend_from_slice(&self.scale.to_le_bytes());
        for x in self.c0.iter().chain(&self.c1) {
            out.extend_from_slice(&x.to_le_bytes());
        }
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
        r.header(KIND_EVAL_CIPHERTEXT, params, None)?;
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
        let n = params.n();
        let moduli = params.basis().moduli();
        let poly = |r: &mut Reader<'_>| -> Result<Vec<u64>, CkksError> {
            let mut v = Vec::with_capacity(n * (level + 1));
            for &q in &moduli[..=level] {
                for _ in 0..n {
                    let x = r.u64()?;
                    if x >= q {
                        return Err(r.bad(format!("residue {x} is not below its prime {q}")));
                    }
                    v.push(x);
                }
            }
            Ok(v)
        };
        let c0 = poly(&mut r)?;
        let c1 = poly(&mut r)?;
        Ok(Self {
            c0,
            c1,
            level,
            scale,
        })
    }
}
