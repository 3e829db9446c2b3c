"""privopt_flower.he: encrypted averaging of whole models under threshold multi-key CKKS,
driven through Flower's own ClientApp and workflow machinery with an in-process grid."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ArrayRecord, RecordDict
from flwr.client import ClientApp, NumPyClient
from flwr.clientapp import ClientApp as MessageClientApp
from loopback import (  # noqa: F401  (task_identity: an autouse fixture)
    LoopbackGrid,
    bare_train,
    fixed_update_app,
    global_model,
    legacy_context,
    task_identity,
)
from privopt.errors import InsecureParameters, ProtocolError

from privopt_flower import he


def message_app(values: dict[int, np.ndarray], weights: dict[int, int]) -> MessageClientApp:
    """A Message-API ClientApp behind the mod, replying with a fixed update per node."""
    return fixed_update_app(values, weights, he.he_mod)


def make_values(n: int, dim: int, seed: int = 0) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {100 + i: rng.uniform(-2, 2, dim).astype(np.float32) for i in range(n)}


def uploads_seen(grid: LoopbackGrid) -> list[bytes]:
    """The encrypted uploads in the replies the grid carried."""
    return [
        c.config_records[he.RECORD]["upload"]
        for _, c in grid.seen
        if "upload" in c.config_records.get(he.RECORD, {})
    ]


def relative_error(out: he.EncryptedMean, want: np.ndarray) -> float:
    """The largest error of the mean ``out`` carries, over the largest entry of ``want``."""
    got = out.arrays.to_numpy_ndarrays()[0]
    return float(np.abs(got - want).max() / np.abs(want).max())


def mean_of(values: dict[int, np.ndarray], nodes: list[int]) -> np.ndarray:
    return np.mean(np.stack([values[n].astype(np.float64) for n in nodes]), axis=0)


def test_the_mean_of_whole_models_and_no_reply_carries_an_update_in_the_clear():
    values = make_values(5, 10_000)  # three ciphertexts per update
    grid = LoopbackGrid({n: message_app(values, {n: 1 for n in values}) for n in values})
    out = he.encrypted_mean(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(10_000)])}), server_round=1
    )
    want = mean_of(values, sorted(values))
    assert relative_error(out, want) < 1e-6
    assert out.weight == pytest.approx(5.0) and sorted(out.replies) == sorted(values)
    # An upload is one polynomial per chunk (c1 is expanded from the round's seed): three
    # chunks of 4096 residues of 8 bytes, plus a header of under 200 bytes.
    uploads = uploads_seen(grid)
    assert len(uploads) == 5
    assert all(3 * 4096 * 8 < len(b) < 3 * 4096 * 8 + 200 for b in uploads)
    for _, content in grid.seen:
        for record in content.array_records.values():
            assert len(record) == 0
        for v in content.config_records[he.RECORD].values():
            blobs = v if isinstance(v, list) else [v]
            for b in blobs:
                if isinstance(b, bytes):
                    for x in values.values():
                        assert x.tobytes()[:16] not in b


@pytest.mark.parametrize("stage", [he.Stage.KEYS, he.Stage.DEAL, he.Stage.ENCRYPT, he.Stage.READY])
def test_a_client_killed_mid_round_is_left_out_or_counted_and_the_rest_decrypt(stage):
    values = make_values(5, 5000, seed=1)
    victim = 102
    grid = LoopbackGrid(
        {n: message_app(values, {n: 1 for n in values}) for n in values}, kill={stage: {victim}}
    )
    out = he.encrypted_mean(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(5000)])}), server_round=3
    )
    # Dying before its upload leaves it out; dying after (at ready) keeps its update in.
    assert (victim in out.replies) == (stage == he.Stage.READY)
    assert (victim in out.dropped) != (stage == he.Stage.READY)
    want = mean_of(values, sorted(out.replies))
    assert relative_error(out, want) < 1e-6


def test_a_member_of_the_active_set_lost_fails_the_round_without_a_second_request():
    values = make_values(4, 100, seed=2)
    grid = LoopbackGrid(
        {n: message_app(values, {n: 1 for n in values}) for n in values},
        kill={he.Stage.DECRYPT: {101}},
    )
    with pytest.raises(ProtocolError, match=r"\[101\] of the active set"):
        he.encrypted_mean(
            grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(100)])}), server_round=1
        )


def test_an_update_outside_the_clip_or_not_finite_drops_its_client_by_name():
    values = make_values(6, 50, seed=3)  # 4 of 6 decrypt
    values[101][7] = 9.0  # outside clip = 8
    values[103][3] = np.nan
    grid = LoopbackGrid({n: message_app(values, {n: 1 for n in values}) for n in values})
    out = he.encrypted_mean(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(50)])}), server_round=1
    )
    assert "index 8" in out.dropped[101]  # index 0 carries the weight
    assert "not finite at index 3" in out.dropped[103]
    want = mean_of(values, [100, 102, 104, 105])
    assert np.abs(out.arrays.to_numpy_ndarrays()[0] - want).max() < 1e-5


def test_the_workflow_gives_fedavg_through_flowers_legacy_strategy():
    from flwr.server.strategy import FedAvg

    values = make_values(5, 9, seed=5)
    weights = {100: 5, 101: 15, 102: 20, 103: 40, 104: 20}

    class Fixed(NumPyClient):
        def __init__(self, node: int) -> None:
            self.node = node

        def fit(self, parameters, config):
            v = values[self.node]
            return [v[:6].reshape(2, 3), v[6:]], weights[self.node], {}

    apps = {
        n: ClientApp(client_fn=lambda ctx: Fixed(ctx.node_id).to_client(), mods=[he.he_mod])
        for n in values
    }
    strategy = FedAvg(fraction_fit=1.0, min_fit_clients=5, min_available_clients=5)
    context = legacy_context(values, [np.zeros((2, 3)), np.zeros(3)], strategy)
    he.HeFedAvgWorkflow(clip=2.0)(LoopbackGrid(apps), context)
    result = global_model(context)
    mean = sum(weights[n] * values[n].astype(np.float64) for n in values) / sum(weights.values())
    flat = np.concatenate([result[0].ravel(), result[1]])
    assert np.abs(flat - mean).max() < 1e-6


def test_a_train_message_without_the_configuration_is_refused():
    values = make_values(2, 4)
    app = message_app(values, {n: 1 for n in values})
    with pytest.raises(ValueError, match="without encrypted-averaging configuration"):
        bare_train(app)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"clip": 0.0}, "clip"),
        ({"clip": 1e6}, "clip"),
        ({"threshold": 1}, "threshold"),
        ({"distance_bits": 8}, "distance_bits"),
        ({"distance_bits": float("nan")}, "distance_bits"),
    ],
)
def test_bad_settings_are_one_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        he.HeFedAvgWorkflow(**kwargs)


def test_a_clip_below_one_still_carries_the_weight():
    values = {n: v * 0.2 for n, v in make_values(4, 300, seed=4).items()}  # within ±0.4
    grid = LoopbackGrid({n: message_app(values, {n: 1 for n in values}) for n in values})
    out = he.encrypted_mean(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(300)])}), server_round=1,
        clip=0.5,
    )  # fmt: skip
    want = mean_of(values, sorted(values))
    assert not out.dropped
    assert relative_error(out, want) < 1e-6


def test_smudging_sized_for_a_distance_keeps_the_mean_on_two_primes():
    values = make_values(5, 10_000, seed=5)
    grid = LoopbackGrid({n: message_app(values, {n: 1 for n in values}) for n in values})
    out = he.encrypted_mean(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(10_000)])}), server_round=1,
        distance_bits=40,
    )  # fmt: skip
    want = mean_of(values, sorted(values))
    assert relative_error(out, want) < 1e-6
    # σ* for 2^-40 over three chunks of five uploads' noise: 2^(½·log2(3·4096) + log2(3.2·√5)
    # + log2 13 + 40 − log2 √(2π)) ≈ 2^52.0, on two primes: uploads twice the bytes.
    primes, bits = he.modulus_for(5, 8.0, 10_001, 40)
    assert primes == he.TWO_PRIMES and 51.9 < bits < 52.1
    uploads = uploads_seen(grid)
    assert len(uploads) == 5
    assert all(3 * 4096 * 16 < len(b) < 3 * 4096 * 16 + 200 for b in uploads)


def test_a_client_refuses_smudging_below_its_floor():
    from flwr.app import ConfigRecord, Context, Message

    app = message_app(make_values(2, 4), {100: 1, 101: 1})
    keys = ConfigRecord(
        {"stage": he.Stage.KEYS, "session": 7, "id": 0, "members": [0, 1], "threshold": 2,
         "primes": he.ONE_PRIME, "smudging_bits": 10.0}
    )  # fmt: skip
    msg = Message(RecordDict({he.RECORD: keys}), dst_node_id=100, message_type="train")
    msg.metadata.__dict__["_message_id"] = "m"
    ctx = Context(run_id=1, node_id=100, node_config={}, state=RecordDict(), run_config={})
    with pytest.raises(InsecureParameters, match="below 2\\^20"):
        app(msg, ctx)


def test_a_client_that_deals_another_secret_is_named_and_left_out():
    """A client deals Shamir shares of a fresh secret, not of the key share it reports: the
    dealing check names it, its upload is left out, and the others' mean comes out."""
    from privopt import ckks
    from privopt.ckks import multiparty as mk

    values = make_values(5, 3000, seed=6)
    cheat = 103

    def dealing_cheat(msg, ctxt, call_next):
        record = msg.content.config_records.get(he.RECORD)
        if ctxt.node_id != cheat or record is None or record.get("stage") != he.Stage.DEAL:
            return he.he_mod(msg, ctxt, call_next)
        state = ctxt.state.config_records[he.STATE]
        p = ckks.Params(he.RING_DEGREE, list(state["primes"]), scale_bits=he.SCALE_BITS)
        honest = mk.Party.restore(p, state["party"])
        session = int(state["session"])
        impostor = mk.Party(honest.id, p, he._crs(p, session))
        state["party"] = impostor.snapshot()
        reply = he.he_mod(msg, ctxt, call_next)  # deals the impostor's secret
        reply.content.config_records[he.RECORD]["key_share"] = honest.public_key_share(session)
        ctxt.state.config_records[he.STATE]["party"] = honest.snapshot()  # uploads as itself
        return reply

    apps = {n: fixed_update_app(values, {n: 1 for n in values}, he.he_mod) for n in values}
    apps[cheat] = fixed_update_app(values, {n: 1 for n in values}, dealing_cheat)
    grid = LoopbackGrid(apps)
    out = he.encrypted_mean(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(3000)])}), server_round=1
    )
    assert "dealing check" in out.dropped[cheat] and cheat not in out.replies
    honest = [n for n in sorted(values) if n != cheat]
    want = mean_of(values, honest)
    assert relative_error(out, want) < 1e-6
