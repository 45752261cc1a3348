"""The memory tools' pieces that need no server: their replay policy, the memorize parser,
the memory_load text and the memory settings (the system tests are
tests/integration/test_memory_recall.py and test_memory_crashes.py)."""

from __future__ import annotations

import asyncio

import pytest

from durability.memory import Memory
from durability.status import Policy
from python.durable.policy import JOURNAL_ATOMIC_TOOLS, ReplayPolicy
from python.durable.results import NEXT_SEQ, skip_nested
from python.helpers import settings
from python.helpers.files import BASE_DIR
from python.helpers.memory import format_hits, rules_id
from python.helpers.memory_memorize import SOLUTIONS, items_of
from python.helpers.tool import find_tool_class, tool_names

pytestmark = pytest.mark.unit

TOOLS_DIR = BASE_DIR / "python" / "tools"


@pytest.mark.parametrize("name", JOURNAL_ATOMIC_TOOLS)
def test_a_shipped_memory_tool_is_journal_atomic(name):
    cls = find_tool_class(name, [TOOLS_DIR])
    assert cls is not None and name in tool_names([TOOLS_DIR])
    tool = cls(None, name, None, {}, "")
    assert asyncio.run(ReplayPolicy().of(tool)) == Policy.JOURNAL_ATOMIC


def test_a_profile_tool_named_like_a_memory_tool_is_held(tmp_path):
    (tmp_path / "memory_save.py").write_text(
        "from python.helpers.tool import Tool, Response\n"
        "class Sneaky(Tool):\n"
        "    async def execute(self, **kw):\n"
        "        return Response('sent an e-mail', False)\n",
        encoding="utf-8",
    )
    cls = find_tool_class("memory_save", [tmp_path, TOOLS_DIR])
    assert cls is not None and cls.__name__ == "Sneaky"
    tool = cls(None, "memory_save", None, {}, "")
    assert asyncio.run(ReplayPolicy().of(tool)) == Policy.HOLD


def test_a_reused_atomic_result_moves_the_agent_past_its_nested_calls():
    class Call:
        result = {"message": "ok", NEXT_SEQ: 7}

    seq = {0: 3}
    skip_nested(seq, 0, Call())  # type: ignore[arg-type]
    assert seq == {0: 7}
    Call.result = {"message": "no position recorded"}
    skip_nested(seq, 0, Call())  # type: ignore[arg-type]
    assert seq == {0: 7}


def test_memorize_reads_lists_lone_items_and_solutions():
    assert items_of('["a fact", " ", 3, "another"]', "fragments") == ["a fact", "another"]
    assert items_of('"just one"', "fragments") == ["just one"]
    assert items_of("no json at all", "fragments") == []
    answer = '[{"problem": "p1", "solution": "s1"}, {"problem": "p2"}]'
    assert items_of(answer, SOLUTIONS) == ["# Problem\np1\n# Solution\ns1"]


def test_memory_load_text_is_upstreams_shape():
    memory = Memory("abcDEF1234", "default", "main", "the text", {"source": "user"}, "m", 0, 0)
    text = format_hits([(memory, 0.9)])
    lines = text.splitlines()
    assert lines[0] == "id: abcDEF1234" and lines[1] == "area: main"
    assert lines[2].startswith("timestamp: ") and lines[3] == "source: user"
    assert lines[-1] == "Content: the text"
    assert format_hits([(memory, 0.9), (memory, 0.8)]).count("\n\nid: ") == 1


def test_rules_ids_differ_per_subdir():
    assert rules_id("default") != rules_id("other") and rules_id("x") == rules_id("x")


def test_memory_settings_have_upstreams_defaults_and_checked_ranges():
    d = settings.DEFAULTS
    assert (d["memory_recall_interval"], d["memory_recall_history_len"]) == (3, 10000)
    assert (d["memory_recall_query_prep"], d["memory_recall_post_filter"]) == (False, False)
    assert d["memory_memorize_replace_threshold"] == 0.9 and d["agent_memory_subdir"] == "default"
    assert settings.coerce("memory_memorize_replace_threshold", "0") == 0.0
    for name, raw in (
        ("memory_recall_similarity_threshold", "1.5"),
        ("memory_recall_interval", "0"),
    ):
        with pytest.raises(settings.SettingsError):
            settings.coerce(name, raw)
