"""Every journal error has a stable, documented code and a to_dict() (the HTTP status is
the server's: tests/unit/test_api_docs.py checks the table against the same rows)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import durability
from durability import errors

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[2] / "docs" / "durability.md"


def test_codes_are_unique_snake_case():
    codes = [cls.code for cls in errors.ALL_ERRORS]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in codes)


def test_every_error_class_is_listed_and_exported():
    defined = {
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, errors.DurabilityError)
    }
    assert defined == set(errors.ALL_ERRORS)
    for cls in errors.ALL_ERRORS:
        if cls is not errors.DurabilityError:
            assert getattr(durability, cls.__name__, None) is cls


def test_every_code_is_documented_with_its_class():
    text = DOC.read_text(encoding="utf-8")
    for cls in errors.ALL_ERRORS:
        row = rf"^\| `{cls.code}` \| \d{{3}} \| `{cls.__name__}` \|"
        assert re.search(row, text, re.MULTILINE), f"docs/durability.md lacks: {row}"


def test_a_journal_error_knows_no_http_status():
    assert not any(hasattr(cls, "http_status") for cls in errors.ALL_ERRORS)


def test_to_dict_carries_code_message_and_fields():
    exc = durability.StaleVersion("changed", run_id="r1", version=3, current_version=4)
    assert exc.to_dict() == {
        "code": "stale_version",
        "message": "changed",
        "run_id": "r1",
        "version": 3,
        "current_version": 4,
    }
    assert exc.current_version == 4
    assert str(exc) == "changed"
    with pytest.raises(AttributeError):
        _ = exc.missing_field


def test_the_required_refusals_exist():
    for name in (
        "InputConflict",
        "ActiveRunExists",
        "ResultConflict",
        "StaleVersion",
        "NoteRequired",
        "IntentMissing",
        "DocumentConflict",
        "DocumentTooLarge",
        "CorruptCheckpoint",
        "FencingLost",
    ):
        assert issubclass(getattr(durability, name), durability.DurabilityError)
