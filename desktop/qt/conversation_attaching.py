"""A conversation's attaching: files pasted, dropped or picked go into the message box as chips
and upload at once in the background (`shared/uploads.py` over the app's client); Send waits
for them.  A prompt's files in the transcript open from here too (`attachment_viewing.py`).
Which files are taken and what the chips say is `desktop/state/attachments.py`'s."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from desktop.qt.aio import spawn
from desktop.qt.attachment_viewing import FileOpener, Thumbnails
from desktop.qt.attachments import Given, read_file, to_read
from desktop.qt.compat import emit
from desktop.qt.composer import ComposerPanel
from desktop.state.attachments import (
    Intent,
    Pending,
    PendingFile,
    current_vision,
    vision_notice,
    waiting_words,
)
from desktop.state.session import SessionState
from shared import protocol as p
from shared.uploads import upload

if TYPE_CHECKING:
    from desktop.link import Link

NOTE_MS = 8_000  # a refusal's words stay this long over the message box
FILE_FILTER = ("Images, PDFs and text (*.png *.jpg *.jpeg *.gif *.webp *.pdf *.txt *.md *.csv "
               "*.json *.xml *.yaml *.yml *.toml *.js *.ts *.py *.sh *.log *.html *.css);;"
               "All files (*)")


class Host(Protocol):
    """What attaching needs of its conversation (`Conversation`)."""

    link: Link
    session_id: str
    state: SessionState
    composer_frame: ComposerPanel

    def providers(self) -> list[p.ProviderChoice]: ...


class ConversationAttaching(QObject):
    """`changed`: the waiting files changed (the model box marks blind models while an image
    waits); `ready`: Send was pressed during uploads, and they are all done (its intent)."""

    changed = Signal()
    ready = Signal(str)

    def __init__(self, host: Host, window: QWidget) -> None:
        super().__init__(window)
        self.host = host
        self.window = window
        self.pending = Pending()
        self.refused = ""  # the last refusal's words, shown a while
        self._unsay = QTimer(self, singleShot=True, interval=NOTE_MS)
        self._unsay.timeout.connect(lambda: self.say(""))
        self.thumbnails = Thumbnails(host.link, host.session_id, self)
        self.opener = FileOpener(host.link, host.session_id, window)
        self.opener.said.connect(self.say)
        self.picker: QFileDialog | None = None
        self._reading: asyncio.Lock | None = None  # made on the loop, at the first read
        self.reads = 0  # drops and picks whose files are being read
        panel = host.composer_frame
        panel.chips.remove.connect(self.remove)
        panel.attach.connect(self.pick)
        panel.composer.files_given.connect(self.give)

    # --- adding --------------------------------------------------------------------

    def give(self, given: Sequence[Given]) -> None:
        """Files pasted, dropped or picked: each taken (its upload started) or refused, saying
        why.  Local files still to read are read in a thread first: the window stays live."""
        if any(g.path for g in given):
            self.reads += 1  # now, not when the read starts: a Send right after waits for it
            spawn(self._read_then_give(given), self.say)
            return
        refusals: list[str] = []
        for g in given:
            added = self.pending.add(g.name, g.data) if not g.refused else g.refused
            if isinstance(added, str):
                refusals.append(added)
            else:
                spawn(self._upload(added), self._failing(added.key))
        self.say(" ".join(refusals))
        self.show()

    def pick(self) -> None:
        """The attach button or Ctrl+U: a file picker (not modal: the loop keeps running)."""
        dialog = self.picker = QFileDialog(self.window, "Attach files")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        dialog.setNameFilter(FILE_FILTER)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.filesSelected.connect(self.give_paths)
        dialog.open()

    def give_paths(self, paths: Sequence[str]) -> None:
        self.give([to_read(path) for path in paths])

    async def _read_then_give(self, given: Sequence[Given]) -> None:
        def read_all() -> list[Given]:
            return [read_file(g.path) if g.path else g for g in given]

        # One read at a time, in the order given (asyncio's lock is first come, first
        # served): two drops in a row attach in the order they were dropped.
        self._reading = self._reading or asyncio.Lock()
        try:
            async with self._reading:
                self.give(await asyncio.to_thread(read_all))
        finally:
            self.reads -= 1
            self._maybe_ready()

    def _maybe_ready(self) -> None:
        """A Send held for the files sends once none is being read or uploaded."""
        if self.pending.waiting is not None and not self.busy:
            emit(self.ready, self.pending.waiting)

    @property
    def busy(self) -> bool:
        """Files are still being read (a drop, a pick) or uploaded: Send waits."""
        return self.reads > 0 or self.pending.uploading

    async def _upload(self, f: PendingFile) -> None:
        def progress(received: int, _size: int) -> None:
            self.pending.progress(f.key, received)
            self.show()

        stored = await upload(self.host.link, f.data, f.mime_type, progress=progress)
        self.pending.done(f.key, stored)
        self.show()
        self._maybe_ready()

    def _failing(self, key: int) -> Callable[[str], None]:
        def failed(words: str) -> None:
            self.pending.failed(key, words)
            self.show()
        return failed

    def remove(self, key: int) -> None:
        self.pending.remove(key)
        self.show()
        self._maybe_ready()

    # --- sending -------------------------------------------------------------------

    def hold(self, intent: Intent) -> bool:
        """Whether Send must wait for files being read or uploaded (it is then remembered and
        goes when they end)."""
        if not self.busy:
            return False
        self.pending.waiting = intent
        self.show()
        return True

    def take(self) -> list[PendingFile]:
        taken = self.pending.take()
        self.show()
        return taken

    def put_back(self, files: Sequence[PendingFile]) -> None:
        self.pending.put_back(files)
        self.show()

    # --- showing -------------------------------------------------------------------

    def say(self, words: str) -> None:
        """Words over the message box (a refusal), for a while; "" clears them."""
        self.refused = words
        if words:
            self._unsay.start()
        self.show()

    def show(self) -> None:
        """The chips and the note over them, after the waiting files changed."""
        panel = self.host.composer_frame
        if panel.chips.show_files(self.pending.files):
            panel.composer.setFocus(Qt.FocusReason.OtherFocusReason)
        self.show_note()
        emit(self.changed)

    def show_note(self) -> None:
        """The line over the chips: a refusal, else a model that cannot see the image waiting
        and Send waiting for uploads."""
        h = self.host
        provider = (h.state.session.provider or "") if h.state.session else ""
        blind = vision_notice(self.pending.has_image, current_vision(provider, h.providers()))
        waiting = waiting_words(self.pending)
        if self.refused:
            h.composer_frame.note(self.refused, "danger")
        else:
            said = [words for words in (blind, waiting) if words]
            h.composer_frame.note("\n".join(said) or None, "warning" if blind else "muted")

    def open(self, a: p.MessageAttachment) -> None:
        """A prompt's file clicked in the transcript."""
        self.opener.open(a)
