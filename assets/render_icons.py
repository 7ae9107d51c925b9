"""Renders the icon SVGs in assets/icons/ to the PNGs the app loads.

    .venv/bin/python assets/render_icons.py

The app icon goes to icons/hicolor/NxN/apps/turnkey.png (the freedesktop icon
theme layout), each tray state to icons/tray/<state>-N.png and each interface
icon (icons/ui/<name>.svg, black line art) to icons/ui/<name>-N.png; the sizes are
`desktop.assets.APP_ICON_SIZES`, `TRAY_ICON_SIZES` and `UI_ICON_SIZES`.  Runs
offscreen; the same sources give the same bytes, so rerunning it leaves git clean.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QRectF, Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

import desktop.qt.compat  # noqa: E402, F401  (keeps None alive under PySide6 on Python 3.11)
from desktop.assets import icon_files, icon_kinds, svg_source, ui_icon_kinds  # noqa: E402


def render(renderer: QSvgRenderer, size: int) -> QImage:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image.convertToFormat(QImage.Format.Format_ARGB32)


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    written = 0
    for kind in [*icon_kinds(), *ui_icon_kinds()]:
        source = svg_source(kind)
        renderer = QSvgRenderer(str(source))
        if not renderer.isValid():
            print(f"render_icons: cannot parse {source}", file=sys.stderr)
            return 1
        for size, target in icon_files(kind):
            target.parent.mkdir(parents=True, exist_ok=True)
            if not render(renderer, size).save(str(target)):  # PNG, from the suffix
                print(f"render_icons: cannot write {target}", file=sys.stderr)
                return 1
            written += 1
            print(target.relative_to(ROOT))
    print(f"{written} PNGs written")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
