//! Multi-key CKKS (xMK-CKKS, Ma et al.), as used by EEZOFL (the EEZOFL paper, §III-B, App. A).
//!
//! Every party `i` holds its own secret `s_i`; nobody holds the sum.
//!
//! 1. **Keys** — party `i` publishes `b_i = −s_i·a + e_i` for the common polynomial `a`
//!    ([`CommonPoly`], expanded from a public seed). The collective key is `b̃ = Σ b_i`
//!    ([`CollectivePublicKey::aggregate`]), so `b̃ + a·Σ s_i = Σ e_i` is small.
//! 2. **Encryption** — `(c0, c1) = (v·b̃ + m + e0, v·a + e1)` with fresh ternary `v` and
//!    Gaussian `e0, e1`. Ciphertexts under the same key add up ([`Ciphertext::sum`]).
//! 3. **Partial decryption** — party `i` returns `D_i = s_i·C1 + e*_i` with smudging noise
//!    `e*_i ~ N(0, σ*²)` ([`Party::partial_decrypt`]).
//! 4. **Fusion** — `C0 + Σ D_i = Σ m + v·Σe + e0 + (Σs)·e1 + Σe*`: the `q`-size terms cancel
//!    and the message sum remains ([`fuse`]).
//!
//! Shares carry their round in their type ([`Share<KeyRound>`], [`Share<DecryptRound>`]), a
//! session number (the protocol round, e.g. the FL round), and a *binding*: the digest of the
//! common polynomial (key shares) or of the ciphertext (decryption shares). A
//! [`ShareCollector`] checks each share as it arrives — member, session, binding, duplicate —
//! and [`ShareCollector::finish`] refuses to combine while a member's share is missing.
//! Everything is sans-IO: parties and collectors take and return messages; [`crate::wire`]
//! turns messages into bytes and back.
//!
//! A threshold key ([`Committee`], [`ThresholdParty`]) lets any `t` of the `N` parties
//! decrypt: each party Shamir-shares its secret once at setup, and a decryption asks an
//! [`ActiveSet`] of at least `t` members, each answering at most once per ciphertext.

pub(crate) mod cipher;
mod dealing;
mod model;
mod party;
mod shares;
mod threshold;

pub use cipher::{Ciphertext, CollectivePublicKey, Decrypted, encrypt_with_key, fuse, lift_log2};
pub use dealing::{DealingAnswer, DealingCheck, failed_dealers, verify_dealing};
pub use model::{EncryptedModel, ModelCodec};
pub use party::{CommonPoly, Party, SecretKey, decryption_share, partial_public_key};
pub use shares::{
    DecryptRound, DecryptionShare, KeyRound, PublicKeyShare, Round, Share, ShareCollector,
    SharingRound,
};
pub use threshold::{
    ActiveSet, Committee, MAX_ANSWERED, SecretShare, SmudgingBound, ThresholdParty, batch_digest,
    fuse_threshold, fuse_threshold_batch, model_smudging_for_distance, smudging_for_distance,
};

/// Identifier of a party (device).
pub type PartyId = u32;
