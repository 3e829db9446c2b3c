"""Text for privopt's language-model runs: BERT's uncased WordPiece tokenizer, the one the Rust
engine's MiniLM reads, so a PyTorch model (:mod:`privopt.torch.text`) sees the same token ids.

>>> vocab = WordPiece("data/minilm/vocab.txt")          # after `privopt data fetch minilm`
>>> vocab.encode("a gripping film.", max_len=64)         # [CLS] … [SEP]
>>> ids, lengths, cut = vocab.encode_batch(texts, max_len=64)

``encode_batch`` pads with 0 (``[PAD]``) to the longest row and names the texts it cut to
``max_len`` (``cut``), so a caller can say how many were truncated.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._native import text as _native
from .errors import ParameterError

WordPiece = _native.WordPiece


def data_dir() -> Path:
    """Where ``privopt data fetch`` puts datasets and models: ``$PRIVOPT_DATA``, else ``data``
    in the working directory."""
    return Path(os.environ.get("PRIVOPT_DATA", "data"))


def fetched(name: str) -> Path:
    """The folder of the fetched catalog entry ``name`` (e.g. ``"minilm"``), or
    :class:`~privopt.errors.ParameterError` saying which command fetches it."""
    path = data_dir() / name
    if not path.is_dir():
        raise ParameterError(
            f"{path} does not exist: run `privopt data fetch {name}` (or set PRIVOPT_DATA to "
            "the folder it fetched into)"
        )
    return path


__all__ = ["WordPiece", "data_dir", "fetched"]
