"""The bundled app's entry point: `turnkey` opens the window, `turnkey backend serve ...` is the
backend (the app starts its backend by running this same executable that way)."""

import sys

from desktop.cli import main

if __name__ == "__main__":
    sys.exit(main())
