"""Paillier: three hospitals' encrypted statistics averaged by an aggregator that cannot read
them; only the key holder decrypts the result."""

import numpy as np

from privopt import paillier

kp = paillier.KeyPair.generate(2048)
pk = paillier.PublicKey.from_bytes(kp.public_key.to_bytes())  # what the hospitals receive

rng = np.random.default_rng(1)
stats = [rng.normal(size=1000) for _ in range(3)]
uploads = [pk.encrypt_floats(s).to_bytes() for s in stats]  # batch, all cores

total = None
for u in uploads:
    enc = paillier.EncryptedArray.from_bytes(pk, u)
    total = enc if total is None else total + enc
mean = kp.decrypt_floats(total.mul_floats(1 / 3))
print(f"max error of the encrypted mean: {np.abs(mean - np.mean(stats, axis=0)).max():.2e}")
assert np.allclose(mean, np.mean(stats, axis=0), atol=1e-8)
