"""The application stylesheet, one template filled with a theme's tokens (`desktop.qt.theme`).

Focus is drawn here, not by the style: every focusable control gets a 2 px `$focus`
border when it has focus.  Unfocused controls have a 1 px border and one pixel more
padding, so focusing one never moves its content.  Colours come only from tokens, so
the same rules hold in the light and the dark theme.
"""

from __future__ import annotations

from string import Template

SHEET = Template("""
QToolTip {
    color: $tooltip_text; background: $tooltip_bg; border: 1px solid $tooltip_bg;
    border-radius: 6px; padding: 4px 8px;
}

/* --- buttons ------------------------------------------------------------------------ */

QPushButton {
    color: $text; background: $button; border: 1px solid $border_strong; border-radius: 6px;
    padding: 6px 14px; outline: none;
}
QPushButton:hover { background: $button_hover; }
QPushButton:pressed, QPushButton:checked { background: $button_pressed; }
QPushButton:focus { border: 2px solid $focus; padding: 5px 13px; }
QPushButton:disabled { color: $disabled_text; background: $disabled_bg; border-color: $border; }
QPushButton:flat { background: transparent; border-color: transparent; }
QPushButton:flat:hover { background: $hover; }
QPushButton:flat:focus { border-color: $focus; }

QPushButton[primary="true"], QToolButton[primary="true"] {
    color: $on_accent; background: $primary; border-color: $primary;
}
QPushButton[primary="true"]:hover, QToolButton[primary="true"]:hover {
    background: $primary_hover; border-color: $primary_hover;
}
QPushButton[primary="true"]:pressed, QToolButton[primary="true"]:pressed {
    background: $primary_pressed; border-color: $primary_pressed;
}
QPushButton[danger="true"] { color: $on_accent; background: $danger_fill; border-color: $danger_fill; }
QPushButton[danger="true"]:hover { background: $danger_fill_hover; border-color: $danger_fill_hover; }
QPushButton[danger="true"]:pressed { background: $danger_fill_pressed; border-color: $danger_fill_pressed; }
QPushButton[primary="true"]:focus, QPushButton[danger="true"]:focus,
QToolButton[primary="true"]:focus { border-color: $focus_on_fill; }
QPushButton[primary="true"]:disabled, QPushButton[danger="true"]:disabled,
QToolButton[primary="true"]:disabled {
    color: $disabled_text; background: $disabled_bg; border-color: $border;
}

QToolButton {
    color: $text; background: transparent; border: 1px solid transparent; border-radius: 6px;
    padding: 4px; outline: none;
}
QToolButton:hover { background: $hover; }
QToolButton:pressed, QToolButton:checked { background: $pressed; }
QToolButton:focus { border: 2px solid $focus; padding: 3px; }
QToolButton:disabled { color: $disabled_text; }
/* A pill raised over content (follow.py's jump-to-latest button is one). */
QToolButton[floating="true"], QToolButton#jumpToLatest {
    background: $raised; border: 1px solid $border_strong; border-radius: 14px; padding: 5px 10px;
}
QToolButton[floating="true"]:hover, QToolButton#jumpToLatest:hover { background: $button_hover; }
QToolButton[floating="true"]:focus, QToolButton#jumpToLatest:focus {
    border: 2px solid $focus; padding: 4px 9px;
}

/* --- fields ------------------------------------------------------------------------- */

QLineEdit, QPlainTextEdit, QTextEdit {
    color: $text; background: $base; border: 1px solid $border_strong; border-radius: 6px;
    selection-background-color: $primary; selection-color: $on_accent;
}
QLineEdit { padding: 5px 8px; }
QPlainTextEdit, QTextEdit { padding: 4px 6px; }
QLineEdit:focus, QPlainTextEdit:focus, QTextEdit:focus { border: 2px solid $focus; }
QLineEdit:focus { padding: 4px 7px; }
QPlainTextEdit:focus, QTextEdit:focus { padding: 3px 5px; }
QLineEdit:disabled, QPlainTextEdit:disabled, QTextEdit:disabled {
    color: $disabled_text; background: $disabled_bg; border-color: $border;
}
QLineEdit:read-only, QPlainTextEdit:read-only, QTextEdit:read-only { background: $window; }
QPlainTextEdit[flat="true"], QTextEdit[flat="true"] { border-color: transparent; }
QPlainTextEdit[flat="true"]:focus, QTextEdit[flat="true"]:focus { border-color: $focus; }
QLineEdit[problem="true"], QPlainTextEdit[problem="true"], QTextEdit[problem="true"],
QComboBox[problem="true"] { border-color: $danger; }

QComboBox {
    color: $text; background: $button; border: 1px solid $border_strong; border-radius: 6px;
    padding: 5px 10px; outline: none;
}
QComboBox:hover { background: $button_hover; }
QComboBox:focus { border: 2px solid $focus; padding: 4px 9px; }
QComboBox:disabled { color: $disabled_text; background: $disabled_bg; border-color: $border; }
QComboBox:editable { background: $base; }
QComboBox QLineEdit { border: none; padding: 0px; background: transparent; }
/* Any rule for the drop-down takes the style's arrow away, so the arrow is an image: the
   chevron-down icon in the theme's colours, written to a scratch file by theme.py. */
QComboBox::drop-down {
    subcontrol-origin: padding; subcontrol-position: center right; width: 22px; border: none;
}
QComboBox::down-arrow { image: url("$chevron"); width: 16px; height: 16px; }
QComboBox::down-arrow:disabled { image: url("$chevron_disabled"); }
QComboBox QAbstractItemView {
    background: $raised; border: 1px solid $border; border-radius: 0px; padding: 4px;
    selection-background-color: $selection; selection-color: $text;
}
QComboBox QAbstractItemView:focus { border: 1px solid $border; padding: 4px; }

/* The indicator itself shows focus (theme_style.py draws the ring). */
QCheckBox, QRadioButton { color: $text; spacing: 6px; outline: none; }
QCheckBox:disabled, QRadioButton:disabled { color: $disabled_text; }

/* --- views -------------------------------------------------------------------------- */

QAbstractItemView {
    color: $text; background: $base; alternate-background-color: $alt_base;
    border: 1px solid $border; border-radius: 8px; padding: 1px; outline: none;
    selection-background-color: $selection; selection-color: $text;
}
QAbstractItemView[flat="true"] { border-color: transparent; }
QAbstractItemView:focus, QAbstractItemView[flat="true"]:focus {
    border: 2px solid $focus; padding: 0px;
}
QAbstractItemView:disabled { color: $disabled_text; }
QListView::item, QTreeView::item { padding: 5px 8px; border-radius: 6px; }
QListView::item:hover, QTreeView::item:hover { background: $hover; }
QListView::item:selected, QTreeView::item:selected { background: $selection; color: $text; }
QTableView { gridline-color: $border; }
QTableView::item { padding: 4px 8px; }
QTableView::item:hover { background: $hover; }
QTableView::item:selected { background: $selection; color: $text; }
QHeaderView { background: transparent; border: none; }
QHeaderView::section {
    color: $muted; background: $base; border: none; border-bottom: 1px solid $border;
    padding: 6px 8px;
}
QTableCornerButton::section { background: $base; border: none; }

QScrollBar:vertical { background: transparent; width: 12px; margin: 0px; border: none; }
QScrollBar:horizontal { background: transparent; height: 12px; margin: 0px; border: none; }
QScrollBar::handle { background: $scroll; border-radius: 3px; }
QScrollBar::handle:vertical { min-height: 32px; margin: 2px 3px; }
QScrollBar::handle:horizontal { min-width: 32px; margin: 3px 2px; }
QScrollBar::handle:hover, QScrollBar::handle:pressed { background: $scroll_hover; }
QScrollBar::add-line, QScrollBar::sub-line { width: 0px; height: 0px; border: none; background: none; }
QScrollBar::add-page, QScrollBar::sub-page { background: none; }

/* --- chrome ------------------------------------------------------------------------- */

QMenuBar { color: $text; background: $window; padding: 2px 4px; }
QMenuBar::item { padding: 4px 10px; border-radius: 6px; background: transparent; }
QMenuBar::item:selected { background: $hover; }
QMenuBar::item:pressed { background: $pressed; }
QMenu { color: $text; background: $raised; border: 1px solid $border_strong; padding: 4px; }
QMenu::item { padding: 6px 28px 6px 12px; border-radius: 4px; background: transparent; }
QMenu::item:selected { background: $selection; }
QMenu::item:disabled { color: $disabled_text; }
QMenu::separator { height: 1px; background: $border; margin: 4px 8px; }

QToolBar { background: $window; border: none; padding: 4px; spacing: 4px; }
QToolBar::separator { background: $border; width: 1px; margin: 6px 4px; }
QStatusBar { color: $muted; background: $window; }
QStatusBar::item { border: none; }
QSplitter::handle { background: $border; }
QSplitter::handle:horizontal { width: 1px; }
QSplitter::handle:vertical { height: 1px; }
QSplitter::handle:hover { background: $focus; }

QGroupBox { border: 1px solid $border; border-radius: 8px; margin-top: 1.6em; padding: 4px 2px 2px 2px; }
QGroupBox::title {
    subcontrol-origin: margin; subcontrol-position: top left; left: 2px; padding: 0px 2px;
    color: $text; font-weight: bold;
}
QProgressBar {
    color: $text; background: $hover; border: none; border-radius: 4px; text-align: center;
}
QProgressBar::chunk { background: $primary; border-radius: 4px; }

/* --- text --------------------------------------------------------------------------- */

QLabel[muted="true"] { color: $muted; }
QLabel[tone="danger"] { color: $danger; }
QLabel[tone="warning"] { color: $warning; }
QLabel[tone="success"] { color: $success; }
QLabel[banner="warning"], QFrame[banner="warning"] {
    color: $text; background: $warning_fill; border: 1px solid $warning; border-radius: 6px;
    padding: 8px 10px;
}
QLabel[banner="info"], QFrame[banner="info"] {
    color: $text; background: $info_fill; border: 1px solid $accent; border-radius: 6px;
    padding: 8px 10px;
}
/* --- Turnkey's own surfaces --------------------------------------------------------- */

QLabel[tone="accent"] { color: $accent; }
QWidget#sidebar { background: $window; }
QListView#sessionList { background: transparent; }
QToolButton#sidebarOptions::menu-indicator { image: none; width: 0px; }
QWidget#conversation, QWidget#emptyPage, QWidget#conversationHeader { background: $base; }
QFrame#rule { background: $border; border: none; }
QLabel#emptyTitle { color: $text; font-size: 20pt; font-weight: 600; }
QPushButton#newSession, QPushButton#sidebarSettings { text-align: left; padding-left: 10px; }
QPushButton#newSession:focus, QPushButton#sidebarSettings:focus { padding-left: 9px; }
/* The message box: a rounded frame around a borderless editor and its buttons; the frame
   shows the editor's focus (Conversation sets `focused`), always 2 px so nothing moves. */
QFrame#composerFrame { background: $base; border: 2px solid $border; border-radius: 12px; }
QFrame#composerFrame[focused="true"] { border-color: $focus; }
QPlainTextEdit#composer, QPlainTextEdit#composer:focus {
    background: transparent; border: none; padding: 2px;
}
QFrame#approvalCard {
    background: $warning_fill; border: 1px solid $warning; border-radius: 10px;
}
QLabel#approvalCommand {
    color: $text; background: $base; border: 1px solid $border; border-radius: 6px;
    padding: 6px 8px; font-family: "DejaVu Sans Mono", monospace;
}
QFrame#queueRow { background: $surface; border: 1px solid $border; border-radius: 8px; }
QLabel#errorBanner {
    color: $on_accent; background: $danger_fill; border-radius: 6px; padding: 8px 10px;
}
QLabel#statusChip {
    color: $muted; background: $surface; border-radius: 10px; padding: 2px 10px;
}
QLabel#statusChip[tone="accent"] { color: $accent; background: $info_fill; }
QLabel#statusChip[tone="warning"] { color: $warning; background: $warning_fill; }
/* A messaging door's row at the foot of the sidebar: one line with a dot; failing, outlined. */
QPushButton#doorRow { text-align: left; padding: 4px 10px; border-radius: 6px; }
QPushButton#doorRow[tone="danger"] { color: $danger; border: 1px solid $danger; }
QPushButton#doorRow[tone="warning"] { color: $warning; }
QPushButton#doorRow[tone="muted"] { color: $muted; }
QFrame#doorPopover { background: $raised; border: 1px solid $border; border-radius: 8px; }
/* Files waiting in the message box (attachments.py): a chip each; a refused one outlined;
   the whole conversation outlined while files are dragged over it. */
QFrame#attachmentChip { background: $surface; border: 1px solid $border; border-radius: 8px; }
QFrame#attachmentChip:focus { border: 2px solid $focus; }
QFrame#attachmentChip[tone="danger"] { border: 1px solid $danger; }
QLabel#fileBadge {
    color: $accent; background: $info_fill; border-radius: 4px; font-weight: 600;
}
QToolButton#removeAttachment { border: none; border-radius: 9px; padding: 0px; }
QToolButton#removeAttachment:hover { background: $hover; }
QLabel#dropTarget {
    color: $accent; background: $info_fill; border: 2px dashed $accent; border-radius: 12px;
    font-size: 14pt; font-weight: 600;
}
QPushButton#doorRoom { text-align: left; color: $accent; padding: 2px 6px; }
""")


def stylesheet_for(tokens: dict[str, str]) -> str:
    """The stylesheet with every `$token` replaced: the theme's colours, and `chevron` and
    `chevron_disabled`, the paths of the combo box's arrow images.  A token the template
    names but `tokens` lacks is a KeyError (a typo would otherwise ship as an ignored rule)."""
    return SHEET.substitute(tokens)
