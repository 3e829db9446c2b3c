"""DeComFL on a PyTorch model: four clients fine-tune a small MLP in place, sending one
scalar per perturbation per round; the server keeps the global model in its own module.
(Needs PyTorch: pip install "privopt[torch]".)"""

import torch

from privopt.protocols import scalar_fl
from privopt.torch import ZerothOrderClient, ZerothOrderServer

torch.manual_seed(0)
target = torch.nn.Linear(8, 1)
xs = [torch.randn(64, 8) for _ in range(4)]  # each client's own data
ys = [target(x).detach() for x in xs]


def make_model() -> torch.nn.Module:
    torch.manual_seed(1)  # every party builds the same starting weights
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def loss_fn(module, batch):
    x, y = batch
    return torch.nn.functional.mse_loss(module(x), y)


spec = scalar_fl.Spec(lr=0.02, local_steps=1, perturbations=4)
server = ZerothOrderServer(make_model(), spec, clients=4, seed=0)
clients = [ZerothOrderClient(make_model(), spec, id=i, loss_fn=loss_fn) for i in range(4)]


def global_loss() -> float:
    module = server.sync()  # the global model, written into the server's module
    with torch.no_grad():
        return sum(float(loss_fn(module, (x, y))) for x, y in zip(xs, ys)) / 4


start, up = global_loss(), 0
for _ in range(200):
    plan, who = server.begin_round(per_round=2)
    for i in who:
        clients[i].receive(server.catch_up(i))  # replays the rounds it missed, in place
        reply = clients[i].local_update(plan, [(xs[i], ys[i])])
        up += len(reply)
        server.receive(reply)
    server.finish_round()
end = global_loss()
print(f"loss {start:.4f} -> {end:.4f}, {up / 400:.0f} bytes up per participant-round")
assert end < 0.7 * start
