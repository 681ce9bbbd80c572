"""`typing`'s names without importing `typing` at run time (a tenth of the metrics
collector's start in every trial pod, for names that only mypy reads).

`if TYPE_CHECKING:` guards imports of `typing` itself (mypy recognises the name). At run time
`Protocol` is a plain base class (nothing checks these protocols with `isinstance`).
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Protocol as Protocol
else:
    Protocol = object
