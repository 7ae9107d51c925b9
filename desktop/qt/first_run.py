"""The first run's steps in the app (the words are `desktop/state/first_run.py`'s): a session to
type in when the backend has none and nothing is configured, and the settings' provider form,
opened by itself once when nothing can answer and by the welcome's "Add a provider"."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from desktop.state.first_run import provider_name

if TYPE_CHECKING:
    from desktop.qt.settings import SettingsDialog

log = logging.getLogger("desktop")


def open_provider_form(dialog: SettingsDialog) -> None:
    """The dialog's Providers page with a new provider's form (its name offered, its connection
    test beside it).  A dialog still loading its config gets the form once the config is in:
    that load fills the form afresh and would drop a new provider started before it."""
    dialog.show_tab("Providers")
    if dialog.config is not None and "load" not in dialog.busy:
        _start(dialog)
        return

    def loaded(_config: object) -> None:
        dialog.loaded.disconnect(loaded)
        _start(dialog)

    dialog.loaded.connect(loaded)


def _start(dialog: SettingsDialog) -> None:
    if dialog.state.draft is not None:  # a new provider is being filled in already
        dialog.providers_page.form.fields["model"].setFocus()
        return
    name = provider_name(dialog.providers())
    if dialog.start_new_provider(name):
        log.info("the provider form opened for a new provider %r", name)
