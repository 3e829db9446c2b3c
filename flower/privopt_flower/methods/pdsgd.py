"""Paillier decentralized SGD: agents on a graph, each exchange between neighbours i and j
relayed through the server, which sees only Paillier ciphertexts under i's key. Per iteration:
every agent quantizes its state and sends one request per neighbour (``initiate``); the
server hands each agent the requests addressed to it (``respond``: its own state and its private
weight applied under the requester's key); the server returns the responses (``finish``: the
agent decrypts ``w_ij·w_ji·(x_j − x_i)`` per neighbour and takes its step with a private random
stepsize).

Each agent draws its weights ``k_ij`` privately, with ``w_ij = k_ij·δ ≤ weight_max/√D`` (D the
graph's largest degree), so ``Σ_j w_ij·w_ji < 1`` holds for every agent without anyone seeing
the other side's weight. A dead neighbour's exchange is skipped: the agent mixes with the
neighbours that answered, and abandons the open exchange at the next iteration."""

from __future__ import annotations

import math
import secrets
from typing import Any

import numpy as np
from privopt.protocols import pdsgd

from .. import problems
from ..config import ConfigError, PdsgdParams, Settings, method_params
from ..node import Node, State
from ..results import PdsgdOutcome, Report
from ..transport import Federation, Payload

AGENT, MODEL, QUANTIZED = "pdsgd-agent", "pdsgd-x", "pdsgd-q"

# The stages the server sends, in order; each travels as Flower message type "query.<stage>".
STAGES: tuple[str, ...] = ("setup", "neighbours", "initiate", "respond", "finish")


def _params(s: Settings) -> PdsgdParams:
    return method_params(s, PdsgdParams)


def edges(s: Settings) -> list[tuple[int, int]]:
    """The graph: ``ring``, ``complete`` or an edge list ``"0-1 1-2 2-0"``."""
    spec, n = _params(s).graph.strip(), s.clients
    if spec == "ring":
        return (
            sorted({(min(i, (i + 1) % n), max(i, (i + 1) % n)) for i in range(n)})
            if n > 2
            else [(0, 1)]
        )
    if spec == "complete":
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    out = set()
    for e in spec.split():
        a, _, b = e.partition("-")
        try:
            i, j = int(a), int(b)
        except ValueError:
            raise ConfigError(f"pdsgd.graph: edge {e!r} is not I-J") from None
        if not (0 <= i < n and 0 <= j < n and i != j):
            raise ConfigError(f"pdsgd.graph: edge {e!r} needs two distinct agents below {n}")
        out.add((min(i, j), max(i, j)))
    return sorted(out)


def neighbours(es: list[tuple[int, int]], n: int) -> list[list[int]]:
    adj: list[list[int]] = [[] for _ in range(n)]
    for i, j in es:
        adj[i].append(j)
        adj[j].append(i)
    return [sorted(a) for a in adj]


def serve(fed: Federation, s: Settings, report: Report) -> PdsgdOutcome:
    es = edges(s)
    adj = neighbours(es, s.clients)
    reached, frontier = {0}, [0]
    while frontier:
        frontier = [j for i in frontier for j in adj[i] if j not in reached]
        reached.update(frontier)
    if len(reached) < s.clients:
        cut = sorted(set(range(s.clients)) - reached)
        raise ConfigError(f"pdsgd.graph is not connected: agent(s) {cut} cannot reach agent 0")
    max_degree = max(len(a) for a in adj)
    up = down = 0

    def stage(name: str, requests: dict[int, Payload]) -> dict[int, Payload]:
        nonlocal up, down
        ex = fed.exchange(name, requests, s.stage_timeout)
        up, down = up + ex.up_bytes, down + ex.down_bytes
        for c, why in sorted(ex.missing.items()):
            report.event(f"{name}: party {c} missing ({why})")
        return ex.replies

    def paired(name: str, party: int, ids: list[Any], items: list[Any]) -> list[tuple[Any, Any]]:
        # A reply whose lists disagree in length is dropped whole, not cut to the shorter.
        if len(ids) != len(items):
            report.event(f"{name}: party {party} sent {len(items)} items for {len(ids)} ids")
            return []
        return list(zip(ids, items, strict=True))

    agents = fed.present()
    keys = stage("setup", {c: {"round": 0, "max_degree": max_degree} for c in agents})
    stage(
        "neighbours",
        {
            c: {
                "round": 0,
                "ids": [j for j in adj[c] if j in keys],
                "announcements": [keys[j]["announcement"] for j in adj[c] if j in keys],
            }
            for c in keys
        },
    )
    alive = sorted(keys)
    for k in range(1, s.rounds + 1):
        sent = stage("initiate", {c: {"round": k} for c in alive})
        inbox: dict[int, tuple[list[int], list[bytes]]] = {c: ([], []) for c in alive}
        for i, reply in sent.items():
            for j, req in paired("initiate", i, reply["to"], reply["requests"]):
                if j in inbox:
                    inbox[j][0].append(i)
                    inbox[j][1].append(req)
        answered = stage(
            "respond", {j: {"round": k, "requests": reqs} for j, (_, reqs) in inbox.items()}
        )
        outbox: dict[int, list[bytes]] = {i: [] for i in sent}
        for j, reply in answered.items():
            for i, resp in paired("respond", j, inbox[j][0], reply["responses"]):
                if i in outbox:
                    outbox[i].append(resp)
        evaluate = s.evaluates(k)
        stepped = stage(
            "finish",
            {i: {"round": k, "responses": r, "evaluate": evaluate} for i, r in outbox.items()},
        )
        alive = sorted(stepped)
        row: dict[str, Any] = {"round": k, "agents": len(alive), "up_bytes": up, "down_bytes": down}
        if evaluate and alive:
            # Each agent scores its own model on the test set; the server sees only the scores.
            losses = [float(stepped[c]["test_loss"]) for c in alive]
            accs = [float(stepped[c]["accuracy"]) for c in alive]
            row.update(
                test_loss=float(np.mean(losses)),
                accuracy=float(np.mean(accs)),
                accuracy_spread=max(accs) - min(accs),
            )
        report.round(**row)
        if len(alive) < 2:
            report.event(f"iteration {k}: fewer than 2 agents left: stop")
            break
    return PdsgdOutcome(
        test_loss=row.get("test_loss", math.nan),
        accuracy=row.get("accuracy"),
        up_bytes=up,
        down_bytes=down,
        agents=alive,
    )


def hello(state: State, node: Node, s: Settings) -> Payload:
    return {}


def _quantize(x: np.ndarray, delta: float) -> np.ndarray:
    """Stochastic rounding to the δ grid (the Paillier D-SGD paper, eq. 4), from the agent's secret randomness."""
    scaled = x / delta
    low = np.floor(scaled)
    up = np.random.default_rng(secrets.randbits(128)).random(x.shape) < (scaled - low)
    return (low + up).astype(np.int64)


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    cfg = _params(s)
    delta = cfg.delta
    if stage == "setup":
        bits = cfg.key_bits
        agent = pdsgd.Agent(node.party, bits=bits, insecure=bits < 2048)
        state.put(AGENT, agent.save())
        state.put(MODEL, problems.problem(s).init_params(s.seed).astype("<f8").tobytes())
        state.put("pdsgd-max-degree", str(int(req["max_degree"])).encode())
        return {"announcement": agent.announcement}
    agent = pdsgd.Agent.restore(state.require(AGENT, stage, "this agent"))
    x = np.frombuffer(state.get(MODEL) or b"", dtype="<f8").copy()
    reply: Payload = {}
    if stage == "neighbours":
        degree = int((state.get("pdsgd-max-degree") or b"1").decode())
        kmax = max(1, math.floor(cfg.weight_max / (delta * math.sqrt(degree))))
        for ann in req["announcements"]:
            # The private weight k_ij: nobody else ever learns it.
            agent.add_neighbour(ann, 1 + secrets.randbelow(kmax))
    elif stage == "initiate":
        q = _quantize(x, delta)
        state.put(QUANTIZED, q.tobytes())
        ids = [j for j in neighbours(edges(s), s.clients)[node.party]]
        reply["to"] = ids
        reply["requests"] = [agent.initiate(j, int(req["round"]), q) for j in ids]
    elif stage == "respond":
        q = np.frombuffer(state.get(QUANTIZED) or b"", dtype=np.int64)
        reply["responses"] = [agent.respond(r, q) for r in req["requests"]]
    elif stage == "finish":
        k = int(req["round"])
        mix = np.zeros_like(x)
        for resp in req["responses"]:
            mix += agent.finish(resp, delta)
        p = problems.problem(s)
        loss, g = p.loss_grad(x, problems.batch(p, s, node.party, k, 0, cfg.batch_size))
        schedule = cfg.schedule()
        step = schedule.stepsizes(k, x.size)  # private, per coordinate
        x = x + schedule.attenuation(k) * mix - step * g
        state.put(MODEL, x.astype("<f8").tobytes())
        reply["train_loss"] = loss
        if req.get("evaluate"):
            test_loss, acc = p.evaluate(x)
            reply.update(test_loss=test_loss, accuracy=acc if acc is not None else math.nan)
    else:
        raise ValueError(f"pdsgd has no stage {stage!r}")
    state.put(AGENT, agent.save())
    return reply
