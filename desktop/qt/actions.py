"""Every command of a window, declared once: its name, menu text, keys, and for a command on
the conversation the window shows, what it does and when it can. The menus are laid out from
MENUS; the command palette lists a window's actions (palette.py), so what is here is in both;
the main window and every pop-out build theirs from these same tables (session_window.py).

A command the app carries out (a new session, Settings, Quit) is an AppCommand: the window
asks the controller for it by name (`Window.requested`). A command on the conversation shown
(Stop, Regenerate, Undo) is a ConversationCommand: it runs on that Conversation, and is
enabled while `can` says so (checked whenever the conversation changes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtGui import QKeySequence

if TYPE_CHECKING:
    from desktop.qt.conversation import Conversation

Key = QKeySequence.StandardKey | str


@dataclass(frozen=True)
class AppCommand:
    name: str
    text: str
    keys: tuple[Key, ...] = ()
    needs_session: bool = False  # about the session shown: disabled in a window without one


@dataclass(frozen=True)
class ConversationCommand:
    name: str  # the window's attribute is `{name}_action`
    text: str
    keys: tuple[Key, ...]
    run: Callable[[Conversation], object]
    can: Callable[[Conversation], bool] = lambda c: True


# (Key sequences are made when a window is: not before the QApplication exists.)
APP_COMMANDS: tuple[AppCommand, ...] = (
    AppCommand("new", "&New session…", (QKeySequence.StandardKey.New,)),
    AppCommand("sessions", "&All sessions", ("Ctrl+Shift+L",)),
    AppCommand("find", "&Search sessions…", (QKeySequence.StandardKey.Find,)),
    AppCommand("settings", "&Settings…", ("Ctrl+,",)),  # (the platform's StandardKey may be empty)
    AppCommand("schedules", "Sc&heduled prompts…"),
    AppCommand("remote", "Connect to a &remote backend…"),
    AppCommand("backends", "&Backends on the store…"),
    AppCommand("quit", "&Quit", ("Ctrl+Q",)),
    AppCommand("pop_out", "Open in new &window", ("Ctrl+Shift+O",), needs_session=True),
    AppCommand("delete", "&Delete session…", needs_session=True),
    AppCommand("logs", "Open &logs folder"),
    AppCommand("data", "Open &data folder"),
)

CONVERSATION_COMMANDS: tuple[ConversationCommand, ...] = (
    ConversationCommand("rename", "&Rename…", ("F2",), lambda c: c.rename()),
    # Esc too, wherever the focus is in the window (the key reached for in a panic).  A popup or
    # a dialog keeps its own Esc: the window's shortcuts do not reach them.  Enabled only while a
    # turn runs, so an idle window's Esc is left to the widget with the focus (the message
    # reader's: back to the list).
    ConversationCommand("stop", "S&top the running turn", ("Ctrl+.", "Esc"),
                        lambda c: c.interrupt(), lambda c: c.state.busy),
    # The keyboard's way to an approval card: the focus on its Allow once (Enter allows, Tab
    # reaches the other answers); with only a question waiting, on its first choice (1-9 pick
    # one) or its text field.
    ConversationCommand("approval", "Go to the waiting &approval or question", ("Ctrl+Shift+A",),
                        lambda c: c.focus_first_approval(),
                        lambda c: bool(c.cards) or bool(c.question_cards)),
    # A prompt's answers and branches (state/answers.py, session.regenerate/choose/fork).
    ConversationCommand("regenerate", "Re&generate answer", ("Ctrl+Shift+R",),
                        lambda c: c.regenerate()),
    ConversationCommand("previous_answer", "&Previous answer", ("Alt+Left",),
                        lambda c: c.page_answer(None, -1)),
    ConversationCommand("next_answer", "&Next answer", ("Alt+Right",),
                        lambda c: c.page_answer(None, 1)),
    ConversationCommand("edit", "&Edit message and branch…", ("Ctrl+E",),
                        lambda c: c.edit_prompt()),
    ConversationCommand("original", "Open the branch's &original", (),
                        lambda c: c.open_original(),
                        lambda c: bool(c.state.session is not None and c.state.session.forked_from)),
    # (Ctrl+Shift+Z is the message box's own Redo.)
    ConversationCommand("undo", "&Undo the last turn's file changes", ("Ctrl+Alt+Z",),
                        lambda c: c.undo(),
                        lambda c: not c.state.busy and c.turn_actions.undo_turn is not None),
    ConversationCommand("composer", "Go to the &message box", ("Ctrl+L",),
                        lambda c: c.focus_composer()),
    # Files for the message: a picker (they can be pasted or dropped on the window too).
    ConversationCommand("attach", "A&ttach files…", ("Ctrl+U",), lambda c: c.attach_files(),
                        lambda c: c.composer.isEnabled()),
    ConversationCommand("latest", "Jump to &latest", ("Ctrl+End",), lambda c: c.follower.jump()),
)

# The menus of every window, in order; None is a separator.  Names are the commands' above,
# and three of the window's own: "close" (this window), "changes" (the changes panel's
# toggle) and "palette" (Ctrl+K).  The main window adds its sidebar's entries to View.
MENUS: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    ("&File", ("new", "pop_out", None, "schedules", "settings", None, "remote", None, "close",
               "quit")),
    ("&Edit", ("find", "composer", "attach")),
    ("&View", ("sessions", "changes", "latest", None, "backends")),
    ("&Session", ("rename", "stop", "approval", None, "regenerate", "previous_answer",
                  "next_answer", "edit", "original", None, "undo", None, "pop_out", None,
                  "delete")),
    ("&Help", ("palette", None, "logs", "data")),
)
