"""The light and dark themes (desktop/qt/theme.py): which one applies, that their text is
readable, that keyboard focus shows on every kind of control, and the tinted line icons."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QImage, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QGroupBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QMainWindow,
    QMenu,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QStatusBar,
    QStyleFactory,
    QTableWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.assets import UI_ICONS
from desktop.qt import theme
from desktop.qt.theme import THEMES, Scheme
from desktop.qt.theme_sheet import stylesheet_for
from desktop.qt.theme_style import ThemeStyle

SCHEMES: tuple[Scheme, ...] = ("light", "dark")


@pytest.fixture
def themed(qapp: QApplication, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Scheme], None]]:
    """``themed("dark")`` applies a theme through TURNKEY_THEME; afterwards the application's
    style, palette and stylesheet are what they were (pytest-qt's QApplication is shared)."""
    style, palette, sheet = qapp.style().name() or "Fusion", QPalette(qapp.palette()), qapp.styleSheet()
    for name, value in (("_applied", None), ("_style", None), ("_following", False), ("_icons", {})):
        monkeypatch.setattr(theme, name, value)

    def use(scheme: Scheme) -> None:
        monkeypatch.setenv(theme.ENV, scheme)
        theme.apply(qapp)

    yield use
    if theme._following:
        QGuiApplication.styleHints().colorSchemeChanged.disconnect(theme._system_switched)
    qapp.setStyleSheet(sheet)
    qapp.setStyle(QStyleFactory.create(style))
    qapp.setPalette(palette)


def luminance(color: QColor | str) -> float:
    """WCAG relative luminance."""
    c = QColor(color)

    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())


def contrast(a: QColor | str, b: QColor | str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# --- which theme ---------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_each_theme_applies_fusion_its_palette_and_its_stylesheet(
    qapp: QApplication, themed: Callable[[Scheme], None], scheme: Scheme
) -> None:
    themed(scheme)
    window = qapp.palette().color(QPalette.ColorRole.Window)
    assert (luminance(window) < 0.05) if scheme == "dark" else (luminance(window) > 0.8)
    assert window.name() == THEMES[scheme].window
    assert theme.current() == scheme
    assert isinstance(theme._style, ThemeStyle)  # Fusion underneath, wrapped by the stylesheet's style
    assert theme._style.baseStyle().name().lower() == "fusion"
    assert qapp.styleSheet() == theme.stylesheet(scheme)
    assert theme.colors() == theme.Colors(**{k: getattr(THEMES[scheme], k)
                                             for k in theme.Colors.__dataclass_fields__})


def test_the_environment_wins_over_the_system(qapp: QApplication, themed: Callable[[Scheme], None],
                                              monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(theme, "_system_scheme", lambda: Qt.ColorScheme.Dark)
    themed("light")
    assert theme.current() == "light"
    monkeypatch.delenv(theme.ENV)
    assert theme.wanted() == "dark"
    monkeypatch.setenv(theme.ENV, "purple")
    with caplog.at_level(logging.WARNING):
        assert theme.wanted() == "dark"
    assert "purple" in caplog.text
    monkeypatch.setattr(theme, "_system_scheme", lambda: Qt.ColorScheme.Unknown)
    assert theme.wanted() == "light"


def test_a_system_switch_reapplies_and_emits_changed(qapp: QApplication, qtbot: Any,
                                                     themed: Callable[[Scheme], None],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    system = {"scheme": Qt.ColorScheme.Light}
    monkeypatch.setattr(theme, "_system_scheme", lambda: system["scheme"])
    with qtbot.waitSignal(theme.changed, timeout=1_000) as first:
        themed("light")
    assert first.args == ["light"]
    monkeypatch.delenv(theme.ENV)
    hints = QGuiApplication.styleHints()
    system["scheme"] = Qt.ColorScheme.Dark
    with qtbot.waitSignal(theme.changed, timeout=1_000) as switched:
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert switched.args == ["dark"]
    assert qapp.palette().color(QPalette.ColorRole.Window).name() == THEMES["dark"].window
    assert "#78a6f7" in qapp.styleSheet()  # the dark theme's focus colour
    with qtbot.assertNotEmitted(theme.changed, wait=50):
        theme.apply(qapp)  # the same theme again: nothing to redraw
    monkeypatch.setenv(theme.ENV, "light")  # the override holds against the system
    theme.apply(qapp)
    with qtbot.assertNotEmitted(theme.changed, wait=50):
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert theme.current() == "light"


# --- readable ------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_text_meets_wcag_aa_on_every_background(scheme: Scheme) -> None:
    t = THEMES[scheme]
    backgrounds = (t.window, t.base, t.surface, t.bubble_user, t.alt_base, t.button, t.button_hover,
                   t.raised, t.selection, t.hover)  # (a selected or hovered row keeps its colours)
    for background in backgrounds:
        for name in ("text", "muted", "accent", "warning", "danger", "success"):
            ratio = contrast(getattr(t, name), background)
            assert ratio >= 4.5, f"{scheme}: {name} on {background} is {ratio:.2f}:1"
    for background in (t.base, t.window):  # an empty field's hint (a read-only field has the window's)
        assert contrast(t.placeholder, background) >= 4.5
    for fg, bg in ((t.on_accent, t.primary), (t.on_accent, t.primary_hover), (t.on_accent, t.danger_fill),
                   (t.on_accent, t.danger_fill_hover), (t.tooltip_text, t.tooltip_bg),
                   (t.text, t.warning_fill), (t.text, t.info_fill)):
        assert contrast(fg, bg) >= 4.5, f"{scheme}: {fg} on {bg} is {contrast(fg, bg):.2f}:1"
    for background in (t.window, t.base, t.button):  # a focus ring is a graphic: 3:1
        assert contrast(t.focus, background) >= 3, f"{scheme}: focus on {background}"
    assert contrast(t.focus_on_fill, t.primary) >= 3
    assert contrast(t.focus_on_fill, t.danger_fill) >= 3


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_palette_is_the_themes(scheme: Scheme) -> None:
    p, t, role = theme.palette(scheme), THEMES[scheme], QPalette.ColorRole
    assert p.color(role.Text).name() == t.text
    assert p.color(role.Base).name() == t.base
    assert p.color(role.Highlight).name() == t.primary
    assert p.color(role.PlaceholderText).name() == t.placeholder
    assert p.color(role.Accent).name() == t.focus  # theme_style.py draws focus rings in it


def test_the_dark_palette_dims_disabled_text_and_keeps_it_readable() -> None:
    p, role, group = theme.palette("dark"), QPalette.ColorRole, QPalette.ColorGroup
    for r in (role.WindowText, role.Text, role.ButtonText):
        active, disabled = p.color(group.Active, r), p.color(group.Disabled, r)
        assert active.lightnessF() - disabled.lightnessF() > 0.25, f"{r}: {active.name()}, {disabled.name()}"
        assert disabled.lightnessF() - p.color(group.Disabled, role.Button).lightnessF() > 0.2
    assert p.color(group.Disabled, role.Button) != p.color(group.Active, role.Button)  # flatter


# --- drawn ---------------------------------------------------------------------------------


@pytest.fixture
def shown(qtbot: Any) -> Iterator[Callable[..., QWidget]]:
    """``shown(*widgets)``: the widgets in a shown top-level window, with a spare button
    holding the focus; the windows live until the test ends."""
    tops: list[QWidget] = []

    def show(*widgets: QWidget) -> QWidget:
        tops.append(window(qtbot, *widgets))
        return tops[-1]

    yield show
    for top in tops:
        top.close()


def window(qtbot: Any, *widgets: QWidget) -> QWidget:
    top = QWidget()
    box = QVBoxLayout(top)
    spare = QPushButton("spare")
    box.addWidget(spare)
    for w in widgets:
        box.addWidget(w)
    top.resize(360, 60 + 60 * len(widgets))
    qtbot.addWidget(top)
    top.show()
    qtbot.waitExposed(top)
    spare.setFocus()
    qtbot.waitUntil(spare.hasFocus, timeout=2_000)
    return top


def grab(qtbot: Any, widget: QWidget) -> QImage:
    qtbot.wait(20)  # let the repaint after a focus or property change land
    return widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)


def focused(qtbot: Any, widget: QWidget) -> QImage:
    widget.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(widget.hasFocus, timeout=2_000)
    return grab(qtbot, widget)


def border_changed(before: QImage, after: QImage) -> float:
    """The share of the outermost two-pixel frame (corners left out) that changed."""
    w, h = before.width(), before.height()
    points = [(x, y) for x in range(8, w - 8) for y in (0, 1, h - 2, h - 1)]
    points += [(x, y) for y in range(8, h - 8) for x in (0, 1, w - 2, w - 1)]
    changed = sum(1 for x, y in points if before.pixelColor(x, y) != after.pixelColor(x, y))
    return changed / len(points)


def focus_targets() -> dict[str, Callable[[], QWidget]]:
    def primary() -> QWidget:
        b = QPushButton("Allow once")
        b.setProperty("primary", True)
        return b

    def danger() -> QWidget:
        b = QPushButton("Delete")
        b.setProperty("danger", True)
        return b

    def tool() -> QWidget:
        b = QToolButton()
        b.setIcon(theme.icon("more"))
        b.setIconSize(QSize(16, 16))
        return b

    def combo() -> QWidget:
        c = QComboBox()
        c.addItems(["OpenAI-compatible", "Anthropic"])
        return c

    def listed() -> QWidget:
        v = QListWidget()
        v.addItems(["one", "two"])
        v.setFixedHeight(80)
        return v

    def plain() -> QWidget:
        e = QPlainTextEdit()
        e.setFixedHeight(60)
        return e

    return {"button": lambda: QPushButton("Deny"), "primary": primary, "danger": danger,
            "tool button": tool, "line edit": QLineEdit, "text edit": plain, "combo box": combo,
            "list": listed, "table": lambda: QTableWidget(2, 2)}


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("kind", list(focus_targets()))
def test_focus_shows_as_a_border(qtbot: Any, themed: Callable[[Scheme], None], shown: Any,
                                 scheme: Scheme, kind: str) -> None:
    themed(scheme)
    widget = focus_targets()[kind]()
    shown(widget)
    before = grab(qtbot, widget)
    after = focused(qtbot, widget)
    share = border_changed(before, after)
    assert share > 0.9, f"{kind} in {scheme}: only {share:.0%} of its border changes on focus"
    focus = QColor(THEMES[scheme].focus_on_fill if kind in ("primary", "danger") else THEMES[scheme].focus)
    top = after.pixelColor(after.width() // 2, 0)
    assert contrast(top, focus) < 1.2, f"{kind} in {scheme}: border {top.name()}, not {focus.name()}"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_focused_check_box_rings_its_box(qtbot: Any, themed: Callable[[Scheme], None], shown: Any,
                                           scheme: Scheme) -> None:
    themed(scheme)
    check = QCheckBox("Use for new turns")
    shown(check)
    before = grab(qtbot, check)
    after = focused(qtbot, check)
    ring = QColor(THEMES[scheme].focus)
    near = [(x, y) for x in range(0, 24) for y in range(after.height())
            if before.pixelColor(x, y) != after.pixelColor(x, y)]
    assert len(near) > 30, "the focus ring around the box"
    assert any(contrast(after.pixelColor(x, y), ring) < 1.1 for x, y in near)


def brightest(image: QImage) -> float:
    return max(luminance(image.pixelColor(x, y)) for x in range(image.width())
               for y in range(image.height()))


def test_a_disabled_button_reads_as_disabled_in_the_dark(qtbot: Any, themed: Callable[[Scheme], None],
                                                          shown: Any) -> None:
    themed("dark")
    on, off = QPushButton("Stop"), QPushButton("Stop")
    off.setEnabled(False)
    shown(on, off)
    lit, dim = grab(qtbot, on), grab(qtbot, off)
    assert brightest(lit) > 0.6  # the text, near THEMES["dark"].text
    assert brightest(dim) < brightest(lit) / 3
    background = off.grab().toImage().pixelColor(off.width() // 2, 4)
    assert background.name() == THEMES["dark"].disabled_bg
    assert lit.pixelColor(on.width() // 2, 4).name() == THEMES["dark"].button


@pytest.mark.parametrize("scheme", SCHEMES)
def test_primary_and_danger_fill_with_their_colours(qtbot: Any, themed: Callable[[Scheme], None],
                                                    shown: Any, scheme: Scheme) -> None:
    themed(scheme)
    primary, danger = QPushButton("Send"), QPushButton("Delete")
    shown(primary, danger)
    plain_fill = grab(qtbot, primary).pixelColor(primary.width() // 2, 4)
    theme.restyle(primary, primary=True)
    theme.restyle(danger, danger=True)
    assert grab(qtbot, primary).pixelColor(primary.width() // 2, 4).name() == THEMES[scheme].primary
    assert grab(qtbot, danger).pixelColor(danger.width() // 2, 4).name() == THEMES[scheme].danger_fill
    assert plain_fill.name() == THEMES[scheme].button


def test_the_stylesheet_parses_for_every_styled_widget(qtlog: Any, themed: Callable[[Scheme], None],
                                                       shown: Any) -> None:
    def everything() -> list[QWidget]:
        made: list[QWidget] = [factory() for factory in focus_targets().values()]
        for prop, value in (("muted", True), ("tone", "danger"), ("tone", "warning"), ("tone", "success"),
                            ("banner", "warning"), ("banner", "info")):
            label = QLabel(f"{prop}={value}")
            label.setProperty(prop, value)
            made.append(label)
        floating, problem = QToolButton(), QLineEdit("x")
        floating.setProperty("floating", True)
        problem.setProperty("problem", True)
        disabled = QComboBox()
        disabled.setEnabled(False)
        group = QGroupBox("Group")
        QVBoxLayout(group).addWidget(QCheckBox("inside"))
        bar = QProgressBar()
        bar.setValue(40)
        return [*made, floating, problem, disabled, group, bar]

    for scheme in SCHEMES:
        themed(scheme)
        top = shown(*everything())
        top.grab()
        menu = QMenu(top)
        menu.addAction(theme.icon("copy"), "Copy")
        menu.addSeparator()
        menu.grab()
    problems = [r.message for r in qtlog.records if "style" in r.message.lower() or "parse" in r.message]
    assert not problems, problems


def test_a_missing_token_is_an_error_not_a_silent_rule() -> None:
    with pytest.raises(KeyError):
        stylesheet_for({"text": "#000000"})


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_combo_arrow_images_exist(scheme: Scheme) -> None:
    sheet = theme.stylesheet(scheme)
    for name in (f"chevron-{scheme}.png", f"chevron-{scheme}-disabled.png"):
        urls = [part.split('"')[0] for part in sheet.split('url("')[1:]]
        [path] = [url for url in urls if url.endswith(name)]
        image = QImage(path)
        assert not image.isNull(), path
        assert image.pixelColor(16, 19).alpha() > 0  # on the chevron's stroke


def test_tidy_window_hides_the_size_grip_and_adds_no_status_bar(qapp: QApplication) -> None:
    with_bar, without = QMainWindow(), QMainWindow()
    bar = with_bar.statusBar()
    assert bar.isSizeGripEnabled()
    theme.tidy_window(with_bar)
    assert not bar.isSizeGripEnabled()
    theme.tidy_window(without)
    assert without.findChild(QStatusBar) is None
    with_bar.deleteLater()
    without.deleteLater()


# --- icons ---------------------------------------------------------------------------------


def inked(image: QImage, color: str) -> bool:
    """Whether an icon's solid pixels (its edges blend into the background, and a thin stroke
    at 16 px may have no fully opaque pixel) all have `color`, give or take rounding."""
    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    want = QColor(color)
    solid = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())
             if image.pixelColor(x, y).alpha() >= 160]
    return bool(solid) and all(
        max(abs(c.red() - want.red()), abs(c.green() - want.green()), abs(c.blue() - want.blue())) <= 6
        for c in solid)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_icon_is_tinted_to_the_theme(qapp: QApplication, themed: Callable[[Scheme], None],
                                           scheme: Scheme) -> None:
    themed(scheme)
    t = THEMES[scheme]
    for name in UI_ICONS:
        made = theme.icon(name)
        assert not made.isNull(), name
        for size in (16, 24):
            normal = made.pixmap(QSize(size, size))
            assert normal.size() == QSize(size, size), name
            assert inked(normal.toImage(), t.text), f"{name} at {size}"
        off = made.pixmap(QSize(24, 24), QIcon.Mode.Disabled)
        assert inked(off.toImage(), t.disabled_text), name
        assert theme.icon(name).cacheKey() == made.cacheKey()  # built once per theme
    assert inked(theme.icon("send", "on_accent").pixmap(24, 24).toImage(), "#ffffff")
    assert inked(theme.icon("warning", "warning").pixmap(24, 24).toImage(), t.warning)


def test_icons_follow_a_theme_switch(qapp: QApplication, themed: Callable[[Scheme], None]) -> None:
    themed("light")
    light = theme.icon("search")
    themed("dark")
    dark = theme.icon("search")
    assert light.cacheKey() != dark.cacheKey()
    assert inked(dark.pixmap(24, 24).toImage(), THEMES["dark"].text)
    assert inked(light.pixmap(24, 24).toImage(), THEMES["light"].text)  # kept its colours


def test_an_unknown_icon_names_the_known_ones(qapp: QApplication) -> None:
    with pytest.raises(ValueError, match=r"unknown icon 'sparkles'.*search.*send"):
        theme.icon("sparkles")
    with pytest.raises(ValueError, match="unknown tone"):
        theme.icon("search", "purple")  # type: ignore[arg-type]
