"""Your own model on the methods: a PyTorch model and data handed to privopt_flower.Task train
with every method in process, give the built-in engine's numbers on the same logistic problem,
run in deployment mode, and refuse bad models, data and methods with one clear line."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from privopt.problem import Problem

from privopt_flower import Task, config, inprocess
from privopt_flower.dev.localhost import Localhost

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "pytorch-mnist"
DATA = Path(os.environ.get("PRIVOPT_DATA", Path(__file__).resolve().parents[2] / "data"))

SMALL: dict[str, Any] = {
    "seed": 0,
    "clients": 3,
    "eval-every": 100,
    "data.dataset": "synthetic_logistic",
    "data.n_train": 600,
    "data.n_test": 200,
    "data.dim": 8,
    "model.kind": "logistic",
}


class Logistic(torch.nn.Module):
    """privopt's logistic model in PyTorch (d weights, then the bias; zero start)."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(d, 1, dtype=torch.float64)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).squeeze(-1)


def log_loss(module: torch.nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    z = module(x)
    return (torch.nn.functional.softplus(z) - y * z).mean()


def logistic_task(settings: dict[str, Any]) -> Task:
    """The built-in problem's data and partition, as a user would hand them over."""
    s = config.parse({**config.defaults(), **settings})
    data, model = s.problem_tables()
    p = Problem(data, model, seed=s.seed)

    def data_fn(i: int, n: int, run_config: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = p.rows(p.client_indices(i))
        return torch.from_numpy(x), torch.from_numpy(y)

    test_x, test_y = p.rows(np.arange(p.sizes[1], dtype=np.uint64))

    def evaluate(module: torch.nn.Module) -> tuple[float, float]:
        # The engine's test loss is over its test set; score the same points.
        w = np.concatenate(
            [module.linear.weight.detach().numpy().ravel(), module.linear.bias.detach().numpy()]
        )
        loss, acc = p.evaluate(w)
        return loss, acc if acc is not None else math.nan

    del test_x, test_y
    return Task(model_fn=Logistic, data_fn=data_fn, loss_fn=log_loss, evaluate_fn=evaluate)


@pytest.mark.parametrize(
    "method,extra",
    [
        ("scalar_fl", {"rounds": 8, "scalar_fl.lr": 0.05}),
        ("scalar_fl", {"rounds": 8, "scalar_fl.lr": 0.05, "scalar_fl.rule": "hiso"}),
        ("dome", {"rounds": 5, "dome.epsilon": 0.0, "dome.lr": 0.05}),
    ],
)
def test_a_torch_model_gives_the_engines_run(method, extra):
    """The same config and seed through the Flower driver, once with privopt's Rust model and
    once with the user's PyTorch model: the same run to rounding."""
    settings = {**SMALL, "method": method, **extra}
    want = inprocess.run(settings)
    got = logistic_task(settings).run_inprocess(settings)
    assert got["events"] == want["events"] == []
    assert got["test_loss"] == pytest.approx(want["test_loss"], rel=1e-9)
    assert got["accuracy"] == want["accuracy"]


def test_eezofl_and_pdsgd_train_a_torch_model():
    for method, extra in [
        ("eezofl", {"rounds": 12}),
        ("pdsgd", {"rounds": 4, "pdsgd.key_bits": 1024}),
    ]:
        settings = {**SMALL, "method": method, **extra}
        want = inprocess.run(settings)
        got = logistic_task(settings).run_inprocess(settings)
        assert not got["events"], got["events"]
        # Random (private) stepsizes and fresh encryption noise: close, not equal.
        assert got["test_loss"] == pytest.approx(want["test_loss"], rel=0.05), method
        assert got["test_loss"] < math.log(2)  # below the zero model's loss


def test_bad_models_data_and_methods_are_one_line_errors():
    settings = {**SMALL, "method": "scalar_fl", "rounds": 1}
    with pytest.raises(config.ConfigError, match="method 'dpfhe' does not train a user model"):
        Task(model_fn=Logistic).settings({**settings, "method": "dpfhe"})
    with pytest.raises(config.ConfigError, match="model_fn returned dict"):
        Task(model_fn=dict).settings(settings)  # type: ignore[arg-type]
    frozen = Task(model_fn=lambda: Logistic().requires_grad_(False))
    with pytest.raises(ValueError, match="Logistic has no trainable parameters"):
        frozen.settings(settings)
    with pytest.raises(ValueError, match="selects none"):
        Task(model_fn=Logistic).settings({**settings, "train-params": "conv"})

    # A client whose data or loss is broken drops out of the round, named; the others go on.
    def data_fn(i: int, n: int, rc: Any) -> Any:
        if i == 1:
            return [torch.zeros(4, 8)], "not a dataset"
        return torch.zeros(10, 8, dtype=torch.float64), torch.zeros(10, dtype=torch.float64)

    out = Task(model_fn=Logistic, data_fn=data_fn, loss_fn=log_loss).run_inprocess(settings)
    assert any("party 1: ConfigError: data_fn(1, 3) must return" in e for e in out["events"])

    def nan_loss(module: torch.nn.Module, batch: Any) -> torch.Tensor:
        return log_loss(module, batch) * math.nan

    good = Task(model_fn=Logistic, data_fn=data_fn, loss_fn=nan_loss)
    out = good.run_inprocess({**settings, "clients": 1})
    assert any("party 0" in e and "dropped" in e for e in out["events"]), out["events"]


def test_train_params_selects_what_the_methods_train():
    settings = {
        **SMALL,
        "method": "dome",
        "rounds": 3,
        "dome.epsilon": 0.0,
        "dome.k": 4,
        "train-params": "weight",
    }
    task = logistic_task(settings)
    s = task.settings(settings)
    assert s.task.num_params == 8  # only the weights are trained and travel
    out = task.run_inprocess(settings)
    assert not out["events"]
    assert s.task.params.names == ["linear.weight"]
    # The bias never moved from its start.
    assert float(s.task.module.linear.bias.detach()) == 0.0


needs_mnist = pytest.mark.skipif(
    not (DATA / "mnist" / "train-images-idx3-ubyte").is_file(),
    reason=f"needs MNIST in {DATA}: privopt data fetch mnist",
)


def example_task() -> tuple[Task, dict[str, Any]]:
    import sys

    sys.path.insert(0, str(EXAMPLE))
    try:
        from pytorch_mnist.task import Net, load_partition, load_test
    finally:
        sys.path.remove(str(EXAMPLE))
    cfg = {**config.defaults(EXAMPLE / "pyproject.toml"), "data-dir": str(DATA)}
    return Task(model_fn=Net, data_fn=load_partition, test_fn=load_test), cfg


@needs_mnist
def test_the_pytorch_mnist_example_learns_in_process():
    task, cfg = example_task()
    cfg = {**cfg, "rounds": 20, "clients": 3, "examples-per-client": 500, "test-examples": 500}
    out = task.run_inprocess(
        {**cfg, "method": "dome", "dome.epsilon": 0.0, "dome.sketch": "identity"}
    )
    assert out["accuracy"] > 0.5 and not out["events"]
    for method in ("scalar_fl", "eezofl"):
        out = task.run_inprocess({**cfg, "method": method, "rounds": 2})
        assert not out["events"] and math.isfinite(out["test_loss"])


@needs_mnist
@pytest.mark.localhost
def test_the_pytorch_mnist_example_in_deployment_equals_in_process(tmp_path):
    task, cfg = example_task()
    run = {
        "method": "dome",
        "rounds": 2,
        "clients": 3,
        "eval-every": 2,
        "dome.epsilon": 0.0,
        "examples-per-client": 300,
        "test-examples": 300,
        "data-dir": str(DATA),
    }
    with Localhost(tmp_path, 3, preload=["torch"]) as fed:
        got = fed.run(EXAMPLE, run)
    want = task.run_inprocess({**cfg, **run})
    assert got["events"] == want["events"] == []
    assert got["test_loss"] == pytest.approx(want["test_loss"], rel=1e-12)
    assert got["accuracy"] == want["accuracy"]
