"""browser_agent's pieces without a browser: the task's first URL, the action parser, the
inner agent number, the model-call fingerprint of a message with a screenshot, the reset
marker, the replay policies of its calls and the verdicts on a tool-kind child (#21)."""

from __future__ import annotations

from typing import Any

import pytest

from durability import replay
from durability.records import Call
from durability.status import CallKind, CallState, Policy
from durability.verdicts import Action, Evidence, judge
from python.durable.policy import ReplayPolicy
from python.durable.recorded import fingerprint_messages
from python.helpers import browser_session
from python.helpers.browser_actions import BrowserAct, inside
from python.helpers.browser_loop import first_url, inner_agent_number, parse_action
from python.helpers.browser_reading import BrowserRead
from python.tools.browser_agent import BrowserAgent

pytestmark = pytest.mark.unit


def test_the_first_url_of_the_task_is_found():
    assert first_url("Open https://example.com/a?b=1, then read it.") == "https://example.com/a?b=1"
    assert first_url("see (http://x.test/page).") == "http://x.test/page"
    assert first_url("no address here") is None


def test_actions_are_parsed_tolerantly():
    assert parse_action('{"action": "click", "index": 3}') == {"action": "click", "index": 3}
    assert parse_action('Sure: {"action": "done", "response": "ok"}')["action"] == "done"
    assert parse_action("click the button") is None
    assert parse_action('{"index": 3}') is None


def test_the_inner_agent_number_is_stable_and_apart_from_the_chain():
    first = inner_agent_number("call-1")
    assert first == inner_agent_number("call-1") != inner_agent_number("call-2")
    assert first >= 1_000_000 and first < 2**63


def test_a_screenshot_does_not_change_the_model_call_fingerprint():
    text = {"type": "text", "text": "page state, screenshot sha256 abc"}
    with_image = [
        {"role": "user", "content": [text, {"type": "image_url", "image_url": {"url": "data:x"}}]}
    ]
    other_image = [
        {"role": "user", "content": [text, {"type": "image_url", "image_url": {"url": "data:y"}}]}
    ]
    plain = [{"role": "user", "content": "page state, screenshot sha256 abc"}]
    assert fingerprint_messages(with_image) == fingerprint_messages(other_image)
    assert fingerprint_messages(with_image) == fingerprint_messages(plain)


def test_reset_forgets_the_profile_once_per_call(monkeypatch, tmp_path):
    monkeypatch.setenv("A0_USR_DIR", str(tmp_path))
    state = browser_session.profile_dir("chat-1") / browser_session.STATE_FILE
    state.write_text("{}")
    assert browser_session.forget_profile("chat-1", "call-a") is True
    assert not state.exists()
    state.write_text('{"cookies": ["set by an earlier step of call-a"]}')
    assert browser_session.forget_profile("chat-1", "call-a") is False  # resumed: kept
    assert state.exists()
    assert browser_session.forget_profile("chat-1", "call-b") is True
    assert (tmp_path / "browser" / "chat-1").stat().st_mode & 0o777 == 0o700


def test_uploads_are_taken_only_from_the_work_folder(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    assert inside(tmp_path, "a.txt") == (tmp_path / "a.txt").resolve()
    assert inside(tmp_path, "../etc/passwd") is None
    assert inside(tmp_path, "/etc/passwd") is None


class _Agent:
    number = 0


@pytest.mark.parametrize(
    ("cls", "name", "policy"),
    [
        (BrowserRead, "browser_read", Policy.SAFE_REPLAY),
        (BrowserAct, "browser_act", Policy.HOLD),
        (BrowserAgent, "browser_agent", Policy.CHILD),
    ],
)
async def test_the_browser_calls_replay_policies(cls, name, policy):
    tool = cls(_Agent(), name, None, {}, "")  # type: ignore[arg-type]
    assert await ReplayPolicy().of(tool) == policy


def test_browser_read_is_pinned_to_its_own_file():
    path = replay.tool_source_path("browser_read")
    assert path.name == "browser_reading.py" and path.is_file()
    assert replay.is_safe("browser_read", path)
    assert not replay.is_safe("browser_act", replay.tool_source_path("browser_act"))


def _call(state: str, result: Any = None) -> Call:
    return Call(
        id="c1",
        run_id="r1",
        agent_no=0,
        seq=1,
        attempt=1,
        kind=CallKind.TOOL,
        name="browser_agent",
        args={},
        policy=Policy.CHILD,
        fingerprint="f" * 64,
        state=state,
        result=result,
        result_digest=None,
        created_at=0.0,
        closed_at=None,
    )


def test_an_open_browser_task_resumes_and_a_finished_one_is_reused():
    recovering = Evidence(recovering=True, known=True)
    assert judge(_call(CallState.OPEN), recovering).action is Action.CHILD
    assert judge(_call(CallState.OPEN), Evidence(known=True)).action is Action.CHILD
    done = _call(CallState.COMPLETED, {"message": "answer", "break_loop": False})
    assert judge(done, Evidence(known=True)).action is Action.REUSE
