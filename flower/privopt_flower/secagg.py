"""A drop-in for Flower's SecAgg+, backed by privopt's Rust SecAgg+.

An existing Flower app switches by changing two imports::

    # from flwr.server.workflow import SecAggPlusWorkflow
    # from flwr.client.mod import secaggplus_mod
    from privopt_flower.secagg import SecAggPlusWorkflow, secaggplus_mod

    workflow = DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(num_shares=3,
                                                               reconstruction_threshold=2))
    client_app = ClientApp(client_fn=client_fn, mods=[secaggplus_mod])

The workflow and the mod take Flower's arguments and give Flower's result: the strategy's
``aggregate_fit`` sees only the weighted average of the sampled clients' parameters (each
client uploads ``[w, w·params]`` masked, ``w`` its ``num_examples`` over ``max_weight``,
clipped to ``clipping_range`` and stochastically quantized to ``quantization_range`` levels
with Flower's own quantizer, summed modulo ``modulus_range``). Apps on the Message API
(``@app.main()`` with a ``Grid``) call :func:`secure_sum` instead.

Where this differs from Flower's (flwr 1.41):

- The cryptography is privopt's SecAgg+ (``privopt.secagg``, Bell et al. 2020): X25519 key
  agreement, HKDF-SHA256 bound to the session, round and both ends, Shamir shares sealed
  with AES-128-GCM, masks from AES-128-CTR, in Rust (docs/secagg.md). Flower's stage names are kept (``setup``,
  ``share_keys``, ``collect_masked_vectors``, ``unmask``); the messages are privopt's bytes in
  a config record of their own (``privopt.secaggplus``), so this mod never pairs silently with
  Flower's workflow or the other way round.
- A client answers one unmask request per round and never reveals, for one neighbour, both
  the self-mask share and the masking-key share; the server's list of dropped clients is
  checked against what each client saw (a server that calls a client dead to some neighbours
  and alive to others is caught). Flower's mod answers whatever the unmask request lists.
- The threshold counts the neighbours' shares only (``num_shares − 1`` neighbours; a client
  keeps no share of its own secrets) and must exceed half of them: at or below half, a server
  that lies about dropouts can learn a client's input. Flower's client keeps one share of its
  own, so at the same ``num_shares`` and threshold a Flower round survives one more dropout
  among a live client's neighbours; here settings below the bound raise, naming it.
- A client refuses a train message that carries no SecAgg+ configuration, so a misconfigured
  (or malicious) server cannot collect a plaintext update from it.
- ``modulus_range`` may be any power of two up to 2^32 (sums are taken modulo 2^32, then
  reduced).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.app.message_type import MessageType
from flwr.clientapp.typing import ClientAppCallable
from flwr.common.secure_aggregation.quantization import dequantize
from privopt import secagg
from privopt.errors import PrivoptError

__all__ = [
    "RECORD",
    "SecAggPlusWorkflow",
    "SecureSum",
    "Stage",
    "secaggplus_mod",
    "secure_sum",
]

log = logging.getLogger("privopt_flower.secagg")

RECORD = "privopt.secaggplus"
"""The config record that carries this protocol's fields in every message."""
STATE = "privopt.secaggplus.state"
"""The client's context-state record (its SecAgg+ client between stages)."""
MAX_MODULUS = 2**32


class Stage:
    """Flower's SecAgg+ stage names, kept."""

    SETUP = "setup"
    SHARE_KEYS = "share_keys"
    COLLECT_MASKED_VECTORS = "collect_masked_vectors"
    UNMASK = "unmask"


@dataclass(frozen=True)
class Quantization:
    """Flower's SecAgg+ encoding of ``[w, w·params]`` as integers."""

    clipping_range: float
    quantization_range: int
    modulus_range: int
    max_weight: float

    def encode(self, arrays: Sequence[npt.NDArray[Any]], weight: float) -> npt.NDArray[np.uint32]:
        """One client's ``[q_ratio, quantize(params · dq_ratio)]``, flattened: Flower's
        ``_collect_masked_vectors`` before the masks, its stochastic rounding included (up
        with probability the fractional part). The rounding runs in Rust
        (:class:`privopt.secagg.StochasticQuantizer`, 32 random bits per coordinate from an
        OS-keyed AES-CTR stream); Flower's draws from NumPy's global legacy generator, which
        takes most of its client time at large d."""
        ratio = weight / self.max_weight
        if ratio > 1:
            log.warning(
                "weight %s exceeds max_weight %s: the sum may overflow", weight, self.max_weight
            )
        q_ratio = round(ratio * self.quantization_range)
        dq_ratio = q_ratio / self.quantization_range
        code = secagg.StochasticQuantizer(self.clipping_range, self.quantization_range)
        flat = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
        words = code.encode(np.concatenate(flat) if flat else np.zeros(0), dq_ratio)
        return np.concatenate([np.array([q_ratio], dtype=np.uint32), words])

    def decode(
        self, total: npt.NDArray[np.uint32], contributors: int, shapes: Sequence[tuple[int, ...]]
    ) -> tuple[list[npt.NDArray[np.float64]], float]:
        """The weighted average from the sum of ``contributors`` encodings (Flower's
        ``unmask_stage`` after the masks), and the total weight ``Σ w``."""
        reduced = total.astype(np.int64) % self.modulus_range
        q_total = int(reduced[0])
        if q_total == 0:
            raise ValueError("the contributors' weights sum to zero: no average exists")
        flat = dequantize([reduced[1:]], self.clipping_range, self.quantization_range)[0]
        flat = (flat - (contributors - 1) * self.clipping_range) * (
            self.quantization_range / q_total
        )
        return unflatten(flat, shapes), q_total * self.max_weight / self.quantization_range


def _check_settings(
    num_shares: float,
    reconstruction_threshold: float,
    max_weight: float,
    clipping_range: float,
    quantization_range: int,
    modulus_range: int,
    timeout: float | None,
) -> None:
    """Flower's checks of the workflow's arguments, plus the modulus bound of privopt's sum."""
    if isinstance(num_shares, bool) or not isinstance(num_shares, (int, float)):
        raise TypeError("`num_shares` must be of type int or float.")
    if isinstance(num_shares, int) and num_shares != 1 and num_shares <= 2:
        raise ValueError("`num_shares` as an integer must be greater than 2.")
    if isinstance(num_shares, float) and num_shares <= 0:
        raise ValueError("`num_shares` as a float must be greater than 0.")
    t = reconstruction_threshold
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError("`reconstruction_threshold` must be of type int or float.")
    if isinstance(t, int) and t != 1 and isinstance(num_shares, int) and t >= num_shares:
        raise ValueError("`reconstruction_threshold` must be less than `num_shares`.")
    if isinstance(t, float) and not 0 < t <= 1:
        raise ValueError(
            "If `reconstruction_threshold` is a float, it must be greater than 0 and less "
            "than or equal to 1."
        )
    if not max_weight > 0:
        raise ValueError("`max_weight` must be greater than 0.")
    if not (math.isfinite(clipping_range) and clipping_range > 0):
        raise ValueError("`clipping_range` must be a finite number greater than 0.")
    if (
        isinstance(quantization_range, bool)
        or not isinstance(quantization_range, int)
        or quantization_range <= 0
    ):
        raise ValueError("`quantization_range` must be an integer and greater than 0.")
    if not isinstance(modulus_range, int) or modulus_range <= quantization_range:
        raise ValueError(
            "`modulus_range` must be an integer and greater than `quantization_range`."
        )
    if modulus_range.bit_count() != 1 or modulus_range > MAX_MODULUS:
        raise ValueError("`modulus_range` must be a power of 2, at most 2**32.")
    if timeout is not None and not timeout > 0:
        raise ValueError("`timeout` must be None or greater than 0.")


def _round_shape(
    num_shares: float, reconstruction_threshold: float, sampled: int
) -> tuple[int, int]:
    """Flower's share count and threshold for ``sampled`` clients, as privopt's graph degree
    (neighbours; Flower's count includes the client's own share) and threshold."""
    if isinstance(num_shares, float) or num_shares == 1:
        shares = round(float(num_shares) * sampled)
        if shares < sampled and shares % 2 == 0:
            shares += 1
        if shares <= 2:
            shares = sampled
    else:
        shares = num_shares
    if isinstance(reconstruction_threshold, float) or reconstruction_threshold == 1:
        threshold = max(round(float(reconstruction_threshold) * shares), 2)
    else:
        threshold = reconstruction_threshold
    if sampled != shares and shares % 2 == 0:
        shares += 1
    degree = min(shares - 1, sampled - 1)
    if degree % 2 == 1 and sampled % 2 == 1 and degree < sampled - 1:
        degree += 1  # a Harary graph of odd degree needs an even number of clients
    if not degree / 2 < threshold <= degree:
        raise ValueError(
            f"SecAgg+ with {sampled} clients, {degree} neighbours each (num_shares = "
            f"{shares}) and reconstruction_threshold = {threshold}: the threshold must exceed "
            f"half the neighbours ({degree // 2}) and be at most {degree}; at or below half, "
            "a server that lies about dropouts can unmask a client's input"
        )
    return degree, threshold


@dataclass
class AggregateResult:
    """What a private aggregation of the clients' arrays returns."""

    arrays: ArrayRecord
    """The aggregate over the contributors (each subclass says which)."""
    weight: float
    """``Σ w_i`` over the contributors (``w_i`` = 1 unless weighted)."""
    replies: dict[int, Message]
    """Each contributor's reply (its metrics and configs; its arrays cleared)."""
    dropped: dict[int, str] = field(default_factory=dict)
    """Nodes that left the round, with why."""


@dataclass
class SecureSum(AggregateResult):
    """What :func:`secure_sum` returns: ``arrays`` is ``Σ w_i · x_i``; divide by ``weight``
    for the (weighted) mean."""


@dataclass
class Round:
    """One SecAgg+ round's outcome, from the server's side."""

    average: list[npt.NDArray[np.float64]]
    weight: float
    replies: dict[int, Message]
    dropped: dict[int, str]


def send(
    grid: Any,
    requests: Mapping[int, RecordDict],
    group: str,
    timeout: float | None,
    dropped: dict[int, str],
    stage: str,
) -> dict[int, Message]:
    """Sends each node its request; returns the replies that arrived without an error and
    records the others in ``dropped``."""
    messages = [
        Message(content=content, dst_node_id=node, message_type=MessageType.TRAIN, group_id=group)
        for node, content in requests.items()
    ]
    replies: dict[int, Message] = {}
    for msg in grid.send_and_receive(messages, timeout=timeout):
        node = msg.metadata.src_node_id
        if node not in requests:
            continue
        if msg.has_error():
            dropped[node] = f"{stage}: {msg.error.reason or f'error {msg.error.code}'}"
        else:
            replies[node] = msg
    for node in requests:
        if node not in replies and node not in dropped:
            dropped[node] = f"{stage}: no reply" + (f" within {timeout:g} s" if timeout else "")
    return replies


def _run_round(
    grid: Any,
    train_contents: Mapping[int, RecordDict],
    shapes: Sequence[tuple[int, ...]],
    quant: Quantization,
    num_shares: float,
    reconstruction_threshold: float,
    server_round: int,
    timeout: float | None,
    weighted: bool = True,
) -> Round:
    """Setup, share keys, collect masked vectors (the train contents go out here), unmask.
    ``weighted``: each client's weight is its reply's example count (else 1)."""
    nodes = sorted(train_contents)
    if len(nodes) < 2:
        raise ValueError(f"SecAgg+ needs at least 2 clients, got {len(nodes)}")
    degree, threshold = _round_shape(num_shares, reconstruction_threshold, len(nodes))
    graph = (
        secagg.Graph.complete(len(nodes))
        if degree >= len(nodes) - 1
        else secagg.Graph.harary(len(nodes), degree, os.urandom(32))
    )
    vector_len = 1 + sum(math.prod(s) for s in shapes)
    session = os.urandom(16)
    server = secagg.Server(session, server_round, graph, threshold, vector_len)
    node_of = dict(enumerate(nodes))
    group = str(server_round)
    dropped: dict[int, str] = {}

    def deliver(replies: Mapping[int, Message], stage: str) -> None:
        for node, msg in replies.items():
            try:
                server.receive(cast(bytes, msg.content.config_records[RECORD]["msg"]))
            except (PrivoptError, KeyError, TypeError) as e:
                dropped[node] = f"{stage}: reply refused ({e})"

    setup = {
        node_of[i]: RecordDict(
            {
                RECORD: ConfigRecord(
                    {
                        "stage": Stage.SETUP,
                        "session": session,
                        "round": server_round,
                        "id": i,
                        "neighbours": graph.neighbours(i),
                        "threshold": threshold,
                        "vector_len": vector_len,
                        "clipping_range": float(quant.clipping_range),
                        "quantization_range": quant.quantization_range,
                        "modulus_range": quant.modulus_range,
                        "max_weight": float(quant.max_weight),
                        "weighted": weighted,
                    }
                )
            }
        )
        for i in range(len(nodes))
    }
    log.debug("[setup] configuring %d clients", len(nodes))
    deliver(send(grid, setup, group, timeout, dropped, Stage.SETUP), Stage.SETUP)
    masked: dict[int, Message] = {}
    for stage in (Stage.SHARE_KEYS, Stage.COLLECT_MASKED_VECTORS, Stage.UNMASK):
        outbox = server.close_stage()  # raises when too few clients are left
        requests: dict[int, RecordDict] = {}
        for sid, payload in outbox.items():
            node = node_of[sid]
            content = (
                copy_content(train_contents[node])
                if stage == Stage.COLLECT_MASKED_VECTORS
                else RecordDict()
            )
            content.config_records[RECORD] = ConfigRecord({"stage": stage, "msg": payload})
            requests[node] = content
        log.debug("[%s] %d clients", stage, len(requests))
        replies = send(grid, requests, group, timeout, dropped, stage)
        deliver(replies, stage)
        if stage == Stage.COLLECT_MASKED_VECTORS:
            masked = {n: m for n, m in replies.items() if n not in dropped}
    total, contributors = server.finish()
    average, weight = quant.decode(total, len(contributors), shapes)
    survivors = {node_of[c] for c in contributors}
    for node in survivors:
        dropped.pop(node, None)  # a late unmask failure does not undo a counted input
    return Round(
        average=average,
        weight=weight,
        replies={n: m for n, m in masked.items() if n in survivors},
        dropped={n: why for n, why in dropped.items() if n not in survivors},
    )


def copy_content(content: RecordDict) -> RecordDict:
    """A shallow copy of a RecordDict (one per recipient; the records themselves are shared)."""
    out = RecordDict()
    for key, record in content.items():
        out[key] = record
    return out


def round_request(
    node_ids: Iterable[int],
    content: RecordDict | Mapping[int, RecordDict],
    template: ArrayRecord | None,
    what: str,
) -> tuple[dict[int, RecordDict], list[str], list[tuple[int, ...]]]:
    """Each node's train content (one RecordDict for all, or one per node), and the keys and
    shapes of the arrays the replies carry (``template``, default: the first ArrayRecord of
    the content). ``what`` names the caller in errors."""
    nodes = sorted(set(node_ids))
    per_node = (
        {n: content for n in nodes}
        if isinstance(content, RecordDict)
        else {n: content[n] for n in nodes}
    )
    if template is None:
        first = next(iter(per_node.values()), RecordDict())
        records = list(first.array_records.values())
        if not records:
            raise ValueError(f"{what} needs a template ArrayRecord (the content has none)")
        template = records[0]
    return per_node, list(template.keys()), [tuple(a.shape) for a in template.to_numpy_ndarrays()]


def weight_cap(max_weight: float | None, weighted: bool) -> float:
    """``max_weight``, or its default: 1000 examples when weighted, else 1."""
    return max_weight if max_weight is not None else (1000.0 if weighted else 1.0)


def record_of(keys: Sequence[str], arrays: Sequence[npt.NDArray[Any]]) -> ArrayRecord:
    """The arrays under the template's keys, in order."""
    return ArrayRecord({k: Array(np.asarray(a)) for k, a in zip(keys, arrays, strict=True)})


def unflatten(flat: npt.NDArray[np.float64], shapes: Sequence[tuple[int, ...]]) -> list[Any]:
    """``flat`` cut into arrays of ``shapes``, in order."""
    out, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(flat[start : start + size].reshape(shape))
        start += size
    return out


def secure_sum(
    grid: Any,
    node_ids: Iterable[int],
    content: RecordDict | Mapping[int, RecordDict],
    *,
    server_round: int,
    template: ArrayRecord | None = None,
    weighted: bool = False,
    num_shares: float = 1.0,
    reconstruction_threshold: float = 0.5,
    clipping_range: float = 8.0,
    quantization_range: int = 4194304,
    modulus_range: int = 4294967296,
    max_weight: float | None = None,
    timeout: float | None = None,
) -> SecureSum:
    """Sends ``content`` (one RecordDict for all, or one per node) as a train message to
    ``node_ids`` whose ClientApps run :func:`secaggplus_mod`, and returns the sum of the
    arrays they reply with, weighted by their ``num-examples`` metric if ``weighted``,
    without the server seeing any single reply's arrays. ``template`` gives the reply's
    array shapes (default: the first ArrayRecord of the content sent). Entries are clipped
    to ``clipping_range`` (after weighting by ``w / max_weight``) and quantized as Flower's
    SecAgg+ does. Raises :class:`privopt.errors.ProtocolError` when too few clients stay."""
    per_node, keys, shapes = round_request(node_ids, content, template, "secure_sum")
    cap = weight_cap(max_weight, weighted)
    _check_settings(
        num_shares,
        reconstruction_threshold,
        cap,
        clipping_range,
        quantization_range,
        modulus_range,
        timeout,
    )
    quant = Quantization(clipping_range, quantization_range, modulus_range, cap)
    outcome = _run_round(
        grid,
        per_node,
        shapes,
        quant,
        num_shares,
        reconstruction_threshold,
        server_round,
        timeout,
        weighted=weighted,
    )
    total = [a * outcome.weight for a in outcome.average]
    return SecureSum(
        arrays=record_of(keys, total),
        weight=outcome.weight,
        replies=outcome.replies,
        dropped=outcome.dropped,
    )


class SecAggPlusWorkflow:
    """Flower's ``SecAggPlusWorkflow`` (same arguments, same result), on privopt's SecAgg+.

    Use it as ``DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(...))`` with a legacy
    ``Strategy`` and ``LegacyContext``; its ClientApp runs :func:`secaggplus_mod`. Each round
    the strategy's ``configure_fit`` samples the clients, the four SecAgg+ stages run
    (dropouts tolerated at every stage down to the threshold), and ``aggregate_fit`` receives
    every contributor's ``FitRes`` carrying the weighted average of their parameters (so
    FedAvg returns it), never a client's own.
    """

    def __init__(
        self,
        num_shares: float,
        reconstruction_threshold: float,
        *,
        max_weight: float = 1000.0,
        clipping_range: float = 8.0,
        quantization_range: int = 4194304,
        modulus_range: int = 4294967296,
        timeout: float | None = None,
    ) -> None:
        _check_settings(
            num_shares,
            reconstruction_threshold,
            max_weight,
            clipping_range,
            quantization_range,
            modulus_range,
            timeout,
        )
        self.num_shares = num_shares
        self.reconstruction_threshold = reconstruction_threshold
        self.max_weight = max_weight
        self.clipping_range = clipping_range
        self.quantization_range = quantization_range
        self.modulus_range = modulus_range
        self.timeout = timeout

    def __call__(self, grid: Any, context: Context) -> None:
        """Runs one round of secure aggregation (as Flower's does)."""
        quant = Quantization(
            self.clipping_range, self.quantization_range, self.modulus_range, self.max_weight
        )

        def aggregate(
            contents: Mapping[int, RecordDict], shapes: Sequence[tuple[int, ...]], rnd: int
        ) -> Round:
            return _run_round(
                grid, contents, shapes, quant, self.num_shares, self.reconstruction_threshold,
                rnd, self.timeout,
            )  # fmt: skip

        legacy_fit(context, aggregate, "Secure aggregation")


def legacy_fit(
    context: Context,
    aggregate: Callable[[Mapping[int, RecordDict], Sequence[tuple[int, ...]], int], Round],
    label: str,
) -> None:
    """One fit round of a legacy ``Strategy`` with the sampled clients' parameters averaged
    by ``aggregate`` (their train contents, the parameters' shapes, the round): the
    strategy's ``configure_fit`` samples, ``aggregate_fit`` receives every contributor's
    ``FitRes`` carrying the average, never a client's own."""
    import flwr.compat.common.recorddict_compat as compat
    from flwr.common import ndarrays_to_parameters
    from flwr.server.compat.legacy_context import LegacyContext
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
    from flwr.server.workflow.constant import Key as WorkflowKey

    if not isinstance(context, LegacyContext):
        raise TypeError(f"Expect a LegacyContext, but get {type(context).__name__}.")
    cfg = context.state.config_records[MAIN_CONFIGS_RECORD]
    server_round = cast(int, cfg[WorkflowKey.CURRENT_ROUND])
    global_arrays = context.state.array_records[MAIN_PARAMS_RECORD]
    parameters = compat.arrayrecord_to_parameters(global_arrays, keep_input=True)
    proxies = context.strategy.configure_fit(server_round, parameters, context.client_manager)
    if not proxies:
        log.info("configure_fit: no clients selected, cancel")
        return
    log.info(
        "configure_fit: strategy sampled %s clients (out of %s)",
        len(proxies),
        context.client_manager.num_available(),
    )
    contents = {p.node_id: compat.fitins_to_recorddict(ins, True) for p, ins in proxies}
    proxy_of = {p.node_id: p for p, _ in proxies}
    shapes = [tuple(a.shape) for a in global_arrays.to_numpy_ndarrays()]
    start = time.monotonic()
    try:
        outcome = aggregate(contents, shapes, server_round)
    except (PrivoptError, ValueError) as e:
        log.error("%s halted in round %s: %s", label, server_round, e)
        return
    for node, why in sorted(outcome.dropped.items()):
        log.info("round %s: node %s dropped at %s", server_round, node, why)
    log.info(
        "%s of %s clients completed in %.2f s",
        label,
        len(outcome.replies),
        time.monotonic() - start,
    )
    aggregated = ndarrays_to_parameters(outcome.average)
    results = []
    for node, msg in outcome.replies.items():
        fitres = compat.recorddict_to_fitres(msg.content, True)
        fitres.parameters = aggregated
        results.append((proxy_of[node], fitres))
    failures: list[tuple[Any, Any] | BaseException] = [
        Exception(why) for why in outcome.dropped.values()
    ]
    params, metrics = context.strategy.aggregate_fit(server_round, results, failures)
    if params:
        context.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
            params, True
        )
        context.history.add_metrics_distributed_fit(server_round=server_round, metrics=metrics)


def reply_arrays(content: RecordDict) -> tuple[list[npt.NDArray[Any]], float | None]:
    """The arrays a ClientApp replied with (every ArrayRecord, in order) and its weight: a
    legacy ``FitRes``'s ``num_examples``, or a ``num-examples`` metric."""
    arrays: list[npt.NDArray[Any]] = []
    for record in content.array_records.values():
        arrays.extend(record.to_numpy_ndarrays())
    weight: float | None = None
    legacy = content.metric_records.get("fitres.num_examples")
    if legacy is not None:
        weight = float(cast(float, legacy["num_examples"]))
    else:
        for metrics in content.metric_records.values():
            if "num-examples" in metrics:
                weight = float(cast(float, metrics["num-examples"]))
                break
    return arrays, weight


def check_update(
    arrays: Sequence[npt.NDArray[Any]], weight: float, expected: int, what: str = "SecAgg+"
) -> None:
    """Refuses (so the client drops out of the round, named) an update the sum cannot take:
    the wrong length, a non-finite entry or weight. Entries outside the clipping range are
    clipped by SecAgg+'s quantizer, as Flower's are. ``what`` names the protocol."""
    size = sum(int(np.size(a)) for a in arrays)
    if size != expected:
        raise ValueError(f"{what}: the update has {size} values, the round sums {expected}")
    if not (math.isfinite(weight) and weight >= 0):
        raise ValueError(f"{what}: the update's weight is {weight}, not a finite number >= 0")
    for i, a in enumerate(arrays):
        bad = ~np.isfinite(np.asarray(a, dtype=np.float64))
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{what}: array {i} of the update is not finite at index {at}")


def secaggplus_mod(msg: Message, ctxt: Context, call_next: ClientAppCallable) -> Message:
    """Flower's ``secaggplus_mod``, on privopt's SecAgg+: a ClientApp mod that answers the
    four SecAgg+ stages of :class:`SecAggPlusWorkflow` and :func:`secure_sum`, and masks what
    the ClientApp's train function returns. Messages other than train pass through; a train
    message without SecAgg+ configuration is refused (the update would leave unmasked)."""
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, ctxt)
    configs = msg.content.config_records.get(RECORD)
    if configs is None:
        raise ValueError(
            "privopt_flower.secagg.secaggplus_mod: a train message without SecAgg+ "
            "configuration; this client sends updates only through SecAgg+ (run the server "
            "with privopt_flower.secagg's SecAggPlusWorkflow or secure_sum)"
        )
    stage = configs.get("stage")
    if stage == Stage.SETUP:
        client = secagg.Client(
            cast(bytes, configs["session"]),
            int(cast(int, configs["round"])),
            int(cast(int, configs["id"])),
            [int(n) for n in cast(list[int], configs["neighbours"])],
            int(cast(int, configs["threshold"])),
            int(cast(int, configs["vector_len"])),
        )
        keep = {
            k: configs[k]
            for k in (
                "clipping_range",
                "quantization_range",
                "modulus_range",
                "max_weight",
                "vector_len",
                "weighted",
            )
        }
        _save(ctxt, client, keep)
        return _reply(msg, RecordDict(), client.advertisement)
    client, keep = _load(ctxt, str(stage))
    if stage == Stage.SHARE_KEYS:
        out = client.share_keys(cast(bytes, configs["msg"]))
        _save(ctxt, client, keep)
        return _reply(msg, RecordDict(), out)
    if stage == Stage.COLLECT_MASKED_VECTORS:
        result = call_next(msg, ctxt)
        if result.has_error():
            return result
        arrays, weight = reply_arrays(result.content)
        if not keep["weighted"]:
            weight = 1.0
        quant = Quantization(
            float(cast(float, keep["clipping_range"])),
            int(cast(int, keep["quantization_range"])),
            int(cast(int, keep["modulus_range"])),
            float(cast(float, keep["max_weight"])),
        )
        if weight is None:
            raise ValueError(
                "SecAgg+: the train reply has no weight (a legacy FitRes num_examples or a "
                "'num-examples' metric)"
            )
        check_update(arrays, weight, int(cast(int, keep["vector_len"])) - 1)
        vector = quant.encode(arrays, weight)
        out = client.mask_input(cast(bytes, configs["msg"]), vector)
        _save(ctxt, client, keep)
        content = result.content
        for record in content.array_records.values():
            record.clear()
        return _reply(msg, content, out)
    if stage == Stage.UNMASK:
        out = client.unmask(cast(bytes, configs["msg"]))
        del ctxt.state.config_records[STATE]
        return _reply(msg, RecordDict(), out)
    raise ValueError(f"SecAgg+: unknown stage {stage!r}")


def _reply(msg: Message, content: RecordDict, payload: bytes) -> Message:
    content.config_records[RECORD] = ConfigRecord({"msg": payload})
    return Message(content, reply_to=msg)


def _save(ctxt: Context, client: secagg.Client, keep: Mapping[str, Any]) -> None:
    ctxt.state.config_records[STATE] = ConfigRecord({"client": client.snapshot(), **keep})


def _load(ctxt: Context, stage: str) -> tuple[secagg.Client, dict[str, Any]]:
    record = ctxt.state.config_records.get(STATE)
    if record is None:
        raise ValueError(f"SecAgg+: a {stage} message before this round's setup")
    keep = {k: v for k, v in record.items() if k != "client"}
    return secagg.Client.restore(cast(bytes, record["client"])), keep
