# The extension module: its submodules' classes are typed where they are re-exported
# (privopt.ckks, privopt.paillier, …).
from typing import Any

__version__: str

def __getattr__(name: str) -> Any: ...
