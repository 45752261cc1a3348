"""A run killed mid-shell-call (real run_ui.py, SIGKILL) together with its shell (a container
dying takes both), restarted: the Recovery panel shows the command, what the shell receipt
proves, the output so far and the timeline; the operator decides in the panel, and the run
completes. (A shell that outlives the server is adopted instead of held:
tests/integration/test_receipts_adoption.py.)"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.integration._durable_system import crashable as crashable
from tests.integration._helpers import wait_until

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def _kill_group(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def test_a_run_killed_mid_shell_call_is_checked_and_decided_in_the_panel(
    page: Page, crashable, model_server, tmp_path: Path
):
    gate = tmp_path / "gate"
    code = f"echo step-1-done; while [ ! -e {gate} ]; do sleep 0.05; done; echo step-2-done"
    model_server.tool(
        "code_execution_tool",
        {"runtime": "terminal", "session": 0, "code": code},
        headline="Running the two-step job",
    )
    model_server.tool("response", {"text": "The job **finished**."})
    receipts = crashable.usr / "durability" / "receipts"

    server = crashable.start()
    sender = threading.Thread(
        target=lambda: _quietly(lambda: server.api_message("run the job", input_id="job-1")),
        daemon=True,
    )
    sender.start()
    outputs = lambda: [p for p in receipts.glob("*.out") if "step-1-done" in p.read_text()]  # noqa: E731
    wait_until(outputs, what="the command's first output")
    shell_pid = json.loads(next(receipts.glob("*.start")).read_text())["shell_pid"]
    try:
        crashable.kill()  # SIGKILL mid-call: the command is still waiting on the gate
        _kill_group(shell_pid)  # and the shell with it: nothing is left to adopt
        wait_until(lambda: not _alive(shell_pid), what="the shell to end")
        sender.join(30)
        server = crashable.start()
        run = crashable.only_run()
        assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call"), run

        page.goto(server.url)
        page.get_by_test_id("chat-item").first.click()
        expect(page.get_by_test_id("held-banner")).to_be_visible(timeout=TIMEOUT_MS)
        page.get_by_test_id("held-open").click()
        card = page.get_by_test_id("recovery-run")
        expect(card).to_have_count(1, timeout=TIMEOUT_MS)
        expect(card.get_by_test_id("run-phase")).to_have_text("intent_open")
        expect(card.get_by_test_id("reason-text")).to_contain_text("may or may not have happened")
        expect(card.get_by_test_id("reason-detail")).to_contain_text(
            re.compile("receipt_unknown|process_ended")
        )
        # the timeline: the model call committed, the shell call held
        steps = card.get_by_test_id("timeline-step")
        expect(steps).to_have_count(2)
        expect(steps.nth(0)).to_have_attribute("data-outcome", "committed")
        expect(steps.nth(1)).to_have_attribute("data-outcome", "open")
        expect(steps.nth(1)).to_contain_text("held here")
        # the uncertain call: its command and what the receipt proves now
        shell = card.locator("[data-testid=recovery-call][data-status=open]")
        expect(shell.get_by_test_id("call-command")).to_have_text(code)
        evidence = shell.get_by_test_id("receipt-evidence")
        expect(evidence).to_contain_text("Start marker without exit marker")
        expect(evidence.get_by_test_id("receipt-output")).to_have_text("step-1-done\n")

        # the operator reads the output and decides: the job did its first step only
        card.get_by_test_id("decision-confirmed_completed").click()
        card.get_by_test_id("decision-note").fill("step 1 ran; step 2 is not needed")
        card.get_by_test_id("decision-submit").click()
        expect(page.get_by_test_id("recovery-message")).to_contain_text("recorded")
        expect(page.get_by_test_id("recovery-empty")).to_be_visible(timeout=TIMEOUT_MS)
        done = crashable.wait_status(run["run_id"], "completed")
        assert [d["decision"] for d in done["decisions"]] == ["confirmed_completed"]
        assert model_server.calls == 2

        page.get_by_test_id("recovery-close").click()
        expect(page.get_by_test_id("held-banner")).to_be_hidden(timeout=TIMEOUT_MS)
        answer = page.get_by_test_id("log-response").last
        expect(answer.locator("strong")).to_have_text("finished", timeout=TIMEOUT_MS)
        crashable.stop()
    finally:
        _kill_group(shell_pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def _quietly(fn) -> None:
    try:
        fn()
    except httpx.HTTPError:
        pass
