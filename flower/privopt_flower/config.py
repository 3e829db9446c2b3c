"""The run configuration: Flower's flat run config (``data.dataset = …``) read into typed
settings, with every value checked before anything starts (one line per error)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from privopt.errors import ParameterError
from privopt.protocols import eezofl, pdsgd

# Flower refuses run-config keys its pyproject.toml does not list, so every key of privopt's
# [data] and [model] tables is listed there with a default; these say which keys each dataset,
# partition and model kind takes, so the defaults of one (a synthetic set's size, an MLP's
# width) never reach another. An optional count listed as 0 means "not set".
SYNTHETIC_ONLY = ("n_train", "n_test", "dim")
UNSET_WHEN_ZERO = ("pca", "max_train", "validation")
PARTITION_KEYS = {"iid": (), "dirichlet": ("alpha",), "shards": ("shards_per_client",)}
MODEL_KEYS = {
    "logistic": ("l2",),
    "least_squares": ("l2",),
    "mlp": ("hidden", "l2"),
    "cnn": ("c1", "c2", "kernel", "padding", "l2"),
    "minilm": ("trainable",),
}


class ConfigError(ValueError):
    """A run-config value is missing, of the wrong type or out of range."""


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"data.dataset": "x"}`` → ``{"data": {"dataset": "x"}}`` (Flower flattens tables)."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        node = nested
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{key}: {p} is both a value and a table")
        node[parts[-1]] = value
    return nested


def _get(table: Mapping[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = table.get(key, default)
    if value is None:
        raise ConfigError(f"{where}{key} is required")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where}{key} must be {kind.__name__}, got {value!r}")
    return value


P = TypeVar("P")


def read_table(cls: type[P], table: Mapping[str, Any], where: str) -> P:
    """The frozen dataclass ``cls`` from a run-config table: each field read with its annotated
    type (an int where a float is declared is widened), every field required (the app's
    pyproject.toml gives each its default), and a key the class does not declare refused."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where.rstrip('.')} must be a table of settings, got {table!r}")
    hints = get_type_hints(cls)
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(table) - set(names))
    if unknown:
        raise ConfigError(f"{where}{unknown[0]} is not a setting of {where.rstrip('.')}")
    values = {}
    for name in names:
        hint = hints[name]
        if get_origin(hint) is Literal:
            choices = get_args(hint)
            value = _get(table, name, str, None, where)
            if value not in choices:
                raise ConfigError(
                    f"{where}{name} must be one of {', '.join(choices)}, got {value!r}"
                )
            values[name] = value
        else:
            values[name] = _get(table, name, hint, None, where)
    return cls(**values)


S = TypeVar("S")


def _checked(where: str, make: Callable[..., S], *args: float) -> S:
    """``make(*args)``, its refusal (which names the field) as a config error naming the table."""
    try:
        return make(*args)
    except ParameterError as e:
        raise ConfigError(f"{where.rstrip('.')}: {e}") from None


@dataclass(frozen=True)
class ScalarFlParams:
    """``scalar_fl.*``: DeComFL (``rule = "decomfl"``) or HiSo (``"hiso"``)."""

    rule: Literal["decomfl", "hiso"]
    lr: float
    local_steps: int
    perturbations: int
    mu: float
    difference: Literal["forward", "central"]
    per_round: int
    staleness_bound: int
    batch_size: int
    nu: float
    eps: float
    weight_decay: float
    # Client-level DP on the scalars (privopt.protocols.scalar_fl.Privacy): 0 = none.
    epsilon: float
    delta: float
    clip: float
    noise_floor: float
    participations: int
    # Sum the scalars with SecAgg+ (always, with epsilon > 0).
    secagg: bool


@dataclass(frozen=True)
class DomeParams:
    """``dome.*``: DP federated Adam on a learned sketch, summed by SecAgg+."""

    k: int
    clip: float
    epsilon: float
    delta: float
    lr: float
    beta1: float
    beta2: float
    gamma_prime: float
    sketch: Literal["learned", "learned_no_probes", "random", "identity"]
    energy: float
    batch_size: int
    graph: Literal["complete", "auto"]
    dropout_rate: float
    corrupt_rate: float
    max_epsilon: float
    noise_floor: float


@dataclass(frozen=True)
class EezoflParams:
    """``eezofl.*``: the digital path, one xMK-CKKS-encrypted scalar per device per round; the
    step size and radius sequences of :class:`privopt.protocols.eezofl.Schedule`."""

    eta0: float
    eta_decay: float
    gamma0: float
    gamma_decay: float
    batch_size: int
    threshold: int
    distance_bits: float

    def __post_init__(self) -> None:
        self.schedule()  # refuse a bad sequence when the run config is read
        if self.threshold < 0 or self.threshold == 1:
            raise ConfigError(
                f"eezofl.threshold = {self.threshold}: use 0 (two thirds of the devices) or "
                "t >= 2 (one device alone must never decrypt)"
            )
        if self.distance_bits != 0 and not 16 <= self.distance_bits <= 64:
            raise ConfigError(
                f"eezofl.distance_bits = {self.distance_bits}: use 0 (smudging 2^20) or a "
                "statistical distance 2^-λ with λ in [16, 64]"
            )

    def threshold_for(self, members: int) -> int:
        """The threshold of a key of ``members`` devices (``members``: every one is needed)."""
        t = self.threshold or eezofl.default_threshold(members)
        return min(t, members)

    def schedule(self) -> eezofl.Schedule:
        return _checked(
            "eezofl.", eezofl.Schedule, self.eta0, self.eta_decay, self.gamma0, self.gamma_decay
        )


@dataclass(frozen=True)
class PdsgdParams:
    """``pdsgd.*``: Paillier decentralized SGD over a graph."""

    graph: str
    key_bits: int
    delta: float
    weight_max: float
    lambda0: float
    lambda_decay: float
    zeta_decay: float
    attenuation_a: float
    attenuation_b: float
    batch_size: int

    def __post_init__(self) -> None:
        self.schedule()

    def schedule(self) -> pdsgd.Schedule:
        """Algorithm 1's attenuation and private random stepsizes."""
        return _checked(
            "pdsgd.",
            pdsgd.Schedule,
            self.lambda0,
            self.lambda_decay,
            self.zeta_decay,
            self.attenuation_a,
            self.attenuation_b,
        )


@dataclass(frozen=True)
class DpfheParams:
    """``dpfhe.*``: Algorithm 4 on the data owner's CKKS-encrypted examples."""

    ring_n: int
    insecure: bool
    batch: int
    lr: float
    clip: float
    clip_bound: float
    sigmoid_degree: int
    sigmoid_bound: float
    epsilon: float
    delta: float
    threads: int


MethodParams = ScalarFlParams | DomeParams | EezoflParams | PdsgdParams | DpfheParams

# Each method's settings class, by the method's run-config name.
PARAMS: dict[str, type[MethodParams]] = {
    "scalar_fl": ScalarFlParams,
    "dome": DomeParams,
    "eezofl": EezoflParams,
    "pdsgd": PdsgdParams,
    "dpfhe": DpfheParams,
}
METHODS = tuple(PARAMS)


@dataclass(frozen=True)
class Settings:
    """What every method shares."""

    method: str
    seed: int
    rounds: int
    clients: int
    stage_timeout: float
    join_timeout: float
    eval_every: int
    out_dir: str
    data_dir: str
    data: dict[str, Any]
    model: dict[str, Any]
    # The method's own table (``scalar_fl.*``, ``dome.*``, …), read into its typed settings.
    params: MethodParams | None = None
    # Test-only switches (``debug.*``); see docs/flower.md.
    debug: dict[str, Any] = field(default_factory=dict)
    # A user's model and data (``privopt_flower.client_app(model_fn=...)``), trained instead
    # of the ``[data]``/``[model]`` tables; not a run-config key.
    task: Any = None

    def evaluates(self, done: int) -> bool:
        """Whether to score the model after ``done`` rounds (every ``eval-every``, and last)."""
        return done % self.eval_every == 0 or done == self.rounds

    def problem_tables(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ``[data]`` (with one partition per client) and ``[model]`` tables, each with
        only the keys its dataset, partition and model kind take."""
        data = {k: v for k, v in self.data.items() if k != "partition"}
        if not str(data.get("dataset", "")).startswith("synthetic_"):
            for key in SYNTHETIC_ONLY:
                data.pop(key, None)
        for key in UNSET_WHEN_ZERO:
            if data.get(key) == 0:
                data.pop(key)
        data["clients"] = self.clients
        partition = dict(self.data.get("partition", {"kind": "iid"}))
        kind = partition.get("kind", "iid")
        data["partition"] = {"kind": kind} | {
            k: v for k, v in partition.items() if k in PARTITION_KEYS.get(kind, ())
        }
        model_kind = self.model.get("kind")
        model = {"kind": model_kind} | {
            k: v for k, v in self.model.items() if k in MODEL_KEYS.get(str(model_kind), ())
        }
        return data, model


def parse(run_config: Mapping[str, Any]) -> Settings:
    """Reads and checks Flower's run config."""
    cfg = unflatten(run_config)
    method = _get(cfg, "method", str, None, "")
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    s = Settings(
        method=method,
        seed=_get(cfg, "seed", int, 0, ""),
        rounds=_get(cfg, "rounds", int, None, ""),
        clients=_get(cfg, "clients", int, None, ""),
        stage_timeout=_get(cfg, "stage-timeout", float, 60.0, ""),
        join_timeout=_get(cfg, "join-timeout", float, 120.0, ""),
        eval_every=_get(cfg, "eval-every", int, 1, ""),
        out_dir=_get(cfg, "out-dir", str, "", ""),
        data_dir=_get(cfg, "data-dir", str, "data", ""),
        data=dict(cfg.get("data", {})),
        model=dict(cfg.get("model", {})),
        params=read_table(PARAMS[method], cfg.get(method, {}), f"{method}."),
        debug=dict(cfg.get("debug", {})),
    )
    if not 1 <= s.rounds <= 1_000_000:
        raise ConfigError(f"rounds must be in 1..=1000000, got {s.rounds}")
    if not 1 <= s.clients <= 10_000:
        raise ConfigError(f"clients must be in 1..=10000, got {s.clients}")
    if not 0 < s.stage_timeout <= 86_400 or not 0 < s.join_timeout <= 86_400:
        raise ConfigError("stage-timeout and join-timeout must be in (0, 86400] seconds")
    if s.eval_every < 1:
        raise ConfigError(f"eval-every must be >= 1, got {s.eval_every}")
    if "dataset" not in s.data or "kind" not in s.model:
        raise ConfigError("data.dataset and model.kind are required")
    if s.model["kind"] not in MODEL_KEYS:
        raise ConfigError(
            f"model.kind must be one of {', '.join(MODEL_KEYS)}, got {s.model['kind']!r}"
        )
    partition = s.data.get("partition", {})
    if not isinstance(partition, dict) or partition.get("kind", "iid") not in PARTITION_KEYS:
        raise ConfigError(
            f"data.partition.kind must be one of {', '.join(PARTITION_KEYS)}, got {partition!r}"
        )
    if s.seed < 0:
        raise ConfigError(f"seed must be >= 0, got {s.seed}")
    return s


def method_params(s: Settings, cls: type[P]) -> P:
    """The run's method settings as ``cls`` (the class of the method asking)."""
    if not isinstance(s.params, cls):
        raise ConfigError(f"method {s.method} has no {cls.__name__}")
    return s.params


def app_pyproject() -> Path:
    """The app's ``pyproject.toml``: an installed wheel carries a copy inside the package; in
    the source tree it is beside the package."""
    here = Path(__file__).resolve().parent
    for path in (here / "pyproject.toml", here.parent / "pyproject.toml"):
        if path.is_file() and "[tool.flwr.app" in path.read_text():
            return path
    raise FileNotFoundError(f"no Flower app pyproject.toml inside or beside {here}")


def defaults(path: Path | str | None = None) -> dict[str, Any]:
    """The run config of an app's pyproject.toml (default: this app's), flat as Flower
    passes it."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11; Flower depends on tomli
        import tomli as tomllib  # type: ignore[no-redef]
    path = app_pyproject() if path is None else Path(path)
    with open(path, "rb") as f:
        table = tomllib.load(f)["tool"]["flwr"]["app"]["config"]
    flat: dict[str, Any] = {}

    def walk(t: Mapping[str, Any], prefix: str) -> None:
        for k, v in t.items():
            if isinstance(v, Mapping):
                walk(v, f"{prefix}{k}.")
            else:
                flat[prefix + k] = v

    walk(table, "")
    return flat
