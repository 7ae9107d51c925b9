"""docs/ARCHITECTURE.md's module map (section 2) names every module of the tree: the next
engineer finds where a thing lives, and a new module without a line there fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("backend", "shared", "desktop")


def module_map() -> str:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    return text[text.index("## 2. Module map"):text.index("**The import rule.**")]


def test_every_module_is_in_the_module_map() -> None:
    shown = module_map()
    missing = [str(path.relative_to(ROOT)) for package in PACKAGES
               for path in sorted((ROOT / package).rglob("*.py"))
               if path.name != "__init__.py"
               and not re.search(rf"(?<![\w.]){re.escape(path.stem)}(\.py)?(?!\w)", shown)]
    assert missing == [], f"modules docs/ARCHITECTURE.md section 2 does not name: {missing}"
