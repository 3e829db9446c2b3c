"""DP training under FHE: one data owner (party 0) encrypts its data step by step under CKKS;
the server trains logistic regression on the ciphertexts (Algorithm 4: per-example polynomial
clipping, then the noised mean gradient) and asks the owner to refresh a ciphertext when it runs
out of levels (until bootstrapping lets the server go alone). The owner decrypts only what it
is asked to refresh and, at evaluation points, the model, whose scores it reports.

Privacy: DP-SGD accounting of the owner's examples (replace-one adjacency): each step's mean of
B clipped gradients has sensitivity 2C/B and Gaussian noise of standard deviation σ·2C/B added
by the owner before encryption, σ from the accountant for ``rounds`` steps sampled without
replacement at q = B/N. Features are scaled into [−1, 1] per column by the owner (the sigmoid
and clipping polynomials are fitted for bounded inputs)."""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
from privopt import ckks, dp
from privopt.protocols import dpfhe

from .. import problems
from ..config import ConfigError, DpfheParams, Settings, method_params
from ..node import Node, State
from ..results import DpfheOutcome, Report
from ..transport import Federation, Payload

OWNER = "dpfhe-owner"
DATA_OWNER = 0

# The stages the server sends, in order; each travels as Flower message type "query.<stage>".
STAGES: tuple[str, ...] = ("setup", "step", "refresh", "evaluate")


def _params(s: Settings) -> DpfheParams:
    return method_params(s, DpfheParams)


def _context(s: Settings) -> ckks.Context:
    cfg = _params(s)
    n = cfg.ring_n
    insecure = cfg.insecure
    # 16 levels of 2^40 over a 50-bit base, four 44-bit special primes: 128-bit at n = 2^15.
    return ckks.Context(ckks.Params.leveled(n, 50, 40, 16, [44, 44, 44, 44], insecure=insecure))


def _circuit(s: Settings, ctx: ckks.Context, d: int) -> dpfhe.Circuit:
    cfg = _params(s)
    return dpfhe.Circuit(
        ctx,
        d + 1,
        cfg.batch,
        cfg.lr,
        sigmoid_degree=cfg.sigmoid_degree,
        sigmoid_bound=cfg.sigmoid_bound,
        clip=(cfg.clip, cfg.clip_bound),
    )


def _sigma(s: Settings, examples: int) -> float:
    cfg = _params(s)
    eps, delta = cfg.epsilon, cfg.delta
    if eps == 0:
        return 0.0
    q = cfg.batch / examples
    return dp.noise_multiplier(eps, s.rounds, delta, q=q, sampling="without_replacement")


def serve(fed: Federation, s: Settings, report: Report) -> DpfheOutcome:
    cfg = _params(s)
    if s.clients != 1:
        raise ConfigError("dpfhe is a two-party protocol: run it with clients = 1 (the data owner)")
    p = problems.problem(s)
    ctx = _context(s)
    circuit = _circuit(s, ctx, p.n_features)
    up = down = 0
    refreshes = 0

    def ask(stage: str, req: Payload, timeout: float = s.stage_timeout) -> Payload:
        nonlocal up, down
        ex = fed.exchange(stage, {DATA_OWNER: {"round": req.get("round", 0), **req}}, timeout)
        up, down = up + ex.up_bytes, down + ex.down_bytes
        if DATA_OWNER not in ex.replies:
            raise RuntimeError(
                f"the data owner did not answer {stage!r}: {ex.missing.get(DATA_OWNER)}"
            )
        return ex.replies[DATA_OWNER]

    # Key generation and the evaluation keys' upload (tens of MB): the join timeout.
    keys = ask("setup", {}, s.join_timeout)
    server = dpfhe.ComputeServer(
        ctx, circuit, keys["relin"], list(keys["galois"]), threads=cfg.threads
    )
    w = keys["weights"]
    sigma = float(keys["sigma"])
    row: dict[str, Any] = {}
    for t in range(s.rounds):
        server.begin_step(w, ask("step", {"round": t})["step"])
        while True:
            kind, payload = server.advance()
            if kind == "done":
                w = payload
                break
            refreshes += 1
            server.resume(ask("refresh", {"round": t, "request": payload})["reply"])
        row = {"round": t + 1, "refreshes": refreshes, "up_bytes": up, "down_bytes": down}
        if sigma:
            row["epsilon"] = dp.epsilon(
                sigma,
                t + 1,
                cfg.delta,
                q=cfg.batch / float(keys["examples"]),
                sampling="without_replacement",
            )
        if s.evaluates(t + 1):
            scores = ask("evaluate", {"round": t, "weights": w})
            row.update(test_loss=scores["test_loss"], accuracy=scores["accuracy"])
        report.round(**row)
    return DpfheOutcome(
        test_loss=row.get("test_loss"),
        accuracy=row.get("accuracy"),
        up_bytes=up,
        down_bytes=down,
        sigma=sigma,
        epsilon_spent=row.get("epsilon", float("nan")),
        refreshes=refreshes,
    )


def hello(state: State, node: Node, s: Settings) -> Payload:
    return {}


def _data(s: Settings, party: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The owner's examples scaled into [−1, 1] per column, with the bias column; the scale."""
    p = problems.problem(s)
    idx = p.client_indices(party)
    x, y = p.rows(idx)
    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
    return idx, np.hstack([x / scale, np.ones((len(x), 1))]), y, scale


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    cfg = _params(s)
    ctx = _context(s)
    p = problems.problem(s)
    circuit = _circuit(s, ctx, p.n_features)
    if stage == "setup":
        owner = dpfhe.DataOwner(ctx, circuit)
        relin, galois = owner.evaluation_keys()
        idx, _, _, _ = _data(s, node.party)
        keys: Payload = {
            "relin": relin,
            "galois": galois,
            "examples": len(idx),
            "sigma": _sigma(s, len(idx)),
            "weights": owner.encrypt_weights(np.zeros(p.n_features + 1)),
        }
        state.put(OWNER, owner.save())
        return keys
    owner = dpfhe.DataOwner.restore(ctx, circuit, state.require(OWNER, stage, "the data owner"))
    reply: Payload = {}
    if stage == "step":
        idx, x, y, _ = _data(s, node.party)
        b = cfg.batch
        rng = np.random.default_rng(secrets.randbits(128))  # the owner's secret randomness
        pick = rng.choice(len(idx), size=b, replace=False)
        noise_std = _sigma(s, len(idx)) * 2 * cfg.clip / b
        noise = cfg.lr * noise_std * rng.standard_normal(x.shape[1])
        reply["step"] = owner.encrypt_step(int(req["round"]), x[pick], y[pick], noise)
    elif stage == "refresh":
        reply["reply"] = owner.refresh(req["request"])
    elif stage == "evaluate":
        _, _, _, scale = _data(s, node.party)
        w = owner.decrypt_weights(req["weights"])
        model = np.append(w[:-1] / scale, w[-1])  # back to the unscaled features
        loss, acc = p.evaluate(model)
        reply.update(test_loss=loss, accuracy=acc if acc is not None else float("nan"))
    else:
        raise ValueError(f"dpfhe has no stage {stage!r}")
    state.put(OWNER, owner.save())
    return reply
