//! An agent of the pairwise encrypted exchange (Ruan et al. 2019, adopted by the Paillier D-SGD paper,
//! Fig. 1), for an edge (i, j):
//!
//! 1. i ([`Agent::initiate`]) sends `E_i(−Q(x_i))` under its own key;
//! 2. j ([`Agent::respond`]) forms `(E_i(Q(x_j)) · E_i(−Q(x_i)))^{k_{j→i}}`
//!    `= E_i(k_{j→i}(Q(x_j) − Q(x_i)))` with i's public key and returns it;
//! 3. i ([`Agent::finish`]) decrypts and scales by `w_{i→j} = k_{i→j} δ` and δ² (weight grid
//!    and quantization): `w̃_{i→j} w̃_{j→i} (x̃_j − x̃_i)`.
//!
//! Neither side learns the other's weight: i sees only `k_{j→i}(Q_j − Q_i)`, j only
//! ciphertexts. An agent owns its key pair and holds only its neighbours' public keys, so it
//! can decrypt nothing but what is encrypted to it.

use std::collections::BTreeMap;

use rand::CryptoRng;

use super::graph::MAX_AGENTS;
use super::messages::{
    KIND_AGENT_STATE, KIND_REQUEST, KIND_RESPONSE, KeyAnnouncement, Request, Response,
    decode_exchange, encode_exchange,
};
use super::scheme::Scheme;
use crate::error::{Misbehavior, Peer, ProtocolError, Result, check_param, misbehaved};
use crate::wire::{self, DecodeError, Method, Reader};

/// Largest state dimension an exchange may carry.
pub const MAX_DIM: usize = 1 << 20;

struct Neighbour<K> {
    key: K,
    /// `k_{i→j}`: this agent's private weight integer towards the neighbour.
    weight: i64,
}

/// Agent i: its own key pair, its neighbours' public keys and its private weights towards
/// them, and the exchanges it has started and not yet finished.
pub struct Agent<S: Scheme> {
    id: usize,
    public: S::PublicKey,
    secret: S::SecretKey,
    neighbours: BTreeMap<usize, Neighbour<S::PublicKey>>,
    /// Open exchanges: neighbour → (iteration, dimension).
    pending: BTreeMap<usize, (u64, usize)>,
}

impl<S: Scheme> std::fmt::Debug for Agent<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.id)
            .field("neighbours", &self.neighbours.keys().collect::<Vec<_>>())
            .field("secret", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl<S: Scheme> Agent<S> {
    /// Agent `id` with its own key pair and no neighbours yet.
    pub fn new(id: usize, public: S::PublicKey, secret: S::SecretKey) -> Self {
        Self {
            id,
            public,
            secret,
            neighbours: BTreeMap::new(),
            pending: BTreeMap::new(),
        }
    }

    /// The agent's id.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The agent's whole state (key pair, neighbours' keys, private weights, open exchanges)
    /// as bytes, so another process can [`Agent::restore`] it. Keep them as secret as the
    /// agent: they hold its secret key and weights.
    pub fn save(&self) -> Vec<u8> {
        wire::encode(Method::Pdsgd, KIND_AGENT_STATE, |w| {
            w.len(self.id);
            S::write_public_key(&self.public, w);
            S::write_secret_key(&self.secret, w);
            w.len(self.neighbours.len());
            for (&j, n) in &self.neighbours {
                w.len(j);
                S::write_public_key(&n.key, w);
                w.u64(n.weight as u64);
            }
            w.len(self.pending.len());
            for (&j, &(iteration, dim)) in &self.pending {
                w.len(j);
                w.u64(iteration);
                w.len(dim);
            }
        })
    }

    /// The agent [`Agent::save`] wrote; refuses bytes no agent could have written.
    pub fn restore(bytes: &[u8]) -> std::result::Result<Self, DecodeError> {
        wire::decode(
            bytes,
            "pdsgd agent state",
            Method::Pdsgd,
            KIND_AGENT_STATE,
            |r| {
                let agent = |r: &mut Reader<'_>| {
                    let a = r.index()?;
                    if a >= MAX_AGENTS {
                        return Err(r.invalid(format!("agent {a} is not below {MAX_AGENTS}")));
                    }
                    Ok(a)
                };
                let id = agent(r)?;
                let public = S::read_public_key(r)?;
                let secret = S::read_secret_key(&public, r)?;
                let mut neighbours = BTreeMap::new();
                for _ in 0..r.count(12)? {
                    let j = agent(r)?;
                    let key = S::read_public_key(r)?;
                    let weight = r.u64()? as i64;
                    if j == id
                        || weight < 1
                        || neighbours.insert(j, Neighbour { key, weight }).is_some()
                    {
                        return Err(
                            r.invalid(format!("neighbour {j}: self, repeated or weight < 1"))
                        );
                    }
                }
                let mut pending = BTreeMap::new();
                for _ in 0..r.count(16)? {
                    let j = agent(r)?;
                    let (iteration, dim) = (r.u64()?, r.index()?);
                    if !neighbours.contains_key(&j)
                        || dim > MAX_DIM
                        || pending.insert(j, (iteration, dim)).is_some()
                    {
                        return Err(r.invalid(format!(
                            "open exchange with {j}: not a neighbour, too large or repeated"
                        )));
                    }
                }
                Ok(Self {
                    id,
                    public,
                    secret,
                    neighbours,
                    pending,
                })
            },
        )
    }

    /// What neighbours need to encrypt to this agent.
    pub fn announcement(&self) -> KeyAnnouncement<S::PublicKey> {
        KeyAnnouncement {
            agent: self.id,
            key: self.public.clone(),
        }
    }

    /// Accepts neighbour `j` with its announced key and this agent's private weight integer
    /// `k_{i→j} ≥ 1` towards it.
    pub fn add_neighbour(&mut self, key: KeyAnnouncement<S::PublicKey>, weight: i64) -> Result<()> {
        let j = key.agent;
        check_param(j != self.id, || {
            format!("agent {} cannot be its own neighbour", self.id)
        })?;
        check_param(weight >= 1, || {
            format!(
                "agent {}'s weight towards {j} must be >= 1, got {weight}",
                self.id
            )
        })?;
        check_param(!self.neighbours.contains_key(&j), || {
            format!("agent {} already has neighbour {j}", self.id)
        })?;
        self.neighbours.insert(
            j,
            Neighbour {
                key: key.key,
                weight,
            },
        );
        Ok(())
    }

    fn neighbour(&self, j: usize) -> Result<&Neighbour<S::PublicKey>> {
        self.neighbours.get(&j).ok_or_else(|| {
            misbehaved(
                Peer::Party(j as u64),
                Misbehavior::NotParticipant,
                format!("is not a neighbour of agent {}", self.id),
            )
        })
    }

    /// Step 1 towards neighbour `to` in `iteration`: `E_i(−q_i)` for the quantized state
    /// `q_i` (units of δ). Opens the exchange; a second request to the same neighbour in the
    /// same iteration is an error, one in a later iteration abandons the unanswered one (its
    /// response, should it come, is refused).
    pub fn initiate(
        &mut self,
        to: usize,
        iteration: u64,
        q_own: &[i64],
        rng: &mut impl CryptoRng,
    ) -> Result<Request<S::Ct>> {
        self.neighbour(to).map_err(|_| {
            ProtocolError::OutOfOrder(format!("agent {} has no neighbour {to}", self.id))
        })?;
        check_param(!q_own.is_empty() && q_own.len() <= MAX_DIM, || {
            format!(
                "state dimension must be in 1..={MAX_DIM}, got {}",
                q_own.len()
            )
        })?;
        if let Some(&(open, _)) = self.pending.get(&to)
            && open >= iteration
        {
            return Err(ProtocolError::OutOfOrder(format!(
                "agent {} already awaits a response from {to} in iteration {open}",
                self.id
            )));
        }
        let cts = q_own
            .iter()
            .map(|&q| {
                let neg = q.checked_neg().ok_or_else(|| {
                    ProtocolError::Parameters(format!("quantized value {q} cannot be negated"))
                })?;
                S::encrypt(&self.public, neg, rng)
            })
            .collect::<Result<Vec<_>>>()?;
        self.pending.insert(to, (iteration, q_own.len()));
        Ok(Request {
            from: self.id,
            to,
            iteration,
            cts,
        })
    }

    /// Step 2: answers neighbour i's request with its own quantized state `q_own` and its
    /// private weight `k_{j→i}`, under i's public key. Stateless: it keeps nothing.
    pub fn respond(
        &self,
        request: &Request<S::Ct>,
        q_own: &[i64],
        rng: &mut impl CryptoRng,
    ) -> Result<Response<S::Ct>> {
        let i = request.from;
        let peer = Peer::Party(i as u64);
        if request.to != self.id {
            return Err(misbehaved(
                peer,
                Misbehavior::Misaddressed,
                format!("sent agent {} a request meant for {}", self.id, request.to),
            ));
        }
        let n = self.neighbour(i)?;
        if request.cts.len() != q_own.len() {
            return Err(misbehaved(
                peer,
                Misbehavior::Malformed,
                format!(
                    "sent {} ciphertexts for a state of dimension {}",
                    request.cts.len(),
                    q_own.len()
                ),
            ));
        }
        let cts = request
            .cts
            .iter()
            .zip(q_own)
            .map(|(c, &q)| {
                let own = S::encrypt(&n.key, q, rng)?;
                S::mul(&n.key, &S::add(&n.key, &own, c)?, n.weight)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Response {
            from: self.id,
            to: i,
            iteration: request.iteration,
            cts,
        })
    }

    /// Step 3: decrypts neighbour j's response to the open exchange and returns
    /// `w_{i→j} δ · δ · D_i(c)` per coordinate (with `w_{i→j} = k_{i→j} δ`). Closes the
    /// exchange only on success, so a bad response can be dropped and the right one awaited.
    pub fn finish(&mut self, response: &Response<S::Ct>, delta: f64) -> Result<Vec<f64>> {
        let j = response.from;
        let peer = Peer::Party(j as u64);
        if response.to != self.id {
            return Err(misbehaved(
                peer,
                Misbehavior::Misaddressed,
                format!(
                    "sent agent {} a response meant for {}",
                    self.id, response.to
                ),
            ));
        }
        let Some(&(iteration, dim)) = self.pending.get(&j) else {
            return Err(misbehaved(
                peer,
                Misbehavior::Unsolicited,
                format!("answered agent {}, which asked it nothing", self.id),
            ));
        };
        if response.iteration != iteration || response.cts.len() != dim {
            return Err(misbehaved(
                peer,
                Misbehavior::Malformed,
                format!(
                    "answered iteration {} with {} values; the open exchange is iteration \
                     {iteration} with {dim}",
                    response.iteration,
                    response.cts.len()
                ),
            ));
        }
        let w_ij = self.neighbour(j)?.weight as f64 * delta;
        let out = response
            .cts
            .iter()
            .map(|c| Ok(w_ij * delta * delta * S::decrypt(&self.secret, c)? as f64))
            .collect::<Result<Vec<f64>>>()?;
        self.pending.remove(&j);
        Ok(out)
    }

    /// The bytes of a request this agent made (ciphertexts under its own key).
    pub fn encode_request(&self, request: &Request<S::Ct>) -> Vec<u8> {
        encode_exchange::<S>(
            KIND_REQUEST,
            &self.public,
            request.from,
            request.to,
            request.iteration,
            &request.cts,
        )
    }

    /// The bytes of a response this agent made (ciphertexts under the initiator's key).
    pub fn encode_response(&self, response: &Response<S::Ct>) -> Result<Vec<u8>> {
        let key = &self.neighbour(response.to)?.key;
        Ok(encode_exchange::<S>(
            KIND_RESPONSE,
            key,
            response.from,
            response.to,
            response.iteration,
            &response.cts,
        ))
    }

    /// Decodes a request sent to this agent, validating its ciphertexts under the sender's
    /// key (which must be a neighbour's).
    pub fn decode_request(&self, bytes: &[u8]) -> std::result::Result<Request<S::Ct>, DecodeError> {
        let (head, cts) = decode_exchange::<S>(bytes, "pdsgd request", KIND_REQUEST, |h| {
            self.neighbours
                .get(&h.from)
                .map(|n| &n.key)
                .ok_or_else(|| format!("sender {} is not a neighbour of agent {}", h.from, self.id))
        })?;
        Ok(Request {
            from: head.from,
            to: head.to,
            iteration: head.iteration,
            cts,
        })
    }

    /// Decodes a response sent to this agent, validating its ciphertexts under its own key.
    pub fn decode_response(
        &self,
        bytes: &[u8],
    ) -> std::result::Result<Response<S::Ct>, DecodeError> {
        let (head, cts) =
            decode_exchange::<S>(bytes, "pdsgd response", KIND_RESPONSE, |_| Ok(&self.public))?;
        Ok(Response {
            from: head.from,
            to: head.to,
            iteration: head.iteration,
            cts,
        })
    }
}
