//! Scalar-only federated learning (the HiSo paper, DeComFL and HiSo): the roles and their messages.
//!
//! The [`Server`] samples participants and one seed per local step ([`RoundPlan`]), brings
//! each participant to the round's starting state ([`CatchUp`]: nothing, a replay of the
//! rounds it missed, or the full state), and averages their scalars ([`Reply`]). A [`Client`]
//! replays with the very function the server runs ([`ModelState::apply`]), so its model (and
//! HiSo's Hessian) is bit-identical to the server's; only seeds and scalars travel.

mod client;
mod messages;
mod private;
mod server;
mod state;
mod streams;

/// The algorithm's constants where a caller gives none: the simulator's config, the Python
/// binding's keywords (`privopt.protocols.scalar_fl.DEFAULTS`) and the Flower app's run config
/// all read them from here.
pub mod defaults {
    /// Smoothing radius μ of the finite differences.
    pub const MU: f64 = 1e-3;
    /// HiSo's EMA weight ν of the Hessian diagonal.
    pub const NU: f64 = 0.01;
    /// HiSo's floor ε of the Hessian diagonal.
    pub const HESSIAN_EPS: f64 = 1e-8;
    /// Weight decay λ of every step (none).
    pub const WEIGHT_DECAY: f64 = 0.0;
}

pub use client::{Catch, Client, Invitation, Participant, Probe};
pub use messages::{
    CatchUp, FULL_PARAM_BYTES, Reply, RoundPlan, SCALAR_BYTES, SEED_BYTES, Ticket, Update,
};
pub use private::Privacy;
pub use server::{MAX_CLIENTS, Server};
pub use state::{
    ModelState, ReplaySpec, RoundRecord, Rule, Scratch, add_scaled_direction, apply_record,
    direction_key, load_preconditioner, perturb, step_delta,
};
pub use streams::{local_batch, plan_rng};
