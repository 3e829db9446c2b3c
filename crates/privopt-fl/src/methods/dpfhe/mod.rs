//! DP training under FHE, plaintext side (paper 002, §3–6, App. D): logistic regression with
//! polynomial sigmoid approximations, DP without clipping through a barrier term (Algorithm 3),
//! Theorem 3's conditions and the data-independent parameter selection of App. D.3, the
//! clipping and output-perturbation baselines, and the Table 3 / Table 4 / Fig. 4–5 suites.

pub mod algorithms;
pub mod data;
pub mod encrypted;
mod gap;
pub mod logreg;
pub mod suite;
pub mod theorem;

pub use suite::{DpfheConfig, Experiment};
