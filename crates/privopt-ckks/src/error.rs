//! The crate's error type: each rejection has its own variant, so callers and tests can tell
//! them apart.

use privopt_math::MathError;

/// Everything CKKS and xMK-CKKS can reject.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum CkksError {
    /// The parameters exceed the homomorphic-encryption standard's 128-bit bound.
    #[error(
        "insecure parameters: n = {n} allows log2 q <= {max_log_q} for 128-bit security, got {log_q:.1} (set insecure_for_testing to use them anyway)"
    )]
    Insecure {
        /// Ring degree.
        n: usize,
        /// log2 of the ciphertext modulus.
        log_q: f64,
        /// The standard's bound for this n.
        max_log_q: u32,
    },
    /// A noise parameter below privopt's policy (the key error σ, the decryption-share
    /// smudging), asked for without `insecure_for_testing`.
    #[error("insecure parameters: {0} (set insecure_for_testing to use them anyway)")]
    WeakNoise(String),
    /// Inconsistent or out-of-range parameters.
    #[error("invalid parameters: {0}")]
    InvalidParams(String),
    /// Arithmetic-layer failure.
    #[error(transparent)]
    Math(#[from] MathError),
    /// A value cannot be encoded at this scale.
    #[error("cannot encode: {0}")]
    Encoding(String),
    /// The decrypted value is too large to decode (wrap-around or a broken protocol run).
    #[error(
        "decryption failed: coefficient {index} is not small (noise or message exceeded the modulus)"
    )]
    DecodeOverflow {
        /// The coefficient that failed.
        index: usize,
    },
    /// A party whose share is required did not send one.
    #[error("missing share from party {party}")]
    MissingShare {
        /// The absent party.
        party: u32,
    },
    /// A party sent two shares.
    #[error("duplicate share from party {party}")]
    DuplicateShare {
        /// The party.
        party: u32,
    },
    /// A second decryption request for a ciphertext a threshold party has answered for.
    #[error(
        "party {party} has already answered a decryption request for this ciphertext: \
         a retry needs a fresh encryption"
    )]
    AlreadyAnswered {
        /// The party asked again.
        party: u32,
    },
    /// A second dealing check for a member that has answered one for its setup.
    #[error(
        "party {party} has already answered this setup's dealing check: it answers one per setup"
    )]
    DealingChecked {
        /// The party asked again.
        party: u32,
    },
    /// A dealer whose Shamir shares fail the dealing check: they lie on no polynomial of
    /// degree below the threshold whose constant is the secret of its key share.
    #[error(
        "party {dealer} dealt shares that fail the dealing check (no polynomial of degree < t \
         through them has its key's secret as constant): leave it out and set up again"
    )]
    BadDealing {
        /// The dealer.
        dealer: u32,
    },
    /// A share from a party that is not part of the key.
    #[error("share from party {party}, which is not a member of this key")]
    UnknownParty {
        /// The party.
        party: u32,
    },
    /// A share made in another session (protocol round).
    #[error("share from party {party} belongs to session {got}, expected session {expected}")]
    WrongSession {
        /// The party.
        party: u32,
        /// The session the share claims.
        got: u64,
        /// The session being aggregated.
        expected: u64,
    },
    /// A share made for another ciphertext (or another CRS for key shares).
    #[error("share from party {party} was made for another {what}")]
    WrongBinding {
        /// The party.
        party: u32,
        /// `"ciphertext"` or `"common polynomial"`.
        what: &'static str,
    },
    /// Ciphertexts under different keys or sessions cannot be added.
    #[error("ciphertexts do not match: {0}")]
    Mismatch(String),
    /// Bytes that are not a valid message.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// The message type.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// An operation needs more levels than the ciphertext has left.
    #[error("out of levels: {0}")]
    LevelExhausted(String),
    /// Two operands whose scales differ (the level-scale invariant was broken).
    #[error("scale mismatch: {0}")]
    ScaleMismatch(String),
    /// An evaluation key the operation needs was not generated.
    #[error("missing evaluation key: {0}")]
    MissingKey(String),
}
