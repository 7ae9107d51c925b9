"""Model providers behind one small contract (`base.py`), each speaking its wire over httpx.

httpx imports its own command line (`httpx._main`) whenever rich, click and pygments are
installed, as they are here for other reasons: ~40 ms and several MB in every process that
makes a model call, for a command the backend never runs.  Marking it absent makes httpx
skip it (its `main` then only says the command line is not installed), as it does in the
bundled app, which leaves the module out (`packaging/turnkey.spec`).
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
