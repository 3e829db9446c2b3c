//! Paillier decentralized SGD (the Paillier D-SGD paper): agents on any connected undirected [`Graph`]
//! exchange encrypted quantized states pairwise. Each [`Agent`] owns its key pair and holds
//! only its neighbours' public keys ([`KeyAnnouncement`]); an exchange is a [`Request`] and a
//! [`Response`] between two agents. The [`Scheme`] is real Paillier or, for long experiments,
//! a [`Transparent`] one with the same integer arithmetic.

mod agent;
mod graph;
mod messages;
mod schedule;
mod scheme;

pub use agent::{Agent, MAX_DIM};
pub use graph::{Graph, MAX_AGENTS};
pub use messages::{KeyAnnouncement, Request, Response};
pub use schedule::Schedule;
pub use scheme::{Paillier, Scheme, Transparent, TransparentKey};
