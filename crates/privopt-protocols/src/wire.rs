//! The framing every protocol message shares, and a reader that turns hostile bytes into
//! [`DecodeError`]s.
//!
//! Layout (little-endian): `"PVPR"`, format version (1 byte), method (1 byte), message kind
//! (1 byte), a zero byte, the message's fields, and an 8-byte checksum (the first bytes of
//! BLAKE3 over everything before it). Counts are `u32` and are checked against the bytes that
//! remain before anything is allocated, so a decoder never reserves more than the input's own
//! size; the fields must end exactly where the checksum begins. No message may exceed
//! [`MAX_MESSAGE_BYTES`].
//!
//! The checksum catches corruption on the way (a relay, a truncated read, a flipped bit), not
//! forgery: anyone can recompute it, so every field is still validated, and authenticity is the
//! transport's job (TLS) or the protocol's own (SecAgg+ shares).

/// Magic prefix of every message.
pub const MAGIC: &[u8; 4] = b"PVPR";
/// Version of the framing and of every message layout below it.
pub const VERSION: u8 = 2;
/// Bytes of the frame header.
pub const HEADER_BYTES: usize = 8;
/// Bytes of the checksum that ends every frame.
pub const CHECKSUM_BYTES: usize = 8;
/// Largest message any decoder accepts (64 MiB).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Which method's message a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Method {
    /// EEZOFL (the EEZOFL paper).
    Eezofl = 1,
    /// Paillier decentralized SGD (the Paillier D-SGD paper).
    Pdsgd = 2,
    /// DP training under FHE (the FHE paper).
    Dpfhe = 3,
    /// Scalar-only FL, DeComFL/HiSo (the HiSo paper).
    ScalarFl = 4,
    /// DOME (the DOME paper).
    Dome = 5,
    /// SecAgg+ (what DOME sums with).
    SecAgg = 6,
    /// Objects a user keeps or moves outside any protocol (Paillier arrays, CKKS ciphertexts
    /// from Python): the same framing and checksum, with [`MAX_STANDALONE_BYTES`] as the limit.
    Standalone = 7,
    /// The setup round of a threshold xMK-CKKS key (sealing keys, sealed Shamir shares).
    Threshold = 8,
}

/// Kinds of [`Method::Standalone`] frames.
pub mod standalone {
    /// A Paillier encrypted array (the Python `EncryptedArray`).
    pub const PAILLIER_ARRAY: u8 = 1;
    /// A leveled CKKS ciphertext (the Python `ckks.Ciphertext`): its own encoding, nested.
    pub const CKKS_CIPHERTEXT: u8 = 2;
}

/// Largest standalone object a decoder accepts (4 GiB: a user's own storage, not a peer's
/// message).
pub const MAX_STANDALONE_BYTES: usize = 4 << 30;

/// Why bytes were refused. Decoding changes no state, so the caller may drop the message
/// and carry on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than the layout needs.
    #[error("{what}: truncated ({len} bytes, a field ends at {needed})")]
    Truncated {
        /// The message type.
        what: &'static str,
        /// Bytes given.
        len: usize,
        /// Where the field being read ends.
        needed: usize,
    },
    /// Bytes after the last field.
    #[error("{what}: {extra} bytes after the end of the message")]
    Trailing {
        /// The message type.
        what: &'static str,
        /// How many.
        extra: usize,
    },
    /// More than [`MAX_MESSAGE_BYTES`] ([`MAX_STANDALONE_BYTES`] for standalone objects).
    #[error("{what}: {len} bytes exceeds the {limit}-byte limit")]
    TooLarge {
        /// The message type.
        what: &'static str,
        /// Bytes given.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The checksum does not match: the bytes were damaged on the way.
    #[error("{what}: checksum mismatch (damaged in transit)")]
    Checksum {
        /// The message type expected.
        what: &'static str,
    },
    /// Not a privopt message.
    #[error("{what}: bad magic (not a privopt protocol message)")]
    BadMagic {
        /// The message type expected.
        what: &'static str,
    },
    /// A format version this build does not read.
    #[error("{what}: format version {version}, this build reads version {VERSION}")]
    Version {
        /// The message type expected.
        what: &'static str,
        /// The version in the frame.
        version: u8,
    },
    /// Another method's or another kind's message.
    #[error(
        "{what}: frame holds method {method} kind {kind}, expected method {expected_method} kind {expected_kind}"
    )]
    WrongKind {
        /// The message type expected.
        what: &'static str,
        /// Method byte found.
        method: u8,
        /// Kind byte found.
        kind: u8,
        /// Method byte expected.
        expected_method: u8,
        /// Kind byte expected.
        expected_kind: u8,
    },
    /// A field holds a value the layout forbids.
    #[error("{what}: {reason}")]
    Invalid {
        /// The message type.
        what: &'static str,
        /// Which field and why.
        reason: String,
    },
}

/// A message with a byte encoding.
pub trait Message: Sized {
    /// The method the message belongs to.
    const METHOD: Method;
    /// Its kind within the method.
    const KIND: u8;
    /// Its name in errors.
    const NAME: &'static str;

    /// Writes the fields (after the header).
    fn write_fields(&self, w: &mut Writer);
    /// Reads the fields (after the header); must consume exactly what `write_fields` wrote.
    fn read_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// The framed bytes.
    fn to_bytes(&self) -> Vec<u8> {
        encode(Self::METHOD, Self::KIND, |w| self.write_fields(w))
    }

    /// Parses framed bytes, refusing anything but exactly one well-formed message.
    fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        decode(
            bytes,
            Self::NAME,
            Self::METHOD,
            Self::KIND,
            Self::read_fields,
        )
    }
}

/// Frames the fields `write` appends: header, fields, checksum. For messages whose encoding
/// needs context (a key), which cannot implement [`Message`].
pub fn encode(method: Method, kind: u8, write: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64));
    w.0.extend_from_slice(MAGIC);
    w.0.extend_from_slice(&[VERSION, method as u8, kind, 0]);
    write(&mut w);
    let sum = checksum(&w.0);
    w.0.extend_from_slice(&sum);
    w.0
}

/// Checks size, checksum and header of `bytes`, reads the fields with `read`, and refuses
/// bytes left over. `what` names the message in errors.
pub fn decode<T>(
    bytes: &[u8],
    what: &'static str,
    method: Method,
    kind: u8,
    read: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let limit = match method {
        Method::Standalone => MAX_STANDALONE_BYTES,
        _ => MAX_MESSAGE_BYTES,
    };
    let body = verify_checksum(bytes, what, limit)?;
    let mut r = Reader::new(body, what);
    r.header(method as u8, kind)?;
    let msg = read(&mut r)?;
    r.finish()?;
    Ok(msg)
}

/// The checksum of `framed` (header and fields).
fn checksum(framed: &[u8]) -> [u8; CHECKSUM_BYTES] {
    let mut out = [0u8; CHECKSUM_BYTES];
    out.copy_from_slice(&blake3::hash(framed).as_bytes()[..CHECKSUM_BYTES]);
    out
}

/// Header and fields of `bytes` once its size and checksum are right.
fn verify_checksum<'a>(
    bytes: &'a [u8],
    what: &'static str,
    limit: usize,
) -> Result<&'a [u8], DecodeError> {
    if bytes.len() > limit {
        return Err(DecodeError::TooLarge {
            what,
            len: bytes.len(),
            limit,
        });
    }
    let Some(split) = bytes
        .len()
        .checked_sub(CHECKSUM_BYTES)
        .filter(|&s| s >= HEADER_BYTES)
    else {
        return Err(DecodeError::Truncated {
            what,
            len: bytes.len(),
            needed: HEADER_BYTES + CHECKSUM_BYTES,
        });
    };
    let (body, sum) = bytes.split_at(split);
    if checksum(body) != sum {
        return Err(DecodeError::Checksum { what });
    }
    Ok(body)
}

/// Appends fields.
#[derive(Debug, Default)]
pub struct Writer(Vec<u8>);

impl Writer {
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    /// A `u32`.
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u64`.
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// An `f64` (its IEEE bits).
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    /// A length or index that fits `u32` by the invariants of the message's type.
    pub fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    /// A count, then the `u64`s.
    pub fn u64s(&mut self, v: &[u64]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.u64(x));
    }
    /// A count, then the `u32`s, written in one pass (a masked input is millions of them).
    pub fn u32s(&mut self, v: &[u32]) {
        self.len(v.len());
        let start = self.0.len();
        self.0.resize(start + 4 * v.len(), 0);
        for (dst, x) in self.0[start..].chunks_exact_mut(4).zip(v) {
            dst.copy_from_slice(&x.to_le_bytes());
        }
    }
    /// A count, then the `f32`s.
    pub fn f32s(&mut self, v: &[f32]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.u32(x.to_bits()));
    }
    /// A count, then the `f64`s.
    pub fn f64s(&mut self, v: &[f64]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.f64(x));
    }
    /// A count, then the bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.len(v.len());
        self.raw(v);
    }
    /// Bytes as they are (a fixed-width field).
    pub fn raw(&mut self, v: &[u8]) {
        self.0.extend_from_slice(v);
    }
}

/// A cursor over untrusted bytes.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over the header and fields of a frame whose size and checksum are checked.
    fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Self {
            bytes,
            pos: 0,
            what,
        }
    }

    /// An [`DecodeError::Invalid`] naming this message.
    pub fn invalid(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError::Invalid {
            what: self.what,
            reason: reason.into(),
        }
    }

    fn take(&mut self, k: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.saturating_add(k);
        let s = self
            .bytes
            .get(self.pos..end)
            .ok_or(DecodeError::Truncated {
                what: self.what,
                len: self.bytes.len(),
                needed: end,
            })?;
        self.pos = end;
        Ok(s)
    }

    /// `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn header(&mut self, method: u8, kind: u8) -> Result<(), DecodeError> {
        if self.take(4)? != MAGIC {
            return Err(DecodeError::BadMagic { what: self.what });
        }
        let [version, m, k, reserved] = self.array::<4>()?;
        if version != VERSION {
            return Err(DecodeError::Version {
                what: self.what,
                version,
            });
        }
        if (m, k) != (method, kind) {
            return Err(DecodeError::WrongKind {
                what: self.what,
                method: m,
                kind: k,
                expected_method: method,
                expected_kind: kind,
            });
        }
        if reserved != 0 {
            return Err(self.invalid("reserved header byte is not zero"));
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), DecodeError> {
        match self.bytes.len() - self.pos {
            0 => Ok(()),
            extra => Err(DecodeError::Trailing {
                what: self.what,
                extra,
            }),
        }
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    /// A `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// A `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// A finite `f64`.
    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        let v = f64::from_bits(self.u64()?);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(self.invalid(format!("non-finite number {v}")))
        }
    }
    /// A flag byte, 0 or 1.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.invalid(format!("flag byte {b} is neither 0 nor 1"))),
        }
    }
    /// A `u32` index or length.
    pub fn index(&mut self) -> Result<usize, DecodeError> {
        Ok(self.u32()? as usize)
    }
    /// A count of items of `item_bytes` each, refused if the rest of the input cannot hold
    /// them (so nothing is allocated for a lying count).
    pub fn count(&mut self, item_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.index()?;
        let rest = self.bytes.len() - self.pos;
        if n.saturating_mul(item_bytes.max(1)) > rest {
            return Err(DecodeError::Truncated {
                what: self.what,
                len: self.bytes.len(),
                needed: self.pos.saturating_add(n.saturating_mul(item_bytes.max(1))),
            });
        }
        Ok(n)
    }
    /// A count, then that many `u64`s.
    pub fn u64s(&mut self) -> Result<Vec<u64>, DecodeError> {
        let n = self.count(8)?;
        (0..n).map(|_| self.u64()).collect()
    }
    /// A count, then that many finite `f32`s.
    pub fn f32s(&mut self) -> Result<Vec<f32>, DecodeError> {
        let n = self.count(4)?;
        (0..n)
            .map(|_| {
                let v = f32::from_bits(self.u32()?);
                if v.is_finite() {
                    Ok(v)
                } else {
                    Err(self.invalid(format!("non-finite scalar {v}")))
                }
            })
            .collect()
    }
    /// A count, then that many finite `f64`s.
    pub fn f64s(&mut self) -> Result<Vec<f64>, DecodeError> {
        let n = self.count(8)?;
        (0..n).map(|_| self.f64()).collect()
    }
    /// A count, then that many bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.count(1)?;
        self.take(n)
    }
    /// Exactly `k` bytes (a fixed-width field).
    pub fn fixed(&mut self, k: usize) -> Result<&'a [u8], DecodeError> {
        self.take(k)
    }

    /// `n` `u32`s (a count the caller has read and bounded), read in one pass.
    pub fn u32s(&mut self, n: usize) -> Result<Vec<u32>, DecodeError> {
        let bytes = self.take(
            n.checked_mul(4)
                .ok_or_else(|| self.invalid("too many words"))?,
        )?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

/// Helpers for the decoder tests of each method: every way a message's bytes can be damaged
/// in transit, and forged frames (fields changed, checksum recomputed) for field validation.
/// Behind the `testing` feature: not part of the protocol API.
#[cfg(feature = "testing")]
pub mod damage {
    use super::{CHECKSUM_BYTES, DecodeError, HEADER_BYTES, checksum};

    /// Truncations (every prefix of a short message; of a long one the first and last 64
    /// lengths and about `spread` more between), the message with one extra byte, and
    /// single-bit flips of every header bit and of about `spread` bytes across the rest.
    pub fn in_transit(bytes: &[u8], spread: usize) -> Vec<(String, Vec<u8>)> {
        let len = bytes.len();
        let step = (len / spread.max(1)).max(1);
        let mut cuts: Vec<usize> = if len <= 1024 {
            (0..len).collect()
        } else {
            (0..64)
                .chain((64..len - 64).step_by(step))
                .chain(len - 64..len)
                .collect()
        };
        cuts.dedup();
        let mut out: Vec<(String, Vec<u8>)> = cuts
            .into_iter()
            .map(|k| (format!("truncated to {k}"), bytes[..k].to_vec()))
            .collect();
        let mut longer = bytes.to_vec();
        longer.push(0);
        out.push(("extended by one byte".into(), longer));
        let head = 0..HEADER_BYTES.min(len);
        for at in head.chain((HEADER_BYTES..len).step_by(step)) {
            for bit in 0..8 {
                let mut b = bytes.to_vec();
                b[at] ^= 1 << bit;
                out.push((format!("bit {bit} of byte {at} flipped"), b));
            }
        }
        out
    }

    /// Feeds every [`in_transit`] damage of `bytes` to `decode` (which tries one or several
    /// decoders) and describes the first damaged copy that was accepted or refused with
    /// anything but a transit error (truncated, trailing bytes, checksum); `None` if all were
    /// refused as they should be.
    pub fn first_mishandled(
        bytes: &[u8],
        spread: usize,
        decode: impl Fn(&[u8]) -> Vec<Result<(), DecodeError>>,
    ) -> Option<String> {
        in_transit(bytes, spread)
            .into_iter()
            .find_map(|(how, bad)| {
                decode(&bad).into_iter().find_map(|r| match r {
                    Ok(()) => Some(format!("{how}: decoded")),
                    Err(
                        DecodeError::Truncated { .. }
                        | DecodeError::Trailing { .. }
                        | DecodeError::Checksum { .. },
                    ) => None,
                    Err(e) => Some(format!("{how}: {e}")),
                })
            })
    }

    /// `bytes` with its fields replaced by `edit(fields)` and a valid checksum: what a
    /// malicious peer (not a noisy link) can send.
    pub fn forge(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let end = bytes
            .len()
            .saturating_sub(CHECKSUM_BYTES)
            .max(HEADER_BYTES.min(bytes.len()));
        let mut framed = bytes[..end].to_vec();
        let mut fields = framed.split_off(HEADER_BYTES.min(framed.len()));
        edit(&mut fields);
        framed.extend_from_slice(&fields);
        let sum = checksum(&framed);
        framed.extend_from_slice(&sum);
        framed
    }
}
