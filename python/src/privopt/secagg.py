"""SecAgg+ (Bell et al., CCS 2020): a server learns the sum modulo 2^32 of the inputs of the
clients that survive a round, and nothing else, while clients drop out at any stage.

Everything is bytes in, bytes out, so the transport is yours::

    params = secagg.parameters(clients=100, dropout_rate=0.1, corrupt_rate=0.1)
    graph = secagg.Graph.harary(100, params.degree, seed)
    server = secagg.Server(session, round, graph, params.threshold, vector_len)
    client = secagg.Client(session, round, id, graph.neighbours(id), params.threshold, vector_len)

    server.receive(client.advertisement)        # stage 1, from each client
    to_clients = server.close_stage()           # {id: bytes}
    server.receive(client.share_keys(msg))      # stage 2
    to_clients = server.close_stage()
    server.receive(client.mask_input(msg, q))   # stage 3, q = quantizer.encode(x)
    to_clients = server.close_stage()
    server.receive(client.unmask(msg))          # stage 4
    total, contributors = server.finish()

A round below the threshold raises :class:`~privopt.errors.ProtocolError`; a message of another
round, session or client raises :class:`~privopt.errors.PeerMisbehaved`; bad bytes raise
:class:`~privopt.errors.MalformedMessage`. Nothing raised changes any state.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ._native import secagg as _native
from .errors import ParameterError

GraphParameters = _native.GraphParameters
Graph = _native.Graph
Quantizer = _native.Quantizer
StochasticQuantizer = _native.StochasticQuantizer
Client = _native.Client
Server = _native.Server
parameters = _native.parameters


#: Rounds of at most this many clients use a complete graph (:func:`secure_sum`): the
#: parameter finder's sparse graphs are sized for large rounds.
SMALL_ROUND = 32


def round_graph(
    n: int,
    *,
    sparse: bool,
    dropout_rate: float = 0.1,
    corrupt_rate: float = 0.1,
    seed: bytes,
) -> tuple[Graph, int]:
    """The graph and threshold of a round of ``n`` clients. Not ``sparse``: every pair masks
    and the threshold is a majority of each client's ``n − 1`` neighbours, so the server never
    holds both the self-mask and the masking-key shares of one client (the original SecAgg's
    bound). ``sparse``: SecAgg+'s Harary graph and threshold from :func:`parameters` for the
    dropout and corruption rates (complete when that degree reaches ``n − 1``), laid out by
    ``seed``."""
    if not sparse:
        return Graph.complete(n), (n - 1) // 2 + 1
    params = parameters(n, dropout_rate=dropout_rate, corrupt_rate=corrupt_rate)
    if params.degree >= n - 1:
        return Graph.complete(n), params.threshold
    return Graph.harary(n, params.degree, seed), params.threshold


class SecureSum(NamedTuple):
    """What :func:`secure_sum` returns."""

    #: The sum modulo 2^32 of the contributors' vectors.
    total: npt.NDArray[np.uint32]
    #: The clients whose vectors are in the sum, increasing.
    contributors: list[int]
    #: Bytes each client sent (all its SecAgg+ messages of the round).
    sent: dict[int, int]
    #: Bytes each client received.
    received: dict[int, int]


def secure_sum(
    inputs: Mapping[int, npt.NDArray[np.uint32]],
    *,
    drop: Mapping[int, int] | None = None,
    dropout_rate: float = 0.1,
    corrupt_rate: float = 0.1,
    round: int = 0,
) -> SecureSum:
    """One SecAgg+ round in this process among the clients ``inputs`` names (any ids), each
    with its ``uint32`` vector: the sum modulo 2^32 of the survivors' vectors, the survivors
    (increasing) and each client's traffic. ``drop`` makes client ``i`` vanish before stage
    ``drop[i]`` (2: before sharing keys, 3: before masking — its input is not in the sum —,
    4: before unmasking). Up to :data:`SMALL_ROUND` clients share one complete graph whose
    threshold is a majority of each client's ``n − 1`` neighbours (``(n − 1)//2 + 1``: 3
    clients tolerate no dropout, 4 and 5 one, 6 and 7 two …); larger rounds take the Harary
    graph and threshold :func:`parameters` gives for ``dropout_rate`` and ``corrupt_rate``. A
    round below the threshold raises :class:`~privopt.errors.ProtocolError`. For simulations
    and tests: a deployment runs the same state machines across processes."""
    if not isinstance(inputs, Mapping):
        raise ParameterError(
            f"inputs must map client ids to uint32 vectors, got {type(inputs).__name__}"
        )
    vectors: dict[int, npt.NDArray[np.uint32]] = {}
    for cid, v in inputs.items():
        if not isinstance(cid, int) or isinstance(cid, bool) or not 0 <= cid < 1 << 20:
            raise ParameterError(f"client ids must be ints in 0..2^20, got {cid!r}")
        a = np.asarray(v)
        if a.ndim != 1 or a.dtype != np.uint32:
            raise ParameterError(
                f"client {cid}'s input must be a 1-D uint32 vector, got {a.dtype} of shape "
                f"{a.shape}"
            )
        vectors[cid] = np.ascontiguousarray(a)
    inputs = vectors
    ids = sorted(inputs)
    if len(ids) < 3:
        raise ParameterError(
            f"a secure sum needs at least 3 clients (SecAgg+'s threshold must exceed half of "
            f"each client's neighbours and be at least 2), got {len(ids)}"
        )
    lengths = {len(v) for v in inputs.values()}
    if len(lengths) != 1:
        raise ParameterError(f"the inputs have different lengths: {sorted(lengths)}")
    if drop is not None and not isinstance(drop, Mapping):
        raise ParameterError(f"drop must map client ids to stages, got {type(drop).__name__}")
    drop = dict(drop or {})
    if unknown := sorted(set(drop) - set(ids)):
        raise ParameterError(f"drop names clients that are not in the round: {unknown}")
    if bad := sorted(stage for stage in drop.values() if stage not in (2, 3, 4)):
        raise ParameterError(f"a client drops before stage 2, 3 or 4, got {bad}")
    n, length = len(ids), lengths.pop()
    graph, threshold = round_graph(
        n,
        sparse=n > SMALL_ROUND,
        dropout_rate=dropout_rate,
        corrupt_rate=corrupt_rate,
        seed=os.urandom(32),
    )
    session = os.urandom(16)
    server = Server(session, round, graph, threshold, length)
    clients = [Client(session, round, i, graph.neighbours(i), threshold, length) for i in range(n)]
    sent, received = dict.fromkeys(ids, 0), dict.fromkeys(ids, 0)
    for i, c in enumerate(clients):
        sent[ids[i]] += len(c.advertisement)
        server.receive(c.advertisement)
    for stage in (2, 3, 4):
        for i, message in server.close_stage().items():
            received[ids[i]] += len(message)
            if drop.get(ids[i], 5) <= stage:
                continue
            reply = clients[i].handle(message, inputs[ids[i]])
            sent[ids[i]] += len(reply)
            server.receive(reply)
    total, survivors = server.finish()
    return SecureSum(total, [ids[i] for i in survivors], sent, received)


__all__ = [
    "GraphParameters",
    "Graph",
    "Quantizer",
    "StochasticQuantizer",
    "Client",
    "Server",
    "parameters",
    "round_graph",
    "secure_sum",
    "SecureSum",
    "SMALL_ROUND",
]
