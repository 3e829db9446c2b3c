//! Rust errors as Python exceptions: one class per category, defined in `privopt/errors.py`
//! (so they can also derive from `ValueError` and `ArithmeticError`) and raised from here.

use privopt_ckks::CkksError;
use privopt_dp::DpError;
use privopt_paillier::PaillierError;
use privopt_protocols::{DecodeError, Misbehavior, ProtocolError as ProtocolFailure};
use pyo3::PyErr;

pyo3::import_exception!(privopt.errors, ParameterError);
pyo3::import_exception!(privopt.errors, InsecureParameters);
pyo3::import_exception!(privopt.errors, MalformedMessage);
pyo3::import_exception!(privopt.errors, ProtocolError);
pyo3::import_exception!(privopt.errors, PeerMisbehaved);
pyo3::import_exception!(privopt.errors, ComputationError);

/// A CKKS or xMK-CKKS failure.
pub fn ckks(e: CkksError) -> PyErr {
    let msg = e.to_string();
    match e {
        CkksError::Insecure {
            n,
            log_q,
            max_log_q,
        } => InsecureParameters::new_err(format!(
            "insecure parameters: n = {n} allows log2 q <= {max_log_q} for 128-bit security, \
             got {log_q:.1} (pass insecure=True to use them in tests)"
        )),
        CkksError::WeakNoise(_) => InsecureParameters::new_err(msg),
        CkksError::InvalidParams(_)
        | CkksError::Math(_)
        | CkksError::Encoding(_)
        | CkksError::Mismatch(_) => ParameterError::new_err(msg),
        CkksError::Malformed { .. } => MalformedMessage::new_err(msg),
        CkksError::DuplicateShare { .. } => misbehaved(msg, Misbehavior::Duplicate),
        CkksError::UnknownParty { .. } => misbehaved(msg, Misbehavior::NotParticipant),
        CkksError::WrongSession { .. } => misbehaved(msg, Misbehavior::WrongRound),
        CkksError::WrongBinding { .. } => misbehaved(msg, Misbehavior::Misaddressed),
        // Shares that contradict each other: what the dealer told one member and another.
        CkksError::BadDealing { .. } => misbehaved(msg, Misbehavior::Tampered),
        CkksError::MissingShare { .. } => ProtocolError::new_err(msg),
        // Asked twice for one ciphertext: the protocol forbids the second answer.
        CkksError::AlreadyAnswered { .. } | CkksError::DealingChecked { .. } => {
            misbehaved(msg, Misbehavior::Forbidden)
        }
        CkksError::DecodeOverflow { .. }
        | CkksError::LevelExhausted(_)
        | CkksError::ScaleMismatch(_)
        | CkksError::MissingKey(_) => ComputationError::new_err(msg),
        // A kind a later version adds: a computation that did not complete.
        _ => ComputationError::new_err(msg),
    }
}

/// A Paillier failure.
pub fn paillier(e: PaillierError) -> PyErr {
    let msg = e.to_string();
    match e {
        PaillierError::KeySize(_) | PaillierError::OutOfRange(_) => ParameterError::new_err(msg),
        PaillierError::Insecure(_) => InsecureParameters::new_err(msg),
        PaillierError::InvalidCiphertext(_) | PaillierError::Malformed(_) => {
            MalformedMessage::new_err(msg)
        }
        // A kind a later version adds.
        _ => ParameterError::new_err(msg),
    }
}

/// A SecAgg+ failure.
pub fn secagg(e: privopt_secagg::SecAggError) -> PyErr {
    use privopt_secagg::SecAggError as E;
    let msg = format!("SecAgg+: {e}");
    match e {
        E::Parameters(_) => ParameterError::new_err(msg),
        E::Malformed(_) => MalformedMessage::new_err(msg),
        E::WrongSession | E::WrongRound { .. } => misbehaved(msg, Misbehavior::WrongRound),
        E::Duplicate(_) => misbehaved(msg, Misbehavior::Duplicate),
        E::UnexpectedClient { .. } => misbehaved(msg, Misbehavior::NotParticipant),
        E::Authentication { .. } | E::Reconstruction(_) | E::Equivocation { .. } => {
            misbehaved(msg, Misbehavior::Tampered)
        }
        // Out of order, below threshold, aborted, and whatever a later version adds.
        _ => ProtocolError::new_err(msg),
    }
}

/// Bytes that are not a well-formed protocol message.
pub fn decode(e: DecodeError) -> PyErr {
    MalformedMessage::new_err(e.to_string())
}

/// A protocol role's refusal.
pub fn protocol(e: ProtocolFailure) -> PyErr {
    match e {
        ProtocolFailure::Parameters(_) => ParameterError::new_err(e.to_string()),
        ProtocolFailure::Decode(d) => decode(d),
        ProtocolFailure::PeerMisbehaved { kind, .. } => misbehaved(e.to_string(), kind),
        ProtocolFailure::Diverged { .. } => ComputationError::new_err(e.to_string()),
        ProtocolFailure::Paillier(p) => paillier(p),
        ProtocolFailure::Ckks(c) => ckks(c),
        ProtocolFailure::SecAgg(s) => secagg(s),
        ProtocolFailure::Approx(_) | ProtocolFailure::Math(_) | ProtocolFailure::Channel(_) => {
            ParameterError::new_err(e.to_string())
        }
        // Out of order, incomplete rounds, and whatever a later version adds.
        _ => ProtocolError::new_err(e.to_string()),
    }
}

/// `PeerMisbehaved(message, kind)`: the kind (`"wrong_round"`, …) lets a caller drop a late
/// message and exclude the sender of a malformed one.
fn misbehaved(msg: String, kind: Misbehavior) -> PyErr {
    PeerMisbehaved::new_err((msg, kind.name()))
}

/// An accountant failure.
pub fn dp(e: DpError) -> PyErr {
    ParameterError::new_err(e.to_string())
}

/// A caller's argument that the bindings themselves refuse.
pub fn parameter(msg: impl Into<String>) -> PyErr {
    ParameterError::new_err(msg.into())
}
