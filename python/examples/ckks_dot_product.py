"""An encrypted dot product: the client encrypts, the server computes on ciphertexts it cannot
read, the client decrypts. Only bytes cross between them."""

import numpy as np

from privopt import ckks

rng = np.random.default_rng(0)
x, w = rng.normal(size=4096), rng.normal(size=4096)

# Client: parameters (128-bit), keys, encrypted input.
params = ckks.Params.leveled(8192, 60, 40, 2)
ctx = ckks.Context(params)
sk = ckks.SecretKey.generate(ctx)
upload = {
    "relin": sk.relin_key().to_bytes(),
    "galois": sk.galois_keys([1 << i for i in range(12)]).to_bytes(),
    "x": sk.public_key().encrypt(x).to_bytes(),
}

# Server: the same parameters, the evaluation keys, the ciphertext; no secret.
sctx = ckks.Context(params)
ev = ckks.Evaluator(
    sctx,
    relin_key=ckks.RelinKey.from_bytes(sctx, upload["relin"]),
    galois_keys=ckks.GaloisKeys.from_bytes(sctx, upload["galois"]),
)
cx = ckks.Ciphertext.from_bytes(sctx, upload["x"])
answer = ev.sum(ev.mul_plain(cx, w)).to_bytes()

# Client: decrypt slot 0.
got = sk.decrypt(ckks.Ciphertext.from_bytes(ctx, answer), length=1)[0]
print(
    f"encrypted <x, w> = {got:.6f}, numpy: {x @ w:.6f}, bytes up {sum(map(len, upload.values())):,}"
)
assert abs(got - x @ w) < 1e-3
