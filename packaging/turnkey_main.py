"""The bundled app's entry point: `turnkey` opens the window, `turnkey backend serve ...` is the
backend (the app starts its backend by running this same executable that way).

A bundle built with the offline model (packaging/build --with-local-model) is also its model's
server: the backend starts `sys.executable -m llama_cpp.server ...` from source and frozen alike
(backend/providers/local.py llama_command), and here sys.executable is this executable.  That
one module and no other: `-m` is no general way into the bundle's Python.
"""

import runpy
import sys

LOCAL_SERVER = "llama_cpp.server"


def serve_local_model(argv: list[str]) -> None:
    """Runs llama.cpp's server as `python -m llama_cpp.server ARGS` would."""
    sys.argv = [LOCAL_SERVER, *argv]
    runpy.run_module(LOCAL_SERVER, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    if sys.argv[1:3] == ["-m", LOCAL_SERVER]:
        serve_local_model(sys.argv[3:])
        sys.exit(0)
    from desktop.cli import main  # here, so the model's server does not load the app

    sys.exit(main())
