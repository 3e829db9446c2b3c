//! The pairwise encrypted interaction of Ruan et al. (2019), adopted by the paper (Fig. 1), as
//! two sans-IO roles for an edge (i, j):
//!
//! 1. agent i (initiator) sends `E_i(−Q(x_i))` under its own key;
//! 2. neighbour j (responder) forms `(E_i(Q(x_j)) · E_i(−Q(x_i)))^{k_{j→i}}`
//!    `= E_i(k_{j→i}(Q(x_j) − Q(x_i)))` and returns it;
//! 3. i decrypts and scales by `w_{i→j}` and δ² (weight grid and quantization):
//!    `w̃_{i→j} w̃_{j→i} (x̃_j − x̃_i)`.
//!
//! Neither side learns the other's weight: i sees only `k_{j→i}(Q_j − Q_i)`, j only ciphertexts.

use privopt_math::StreamRng;

use super::backend::Backend;
use crate::error::Result;

/// Step 1 message: `E_i(−Q(x_i))`, one ciphertext per coordinate.
pub struct Request<C> {
    /// The initiator i.
    pub from: usize,
    /// Ciphertexts under i's key.
    pub cts: Vec<C>,
}

/// Step 2 message: `E_i(k_{j→i}(Q(x_j) − Q(x_i)))`.
pub struct Response<C> {
    /// The responder j.
    pub from: usize,
    /// Ciphertexts under the initiator's key.
    pub cts: Vec<C>,
}

/// Agent i's side of edge (i, j).
pub fn initiate<B: Backend>(
    backend: &B,
    i: usize,
    q_xi: &[i64],
    rng: &mut StreamRng,
) -> Result<Request<B::Ct>> {
    let cts = q_xi
        .iter()
        .map(|&q| backend.encrypt(i, -q, rng))
        .collect::<Result<Vec<_>>>()?;
    Ok(Request { from: i, cts })
}

/// Agent j's side: combines with its own quantized state and private weight integer `k_ji`.
pub fn respond<B: Backend>(
    backend: &B,
    j: usize,
    request: &Request<B::Ct>,
    q_xj: &[i64],
    k_ji: i64,
    rng: &mut StreamRng,
) -> Result<Response<B::Ct>> {
    let i = request.from;
    let cts = request
        .cts
        .iter()
        .zip(q_xj)
        .map(|(c, &q)| {
            let own = backend.encrypt(i, q, rng)?;
            Ok(backend.mul(i, &backend.add(i, &own, c), k_ji))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Response { from: j, cts })
}

/// Agent i finishes: `w_{i→j} · δ · δ · D_i(response)` per coordinate.
pub fn finish<B: Backend>(
    backend: &B,
    i: usize,
    response: &Response<B::Ct>,
    w_ij: f64,
    delta: f64,
) -> Result<Vec<f64>> {
    response
        .cts
        .iter()
        .map(|c| Ok(w_ij * delta * delta * backend.decrypt(i, c)? as f64))
        .collect()
}
