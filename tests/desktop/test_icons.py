"""The product icons and the interface's line icons: SVG sources, the PNGs rendered from them,
and the icons the app builds.

The PNGs are committed output of assets/render_icons.py; these tests fail when one is
missing, blank, the wrong size, or stale against its SVG.
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QIcon, QImage, QPainter
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from desktop import assets
from desktop.assets import (
    APP_ICON_SIZES,
    TRAY_ICON_SIZES,
    TRAY_STATES,
    UI_ICON_SIZES,
    UI_ICONS,
    icon_files,
    icon_kinds,
    svg_source,
    ui_icon_kinds,
)
from desktop.qt import tray
from desktop.qt.tray import Notifier, app_icon, window_icon

SVG = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
ALL_KINDS = [*icon_kinds(), *ui_icon_kinds()]


def argb(image: QImage) -> bytes:
    """The pixels as B, G, R, A bytes (little-endian ARGB32), row after row."""
    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    return bytes(image.constBits())[: image.sizeInBytes()]


def pngs() -> list[tuple[str, int, Path]]:
    return [(kind, n, path) for kind in icon_kinds() for n, path in icon_files(kind)]


@pytest.fixture
def fresh_icons() -> Iterator[None]:
    """The icon caches emptied before and after, for a test that changes what is on disk."""
    tray._png_icon.cache_clear()
    tray._drawn_icon.cache_clear()
    yield
    tray._png_icon.cache_clear()
    tray._drawn_icon.cache_clear()


def test_assets_dir_is_the_repository_folder_or_the_bundles(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    assert assets.assets_dir() == Path(__file__).resolve().parents[2] / "assets"
    monkeypatch.setattr("sys.frozen", True, raising=False)
    monkeypatch.setattr("sys._MEIPASS", str(tmp_path), raising=False)
    assert assets.assets_dir() == tmp_path / "assets"


def test_icon_kinds_name_their_files() -> None:
    assert icon_kinds() == ["app", "tray-idle", "tray-working", "tray-approval", "tray-offline"]
    assert [n for n, _ in icon_files("app")] == list(APP_ICON_SIZES)
    assert icon_files("app")[0][1].parts[-4:] == ("hicolor", "16x16", "apps", "turnkey.png")
    assert icon_files("tray-working")[1][1].parts[-2:] == ("tray", "working-22.png")
    with pytest.raises(ValueError, match="unknown icon kind"):
        icon_files("idle")
    with pytest.raises(ValueError, match="unknown icon kind"):
        icon_files("tray-sleeping")
    assert ui_icon_kinds() == [f"ui-{name}" for name in UI_ICONS]
    assert [n for n, _ in icon_files("ui-send")] == list(UI_ICON_SIZES)
    assert icon_files("ui-jump-down")[0][1].parts[-2:] == ("ui", "jump-down-16.png")
    assert svg_source("ui-send").parts[-2:] == ("ui", "send.svg")
    with pytest.raises(ValueError, match="unknown icon kind"):
        icon_files("ui-sparkles")


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_svg_source_is_plain_self_contained_svg_with_a_viewbox(kind: str) -> None:
    root = ET.parse(svg_source(kind)).getroot()
    assert root.tag == f"{SVG}svg"
    box = [float(v) for v in re.split(r"[\s,]+", root.attrib["viewBox"].strip())]
    assert len(box) == 4
    assert box[2] > 0
    assert box[2] == box[3]
    for el in root.iter():
        tag = el.tag.removeprefix(SVG)
        assert tag not in ("image", "filter", "text", "style", "script", "foreignObject"), tag
        for attr in ("href", XLINK_HREF):
            assert el.attrib.get(attr, "#").startswith("#"), f"{kind}: external reference {el.attrib[attr]}"
        for value in el.attrib.values():
            assert "url(" not in value or value.startswith("url(#"), f"{kind}: external url {value}"


@pytest.mark.parametrize(("kind", "size", "path"), pngs(),
                         ids=[f"{kind}-{n}" for kind, n, _ in pngs()])
def test_every_png_exists_at_its_size_and_is_not_blank(qapp: QApplication, kind: str, size: int,
                                                       path: Path) -> None:
    assert path.is_file(), f"{path} is missing: run .venv/bin/python assets/render_icons.py"
    image = QImage(str(path))
    assert not image.isNull()
    assert (image.width(), image.height()) == (size, size)
    assert image.hasAlphaChannel()
    data = argb(image)
    alphas = set(data[3::4])
    assert 0 in alphas  # transparent corners
    assert 255 in alphas  # an opaque face
    colors = {data[i:i + 3] for i in range(0, len(data), 4) if data[i + 3] == 255}
    assert len(colors) >= 2  # the face and the key at least


@pytest.mark.parametrize("kind", ui_icon_kinds())
def test_every_ui_icon_is_a_24_px_line_drawing_in_black(kind: str) -> None:
    """Lucide/Feather-like: a 24-unit grid, 1.75-2 unit strokes with round ends and joins,
    black only (desktop.qt.theme tints it to the theme when it loads the PNGs)."""
    root = ET.parse(svg_source(kind)).getroot()
    assert root.attrib["viewBox"] == "0 0 24 24"
    strokes = [el for el in root.iter() if "stroke" in el.attrib and el.attrib["stroke"] != "none"]
    assert strokes, f"{kind}: no stroked shape"
    for el in strokes:
        assert 1.75 <= float(el.attrib["stroke-width"]) <= 2
        assert el.attrib["stroke-linecap"] == el.attrib["stroke-linejoin"] == "round"
    for el in root.iter():
        for attr in ("stroke", "fill"):
            assert el.attrib.get(attr, "none") in ("none", "#000000"), f"{kind}: {attr}={el.attrib[attr]}"


@pytest.mark.parametrize("kind", ui_icon_kinds())
def test_every_ui_png_is_black_on_transparent_at_every_size(qapp: QApplication, kind: str) -> None:
    for size, path in icon_files(kind):
        assert path.is_file(), f"{path} is missing: run .venv/bin/python assets/render_icons.py"
        image = QImage(str(path))
        assert (image.width(), image.height()) == (size, size)
        data = argb(image)
        alphas = data[3::4]
        assert 0 in alphas  # transparent around the drawing
        assert max(alphas) >= 200, f"{path.name}: too faint"
        assert all(data[i:i + 3] == b"\0\0\0" for i in range(0, len(data), 4) if data[i + 3]), path.name


def render_svg(kind: str, size: int) -> QImage:
    from PySide6.QtSvg import QSvgRenderer  # tests only: the app itself never loads SVG

    renderer = QSvgRenderer(str(svg_source(kind)))
    assert renderer.isValid()
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(p, QRectF(0, 0, size, size))
    p.end()
    return image


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_the_pngs_are_rendered_from_the_current_svgs(qapp: QApplication, kind: str) -> None:
    """An SVG edited without rerunning assets/render_icons.py fails here.  A few levels of
    difference per channel are allowed: another build of Qt 6.12 may antialias an edge a
    little differently, but any edit that moves or recolours a shape changes more."""
    for size, path in icon_files(kind):
        fresh, stored = argb(render_svg(kind, size)), argb(QImage(str(path)))
        assert len(fresh) == len(stored)
        worst = max(abs(a - b) for a, b in zip(fresh, stored, strict=True))
        assert worst <= 8, f"{path.name} differs from {svg_source(kind).name}: rerun assets/render_icons.py"


@pytest.mark.parametrize("size", TRAY_ICON_SIZES)
def test_the_tray_states_look_different_at_every_size(qapp: QApplication, size: int) -> None:
    images = {state: argb(QImage(str(dict(icon_files(f"tray-{state}"))[size]))) for state in TRAY_STATES}
    for a, b in itertools.combinations(TRAY_STATES, 2):
        differing = sum(1 for i in range(0, len(images[a]), 4) if images[a][i:i + 4] != images[b][i:i + 4])
        assert differing > size * size // 10, f"{a} and {b} look alike at {size} px"


def sizes(icon: QIcon) -> set[int]:
    return {s.width() for s in icon.availableSizes() if s.width() == s.height()}


@pytest.mark.parametrize("state", TRAY_STATES)
def test_app_icon_holds_every_rendered_tray_size(qapp: QApplication, state: str) -> None:
    icon = app_icon(state)
    assert not icon.isNull()
    assert sizes(icon) >= set(TRAY_ICON_SIZES)
    assert icon.cacheKey() == app_icon(state).cacheKey()  # built once
    shown = argb(icon.pixmap(QSize(22, 22)).toImage())
    assert shown == argb(QImage(str(dict(icon_files(f"tray-{state}"))[22])))  # the PNG itself, not scaled


def test_an_unknown_state_gets_the_idle_icon(qapp: QApplication) -> None:
    assert app_icon("sleeping").cacheKey() == app_icon("idle").cacheKey()


def test_window_icon_holds_every_app_size(qapp: QApplication) -> None:
    icon = window_icon()
    assert sizes(icon) >= set(APP_ICON_SIZES)
    assert icon.cacheKey() != app_icon("idle").cacheKey()


def test_without_the_pngs_the_icons_are_drawn(qapp: QApplication, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path, fresh_icons: None) -> None:
    monkeypatch.setattr(assets, "assets_dir", lambda: tmp_path / "nowhere")
    for icon in (*(app_icon(state) for state in TRAY_STATES), window_icon()):
        assert not icon.isNull()
        alphas = set(argb(icon.pixmap(QSize(32, 32)).toImage())[3::4])
        assert 0 in alphas  # a drawn mark, not a blank
        assert 255 in alphas
    drawn = [argb(app_icon(state).pixmap(QSize(32, 32)).toImage()) for state in TRAY_STATES]
    assert len(set(drawn)) == len(TRAY_STATES)


@pytest.fixture
def notifier(qapp: QApplication, monkeypatch: pytest.MonkeyPatch) -> Iterator[Notifier]:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    n = Notifier()
    yield n
    assert n.tray is not None
    n.tray.hide()
    n.menu.deleteLater()
    n.deleteLater()


def test_the_tray_icon_follows_the_state(notifier: Any) -> None:
    assert notifier.tray is not None
    seen: dict[str, int] = {}
    pictures: dict[str, QImage] = {}
    for state in ("working", "approval", "offline", "idle", "working"):
        notifier.set_state(state)
        icon = notifier.tray.icon()
        assert icon.cacheKey() == app_icon(state).cacheKey()
        seen[state] = icon.cacheKey()
        pictures[state] = icon.pixmap(QSize(22, 22)).toImage()
    assert len(set(seen.values())) == len(TRAY_STATES)
    for a, b in itertools.combinations(TRAY_STATES, 2):
        assert pictures[a] != pictures[b], f"the tray shows the same picture for {a} and {b}"
