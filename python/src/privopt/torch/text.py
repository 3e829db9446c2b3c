"""Language models for privopt's zeroth-order methods: the all-MiniLM-L6-v2 encoder as a plain
PyTorch module with a classification head, optional LoRA adapters, and the batches and loss
that :class:`~privopt.torch.ZerothOrderClient` feeds it.

The module's parameters are registered in the order of the Rust engine's parameter vector
(``privopt run`` with ``model.kind = "minilm"``), so :class:`~privopt.torch.ParameterSet` over
:data:`BITFIT` or over every parameter is that vector, coordinate for coordinate: a seed's
direction moves the same weights in both, and a vector from
:meth:`privopt.problem.Problem.init_params` loads with ``ParameterSet.load``.

>>> model = MiniLMClassifier.from_pretrained(classes=2)       # data/minilm (privopt data fetch)
>>> data = TextClassification(texts, labels, WordPiece(...), max_len=64, classes=2)
>>> loss = classification_loss(model, data.batch([0, 1, 2]))
>>> lora = model.add_lora(rank=8)                             # a Selection: the adapters + head
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from ..errors import ParameterError
from ..text import WordPiece, fetched

#: The parameters BitFit trains (every bias and LayerNorm vector) plus the head: the Rust
#: engine's ``model.trainable = "bitfit"`` vector, in its order.
BITFIT = r"(_bias|_gain|_shift)$|^head\."
#: LoRA's adapters plus the head (after :meth:`MiniLMClassifier.add_lora`).
LORA = r"_lora_[ab]$|^head\."

_LN_EPS = 1e-12
_PROMPTS = ("this movie is terrible.", "this movie is great.")
_MATRICES = ("query", "key", "value", "output", "up", "down")


def _read_safetensors(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """The float32 tensors of a ``.safetensors`` file (8-byte header length, a JSON header,
    then the raw little-endian data), read without the ``safetensors`` package; tensors of
    other types (BERT's ``position_ids``) are skipped."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise ParameterError(f"{path}: not a safetensors file (too short)")
    n = int.from_bytes(raw[:8], "little")
    if n > len(raw) - 8:
        raise ParameterError(f"{path}: its header claims {n} bytes, the file is shorter")
    try:
        header = json.loads(raw[8 : 8 + n])
    except ValueError as e:
        raise ParameterError(f"{path}: the header is not JSON ({e})") from None
    body = memoryview(raw)[8 + n :]
    out: dict[str, npt.NDArray[np.float32]] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta.get("dtype") != "F32":
            continue
        start, end = meta["data_offsets"]
        shape = tuple(meta["shape"])
        if not 0 <= start <= end <= len(body) or end - start != 4 * math.prod(shape):
            raise ParameterError(f"{path}: tensor {name}'s offsets do not fit its shape")
        out[name] = np.frombuffer(body[start:end], dtype="<f4").reshape(shape)
    return out


class _Layer(torch.nn.Module):
    """One BERT encoder layer. Vectors are registered before matrices: the Rust engine's
    order (so BitFit's vectors are contiguous per layer there too)."""

    def __init__(self, hidden: int, ffn: int, heads: int, init: bool) -> None:
        super().__init__()
        self.heads = heads

        def vec(n: int, fill: float = 0.0) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.full((n,), fill))

        self.query_bias, self.key_bias, self.value_bias = vec(hidden), vec(hidden), vec(hidden)
        self.output_bias = vec(hidden)
        self.attention_norm_gain, self.attention_norm_shift = vec(hidden, 1.0), vec(hidden)
        self.up_bias, self.down_bias = vec(ffn), vec(hidden)
        self.output_norm_gain, self.output_norm_shift = vec(hidden, 1.0), vec(hidden)

        def mat(rows: int, cols: int) -> torch.nn.Parameter:
            w = torch.empty(rows, cols)
            return torch.nn.Parameter(w.normal_(0.0, 0.02) if init else w)

        self.query, self.key, self.value = (
            mat(hidden, hidden),
            mat(hidden, hidden),
            mat(hidden, hidden),
        )
        self.output = mat(hidden, hidden)
        self.up, self.down = mat(ffn, hidden), mat(hidden, ffn)
        self.lora_scale = 0.0

    def _linear(self, x: torch.Tensor, name: str, bias: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, getattr(self, name), bias)
        a = getattr(self, f"{name}_lora_a", None)
        if a is not None:
            b = getattr(self, f"{name}_lora_b")
            y = y + self.lora_scale * F.linear(F.linear(x, a), b)
        return y

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        n, length, hidden = x.shape
        dh = hidden // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, length, self.heads, dh).transpose(1, 2)

        q = split(self._linear(x, "query", self.query_bias))
        k = split(self._linear(x, "key", self.key_bias))
        v = split(self._linear(x, "value", self.value_bias))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, length, hidden)
        x = F.layer_norm(
            x + self._linear(ctx, "output", self.output_bias),
            (hidden,),
            self.attention_norm_gain,
            self.attention_norm_shift,
            _LN_EPS,
        )
        up = F.gelu(self._linear(x, "up", self.up_bias))
        return F.layer_norm(
            x + self._linear(up, "down", self.down_bias),
            (hidden,),
            self.output_norm_gain,
            self.output_norm_shift,
            _LN_EPS,
        )


class MiniLMClassifier(torch.nn.Module):
    """A BERT-style encoder (MiniLM-L6-H384 by default), mean pooling over each text's tokens
    and a linear head: ``forward(ids, lengths)`` gives ``(n, classes)`` logits for ``ids``
    (``int64``, ``(n, L)``, padded past each row's length). ``init=False`` leaves the
    matrices and embedding tables uninitialized, for a caller that loads them."""

    def __init__(
        self,
        *,
        classes: int = 2,
        vocab: int = 30522,
        positions: int = 512,
        hidden: int = 384,
        layers: int = 6,
        heads: int = 12,
        ffn: int = 1536,
        init: bool = True,
    ) -> None:
        super().__init__()
        if classes < 2:
            raise ParameterError(f"a classifier needs at least 2 classes, got {classes}")
        if hidden % heads:
            raise ParameterError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        self.classes, self.vocab, self.positions = classes, vocab, positions

        def table(rows: int) -> torch.nn.Parameter:
            w = torch.empty(rows, hidden)
            return torch.nn.Parameter(w.normal_(0.0, 0.02) if init else w)

        self.word, self.position = table(vocab), table(positions)
        self.token_type = torch.nn.Parameter(torch.zeros(2, hidden))
        self.embedding_norm_gain = torch.nn.Parameter(torch.ones(hidden))
        self.embedding_norm_shift = torch.nn.Parameter(torch.zeros(hidden))
        self.layers = torch.nn.ModuleList(_Layer(hidden, ffn, heads, init) for _ in range(layers))
        # A submodule, so its parameters come after the layers' (direct parameters come
        # first in named_parameters()), where the Rust vector has them.
        self.head = torch.nn.Linear(hidden, classes)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path | None = None,
        *,
        classes: int = 2,
        dtype: torch.dtype = torch.float32,
        zero_shot: bool = True,
    ) -> MiniLMClassifier:
        """The encoder of ``path/model.safetensors`` (default: the fetched ``minilm``, i.e.
        all-MiniLM-L6-v2) with a head for ``classes`` classes. With two classes and
        ``zero_shot``, the head starts as the Rust engine's does: row ``c`` is
        ``10·e_c/‖e_c‖²`` for the embeddings ``e_c`` of "this movie is terrible." and "this
        movie is great." (MeZO-style prompt initialization); otherwise it is zero."""
        folder = Path(path) if path is not None else fetched("minilm")
        config = json.loads((folder / "config.json").read_text())
        model = cls(
            classes=classes,
            vocab=config["vocab_size"],
            positions=config["max_position_embeddings"],
            hidden=config["hidden_size"],
            layers=config["num_hidden_layers"],
            heads=config["num_attention_heads"],
            ffn=config["intermediate_size"],
            init=False,  # every tensor is loaded below
        )
        tensors = _read_safetensors(folder / "model.safetensors")
        names = {
            "word": "embeddings.word_embeddings.weight",
            "position": "embeddings.position_embeddings.weight",
            "token_type": "embeddings.token_type_embeddings.weight",
            "embedding_norm_gain": "embeddings.LayerNorm.weight",
            "embedding_norm_shift": "embeddings.LayerNorm.bias",
        }
        per_layer = {
            "query": "attention.self.query",
            "key": "attention.self.key",
            "value": "attention.self.value",
            "output": "attention.output.dense",
            "up": "intermediate.dense",
            "down": "output.dense",
        }
        for i in range(len(model.layers)):
            for ours, theirs in per_layer.items():
                names[f"layers.{i}.{ours}"] = f"encoder.layer.{i}.{theirs}.weight"
                names[f"layers.{i}.{ours}_bias"] = f"encoder.layer.{i}.{theirs}.bias"
            for ours, theirs in (("attention_norm", "attention.output"), ("output_norm", "output")):
                names[f"layers.{i}.{ours}_gain"] = f"encoder.layer.{i}.{theirs}.LayerNorm.weight"
                names[f"layers.{i}.{ours}_shift"] = f"encoder.layer.{i}.{theirs}.LayerNorm.bias"
        params = dict(model.named_parameters())
        with torch.no_grad():
            for ours, theirs in names.items():
                if theirs not in tensors:
                    raise ParameterError(f"{folder}/model.safetensors has no tensor {theirs}")
                value = torch.from_numpy(tensors[theirs].copy())
                if value.shape != params[ours].shape:
                    raise ParameterError(
                        f"{theirs} has shape {tuple(value.shape)}, the model expects "
                        f"{tuple(params[ours].shape)}"
                    )
                params[ours].copy_(value)
        model = model.to(dtype)
        if classes == 2 and zero_shot:
            vocab = WordPiece(folder / "vocab.txt")
            ids, lengths, _ = vocab.encode_batch(list(_PROMPTS), max_len=64)
            with torch.no_grad():
                e = model.embed(torch.from_numpy(ids), torch.from_numpy(lengths))
                norm2 = (e * e).sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
                model.head.weight.copy_(10.0 * e / norm2)
        return model

    def embed(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Mean-pooled final hidden states, ``(n, hidden)``."""
        if ids.dim() != 2 or lengths.shape != ids.shape[:1]:
            raise ParameterError(
                f"ids must be (n, L) and lengths (n,), got {tuple(ids.shape)} and "
                f"{tuple(lengths.shape)}"
            )
        n, length = ids.shape
        if length > self.positions:
            raise ParameterError(
                f"rows of {length} tokens exceed the model's {self.positions} positions "
                "(tokenize with a smaller max_len)"
            )
        if n and (int(lengths.min()) < 1 or int(lengths.max()) > length):
            raise ParameterError(f"every length must be in 1..={length}")
        if n and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab):
            raise ParameterError(
                f"token id {int(ids.max()) if int(ids.max()) >= self.vocab else int(ids.min())}"
                f" is outside the model's vocabulary of {self.vocab} (a tokenizer of another "
                "model?)"
            )
        keep = torch.arange(length, device=ids.device)[None, :] < lengths[:, None]
        x = self.word[ids] + self.position[:length][None] + self.token_type[0]
        x = F.layer_norm(
            x, x.shape[-1:], self.embedding_norm_gain, self.embedding_norm_shift, _LN_EPS
        )
        for layer in self.layers:
            x = layer(x, keep)
        weights = keep.to(x.dtype) / lengths.to(x.dtype)[:, None]
        return (x * weights[..., None]).sum(1)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.embed(ids, lengths))
        return logits

    def add_lora(
        self,
        rank: int,
        *,
        alpha: float | None = None,
        targets: Sequence[str] = ("query", "value"),
        seed: int = 0,
    ) -> str:
        """Adds LoRA adapters ``W + (alpha/rank)·B·A`` to the ``targets`` matrices of every
        layer (``A`` ~ N(0, 1/in), ``B`` = 0, so the model is unchanged until trained) and
        returns the :class:`~privopt.torch.Selection` that trains them and the head
        (:data:`LORA`). ``alpha`` defaults to ``rank`` (a scale of 1)."""
        if any(hasattr(self.layers[0], f"{t}_lora_a") for t in _MATRICES):
            raise ParameterError("this model already has LoRA adapters")
        unknown = sorted(set(targets) - set(_MATRICES))
        if unknown or not targets:
            raise ParameterError(f"LoRA targets must be among {_MATRICES}, got {list(targets)}")
        generator = torch.Generator().manual_seed(seed)
        for layer in self.layers:
            assert isinstance(layer, _Layer)
            layer.lora_scale = (alpha if alpha is not None else rank) / rank
            for t in targets:
                w: torch.nn.Parameter = getattr(layer, t)
                out, inp = w.shape
                if not 1 <= rank <= min(out, inp):
                    raise ParameterError(
                        f"LoRA rank {rank} must be in 1..={min(out, inp)} for the {out}×{inp} "
                        f"{t} matrices"
                    )
                a = torch.randn(rank, inp, generator=generator, dtype=torch.float64)
                a /= math.sqrt(inp)
                setattr(layer, f"{t}_lora_a", torch.nn.Parameter(a.to(w.dtype)))
                setattr(
                    layer, f"{t}_lora_b", torch.nn.Parameter(torch.zeros(out, rank, dtype=w.dtype))
                )
        return LORA


@dataclass(frozen=True)
class TextBatch:
    """Token ids (``(n, L)``, padded), each row's length and the labels."""

    ids: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def batch_from_rows(x: npt.ArrayLike, y: npt.ArrayLike) -> TextBatch:
    """A batch from the Rust engine's rows (:meth:`privopt.problem.Problem.rows`): token ids as
    floats, ``-1``-padded, and float labels."""
    rows = np.asarray(x, dtype=np.float64)
    if rows.ndim != 2:
        raise ParameterError(f"rows must be (n, L), got shape {rows.shape}")
    lengths = np.argmin(np.concatenate([rows, -np.ones((len(rows), 1))], 1) >= 0, axis=1)
    longest = int(lengths.max()) if len(rows) else 0  # no column of padding only
    ids = np.where(np.arange(longest)[None] < lengths[:, None], rows[:, :longest], 0)
    ids = ids.astype(np.int64)
    return TextBatch(
        torch.from_numpy(ids),
        torch.from_numpy(lengths.astype(np.int64)),
        torch.from_numpy(np.asarray(y, dtype=np.int64)),
    )


class TextClassification:
    """A labelled text set, tokenized once: ``batch(indices)`` gives a :class:`TextBatch`.

    Texts longer than ``max_len`` ids are truncated (``truncated`` counts them, and a warning
    says how many); an empty set, labels outside ``0..classes`` or a ``max_len`` beyond the
    tokenizer's limit raise :class:`~privopt.errors.ParameterError`."""

    def __init__(
        self,
        texts: Sequence[str],
        labels: npt.ArrayLike,
        tokenizer: WordPiece,
        *,
        max_len: int = 64,
        classes: int = 2,
    ) -> None:
        texts = list(texts)
        y = np.asarray(labels)
        if not texts:
            raise ParameterError("the text set is empty")
        if y.shape != (len(texts),):
            raise ParameterError(f"{len(texts)} texts but labels of shape {y.shape}")
        if not np.issubdtype(y.dtype, np.integer):
            if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
                raise ParameterError("labels must be whole class numbers")
            y = y.astype(np.int64)
        if y.min() < 0 or y.max() >= classes:
            bad = int(y.min()) if y.min() < 0 else int(y.max())
            raise ParameterError(f"label {bad} is outside the head's classes 0..{classes - 1}")
        ids, lengths, cut = tokenizer.encode_batch(texts, max_len)
        self.truncated = len(cut)
        if cut:
            warnings.warn(
                f"{len(cut)} of {len(texts)} texts were longer than {max_len} tokens and were "
                "truncated",
                stacklevel=2,
            )
        self.ids, self.lengths, self.labels = ids, lengths, y.astype(np.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, indices: npt.ArrayLike | None = None) -> TextBatch:
        idx = np.arange(len(self)) if indices is None else np.asarray(indices, dtype=np.int64)
        longest = int(self.lengths[idx].max()) if len(idx) else 1
        return TextBatch(
            torch.from_numpy(self.ids[idx, :longest].copy()),
            torch.from_numpy(self.lengths[idx].copy()),
            torch.from_numpy(self.labels[idx].copy()),
        )


def classification_loss(module: torch.nn.Module, batch: TextBatch) -> torch.Tensor:
    """Mean softmax cross-entropy of ``module(batch.ids, batch.lengths)`` (in ``float64``)."""
    logits = module(batch.ids, batch.lengths)
    return F.cross_entropy(logits.double(), batch.labels)


def accuracy(module: torch.nn.Module, batch: TextBatch, *, chunk: int = 64) -> float:
    """The fraction of ``batch`` whose argmax logit is its label (``chunk`` rows at a time)."""
    hits = 0
    with torch.no_grad():
        for s in range(0, len(batch), chunk):
            lengths = batch.lengths[s : s + chunk]
            logits = module(batch.ids[s : s + chunk, : int(lengths.max())], lengths)
            hits += int((logits.argmax(-1) == batch.labels[s : s + chunk]).sum())
    return hits / max(len(batch), 1)


__all__ = [
    "BITFIT",
    "LORA",
    "MiniLMClassifier",
    "TextBatch",
    "TextClassification",
    "accuracy",
    "batch_from_rows",
    "classification_loss",
]
