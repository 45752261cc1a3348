"""Suite-wide fixtures. Feature fixtures live next to their tests or in tests/support/."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_usr_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Keep every in-process test's user data out of the working tree."""
    usr = tmp_path_factory.mktemp("usr")
    monkeypatch.setenv("A0_USR_DIR", str(usr))
    return usr
