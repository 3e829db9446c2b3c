//! The leveled CKKS engine: keys, encryption, and homomorphic evaluation with RNS rescaling,
//! hybrid key switching, rotations, polynomial and linear-transform evaluation, and
//! bootstrapping.
//!
//! Layout: [`context`] precomputes per-parameter tables; [`keys`] makes secret, public and
//! switching keys; [`encode`] maps real vectors to plaintexts; [`evaluator`] runs the
//! operations; key switching and the row kernels are internal.

pub mod bootstrap;
pub mod ciphertext;
pub mod context;
pub mod encode;
pub mod evaluator;
pub mod keys;
mod keyswitch;
pub mod linear;
pub mod polyeval;
mod ring;

pub use bootstrap::{BootstrapConfig, Bootstrapper, EvaluationKeys};
pub use ciphertext::{Ciphertext, KeyId, Plaintext, Product};
pub use context::EvalContext;
pub use encode::{decode, decode_complex, encode, encode_at, encode_complex_at};
pub use evaluator::Evaluator;
pub use keys::{
    EncapsulationKeys, GaloisKeys, KeyRequest, PublicKey, RelinKey, SecretKey, SwitchingKey,
};
pub use linear::{BabySteps, LinearTransform};
pub use polyeval::PolyBasis;
