"""Exceptions raised by privopt, one class per kind of failure.

Every class derives from :class:`PrivoptError`; those caused by a bad argument or bad bytes also
derive from :class:`ValueError`, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "PrivoptError",
    "ParameterError",
    "InsecureParameters",
    "MalformedMessage",
    "ProtocolError",
    "PeerMisbehaved",
    "ComputationError",
]


class PrivoptError(Exception):
    """Base class of every privopt error."""


class ParameterError(PrivoptError, ValueError):
    """An argument or parameter set that cannot work (sizes, ranges, mixed parameter sets)."""


class InsecureParameters(ParameterError):
    """Parameters below 128-bit security; pass ``insecure=True`` to use them in tests."""


class MalformedMessage(PrivoptError, ValueError):
    """Bytes that are not a well-formed key, ciphertext or protocol message."""


class ProtocolError(PrivoptError):
    """A protocol step that cannot proceed: out of order, or a round that cannot complete
    (too few parties survived, a share is missing)."""


class PeerMisbehaved(ProtocolError):
    """A peer sent a well-formed message the protocol forbids here (another round, a
    duplicate, the wrong size, a party not in the round). Drop it; consider excluding the
    peer.

    :attr:`kind` says which: ``"wrong_round"`` (late, replayed, another run),
    ``"not_participant"``, ``"misaddressed"``, ``"duplicate"``, ``"malformed"``,
    ``"out_of_bounds"``, ``"unsolicited"``, ``"forbidden"`` (e.g. a second decryption share
    asked for) or ``"tampered"`` (failed authentication, equivocation); ``"unknown"`` when
    raised without one.
    """

    kind: str

    def __init__(self, message: str, kind: str = "unknown") -> None:
        super().__init__(message, kind)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


class ComputationError(PrivoptError, ArithmeticError):
    """A computation that cannot give a correct result: out of levels, a missing evaluation
    key, a decryption that overflowed, training that diverged."""
