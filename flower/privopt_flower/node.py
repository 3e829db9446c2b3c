"""The client side's view of itself: which party it is, and where its state lives between
messages (a Flower ClientApp handles each message in a fresh process; only its Context's
state survives, in the SuperNode's memory)."""

from __future__ import annotations

import os
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Node:
    """One client: its party id (= data partition), the number of partitions, and an optional
    directory where state marked durable is also written, so a restarted client resumes."""

    party: int
    parties: int
    state_dir: str | None = None


class State(ABC):
    """Bytes kept between messages, by key. ``durable`` values also go to the node's state
    directory (when it has one) and are read back from there after a restart."""

    def __init__(self, node: Node) -> None:
        self._dir = Path(node.state_dir) / f"party-{node.party}" if node.state_dir else None

    @abstractmethod
    def _load(self, key: str) -> bytes | None: ...

    @abstractmethod
    def _store(self, key: str, value: bytes | None) -> None: ...

    def get(self, key: str) -> bytes | None:
        value = self._load(key)
        if value is None and self._dir is not None and (self._dir / key).is_file():
            value = (self._dir / key).read_bytes()
        return value

    def require(self, key: str, stage: str, role: str) -> bytes:
        """The saved ``key``, or an error saying ``stage`` came before ``role`` was set up."""
        value = self.get(key)
        if value is None:
            raise RuntimeError(f"stage {stage!r} before {role} was set up")
        return value

    def put(self, key: str, value: bytes, durable: bool = False) -> None:
        self._store(key, value)
        if durable and self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            # Write then rename: a kill mid-write leaves the previous save intact.
            fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=f".{key}.")
            with os.fdopen(fd, "wb") as f:
                f.write(value)
            os.replace(tmp, self._dir / key)

    def drop(self, key: str) -> None:
        self._store(key, None)


class MemoryState(State):
    """State in a dict (the in-process driver)."""

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self._values: dict[str, bytes] = {}

    def _load(self, key: str) -> bytes | None:
        return self._values.get(key)

    def _store(self, key: str, value: bytes | None) -> None:
        if value is None:
            self._values.pop(key, None)
        else:
            self._values[key] = value
