"""scripts/ui_screenshots.py still takes every picture docs/ui.md shows (a real server, the
scripted model, a real crash), so the pictures can always be regenerated."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def test_the_script_writes_every_picture_the_doc_shows(tmp_path: Path):
    shown = set(re.findall(r"\(img/([\w-]+\.png)\)", (ROOT / "docs" / "ui.md").read_text()))
    assert {"chat.png", "recovery.png", "plan.png", "tasks.png", "files.png"} <= shown
    result = subprocess.run(
        [sys.executable, "scripts/ui_screenshots.py", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in shown:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG), name
        assert (ROOT / "docs" / "img" / name).read_bytes().startswith(PNG), name
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["pictures"]) == shown
