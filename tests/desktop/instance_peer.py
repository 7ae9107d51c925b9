"""A launch reduced to its single-instance part, for tests/desktop/test_single_instance.py.

`python -m tests.desktop.instance_peer DIR SERVE [--wait]`: takes DIR like the app does, or
hands over to the app holding it.  Prints one JSON line: {"role": "serving", "pid": ...}
then one {"request": ...} per request, exiting after SERVE of them; or {"role": "handed",
"reply": ...}.  With --wait it first prints {"role": "ready"} and reads a line from stdin
(to start several at once).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from PySide6.QtCore import QCoreApplication

from desktop.qt import instance


def main(argv: list[str]) -> int:
    data_dir, serve = Path(argv[0]), int(argv[1])
    if "--wait" in argv:
        print(json.dumps({"role": "ready"}), flush=True)
        sys.stdin.readline()
    lock = instance.claim(data_dir)
    if lock is None:
        reply = instance.hand_over(instance.endpoint_of(data_dir), instance.Request())
        print(json.dumps({"role": "handed", "reply": reply}), flush=True)
        return 0 if reply and reply.get("ok") else 1
    app = QCoreApplication([])
    server = instance.InstanceServer(lock)
    server.listen()
    served: list[instance.Request] = []

    def on_request(request: instance.Request) -> None:
        served.append(request)
        print(json.dumps({"request": request.action}), flush=True)
        if len(served) >= serve:
            app.quit()  # after the answer has been written: quit is queued

    server.requested.connect(on_request)
    print(json.dumps({"role": "serving", "pid": os.getpid()}), flush=True)
    app.exec()
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
