"""Where a file tool's path lands, and the places no tool may read or change (the seal).

Judged on the real path a `beneath.Place` resolved, never on the string the
model sent.  Sealed, whatever the approval mode and whatever a person says:

- Turnkey's data folder: the database with every transcript, backend.json
  with the owner token, secrets.json, config, logs, checkpoints.  Its spill
  folder alone may be read: a result too large for the model is kept there,
  and the model is told to read it in parts.
- /proc/<pid>/environ and /proc/<pid>/mem (a process's environment holds
  provider keys; its memory, everything) and /proc/kcore.  Links below
  /proc/<pid>/ are refused while resolving (see `beneath`).

Listings and searches over a folder that holds the data folder skip it.  A
file hard-linked to one of the data folder's own files is sealed too; a
hard link deeper in it (say, to a checkpoint blob) is not looked for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from backend.tools import protected
from backend.tools.beneath import Place

SPILL_FOLDER = "spill"
PROC_SECRETS = frozenset({"environ", "mem", "kcore"})
DATA_REASON = ("it is in Turnkey's data folder (transcripts, tokens, keys), which no tool reads "
               "or changes")
PROC_REASON = ("it is a process's environment or memory (where provider keys live), which file "
               "tools never read")
LINKED_REASON = "it is a hard link to a file in Turnkey's data folder, which no tool reads"


def under(path: str, folder: str) -> bool:
    """True when the real path `path` is `folder` or below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass(frozen=True)
class Seal:
    """What no file tool may touch, for one call: made from the backend's data folder."""

    data: str  # the data folder's real path
    ident: tuple[int, int] | None  # its device and inode; None when it does not exist

    @classmethod
    def of(cls, data_dir: Path) -> Seal:
        real = os.path.realpath(data_dir)
        try:
            st = os.stat(real)
        except OSError:
            return cls(real, None)
        return cls(real, (st.st_dev, st.st_ino))

    def why(self, real: str, *, reading: bool) -> str | None:
        """Why no tool may go to the real path `real`, or None when one may."""
        if under(real, self.data):
            if reading and under(real, os.path.join(self.data, SPILL_FOLDER)):
                return None
            return DATA_REASON
        if real.startswith("/proc/") and os.path.basename(real) in PROC_SECRETS:
            return PROC_REASON
        return None

    def hides(self, st: os.stat_result) -> bool:
        """Whether a folder met in a listing or a search is the data folder (it is skipped)."""
        return self.ident == (st.st_dev, st.st_ino)

    def linked(self, st: os.stat_result) -> bool:
        """Whether an opened file is a hard link to one of the data folder's own files."""
        if st.st_nlink < 2 or self.ident is None:
            return False
        try:
            with os.scandir(self.data) as entries:
                for entry in entries:
                    own = entry.stat(follow_symlinks=False)
                    if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
                        return True
        except OSError:
            return False
        return False


@dataclass(frozen=True)
class Landing:
    """Where a resolved path lands, as the approval policy sees it."""

    real: str
    folder: str  # the real folder it is (or will be) in: what an approval covers
    inside: bool  # in the session folder
    linked_out: bool  # the path as written is in the session folder, a symlink leads it out
    sealed: str | None  # why no tool may go there, else None
    protected: str | None = None  # in the session folder, but code a person's tools run (asks)


def land(place: Place, cwd: Path, seal: Seal, *, reading: bool) -> Landing:
    real = place.real
    inside = under(real, os.path.realpath(cwd))
    written = under(os.path.normpath(place.asked), os.path.abspath(cwd))
    kept = protected.why(real, cwd) if inside and not reading else None
    return Landing(real, place.folder, inside, written and not inside, seal.why(real, reading=reading),
                   kept)
