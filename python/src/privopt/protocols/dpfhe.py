"""DP training under FHE (the FHE paper, Algorithms 4 and 5): logistic regression trained by a
server on data it only ever sees encrypted.

The :class:`DataOwner` holds the secret key: it sends the :class:`ComputeServer` the evaluation
keys, the encrypted initial weights and, per step, the encrypted batch, labels and pre-sampled
DP noise. The server runs the step on ciphertexts; when a ciphertext runs out of levels it
pauses with a refresh request, which the owner answers (decrypt and re-encrypt) until CKKS
bootstrapping lets the server finish alone. Everything crosses as bytes::

    ctx = ckks.Context(ckks.Params.leveled(1 << 15, 50, 40, 16, [44, 44, 44, 44]))
    circuit = Circuit(ctx, d, batch, lr, barrier=(lam, theta, kappa, 15))
    owner = DataOwner(ctx, circuit)
    relin, galois = owner.evaluation_keys()
    server = ComputeServer(ctx, circuit, relin, galois)
    w = owner.encrypt_weights(np.zeros(d))
    for t, (x, y, noise) in enumerate(batches):
        server.begin_step(w, owner.encrypt_step(t, x, y, lr * noise))
        while (status := server.advance())[0] == "refresh":
            server.resume(owner.refresh(status[1]))
        w = status[1]
    weights = owner.decrypt_weights(w)
"""

from __future__ import annotations

from .._native import dpfhe as _native

Circuit = _native.Circuit
DataOwner = _native.DataOwner
ComputeServer = _native.ComputeServer

__all__ = ["Circuit", "DataOwner", "ComputeServer"]
