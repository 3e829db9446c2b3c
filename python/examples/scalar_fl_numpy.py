"""Scalar-only federated learning (DeComFL) of a user's own numpy model: logistic regression
on 10 clients' data. Only seeds and scalars cross the wire after the start; a client that
misses rounds catches up by replaying them."""

import numpy as np

from privopt.protocols import scalar_fl

rng = np.random.default_rng(3)
d, clients = 20, 10
w_true = rng.normal(size=d)
data = []
for _ in range(clients):
    x = rng.normal(size=(200, d))
    data.append((x, (x @ w_true + 0.5 * rng.normal(size=200) > 0).astype(float)))


def logistic_loss(x, y):
    def loss(step, w):  # called by privopt for each local step's probes
        z = x @ w
        return float(np.mean(np.logaddexp(0.0, z) - y * z))

    return loss


def accuracy(w):
    return np.mean([np.mean(((x @ w) > 0) == y) for x, y in data])


spec = scalar_fl.Spec(lr=0.05, local_steps=1, perturbations=5)
w0 = np.zeros(d)
server = scalar_fl.Server(spec, w0, clients=clients, seed=0)
parties = [scalar_fl.Client(i, spec, w0) for i in range(clients)]
up = 0
for r in range(400):
    plan, who = server.begin_round(per_round=4)
    for i in who:
        parties[i].receive(server.catch_up(i))
        reply = parties[i].local_update(plan, logistic_loss(*data[i]))
        up += len(reply)
        server.receive(reply)
    server.finish_round()
    if r % 100 == 99:
        print(f"round {r + 1}: accuracy {accuracy(server.x):.3f}")
print(f"uplink {up / (400 * 4):.0f} bytes per reply (the model is {8 * d} bytes)")
assert accuracy(server.x) > 0.8
