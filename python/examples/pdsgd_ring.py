"""Paillier decentralized SGD with a numpy model: four agents on a ring, no server. Each
iteration every agent takes a gradient step on its own data and mixes with its neighbours
through the Paillier exchange, which reveals to it only w_ij·w_ji·(x_j − x_i), never a
neighbour's state or weight. Each agent's weights k_ij are private integers; delta quantizes
the states."""

import numpy as np

from privopt.protocols import pdsgd

rng = np.random.default_rng(4)
n, d, delta, lr = 4, 5, 1e-3, 0.05
x_true = rng.normal(size=d)
data = []
for _ in range(n):
    a = rng.normal(size=(30, d))
    data.append((a, a @ x_true + 0.01 * rng.normal(size=30)))

agents = [pdsgd.Agent(i, bits=2048) for i in range(n)]
edges = [(i, (i + 1) % n) for i in range(n)]
for i, j in edges:  # each side picks its own private weight integer (w = k·delta)
    agents[i].add_neighbour(agents[j].announcement, int(rng.integers(200, 400)))
    agents[j].add_neighbour(agents[i].announcement, int(rng.integers(200, 400)))

x = [np.zeros(d) for _ in range(n)]


def loss(v):
    return float(np.mean([np.mean((a @ v - b) ** 2) for a, b in data]))


start = loss(np.mean(x, axis=0))
for it in range(25):
    q = [np.round(v / delta).astype(np.int64) for v in x]  # quantized states
    mix = [np.zeros(d) for _ in range(n)]
    for i, j in edges + [(j, i) for i, j in edges]:  # both directions of every edge
        request = agents[i].initiate(j, it, q[i])  # bytes; could cross any network
        response = agents[j].respond(request, q[j])
        mix[i] += agents[i].finish(response, delta)
    grads = [2 * a.T @ (a @ v - b) / len(b) for v, (a, b) in zip(x, data)]
    x = [v + m - lr * g for v, m, g in zip(x, mix, grads)]

spread = max(np.abs(v - np.mean(x, axis=0)).max() for v in x)
print(
    f"loss {start:.3f} -> {loss(np.mean(x, axis=0)):.3f}, disagreement between agents {spread:.3f}"
)
assert loss(np.mean(x, axis=0)) < 0.2 * start
