"""The vendored browser libraries are the files their README names, and the UI loads
nothing from another host."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

WEBUI = Path(__file__).resolve().parents[2] / "webui"
VENDOR = WEBUI / "vendor"


def _listed() -> dict[str, str]:
    text = (VENDOR / "README.md").read_text()
    return {path: digest for digest, path in re.findall(r"^([0-9a-f]{64})  \./(\S+)$", text, re.M)}


def test_every_vendored_file_matches_its_checksum():
    listed = _listed()
    present = {
        str(p.relative_to(VENDOR)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in VENDOR.rglob("*")
        if p.is_file() and p.name != "README.md"
    }
    assert present == listed


def test_every_library_has_its_licence_next_to_it():
    for folder in ("marked", "dompurify", "highlight"):
        assert (VENDOR / folder / "LICENSE").is_file(), folder


def test_the_ui_loads_no_script_or_style_from_another_host():
    pattern = re.compile(r"""(?:src|href)=["']https?://|import[^;]*["']https?://|url\(https?://""")
    for path in [*WEBUI.glob("*.html"), *WEBUI.glob("js/*.js"), *WEBUI.glob("css/*.css")]:
        assert not pattern.search(path.read_text()), path
