//! DP training under FHE (the FHE paper, Algorithms 4 and 5 of App. F): the [`DataOwner`] holds
//! the secret key and encrypts each step's batch, labels and pre-sampled DP noise; the
//! [`ComputeServer`] holds evaluation keys only and runs the step on ciphertexts. The step is
//! resumable: when a ciphertext lacks the levels its next stage needs, the server returns it
//! as a refresh request ([`StepStatus::NeedsRefresh`]) and continues once the owner's answer
//! comes back. Each such round trip is counted; the owner learns nothing it did not have,
//! and the server sees ciphertexts only. A server given bootstrapping keys
//! ([`ComputeServer::bootstrapping`]) refreshes by itself: the owner encrypts its data
//! and goes offline until it decrypts the final model (the FHE paper's setting).
//!
//! **Packing.** A whole batch goes into one ciphertext ([`Layout`]); the paper encrypts one
//! example per ciphertext. The arithmetic is the same with ~100× fewer ciphertext operations.

mod circuit;
mod messages;
mod owner;
mod server;

pub use circuit::{Barrier, ClipCircuit, Layout, StageDepths, TrainingCircuit};
pub use messages::{
    EncryptedStep, Refresh, Weights, encapsulation_keys_from_bytes, encapsulation_keys_to_bytes,
    galois_key_from_bytes, galois_keys_to_messages, relin_key_from_bytes, relin_key_to_bytes,
};
pub use owner::DataOwner;
pub use server::{Bootstrappers, ComputeServer, Step, StepStatus};
