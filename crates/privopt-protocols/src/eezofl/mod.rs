//! EEZOFL (the EEZOFL paper): zero-order FL where each device sends one scalar per round, summed
//! under multi-key CKKS. Two paths share the scalar encoding:
//!
//! - **over the air** ([`ExactDevice`], [`ServerRound`]): the four-phase protocol of §IV in
//!   the exact model; the fading channel superposes the devices' [`Transmission`]s, so the
//!   server's phases take superpositions, and it never sees a gain;
//! - **digital** ([`DigitalDevice`], [`DigitalServer`]): the same payload under xMK-CKKS over
//!   a network, with key shares, ciphertexts and decryption shares as byte messages.

mod digital;

/// The key of round `round`'s public perturbation direction φ under the run's `seed` (what a
/// device's two-point scalar is taken along; `privopt_ml::zo::gaussian_fill` draws it).
pub fn direction_key(seed: u64, round: u64) -> [u8; 32] {
    privopt_math::SeedTree::new(seed).key("eezofl/direction", &[round])
}

mod messages;
mod ota;
mod schedule;

pub use digital::{DigitalDevice, DigitalServer, KEY_SESSION, default_threshold, encode_scalar};
pub use messages::{
    KeyRelay, MAX_DEVICES, MAX_EXP, Phase, ShareUpload, SumBroadcast, Transmission, Upload,
    key_share_from_bytes, key_share_to_bytes,
};
pub use ota::{
    AwaitCiphertexts, AwaitKeys, AwaitShares, ExactDevice, ExactSetup, Recovery, ServerRound,
    numerator_bound_bits,
};
pub use schedule::Schedule;
