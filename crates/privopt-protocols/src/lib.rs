//! privopt's protocols: for each method, its roles (device, client, agent, server, data owner)
//! as sans-IO state machines that take and return typed messages, and each message's versioned,
//! size-limited byte encoding ([`wire`]).
//!
//! Nothing here does I/O, spawns threads, reads files or parses configs: a simulation moves the
//! messages in memory, a deployment moves their bytes between processes or machines, and both
//! run this code. What crosses a process boundary is defined here and only here.
//!
//! | method | roles | messages |
//! |---|---|---|
//! | [`scalar_fl`] (DeComFL/HiSo, the HiSo paper) | [`scalar_fl::Client`], [`scalar_fl::Server`] | [`scalar_fl::RoundPlan`], [`scalar_fl::CatchUp`], [`scalar_fl::Reply`] |
//! | [`eezofl`] (the EEZOFL paper), over the air | [`eezofl::ExactDevice`], [`eezofl::ServerRound`] | [`eezofl::Transmission`] |
//! | [`eezofl`], digital | [`eezofl::DigitalDevice`], [`eezofl::DigitalServer`] | [`eezofl::Upload`], [`eezofl::SumBroadcast`], [`eezofl::ShareUpload`], [`eezofl::KeyRelay`] |
//! | [`dpfhe`] (DP training under FHE, the FHE paper) | [`dpfhe::DataOwner`], [`dpfhe::ComputeServer`] | [`dpfhe::EncryptedStep`], [`dpfhe::Refresh`], [`dpfhe::Weights`], evaluation keys |
//! | [`dome`] (the DOME paper) | [`dome::release`] + a SecAgg+ client, [`dome::DomeServer`] + a SecAgg+ server | [`dome::RoundBroadcast`], [`dome::BasisChunk`], the SecAgg+ messages of [`secagg`] |
//! | [`pdsgd`] (Paillier D-SGD, the Paillier D-SGD paper) | [`pdsgd::Agent`] | [`pdsgd::Request`], [`pdsgd::Response`] |
//! | [`threshold`] (setup of a t-of-N xMK-CKKS key) | [`threshold::ThresholdSetup`] | [`threshold::SealingKey`], [`threshold::SealedShare`] |

pub mod dome;
pub mod dpfhe;
pub mod eezofl;
pub mod error;
pub mod noise;
pub mod pdsgd;
pub mod scalar_fl;
pub mod secagg;
pub mod threshold;
pub mod wire;

pub use error::{Misbehavior, ProtocolError, Result};
pub use wire::{DecodeError, Message};
