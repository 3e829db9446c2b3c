"""A SecAgg+ round driven from Python: 20 clients, a Harary graph from the parameter finder,
clients dropping at two stages; the server learns only the survivors' sum."""

import os

import numpy as np

from privopt import secagg

n, length = 20, 1000
session, round_ = os.urandom(16), 0
params = secagg.parameters(n, dropout_rate=0.1, corrupt_rate=0.1)
graph = secagg.Graph.harary(n, params.degree, os.urandom(32))
quantizer = secagg.Quantizer(clip=1.0, max_summands=n)
server = secagg.Server(session, round_, graph, params.threshold, length)
clients = {
    i: secagg.Client(session, round_, i, graph.neighbours(i), params.threshold, length)
    for i in range(n)
}
rng = np.random.default_rng(2)
updates = {i: rng.uniform(-1, 1, length) for i in range(n)}

for c in clients.values():
    server.receive(c.advertisement)
drops = {3: {4}, 4: {9}}  # client 4 vanishes before masking, 9 before unmasking
for stage in (2, 3, 4):
    for i, msg in server.close_stage().items():
        if i in drops.get(stage, ()):
            continue
        server.receive(clients[i].handle(msg, quantizer.encode(updates[i])))
total, contributors = server.finish()
want = sum(updates[i] for i in contributors)
err = np.abs(quantizer.decode_sum(total) - want).max()
print(
    f"degree {params.degree}, threshold {params.threshold}; {len(contributors)} of {n} in the "
    f"sum, max error {err:.2e} (bound {quantizer.sum_error_bound(len(contributors)):.2e})"
)
assert 4 not in contributors and 9 in contributors
