"""The app's look: a light and a dark theme (palette, stylesheet, colour tokens) and tinted line icons.

`apply(app)` once, after the QApplication exists: Fusion, the theme the system's
colour scheme asks for (or `TURNKEY_THEME=light|dark`, which wins), and again
whenever the system switches.  Widgets take colours from `colors()` instead of
hard-coding them, icons from `icon(name)`, and redraw on `changed`.

The stylesheet matches a few dynamic properties, set with `restyle(widget, ...)`:

- `primary` (QPushButton, QToolButton): the accent-filled main action;
- `danger` (QPushButton): a destructive action, filled red;
- `floating` (QToolButton): a raised pill over content (the jump-to-latest button);
- `flat` (item views, text edits): no frame until focused;
- `muted` (QLabel): secondary text; `tone` = "danger" | "warning" | "success" (QLabel):
  status text; `banner` = "warning" | "info" (QLabel, QFrame): a tinted callout;
- `problem` (QLineEdit, QComboBox, text edits): a field whose value is refused.

Every focusable control shows keyboard focus as a 2 px accent border, in both themes.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal, get_args

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QImage, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QApplication, QMainWindow, QStatusBar, QWidget

from desktop.assets import UI_ICONS, icon_files
from desktop.qt.compat import emit
from desktop.qt.theme_sheet import stylesheet_for
from desktop.qt.theme_style import ThemeStyle

log = logging.getLogger(__name__)

Scheme = Literal["light", "dark"]
Tone = Literal["text", "muted", "accent", "warning", "danger", "success", "on_accent"]
ENV = "TURNKEY_THEME"  # "light" or "dark": wins over the system (screenshots, tests)


@dataclass(frozen=True)
class Colors:
    """The current theme's named colours, as "#rrggbb" (for QColor, stylesheets and rich text).

    `text`, `muted`, `accent`, `warning`, `danger` and `success` are text colours, each
    readable (WCAG AA, 4.5:1) on the window, a view, `surface`, `bubble_user`, a button, and a
    hovered or selected row.
    """

    text: str
    muted: str  # secondary text: hints, timestamps, "queued"
    accent: str  # links, "running", the one colour that says "this is active"
    warning: str
    danger: str
    success: str
    surface: str  # the background of cards (tool calls, notes) over the window or a view
    border: str  # hairlines: card outlines, separators
    bubble_user: str  # the background of the user's messages in the transcript


@dataclass(frozen=True)
class Tokens(Colors):
    """Every colour the palette and the stylesheet are drawn from (`Colors` and the chrome's)."""

    window: str  # the window's own background: toolbars, dialogs, sidebars
    base: str  # inputs, lists, the conversation
    alt_base: str
    raised: str  # menus, floating buttons
    button: str
    button_hover: str
    button_pressed: str
    hover: str  # behind a flat control or a list row under the pointer
    pressed: str  # ... pressed, or a checked tool button
    selection: str  # a selected row (its text stays `text`)
    border_strong: str  # the outline of fields and buttons
    disabled_text: str
    disabled_bg: str
    placeholder: str
    primary: str  # the fill of primary buttons, and text selection
    primary_hover: str
    primary_pressed: str
    on_accent: str  # text on `primary` and `danger_fill`
    danger_fill: str
    danger_fill_hover: str
    danger_fill_pressed: str
    warning_fill: str  # a warning banner's background
    info_fill: str
    focus: str  # the 2 px focus border
    focus_on_fill: str  # the focus border of a filled (primary, danger) button
    scroll: str
    scroll_hover: str
    tooltip_bg: str
    tooltip_text: str


LIGHT = Tokens(
    text="#1d1f23", muted="#5b616b", accent="#2760c6", warning="#975200", danger="#b92e26",
    success="#1a6f37", surface="#f0f1f3", border="#dcdfe4", bubble_user="#e8effc",
    window="#f6f6f7", base="#ffffff", alt_base="#f6f7f8", raised="#ffffff",
    button="#ffffff", button_hover="#f0f1f3", button_pressed="#e4e6ea",
    hover="#ebecef", pressed="#dfe1e6", selection="#dbe7fb", border_strong="#c4c8cf",
    disabled_text="#a2a7af", disabled_bg="#eeeff1", placeholder="#676d76",
    primary="#2f6fde", primary_hover="#2862c8", primary_pressed="#2356b0", on_accent="#ffffff",
    danger_fill="#c4332b", danger_fill_hover="#ad2c25", danger_fill_pressed="#962620",
    warning_fill="#fdf1de", info_fill="#e8effc",
    focus="#2f6fde", focus_on_fill="#1d1f23",
    scroll="#c9ccd2", scroll_hover="#a9aeb6", tooltip_bg="#1d1f23", tooltip_text="#f4f5f6",
)

DARK = Tokens(
    text="#e7e8ea", muted="#a0a5ad", accent="#78a6f7", warning="#e0a040", danger="#f78b85",
    success="#5cc37e", surface="#26272b", border="#34363b", bubble_user="#243249",
    window="#1f2023", base="#18191b", alt_base="#1d1e21", raised="#2a2b2f",
    button="#2b2c30", button_hover="#33353a", button_pressed="#3b3d43",
    hover="#2c2e32", pressed="#36383d", selection="#263a5c", border_strong="#45484e",
    disabled_text="#6a6e75", disabled_bg="#232427", placeholder="#8f949c",
    primary="#2f6fde", primary_hover="#2a64c9", primary_pressed="#2558b3", on_accent="#ffffff",
    danger_fill="#c4332b", danger_fill_hover="#ad2c25", danger_fill_pressed="#962620",
    warning_fill="#3a2c14", info_fill="#1f2c44",
    focus="#78a6f7", focus_on_fill="#ffffff",
    scroll="#45484e", scroll_hover="#5a5e66", tooltip_bg="#34363b", tooltip_text="#f0f1f2",
)

THEMES: dict[Scheme, Tokens] = {"light": LIGHT, "dark": DARK}


class _Switch(QObject):
    changed = Signal(str)  # "light" or "dark", after the palette and stylesheet are in place


_switch = _Switch()
# Emitted after the theme switches (and after the first `apply`): views re-read `colors()`,
# re-request their icons and repaint.  Created with the module: a QObject needs no app.
changed = _switch.changed

_applied: Scheme | None = None
_style: ThemeStyle | None = None  # owned by the QApplication once set
_following = False
_icons: dict[tuple[str, Tone, Scheme], QIcon] = {}
_scratch: Path | None = None  # this process's folder for the images a stylesheet refers to


def apply(app: QApplication) -> None:
    """Fusion in the wanted theme (`wanted()`), following the system's scheme from now on.

    Call once the QApplication exists; calling again re-reads `TURNKEY_THEME`.
    """
    global _following, _style
    if _style is None or not shiboken6.isValid(_style):  # (replaced styles are deleted by Qt)
        _style = ThemeStyle()
        app.setStyle(_style)
    if not _following:
        QGuiApplication.styleHints().colorSchemeChanged.connect(_system_switched)
        _following = True
    _show(app, wanted())


def wanted() -> Scheme:
    """`TURNKEY_THEME` when it says light or dark, else the system's scheme (light when unknown)."""
    override = os.environ.get(ENV, "").strip().lower()
    if override in ("light", "dark"):
        return "dark" if override == "dark" else "light"
    if override:
        log.warning("%s=%r is neither light nor dark; following the system", ENV, override)
    return "dark" if _system_scheme() == Qt.ColorScheme.Dark else "light"


def current() -> Scheme:
    """The theme on screen: the applied one, or the one `apply` would choose."""
    return _applied if _applied is not None else wanted()


def colors() -> Colors:
    """The current theme's named colours."""
    tokens = THEMES[current()]
    return Colors(**{f.name: getattr(tokens, f.name) for f in fields(Colors)})


def tokens() -> Tokens:
    """Every colour of the current theme (the palette's and the stylesheet's too)."""
    return THEMES[current()]


def palette(scheme: Scheme) -> QPalette:
    """The QPalette of a theme, Disabled group included (dimmer text, flatter controls)."""
    t = THEMES[scheme]
    p = QPalette()
    role = QPalette.ColorRole
    for r, c in ((role.Window, t.window), (role.WindowText, t.text), (role.Base, t.base),
                 (role.AlternateBase, t.alt_base), (role.Text, t.text), (role.Button, t.button),
                 (role.ButtonText, t.text), (role.BrightText, t.on_accent), (role.Highlight, t.primary),
                 (role.HighlightedText, t.on_accent), (role.Link, t.accent), (role.LinkVisited, t.accent),
                 (role.ToolTipBase, t.tooltip_bg), (role.ToolTipText, t.tooltip_text),
                 (role.PlaceholderText, t.placeholder), (role.Accent, t.focus),
                 (role.Light, t.button_hover), (role.Midlight, t.border), (role.Mid, t.border_strong),
                 (role.Dark, t.scroll_hover), (role.Shadow, "#000000")):
        p.setColor(r, QColor(c))
    # Disabled controls must look disabled: without this group they inherit the active
    # colours, and a disabled Stop reads like an enabled one.
    off = QPalette.ColorGroup.Disabled
    for r, c in ((role.WindowText, t.disabled_text), (role.Text, t.disabled_text),
                 (role.ButtonText, t.disabled_text), (role.Button, t.disabled_bg),
                 (role.Base, t.disabled_bg), (role.Highlight, t.border_strong),
                 (role.HighlightedText, t.text), (role.PlaceholderText, t.disabled_text)):
        p.setColor(off, r, QColor(c))
    return p


def stylesheet(scheme: Scheme) -> str:
    """The application stylesheet of a theme (writes the arrow images it names, once)."""
    chevron, chevron_disabled = _chevrons(scheme)
    return stylesheet_for({**asdict(THEMES[scheme]), "chevron": chevron,
                           "chevron_disabled": chevron_disabled})


def tidy_window(win: QMainWindow) -> None:
    """No size grip in the corner of the window's status bar, if it has one (none is created).

    Call after the window has built its status bar.
    """
    bar = win.findChild(QStatusBar, options=Qt.FindChildOption.FindDirectChildrenOnly)
    if bar is not None:
        bar.setSizeGripEnabled(False)


def restyle(widget: QWidget, **properties: object) -> None:
    """Sets dynamic properties the stylesheet matches (`primary=True`, `tone="danger"`, ...)
    and re-polishes the widget, which a property changed after it was shown needs."""
    for name, value in properties.items():
        widget.setProperty(name, value)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
    widget.update()


def icon(name: str, tone: Tone = "text") -> QIcon:
    """The line icon `name` (one of `desktop.assets.UI_ICONS`) in the current theme's `tone`,
    and in the disabled text colour for a disabled control.

    Cached per theme; the icon keeps the colours it was made with, so ask again on `changed`.
    """
    if name not in UI_ICONS:
        raise ValueError(f"unknown icon {name!r}; the icons are {', '.join(UI_ICONS)}")
    if tone not in get_args(Tone):
        raise ValueError(f"unknown tone {tone!r}; the tones are {', '.join(get_args(Tone))}")
    scheme = current()
    key = (name, tone, scheme)
    made = _icons.get(key)
    if made is None:
        t = THEMES[scheme]
        made = _icons[key] = _tinted(name, QColor(getattr(t, tone)), QColor(t.disabled_text))
    return made


# --- inside ---------------------------------------------------------------------------------


def _system_scheme() -> Qt.ColorScheme:
    return QGuiApplication.styleHints().colorScheme()


def _system_switched(_scheme: Qt.ColorScheme) -> None:
    app = QApplication.instance()
    if isinstance(app, QApplication):
        _show(app, wanted())


def _show(app: QApplication, scheme: Scheme) -> None:
    global _applied
    app.setPalette(palette(scheme))
    sheet = stylesheet(scheme)
    if app.styleSheet() != sheet:  # setting it re-polishes every widget
        app.setStyleSheet(sheet)
    switched = scheme != _applied
    _applied = scheme
    if switched:
        log.info("theme: %s", scheme)
        emit(changed, scheme)


def _chevrons(scheme: Scheme) -> tuple[str, str]:
    """The combo box's arrow, enabled and disabled, as PNG files (a stylesheet shows images
    only from files): the chevron-down icon tinted for the theme, in a private temporary
    folder removed at exit."""
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="turnkey-theme-"))
        atexit.register(shutil.rmtree, _scratch, True)
    t = THEMES[scheme]
    source = dict(icon_files("ui-chevron-down"))[32]  # drawn at 16 px: sharp on a 2x screen
    paths = []
    for suffix, color in (("", t.muted), ("-disabled", t.disabled_text)):
        path = _scratch / f"chevron-{scheme}{suffix}.png"
        if not path.is_file():
            image = QImage(str(source))
            if image.isNull():
                log.warning("icon chevron-down: missing %s (run assets/render_icons.py)", source)
            elif not _recolored(image, QColor(color)).save(str(path)):
                log.warning("could not write %s", path)
        paths.append(path.as_posix())
    return paths[0], paths[1]


def _tinted(name: str, color: QColor, disabled: QColor) -> QIcon:
    """Every rendered size of a black-on-transparent PNG, recoloured: its alpha kept, its
    colour replaced (the app never loads the SVG sources)."""
    made = QIcon()
    missing = []
    for _n, path in icon_files(f"ui-{name}"):
        image = QImage(str(path))
        if image.isNull():
            missing.append(path.name)
            continue
        normal = _tint(image, color)
        made.addPixmap(normal, QIcon.Mode.Normal)
        made.addPixmap(normal, QIcon.Mode.Selected)  # selected rows keep the text colour
        made.addPixmap(_tint(image, disabled), QIcon.Mode.Disabled)
    if missing:
        log.warning("icon %s: missing %s (run assets/render_icons.py)", name, ", ".join(missing))
    return made


def _tint(image: QImage, color: QColor) -> QPixmap:
    return QPixmap.fromImage(_recolored(image, color))


def _recolored(image: QImage, color: QColor) -> QImage:
    """`image` in `color`: each pixel's alpha kept, its colour replaced."""
    out = image.convertToFormat(QImage.Format.Format_ARGB32_Premultiplied)
    painter = QPainter(out)
    painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_SourceIn)
    painter.fillRect(out.rect(), color)
    painter.end()
    return out
