//! DP training under FHE (the FHE paper, §3–6, App. D): logistic regression with polynomial
//! sigmoid approximations, DP without clipping through a barrier term (Algorithm 3), Theorem 3's
//! conditions and the data-independent parameter selection of App. D.3, the clipping and
//! output-perturbation baselines, and the encrypted Algorithms 4/5 driven through the data
//! owner and compute server roles. The Table 3 / Table 4 / Fig. 4–5 suites that use them live
//! in `privopt-experiments`.

pub mod algorithms;
pub mod data;
pub mod encrypted;
pub mod estimator;
pub mod logreg;
pub mod plan;
pub mod theorem;
