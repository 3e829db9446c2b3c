from __future__ import annotations

import os

import numpy as np
import pytest

from privopt import ckks
from privopt.ckks import multiparty as mk
from privopt.errors import MalformedMessage, PeerMisbehaved, ProtocolError


@pytest.fixture(scope="module")
def setup():
    params = ckks.Params(4096, [37, 36, 36])  # the paper's first set (EEZOFL)
    crs = mk.CommonPoly(params, os.urandom(32))
    parties = [mk.Party(i, params, crs) for i in range(4)]
    session = 7
    key = mk.CollectivePublicKey.aggregate(
        params,
        crs,
        [p.id for p in parties],
        session,
        [p.public_key_share(session) for p in parties],
    )
    return params, crs, parties, key


def test_encrypted_sums_fuse_to_the_plain_sum(setup):
    params, _, parties, key = setup
    xs = [0.25, -1.5, 3.0, 0.125]
    # Each device's ciphertext crosses the wire as bytes.
    cts = [mk.Ciphertext.from_bytes(params, key.encrypt_scalar(x).to_bytes()) for x in xs]
    total = mk.Ciphertext.sum(cts)
    assert total.count == 4 and total.members == [0, 1, 2, 3]
    shares = [p.partial_decrypt(total) for p in parties]
    assert abs(mk.fuse(params, total, shares).scalar() - sum(xs)) < 1e-3
    vs = np.random.default_rng(1).uniform(-1, 1, (4, 100))
    vsum = mk.Ciphertext.sum([key.encrypt_vector(v) for v in vs])
    out = mk.fuse(params, vsum, [p.partial_decrypt(vsum) for p in parties]).vector(length=100)
    np.testing.assert_allclose(out, vs.sum(axis=0), atol=1e-3)


def test_a_missing_or_foreign_share_fails_the_round_naming_the_party(setup):
    params, crs, parties, key = setup
    total = key.encrypt_scalar(1.0) + key.encrypt_scalar(2.0)
    shares = [p.partial_decrypt(total) for p in parties]
    with pytest.raises(ProtocolError, match="party 3"):
        mk.fuse(params, total, shares[:3])
    with pytest.raises(PeerMisbehaved, match="duplicate"):
        mk.fuse(params, total, shares + shares[:1])
    other = key.encrypt_scalar(5.0)
    with pytest.raises(PeerMisbehaved, match="another ciphertext"):
        mk.fuse(params, total, shares[:3] + [parties[3].partial_decrypt(other)])
    with pytest.raises(ProtocolError, match="missing share"):
        mk.CollectivePublicKey.aggregate(
            params, crs, [0, 1, 2, 3], 8, [p.public_key_share(8) for p in parties[:3]]
        )
    with pytest.raises(PeerMisbehaved, match="session"):
        mk.CollectivePublicKey.aggregate(
            params, crs, [0, 1, 2, 3], 8, [p.public_key_share(9) for p in parties]
        )
    with pytest.raises(MalformedMessage):
        mk.fuse(params, total, [s[:-8] for s in shares])
