"""docs/ui.md's pictures cannot go stale (#23 point 8): every view section of the page shows
a picture that scripts/ui_screenshots.py takes, the picture on disk is the one the script
wrote, and the web UI has not changed since. When this fails after a UI change, run
``.venv/bin/python scripts/ui_screenshots.py`` and commit docs/img/."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img"
NOT_VIEWS = {"Regenerating the pictures"}  # sections about the page itself
HINT = "run .venv/bin/python scripts/ui_screenshots.py and commit docs/img/"


def _script():
    spec = importlib.util.spec_from_file_location(
        "ui_screenshots", ROOT / "scripts" / "ui_screenshots.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sections() -> dict[str, str]:
    text = (ROOT / "docs" / "ui.md").read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _manifest() -> dict:
    path = IMG / "manifest.json"
    assert path.is_file(), f"docs/img/manifest.json is missing: {HINT}"
    return json.loads(path.read_text(encoding="utf-8"))


def test_every_view_of_the_page_has_a_picture_the_script_takes():
    views = _script().VIEWS
    sections = {k: v for k, v in _sections().items() if k not in NOT_VIEWS}
    assert set(sections) == set(views), (
        "docs/ui.md's sections and scripts/ui_screenshots.py's VIEWS differ: "
        f"{sorted(set(sections) ^ set(views))}"
    )
    for title, body in sections.items():
        shown = re.findall(r"!\[[^\]]*\]\(img/([\w.-]+\.png)\)", body)
        assert views[title] in shown, f"section '{title}' shows no img/{views[title]}"


def test_the_pictures_are_the_ones_the_script_wrote():
    manifest = _manifest()
    assert manifest["views"] == _script().VIEWS, f"the views changed: {HINT}"
    for name, digest in manifest["pictures"].items():
        data = (IMG / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"docs/img/{name} was replaced: {HINT}"


def test_the_pictures_show_the_current_ui():
    assert _manifest()["ui_digest"] == _script().ui_digest(ROOT), f"the web UI changed: {HINT}"
