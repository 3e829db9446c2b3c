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

from ._native import secagg as _native

GraphParameters = _native.GraphParameters
Graph = _native.Graph
Quantizer = _native.Quantizer
StochasticQuantizer = _native.StochasticQuantizer
Client = _native.Client
Server = _native.Server
parameters = _native.parameters

__all__ = [
    "GraphParameters",
    "Graph",
    "Quantizer",
    "StochasticQuantizer",
    "Client",
    "Server",
    "parameters",
]
