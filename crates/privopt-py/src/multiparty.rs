//! `privopt.ckks.multiparty`: xMK-CKKS (every party its own secret, nobody the sum):
//! key shares, the collective key, encrypted sums, decryption shares and fusion; and its
//! threshold form (any `t` of `N` members decrypt).

use std::sync::Arc;

use numpy::PyArray1;
use numpy::PyReadonlyArray1;
use privopt_ckks::CkksParams;
use privopt_ckks::encoding::SlotEncoder;
use privopt_ckks::multiparty::{
    ActiveSet, Ciphertext, CollectivePublicKey, Committee, CommonPoly, DealingAnswer, DealingCheck,
    DecryptionShare, EncryptedModel, ModelCodec, Party, PublicKeyShare, SecretShare,
    ThresholdParty, fuse, fuse_threshold, fuse_threshold_batch, model_smudging_for_distance,
    smudging_for_distance,
};
use privopt_ckks::wire::{share_batch_from_bytes, share_batch_to_bytes};
use privopt_math::sample::secret_rng;
use privopt_protocols::threshold::{SealedShare, SealingKey, ThresholdSetup};
use privopt_protocols::wire::Message;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::ckks::PyParams;
use crate::errors;
use crate::numpy_io::{Reals, array, slice_or_copy, to_vec};

/// The common random polynomial ``a``, expanded from a public 32-byte seed that every party
/// and the server share (the server picks it, e.g. ``os.urandom(32)``).
#[pyclass(module = "privopt.ckks.multiparty", name = "CommonPoly", frozen)]
pub struct PyCommonPoly(pub CommonPoly);

#[pymethods]
impl PyCommonPoly {
    #[new]
    fn new(params: &PyParams, seed: &[u8]) -> PyResult<Self> {
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| errors::parameter(format!("seed must be 32 bytes, got {}", seed.len())))?;
        Ok(Self(CommonPoly::from_seed(&params.0, seed)))
    }

    /// The seed.
    #[getter]
    fn seed<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.0.seed())
    }
}

/// One party (device): its secret ``s_i`` never leaves the object.
#[pyclass(module = "privopt.ckks.multiparty", name = "Party", frozen)]
pub struct PyParty {
    party: Party,
    params: Arc<CkksParams>,
}

#[pymethods]
impl PyParty {
    /// Party ``id`` with a fresh secret (operating-system randomness).
    #[new]
    fn new(py: Python<'_>, id: u32, params: &PyParams, crs: &PyCommonPoly) -> Self {
        let params = Arc::clone(&params.0);
        let party = py.detach(|| Party::generate(id, &params, &crs.0, &mut secret_rng(None)));
        Self { party, params }
    }

    /// The party's id.
    #[getter]
    fn id(&self) -> u32 {
        self.party.id()
    }

    /// The party (its secret included) as bytes, for its own storage between processes:
    /// keep them as secret as the party.
    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.party.to_bytes())
    }

    /// A party from :meth:`snapshot` bytes.
    #[staticmethod]
    fn restore(params: &PyParams, state: &[u8]) -> PyResult<Self> {
        let party = Party::from_bytes(&params.0, state).map_err(errors::ckks)?;
        Ok(Self {
            party,
            params: Arc::clone(&params.0),
        })
    }

    /// Phase 1: the partial public key ``b_i`` for ``session`` (bytes, for the server).
    fn public_key_share<'py>(&self, py: Python<'py>, session: u64) -> Bound<'py, PyBytes> {
        PyBytes::new(
            py,
            &self.party.public_key_share(session).to_bytes(&self.params),
        )
    }

    /// Phase 3: this party's decryption share of the (summed) ciphertext, as bytes.
    fn partial_decrypt<'py>(
        &self,
        py: Python<'py>,
        ct: &PyCiphertext,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let share = py
            .detach(|| self.party.partial_decrypt(&ct.0, &mut secret_rng(None)))
            .map_err(errors::ckks)?;
        Ok(PyBytes::new(py, &share.to_bytes(&self.params)))
    }

    /// Threshold setup: this party's Shamir shares of its secret, ``{recipient: bytes}``, one
    /// for every member of ``committee`` (itself included). Secret: send each only to its
    /// recipient, encrypted (e.g. under a key agreed with it).
    fn deal<'py>(
        &self,
        py: Python<'py>,
        committee: &PyCommittee,
        session: u64,
    ) -> PyResult<std::collections::BTreeMap<u32, Bound<'py, PyBytes>>> {
        let shares = py
            .detach(|| {
                self.party
                    .deal(&committee.0, session, &mut secret_rng(None))
            })
            .map_err(errors::ckks)?;
        Ok(shares
            .iter()
            .map(|s| (s.to(), PyBytes::new(py, &s.to_bytes(&self.params))))
            .collect())
    }
}

/// The members of a threshold key and how many of them decrypt (``2 ≤ threshold ≤ N``).
#[pyclass(module = "privopt.ckks.multiparty", name = "Committee", frozen)]
pub struct PyCommittee(Committee);

#[pymethods]
impl PyCommittee {
    #[new]
    fn new(threshold: usize, members: Vec<u32>) -> PyResult<Self> {
        Committee::new(threshold, &members)
            .map(Self)
            .map_err(errors::ckks)
    }

    /// How many members decrypt.
    #[getter]
    fn threshold(&self) -> usize {
        self.0.threshold()
    }

    /// The members, sorted.
    #[getter]
    fn members(&self) -> Vec<u32> {
        self.0.members().to_vec()
    }
}

/// The members asked to decrypt one ciphertext, fixed before any share is asked for.
#[pyclass(module = "privopt.ckks.multiparty", name = "ActiveSet", frozen)]
pub struct PyActiveSet(ActiveSet);

#[pymethods]
impl PyActiveSet {
    /// ``members`` (at least the threshold, all in ``committee``) decrypt ``ct``.
    #[new]
    fn new(committee: &PyCommittee, ct: &PyCiphertext, members: Vec<u32>) -> PyResult<Self> {
        ActiveSet::new(&committee.0, &ct.0, &members)
            .map(Self)
            .map_err(errors::ckks)
    }

    /// ``members`` decrypt every chunk of ``model`` (one set, one request for them all).
    #[staticmethod]
    fn for_model(
        committee: &PyCommittee,
        model: &PyEncryptedModel,
        members: Vec<u32>,
    ) -> PyResult<Self> {
        ActiveSet::for_batch(&committee.0, model.inner.ciphertexts(), &members)
            .map(Self)
            .map_err(errors::ckks)
    }

    /// The members, sorted.
    #[getter]
    fn members(&self) -> Vec<u32> {
        self.0.members().to_vec()
    }

    /// The set as bytes, for the members.
    fn to_bytes<'py>(&self, py: Python<'py>, params: &PyParams) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes(&params.0))
    }

    /// Parses a set (a member checks it against its committee when asked for a share).
    #[staticmethod]
    fn from_bytes(params: &PyParams, data: &[u8]) -> PyResult<Self> {
        ActiveSet::from_bytes(&params.0, data)
            .map(Self)
            .map_err(errors::ckks)
    }
}

/// The check of every dealer's Shamir shares after setup: ``seed`` fresh (drawn after every
/// dealing arrived), ``present`` the members that will answer (at least the threshold).
#[pyclass(module = "privopt.ckks.multiparty", name = "DealingCheck", frozen)]
pub struct PyDealingCheck(DealingCheck);

#[pymethods]
impl PyDealingCheck {
    #[new]
    fn new(
        committee: &PyCommittee,
        session: u64,
        seed: &[u8],
        present: Vec<u32>,
    ) -> PyResult<Self> {
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| errors::parameter(format!("a seed of {} bytes, 32 wanted", seed.len())))?;
        DealingCheck::new(&committee.0, session, seed, &present)
            .map(Self)
            .map_err(errors::ckks)
    }

    /// The check sets, each sorted: every member of them answers.
    #[getter]
    fn sets(&self) -> Vec<Vec<u32>> {
        self.0.sets().to_vec()
    }

    /// The check as bytes, for the members.
    fn to_bytes<'py>(&self, py: Python<'py>, params: &PyParams) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes(&params.0))
    }

    /// Parses a check.
    #[staticmethod]
    fn from_bytes(params: &PyParams, data: &[u8]) -> PyResult<Self> {
        DealingCheck::from_bytes(&params.0, data)
            .map(Self)
            .map_err(errors::ckks)
    }
}

/// The dealers whose Shamir shares fail the dealing ``check`` (sorted; empty when every
/// dealing is sound), from the members' answers (bytes from
/// :meth:`ThresholdParty.answer_dealing_check`) and the dealers' public key shares (bytes from
/// :meth:`Party.public_key_share`): leave them out of every sum. A missing, duplicate or
/// foreign answer raises :class:`~privopt.errors.PeerMisbehaved` naming the party, and a set
/// that fails for every dealer (a member of it answered falsely) raises naming the set.
#[pyfunction]
fn failed_dealers(
    py: Python<'_>,
    params: &PyParams,
    committee: &PyCommittee,
    crs: &PyCommonPoly,
    keys: Vec<Vec<u8>>,
    check: &PyDealingCheck,
    answers: Vec<Vec<u8>>,
) -> PyResult<Vec<u32>> {
    let keys = keys
        .iter()
        .map(|b| PublicKeyShare::from_bytes(&params.0, b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(errors::ckks)?;
    let answers = answers
        .iter()
        .map(|b| DealingAnswer::from_bytes(&params.0, b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(errors::ckks)?;
    py.detach(|| {
        privopt_ckks::multiparty::failed_dealers(
            &params.0,
            &committee.0,
            &crs.0,
            &keys,
            &check.0,
            &answers,
        )
    })
    .map_err(errors::ckks)
}

/// A member after threshold setup: its share of the collective secret and the ledger of
/// ciphertexts it has answered for (one decryption share per ciphertext, ever).
#[pyclass(module = "privopt.ckks.multiparty", name = "ThresholdParty")]
pub struct PyThresholdParty {
    inner: ThresholdParty,
    params: Arc<CkksParams>,
}

#[pymethods]
impl PyThresholdParty {
    /// ``party``'s setup from the shares every member dealt to it (bytes from
    /// :meth:`Party.deal`); refuses a missing, duplicate, misaddressed or foreign share.
    #[staticmethod]
    fn from_shares(
        py: Python<'_>,
        party: &PyParty,
        committee: &PyCommittee,
        session: u64,
        shares: Vec<Vec<u8>>,
    ) -> PyResult<Self> {
        let params = Arc::clone(&party.params);
        let shares = shares
            .iter()
            .map(|b| SecretShare::from_bytes(&params, b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(errors::ckks)?;
        let inner = py
            .detach(|| ThresholdParty::from_shares(&party.party, &committee.0, session, &shares))
            .map_err(errors::ckks)?;
        Ok(Self { inner, params })
    }

    /// The member's id.
    #[getter]
    fn id(&self) -> u32 {
        self.inner.id()
    }

    /// The member's state as bytes (its secret share and its ledger of answered
    /// ciphertexts), for its own storage between processes: store it before a share leaves,
    /// never restore an older copy, and keep it as secret as the member.
    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A member from :meth:`snapshot` bytes.
    #[staticmethod]
    fn restore(params: &PyParams, state: &[u8]) -> PyResult<Self> {
        let inner = ThresholdParty::from_bytes(&params.0, state).map_err(errors::ckks)?;
        Ok(Self {
            inner,
            params: Arc::clone(&params.0),
        })
    }

    /// Whether this member has answered for ``ct``.
    fn has_answered(&self, ct: &PyCiphertext) -> bool {
        self.inner.has_answered(&ct.0)
    }

    /// This member's decryption share of ``ct`` for ``active`` (bytes); a second request for
    /// the same ciphertext raises, whatever the set: retry on a fresh encryption.
    fn partial_decrypt<'py>(
        &mut self,
        py: Python<'py>,
        ct: &PyCiphertext,
        active: &PyActiveSet,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let share = py
            .detach(|| inner.partial_decrypt(&ct.0, &active.0, &mut secret_rng(None)))
            .map_err(errors::ckks)?;
        Ok(PyBytes::new(py, &share.to_bytes(&self.params)))
    }

    /// This member's answers to the dealing ``check`` (bytes for :func:`verify_dealing`);
    /// ``crs`` is the key's common polynomial. Once per setup: a second check raises.
    fn answer_dealing_check<'py>(
        &mut self,
        py: Python<'py>,
        check: &PyDealingCheck,
        crs: &PyCommonPoly,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let answer = py
            .detach(|| inner.answer_dealing_check(&check.0, &crs.0, &mut secret_rng(None)))
            .map_err(errors::ckks)?;
        Ok(PyBytes::new(py, &answer.to_bytes(&self.params)))
    }

    /// This member's shares of every chunk of ``model`` for ``active`` (one bytes object);
    /// refused whole if any chunk was answered before.
    fn partial_decrypt_model<'py>(
        &mut self,
        py: Python<'py>,
        model: &PyEncryptedModel,
        active: &PyActiveSet,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let shares = py
            .detach(|| {
                inner.partial_decrypt_batch(
                    model.inner.ciphertexts(),
                    &active.0,
                    &mut secret_rng(None),
                )
            })
            .map_err(errors::ckks)?;
        Ok(PyBytes::new(
            py,
            &share_batch_to_bytes(&self.params, &shares),
        ))
    }
}

/// One member's side of a threshold key's setup with every Shamir share sealed to its
/// recipient (X25519, HKDF-SHA256, AES-128-GCM): the server relays bytes it cannot open.
/// :attr:`sealing_key` to every member; :meth:`deal` with every member's sealing key (one
/// sealed share per member, by recipient); :meth:`finish` with the shares sealed to it.
#[pyclass(module = "privopt.ckks.multiparty", name = "ThresholdSetup")]
pub struct PyThresholdSetup(ThresholdSetup);

#[pymethods]
impl PyThresholdSetup {
    /// Member ``party`` of ``committee`` starts setup ``session`` with a fresh sealing key.
    #[new]
    fn new(party: &PyParty, committee: &PyCommittee, session: u64) -> PyResult<Self> {
        ThresholdSetup::new(&party.party, &committee.0, session, &mut secret_rng(None))
            .map(Self)
            .map_err(errors::protocol)
    }

    /// This member's sealing key (bytes, for every member).
    #[getter]
    fn sealing_key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.sealing_key().to_bytes())
    }

    /// With every member's sealing key, this member's shares, each sealed to its recipient,
    /// ``{recipient: bytes}``. Deals once per setup: save the setup after this call.
    fn deal<'py>(
        &mut self,
        py: Python<'py>,
        party: &PyParty,
        sealing_keys: Vec<Vec<u8>>,
    ) -> PyResult<std::collections::BTreeMap<u32, Bound<'py, PyBytes>>> {
        let keys = sealing_keys
            .iter()
            .map(|b| SealingKey::from_bytes(b).map_err(errors::decode))
            .collect::<PyResult<Vec<_>>>()?;
        let setup = &mut self.0;
        let sealed = py
            .detach(|| setup.deal(&party.party, &keys, &mut secret_rng(None)))
            .map_err(errors::protocol)?;
        Ok(sealed
            .iter()
            .map(|s| (s.to, PyBytes::new(py, &s.to_bytes())))
            .collect())
    }

    /// The shares sealed to this member, one from every member: its threshold key.
    fn finish(
        &self,
        py: Python<'_>,
        party: &PyParty,
        sealed: Vec<Vec<u8>>,
    ) -> PyResult<PyThresholdParty> {
        let sealed = sealed
            .iter()
            .map(|b| SealedShare::from_bytes(b).map_err(errors::decode))
            .collect::<PyResult<Vec<_>>>()?;
        let inner = py
            .detach(|| self.0.finish(&party.party, &sealed))
            .map_err(errors::protocol)?;
        Ok(PyThresholdParty {
            inner,
            params: Arc::clone(&party.params),
        })
    }

    /// The setup's state (its X25519 secret included) as bytes, for the member's own storage
    /// between messages; never restore an older copy.
    fn save<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.save())
    }

    /// A setup from :meth:`save` bytes.
    #[staticmethod]
    fn restore(state: &[u8]) -> PyResult<Self> {
        ThresholdSetup::restore(state)
            .map(Self)
            .map_err(errors::protocol)
    }
}

/// How a model update of ``length`` values is packed under a collective key: ``n`` values per
/// ciphertext in the coefficients, entries within ``±clip``, sums of at most ``max_updates``
/// updates (refused if such a sum could wrap the modulus).
#[pyclass(module = "privopt.ckks.multiparty", name = "ModelCodec", frozen)]
pub struct PyModelCodec {
    codec: ModelCodec,
    params: Arc<CkksParams>,
}

#[pymethods]
impl PyModelCodec {
    #[new]
    #[pyo3(signature = (params, length, clip, max_updates = 64))]
    fn new(params: &PyParams, length: usize, clip: f64, max_updates: u32) -> PyResult<Self> {
        let codec = ModelCodec::new(&params.0, length, clip, max_updates).map_err(errors::ckks)?;
        Ok(Self {
            codec,
            params: Arc::clone(&params.0),
        })
    }

    /// Values per model.
    #[getter]
    fn length(&self) -> usize {
        self.codec.len()
    }

    /// Ciphertexts per model.
    #[getter]
    fn chunks(&self) -> usize {
        self.codec.chunks()
    }

    /// The entries' bound.
    #[getter]
    fn clip(&self) -> f64 {
        self.codec.clip()
    }

    /// ``log2`` of the factor encoded values are lifted by: the bits the parameters' smudging
    /// exceeds the default ``2**20`` by, so the average keeps the default's precision.
    #[getter]
    fn lift_bits(&self) -> u32 {
        self.codec.lift_log2()
    }

    /// ``values`` (1-D ``float32``) encrypted under ``key``; a wrong length, a non-finite entry
    /// or one outside ``±clip`` raises, naming the index.
    fn encrypt(
        &self,
        py: Python<'_>,
        key: &PyCollectiveKey,
        values: PyReadonlyArray1<'_, f32>,
    ) -> PyResult<PyEncryptedModel> {
        let values = slice_or_copy(&values);
        let inner = py
            .detach(|| self.codec.encrypt(&key.key, &values, &mut secret_rng(None)))
            .map_err(errors::ckks)?;
        Ok(PyEncryptedModel {
            inner,
            params: Arc::clone(&self.params),
        })
    }

    /// ``values`` encrypted under ``party``'s own secret for ``session`` of ``committee``'s
    /// threshold key: half the bytes of :meth:`encrypt` (each chunk's ``c1`` is expanded from
    /// a seed), and only a sum of at least the threshold's members' uploads decrypts. One
    /// model per party and session: a second one would reveal the difference of the two.
    fn encrypt_secret(
        &self,
        py: Python<'_>,
        party: &PyParty,
        committee: &PyCommittee,
        session: u64,
        values: PyReadonlyArray1<'_, f32>,
    ) -> PyResult<PyEncryptedModel> {
        let values = slice_or_copy(&values);
        let inner = py
            .detach(|| {
                self.codec.encrypt_secret(
                    &party.party,
                    &committee.0,
                    session,
                    &values,
                    &mut secret_rng(None),
                )
            })
            .map_err(errors::ckks)?;
        Ok(PyEncryptedModel {
            inner,
            params: Arc::clone(&self.params),
        })
    }

    /// The average of the updates ``model`` sums, from the shares (bytes of
    /// :meth:`ThresholdParty.partial_decrypt_model`) of every member of ``active``.
    fn average<'py>(
        &self,
        py: Python<'py>,
        model: &PyEncryptedModel,
        active: &PyActiveSet,
        shares: Vec<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let shares = shares
            .iter()
            .map(|b| share_batch_from_bytes(&self.params, b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(errors::ckks)?;
        let out = py
            .detach(|| {
                let plain = fuse_threshold_batch(model.inner.ciphertexts(), &active.0, &shares)?;
                self.codec.average(&plain, model.inner.count())
            })
            .map_err(errors::ckks)?;
        Ok(array(py, out))
    }
}

/// A model update (or a sum of them) under the collective key.
#[pyclass(module = "privopt.ckks.multiparty", name = "EncryptedModel", frozen)]
pub struct PyEncryptedModel {
    inner: EncryptedModel,
    params: Arc<CkksParams>,
}

#[pymethods]
impl PyEncryptedModel {
    /// The chunk-wise sum of ``models`` (same length, same key).
    #[staticmethod]
    fn sum(py: Python<'_>, models: Vec<PyRef<'_, PyEncryptedModel>>) -> PyResult<Self> {
        let first = models.first().ok_or_else(|| {
            errors::ckks(privopt_ckks::CkksError::InvalidParams(
                "a sum of no models".into(),
            ))
        })?;
        let params = Arc::clone(&first.params);
        let refs: Vec<&EncryptedModel> = models.iter().map(|m| &m.inner).collect();
        let inner = py
            .detach(|| EncryptedModel::sum(&refs))
            .map_err(errors::ckks)?;
        Ok(Self { inner, params })
    }

    fn __add__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        let inner = py
            .detach(|| EncryptedModel::sum(&[&self.inner, &other.inner]))
            .map_err(errors::ckks)?;
        Ok(Self {
            inner,
            params: Arc::clone(&self.params),
        })
    }

    /// Values in the model.
    #[getter]
    fn length(&self) -> usize {
        self.inner.len()
    }

    /// How many updates it sums.
    #[getter]
    fn count(&self) -> u32 {
        self.inner.count()
    }

    /// The members whose :meth:`ModelCodec.encrypt_secret` uploads it sums (sorted), or
    /// ``None`` for public-key encryptions.
    #[getter]
    fn contributors(&self) -> Option<Vec<u32>> {
        self.inner.contributors().map(<[u32]>::to_vec)
    }

    /// The model as bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes = py.detach(|| self.inner.to_bytes());
        PyBytes::new(py, &bytes)
    }

    /// Parses a model under ``params``.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, params: &PyParams, data: &[u8]) -> PyResult<Self> {
        let params = Arc::clone(&params.0);
        let inner = py
            .detach(|| EncryptedModel::from_bytes(&params, data))
            .map_err(errors::ckks)?;
        Ok(Self { inner, params })
    }
}

/// The collective key ``Σ b_i`` of the members, under which anyone encrypts.
#[pyclass(
    module = "privopt.ckks.multiparty",
    name = "CollectivePublicKey",
    frozen
)]
pub struct PyCollectiveKey {
    key: CollectivePublicKey,
    encoder: SlotEncoder,
}

#[pymethods]
impl PyCollectiveKey {
    /// Sums the members' key shares (bytes from :meth:`Party.public_key_share`); refuses a
    /// missing, duplicate, foreign or other-session share.
    #[staticmethod]
    fn aggregate(
        params: &PyParams,
        crs: &PyCommonPoly,
        members: Vec<u32>,
        session: u64,
        shares: Vec<Vec<u8>>,
    ) -> PyResult<Self> {
        let shares = shares
            .iter()
            .map(|b| PublicKeyShare::from_bytes(&params.0, b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(errors::ckks)?;
        let key = CollectivePublicKey::aggregate(&params.0, &crs.0, &members, session, &shares)
            .map_err(errors::ckks)?;
        let encoder = SlotEncoder::new(params.0.n()).map_err(errors::ckks)?;
        Ok(Self { key, encoder })
    }

    /// The members, increasing.
    #[getter]
    fn members(&self) -> Vec<u32> {
        self.key.members().to_vec()
    }

    /// One real in the constant coefficient (what EEZOFL devices send).
    fn encrypt_scalar(&self, py: Python<'_>, x: f64) -> PyResult<PyCiphertext> {
        py.detach(|| self.key.encrypt_scalar(x, &mut secret_rng(None)))
            .map(PyCiphertext)
            .map_err(errors::ckks)
    }

    /// Up to ``n / 2`` reals in the slots.
    fn encrypt_vector(&self, py: Python<'_>, values: Reals<'_>) -> PyResult<PyCiphertext> {
        let values = to_vec(&values);
        py.detach(|| {
            self.key
                .encrypt_vector(&self.encoder, &values, &mut secret_rng(None))
        })
        .map(PyCiphertext)
        .map_err(errors::ckks)
    }
}

/// A ciphertext under a collective key; ciphertexts of one session add up.
#[pyclass(module = "privopt.ckks.multiparty", name = "Ciphertext", frozen)]
pub struct PyCiphertext(Ciphertext);

#[pymethods]
impl PyCiphertext {
    /// The sum of ciphertexts under the same key and session.
    #[staticmethod]
    fn sum(py: Python<'_>, cts: Vec<PyRef<'_, PyCiphertext>>) -> PyResult<Self> {
        let cts: Vec<Ciphertext> = cts.iter().map(|c| c.0.clone()).collect();
        py.detach(|| Ciphertext::sum(&cts))
            .map(Self)
            .map_err(errors::ckks)
    }

    fn __add__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        let pair = [self.0.clone(), other.0.clone()];
        py.detach(|| Ciphertext::sum(&pair))
            .map(Self)
            .map_err(errors::ckks)
    }

    /// The session (protocol round) of the key.
    #[getter]
    fn session(&self) -> u64 {
        self.0.session()
    }

    /// How many encryptions were summed.
    #[getter]
    fn count(&self) -> u32 {
        self.0.count()
    }

    /// The key's members, whose decryption shares :func:`fuse` needs.
    #[getter]
    fn members(&self) -> Vec<u32> {
        self.0.members().to_vec()
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(params: &PyParams, data: &[u8]) -> PyResult<Self> {
        Ciphertext::from_bytes(&params.0, data)
            .map(Self)
            .map_err(errors::ckks)
    }
}

/// The result of :func:`fuse`: the summed message, decoded on request.
#[pyclass(module = "privopt.ckks.multiparty", name = "Decrypted", frozen)]
pub struct PyDecrypted {
    inner: privopt_ckks::multiparty::Decrypted,
    n: usize,
}

#[pymethods]
impl PyDecrypted {
    /// The scalar in the constant coefficient (for :meth:`CollectivePublicKey.encrypt_scalar`).
    fn scalar(&self) -> PyResult<f64> {
        self.inner.scalar().map_err(errors::ckks)
    }

    /// The slots (for :meth:`CollectivePublicKey.encrypt_vector`), the first ``length``.
    #[pyo3(signature = (length = None))]
    fn vector<'py>(
        &self,
        py: Python<'py>,
        length: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let encoder = SlotEncoder::new(self.n).map_err(errors::ckks)?;
        let mut v = py
            .detach(|| self.inner.vector(&encoder))
            .map_err(errors::ckks)?;
        if let Some(len) = length {
            v.truncate(len);
        }
        Ok(array(py, v))
    }
}

/// Fuses the members' decryption shares (bytes from :meth:`Party.partial_decrypt`) of ``ct``:
/// refuses a missing, duplicate, foreign, other-session or other-ciphertext share, naming the
/// party.
#[pyfunction]
fn fuse_shares(
    py: Python<'_>,
    params: &PyParams,
    ct: &PyCiphertext,
    shares: Vec<Vec<u8>>,
) -> PyResult<PyDecrypted> {
    let shares = decryption_shares(params, &shares)?;
    let inner = py.detach(|| fuse(&ct.0, &shares)).map_err(errors::ckks)?;
    Ok(PyDecrypted {
        inner,
        n: params.0.n(),
    })
}

/// Decryption shares from their bytes (a malformed one raises, naming what is wrong).
fn decryption_shares(params: &PyParams, shares: &[Vec<u8>]) -> PyResult<Vec<DecryptionShare>> {
    shares
        .iter()
        .map(|b| DecryptionShare::from_bytes(&params.0, b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(errors::ckks)
}

/// Fuses the active members' decryption shares (bytes from
/// :meth:`ThresholdParty.partial_decrypt`) of ``ct``; refuses a missing, duplicate or foreign
/// share, naming the party.
#[pyfunction]
fn fuse_threshold_shares(
    py: Python<'_>,
    params: &PyParams,
    ct: &PyCiphertext,
    active: &PyActiveSet,
    shares: Vec<Vec<u8>>,
) -> PyResult<PyDecrypted> {
    let shares = decryption_shares(params, &shares)?;
    let inner = py
        .detach(|| fuse_threshold(&ct.0, &active.0, &shares))
        .map_err(errors::ckks)?;
    Ok(PyDecrypted {
        inner,
        n: params.0.n(),
    })
}

/// ``log2`` of the smudging σ* per member that keeps one threshold decryption of a sum of
/// ``uploads`` :meth:`ModelCodec.encrypt_secret` uploads of ``length`` values within
/// ``2**-distance_bits`` statistical distance of one that reveals nothing of their noise,
/// from one honest member's share alone. Build the round's :class:`Params` with it
/// (``smudging_bits=``); a :class:`ModelCodec` on them lifts the values to keep the precision.
#[pyfunction]
#[pyo3(signature = (params, length, uploads, distance_bits = 40.0))]
fn model_smudging_bits(
    params: &PyParams,
    length: usize,
    uploads: usize,
    distance_bits: f64,
) -> PyResult<f64> {
    if length == 0 || uploads == 0 || !(distance_bits.is_finite() && distance_bits > 0.0) {
        return Err(errors::parameter(format!(
            "length {length}, uploads {uploads}, distance_bits {distance_bits}: a model, an \
             upload and a distance above 0 are needed"
        )));
    }
    Ok(model_smudging_for_distance(&params.0, length, uploads, 1, distance_bits).smudging_log2)
}

/// ``log2`` of the smudging σ* per member that keeps one threshold decryption of a sum of
/// ``encryptions`` public-key encryptions under the key of ``parties`` within
/// ``2**-distance_bits`` statistical distance of one that reveals nothing of their noise, from
/// one honest member's share alone (EEZOFL's scalar sums). Build the :class:`Params` with it
/// (``smudging_bits=``); encryptions are then lifted to keep the precision.
#[pyfunction]
#[pyo3(signature = (params, parties, encryptions, distance_bits = 40.0))]
fn smudging_bits(
    params: &PyParams,
    parties: usize,
    encryptions: usize,
    distance_bits: f64,
) -> PyResult<f64> {
    if parties == 0 || encryptions == 0 || !(distance_bits.is_finite() && distance_bits > 0.0) {
        return Err(errors::parameter(format!(
            "parties {parties}, encryptions {encryptions}, distance_bits {distance_bits}: a \
             party, an encryption and a distance above 0 are needed"
        )));
    }
    Ok(smudging_for_distance(&params.0, parties, encryptions, 1, distance_bits).smudging_log2)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(smudging_bits, m)?)?;
    m.add_function(wrap_pyfunction!(model_smudging_bits, m)?)?;
    m.add_function(wrap_pyfunction!(failed_dealers, m)?)?;
    m.add_class::<PyDealingCheck>()?;
    m.add_class::<PyCommittee>()?;
    m.add_class::<PyActiveSet>()?;
    m.add_class::<PyThresholdParty>()?;
    m.add_class::<PyModelCodec>()?;
    m.add_class::<PyThresholdSetup>()?;
    m.add_class::<PyEncryptedModel>()?;
    m.add_function(wrap_pyfunction!(fuse_threshold_shares, m)?)?;
    m.add_class::<PyCommonPoly>()?;
    m.add_class::<PyParty>()?;
    m.add_class::<PyCollectiveKey>()?;
    m.add_class::<PyCiphertext>()?;
    m.add_class::<PyDecrypted>()?;
    m.add_function(wrap_pyfunction!(fuse_shares, m)?)?;
    Ok(())
}
