"""The per-client privacy ledger (:class:`privopt.ledger.PrivacyLedger`), re-exported: the
Flower app and privopt's own drivers keep one ledger."""

from privopt.ledger import PrivacyLedger

__all__ = ["PrivacyLedger"]
