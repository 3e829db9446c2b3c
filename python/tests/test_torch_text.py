"""privopt.torch.text and the private scalar channel: the PyTorch MiniLM is the Rust engine's
model coordinate for coordinate, LoRA starts as the identity, bad text inputs are refused
clearly, and a private federation (clipped, noised scalars summed by SecAgg+) moves the model
as the clear one does when the noise is off, carries the noise when it is on, and stops a
client at its privacy budget."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from privopt import secagg
from privopt.errors import ComputationError, ParameterError, ProtocolError
from privopt.ledger import PrivacyLedger
from privopt.problem import Problem
from privopt.protocols import scalar_fl
from privopt.text import WordPiece, data_dir
from privopt.torch import ParameterSet, ZerothOrderClient, ZerothOrderServer
from privopt.torch.text import (
    BITFIT,
    LORA,
    MiniLMClassifier,
    TextClassification,
    accuracy,
    batch_from_rows,
    classification_loss,
)


@pytest.fixture(scope="module")
def bitfit(minilm_fetched: None) -> Problem:
    return Problem(
        {"dataset": "movie-snippets", "clients": 6},
        {"kind": "minilm", "trainable": "bitfit"},
        data_dir=data_dir(),
        seed=0,
    )


@pytest.fixture(scope="module")
def model(minilm_fetched: None) -> MiniLMClassifier:
    return MiniLMClassifier.from_pretrained()


def test_the_torch_minilm_holds_the_engines_vector_and_gives_its_loss(bitfit, model):
    params = ParameterSet(model, BITFIT)
    w = bitfit.init_params(0)
    assert len(params) == bitfit.num_params == 31_490
    # Its own zero-shot head is the engine's up to float32 rounding of the prompts' embeddings.
    np.testing.assert_allclose(params.to_numpy(), w, rtol=0, atol=1e-6)
    params.load(w)
    for client in (0, 3):
        idx = bitfit.client_indices(client)[:8]
        with torch.no_grad():
            ours = float(classification_loss(model, batch_from_rows(*bitfit.rows(idx))))
        assert abs(ours - bitfit.loss(w, idx)) < 1e-6 * abs(ours)
    # Every weight, in the engine's `trainable = "all"` order: a query-matrix entry lies where
    # the engine's vector has it (after the embeddings, the layer's vectors, before `key`).
    names = [n for n, _ in model.named_parameters()]
    assert names[:5] == [
        "word",
        "position",
        "token_type",
        "embedding_norm_gain",
        "embedding_norm_shift",
    ]
    assert names[-2:] == ["head.weight", "head.bias"]
    assert len(ParameterSet(model)) == 22_566_146


def test_a_round_of_scalars_is_the_engines_to_float32_forward_noise(bitfit, model):
    """One round, two clients, P = 3 on the BitFit vector: the torch client's scalars are the
    engine's within what the engine's float32 forward pass can resolve (a loss rounding of
    ~ulp(0.6) = 6e-8 over μ = 1e-3 is ~1e-4), and the model both servers reach agrees."""
    w = bitfit.init_params(0)
    ParameterSet(model, BITFIT).load(w)
    spec = scalar_fl.Spec(lr=1e-3, perturbations=3)
    engine = scalar_fl.Server(spec, w, clients=6, seed=0)
    ours = ZerothOrderServer(model, spec, clients=6, params=BITFIT, seed=0)
    plan_e, who = engine.begin_round(2)
    plan_t, who_t = ours.begin_round(2)
    assert who == who_t
    for i in who:
        idx = bitfit.scalar_fl_batches(i, 0, local_steps=1, batch_size=8, seed=0)
        c_e = scalar_fl.Client(i, spec, w)
        c_e.receive(engine.catch_up(i))
        engine.receive(c_e.local_update(plan_e, lambda k, x, idx=idx: bitfit.loss(x, idx[k])))
        c_t = ZerothOrderClient(model, spec, id=i, loss_fn=classification_loss, params=BITFIT)
        c_t.receive(ours.catch_up(i))
        ours.receive(c_t.local_update(plan_t, [batch_from_rows(*bitfit.rows(idx[0]))]))
    engine.finish_round()
    ours.finish_round()
    moved = ours.server.x - w
    assert np.abs(moved).max() > 1e-6  # the round moved the model
    np.testing.assert_allclose(ours.server.x, engine.x, rtol=0, atol=1e-7)


def test_lora_starts_as_the_model_and_refuses_bad_ranks(model):
    lora = copy.deepcopy(model)
    ids = torch.tensor([[101, 2023, 3185, 2001, 2307, 102]])
    lengths = torch.tensor([6])
    with torch.no_grad():
        before = lora(ids, lengths)
    selection = lora.add_lora(4, seed=1)
    assert selection == LORA
    trained = ParameterSet(lora, selection)
    # 6 layers × (query, value) × (4·384 + 384·4), plus the head.
    assert len(trained) == 6 * 2 * 2 * 4 * 384 + 2 * 384 + 2
    with torch.no_grad():
        assert torch.equal(lora(ids, lengths), before)
        lora.layers[0].query_lora_b.fill_(0.01)
        assert not torch.allclose(lora(ids, lengths), before)
    with pytest.raises(ParameterError, match="already has LoRA"):
        lora.add_lora(4)
    fresh = MiniLMClassifier(classes=3, layers=1, vocab=50, hidden=24, heads=2, ffn=48)
    with pytest.raises(ParameterError, match=r"LoRA rank 25 must be in 1..=24"):
        fresh.add_lora(25)
    with pytest.raises(ParameterError, match="LoRA targets"):
        fresh.add_lora(2, targets=["gate"])


def test_bad_text_inputs_are_refused_by_name(model):
    vocab = WordPiece(data_dir() / "minilm" / "vocab.txt")
    assert vocab.encode("a fine film.", max_len=64)[0] == 101  # [CLS]
    with pytest.warns(UserWarning, match="1 of 2 texts were longer than 4 tokens"):
        data = TextClassification(["good", "a very long review"], [1, 0], vocab, max_len=4)
    assert data.truncated == 1 and data.batch().ids.shape == (2, 4)
    with pytest.raises(ParameterError, match="empty"):
        TextClassification([], [], vocab)
    with pytest.raises(ParameterError, match=r"label 2 is outside the head's classes 0..1"):
        TextClassification(["a", "b"], [0, 2], vocab)
    with pytest.raises(ParameterError, match="whole class numbers"):
        TextClassification(["a", "b"], [0.5, 1.0], vocab)
    with pytest.raises(ParameterError, match="max_len must be in 2..=512"):
        vocab.encode("x", max_len=1)
    ids = torch.tensor([[101, 40_000, 102]])
    with pytest.raises(ParameterError, match="outside the model's vocabulary of 30522"):
        model(ids, torch.tensor([3]))
    with pytest.raises(ParameterError, match="exceed the model's 512 positions"):
        model(torch.zeros(1, 600, dtype=torch.long), torch.tensor([600]))
    with pytest.raises(ParameterError, match="every length must be in"):
        model(torch.tensor([[101, 102]]), torch.tensor([0]))
    labelled = TextClassification(["great", "awful"], [1, 0], vocab, max_len=16)
    assert 0.0 <= accuracy(model, labelled.batch()) <= 1.0


# The private scalar channel, on a small model so that it runs in a moment.

CLIENTS, D = 5, 6


class Quadratic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(D, dtype=torch.float64))


def quadratic_loss(module: torch.nn.Module, target: torch.Tensor) -> torch.Tensor:
    return ((module.w - target) ** 2).sum()


def federation(privacy, rounds, *, seed=0, nan_client=None, ledger=None, sigma=0.0):
    """Rounds of 4 of 5 clients on a quadratic; with ``privacy`` through SecAgg+."""
    spec = scalar_fl.Spec(lr=0.05, perturbations=2)
    server = ZerothOrderServer(Quadratic(), spec, clients=CLIENTS, seed=seed, privacy=privacy)
    clients = [
        ZerothOrderClient(Quadratic(), spec, id=i, loss_fn=quadratic_loss) for i in range(CLIENTS)
    ]
    targets = [torch.full((D,), 0.1 * (i + 1), dtype=torch.float64) for i in range(CLIENTS)]
    dropped = []
    for _ in range(rounds):
        eligible = None
        if ledger is not None:
            eligible, _ = ledger.admit(range(CLIENTS), sigma)
            if len(eligible) < 4:
                break
        plan, who = server.begin_round(4, eligible)
        words = {}
        for i in who:
            clients[i].receive(server.catch_up(i))
            target = targets[i] * (np.nan if i == nan_client else 1.0)
            try:
                if privacy is None:
                    server.receive(clients[i].local_update(plan, [target]))
                else:
                    words[i] = clients[i].private_update(plan, [target], privacy)
            except ComputationError:  # a non-finite loss: the client drops out of the round
                dropped.append(i)
        if privacy is None:
            server.finish_round()
        else:
            result = secagg.secure_sum(words)
            server.finish_round_secure(result.total, result.contributors)
            if ledger is not None:
                m = privacy.effective_multiplier(len(who), len(result.contributors))
                ledger.record_each(server.round, dict.fromkeys(result.contributors, m))
    return server, dropped


def test_without_noise_a_private_federation_moves_as_the_clear_one():
    clear, _ = federation(None, 8)
    private, _ = federation(scalar_fl.Privacy(clip=100.0, noise_multiplier=0.0), 8)
    # The same plans and directions; the scalars differ only by SecAgg+'s quantization.
    assert np.abs(clear.server.x).max() > 0.05  # it trained
    np.testing.assert_allclose(private.server.x, clear.server.x, rtol=0, atol=1e-4)


def test_noise_moves_the_model_and_a_nan_client_is_dropped_not_averaged():
    clear, _ = federation(None, 8)
    noisy, _ = federation(scalar_fl.Privacy(clip=0.5, noise_multiplier=4.0), 8)
    gap = np.abs(noisy.server.x - clear.server.x).max()
    assert gap > 1e-3  # the noise is there
    assert np.isfinite(noisy.server.x).all()
    # Client 2 computes NaN scalars: it drops out of each round it is in; the rest are summed.
    broken, dropped = federation(
        scalar_fl.Privacy(clip=100.0, noise_multiplier=0.0), 4, nan_client=2
    )
    assert dropped and set(dropped) == {2}
    assert np.isfinite(broken.server.x).all()
    with pytest.raises(ProtocolError, match="never with clear replies"):
        private = ZerothOrderServer(
            Quadratic(),
            scalar_fl.Spec(lr=0.1),
            clients=3,
            privacy=scalar_fl.Privacy(clip=1.0, noise_multiplier=1.0),
        )
        private.begin_round(3)
        private.finish_round()


def test_the_ledger_stops_a_client_at_its_budget():
    privacy = scalar_fl.Privacy(clip=1.0, noise_multiplier=3.0, noise_floor=0.75)
    # 4 of 5 per round, so some client reaches the budget first and sits out.
    ledger = PrivacyLedger(CLIENTS, delta=1e-5, max_epsilon=4.0)
    server, _ = federation(privacy, 40, ledger=ledger, sigma=3.0)
    eps = [ledger.epsilon(c) for c in range(CLIENTS)]
    assert max(eps) <= 4.0 and ledger.exhausted
    # The run stopped when fewer than 4 clients were within budget.
    assert server.round < 40


def test_secure_sum_reports_dropouts_and_traffic_and_refuses_tiny_rounds():
    x = {i: np.full(3, i, dtype=np.uint32) for i in (2, 5, 7, 9, 11)}
    result = secagg.secure_sum(x, drop={7: 3})
    assert result.contributors == [2, 5, 9, 11]
    np.testing.assert_array_equal(result.total, np.full(3, 27, dtype=np.uint32))
    assert result.sent[7] < result.sent[2] and min(result.received.values()) > 0
    with pytest.raises(ParameterError, match="at least 3 clients"):
        secagg.secure_sum({0: x[2], 1: x[5]})
    with pytest.raises(ParameterError, match="not in the round"):
        secagg.secure_sum(x, drop={4: 3})
    with pytest.raises(ProtocolError):
        secagg.secure_sum(x, drop={2: 3, 5: 3, 7: 3})
