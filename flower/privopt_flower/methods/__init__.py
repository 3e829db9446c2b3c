"""One module per method: ``serve`` (the server side, over a Federation), ``hello`` (what a
client reports when it joins) and ``handle`` (a client's reply to one stage)."""

from __future__ import annotations

from types import ModuleType

from . import dome, dpfhe, eezofl, pdsgd, scalar_fl

MODULES: dict[str, ModuleType] = {
    "scalar_fl": scalar_fl,
    "dome": dome,
    "eezofl": eezofl,
    "pdsgd": pdsgd,
    "dpfhe": dpfhe,
}
