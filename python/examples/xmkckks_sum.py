"""xMK-CKKS as EEZOFL uses it: each device encrypts one scalar under a key nobody holds
whole; the server sums the ciphertexts and every device contributes a decryption share."""

import os

from privopt import ckks
from privopt.ckks import multiparty as mk

params = ckks.Params(4096, [37, 36, 36])  # the paper's n = 4096 set, 128-bit
crs = mk.CommonPoly(params, os.urandom(32))  # the server's public seed
devices = [mk.Party(i, params, crs) for i in range(5)]
session = 1

key = mk.CollectivePublicKey.aggregate(
    params, crs, [d.id for d in devices], session, [d.public_key_share(session) for d in devices]
)
values = [0.5, -1.25, 2.0, 0.75, -0.125]
uploads = [key.encrypt_scalar(v).to_bytes() for v in values]  # one ciphertext per device
total = mk.Ciphertext.sum([mk.Ciphertext.from_bytes(params, u) for u in uploads])
shares = [d.partial_decrypt(total) for d in devices]  # each device, on the summed ciphertext
result = mk.fuse(params, total, shares).scalar()
print(f"sum of {len(values)} encrypted scalars = {result:.6f} (exact {sum(values)})")
assert abs(result - sum(values)) < 1e-3
