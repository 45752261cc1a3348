"""The chat log: items, versions, updates since a version, masking."""

from __future__ import annotations

import json

import pytest

from python.helpers.log import LOG_TYPES, Log

pytestmark = pytest.mark.unit


def test_items_and_fields():
    log = Log()
    item = log.log("user", heading="User message", content="hi", kvps={"a": 1}, agentno=0)
    assert item.no == 0 and len(item.id) == 32
    out = log.output()
    assert out == [
        {
            "no": 0,
            "id": item.id,
            "type": "user",
            "heading": "User message",
            "content": "hi",
            "kvps": {"a": 1},
            "agentno": 0,
            "timestamp": item.timestamp,
        }
    ]
    json.dumps(out)
    second = log.log("agent", agentno=1)
    assert second.no == 1 and second.id != item.id
    assert len(log.guid) == 32


def test_version_counts_every_change():
    log = Log()
    assert log.version == 0
    item = log.log("tool", heading="h")
    assert log.version == 1
    item.update(content="x")
    item.stream(content="y")
    assert log.version == 3
    assert item.content == "xy"


def test_output_since_version_returns_changed_items_by_no():
    log = Log()
    first = log.log("agent", content="a")
    log.log("tool", content="b")
    seen = log.version
    assert log.output(seen) == []
    third = log.log("info", content="c")
    first.stream(content="+")
    first.stream(content="+")
    changed = log.output(seen)
    assert [i["no"] for i in changed] == [first.no, third.no]
    assert changed[0]["content"] == "a++"
    assert len(log.output(0)) == 3
    assert log.output(10_000) == []


def test_update_and_stream_kvps():
    log = Log()
    item = log.log("tool", kvps={"code": "ls", "n": 1})
    item.update(heading="H", kvps={"n": 2})
    item.stream(kvps={"code": " -la", "new": 5})
    assert item.heading == "H"
    assert item.kvps == {"code": "ls -la", "n": 2, "new": 5}
    item.update(type="error")
    assert item.type == "error"


def test_masker_is_applied_before_storing():
    class Masker:
        def mask(self, value):
            if isinstance(value, str):
                return value.replace("sk-secret", "§§secret(KEY)")
            if isinstance(value, dict):
                return {k: self.mask(v) for k, v in value.items()}
            return value

    log = Log(masker=Masker())
    item = log.log("tool", heading="key sk-secret", content="c sk-secret", kvps={"k": "sk-secret"})
    item.update(content="u sk-secret")
    item.stream(content=" s sk-secret", kvps={"k": "!sk-secret"})
    text = json.dumps(log.output())
    assert "sk-secret" not in text
    assert item.content == "u §§secret(KEY) s §§secret(KEY)"
    assert log.progress == "key §§secret(KEY)"


def test_reset_changes_guid_and_clears():
    log = Log()
    log.log("info", heading="x")
    guid = log.guid
    log.reset()
    assert log.guid != guid and log.output() == [] and log.version == 0
    assert log.progress == "" and log.progress_active is False


def test_types():
    log = Log()
    for kind in LOG_TYPES:
        log.log(kind)
    for bad in ("", "Bad Type", "x" * 40, None):
        with pytest.raises(ValueError, match="invalid log item type"):
            log.log(bad)  # type: ignore[arg-type]


def test_restored_and_call_id_appear_only_when_set():
    log = Log()
    live = log.log("tool", heading="A0: Using tool 'x'")
    rebuilt = log.log("agent", heading="A0: step", call_id="c1", restored="journal")
    out = log.output()
    assert "restored" not in out[0] and "call_id" not in out[0]
    assert (out[1]["call_id"], out[1]["restored"]) == ("c1", "journal")
    version = log.version
    live.mark(call_id="c2", restored="uncertain")
    assert log.version == version + 1, "a mark is a change the UI polls"
    assert log.output(version) == [live.output()]
    with pytest.raises(ValueError):
        rebuilt.mark(restored="maybe")
    with pytest.raises(ValueError):
        log.log("info", restored="yes")


def test_checkpointed_log_keeps_the_marks_and_drops_unknown_ones():
    from python.durable.checkpoint import _log_item
    from python.helpers.log import RESTORED_STATES

    kept = _log_item({"type": "tool", "call_id": "c1", "restored": "uncertain"})
    assert (kept["call_id"], kept["restored"]) == ("c1", "uncertain")
    dropped = _log_item({"type": "tool", "restored": "<script>"})
    assert dropped["restored"] == "" and "" in RESTORED_STATES
    log = Log()
    item = log.log(**_log_item({"type": "agent", "heading": "h", "restored": "journal"}))
    assert item.output()["restored"] == "journal" and "call_id" not in item.output()


def test_a_secret_split_across_stream_pieces_is_masked():
    from durability import Masker

    log = Log(masker=Masker({"KEY": "sk-secret-42"}))
    item = log.log("code_exe", kvps={"out": ""})
    for piece in ("echo sk-sec", "ret-42", " done"):
        item.stream(content=piece, kvps={"out": piece})
    assert item.content == "echo §§secret(KEY) done"
    assert item.kvps["out"] == "echo §§secret(KEY) done"
