"""Screenshots of the web UI for docs/ui.md, taken from a real server with the scripted model.

    .venv/bin/python scripts/ui_screenshots.py            # writes docs/img/*.png
    .venv/bin/python scripts/ui_screenshots.py --out DIR

Starts the scripted model (tests/support/model_server.py) and run_ui.py on a temporary
usr folder, drives Debian's Chromium (/usr/bin/chromium) through Playwright, and saves one
picture per view docs/ui.md shows (VIEWS). The Recovery picture comes from a real crash:
the server is SIGKILLed while a shell command runs, then restarted.

It also writes ``manifest.json`` next to the pictures: the digest of the web UI's files
(webui/) they were taken from and each picture's digest. tests/unit/test_ui_pictures.py
fails when docs/ui.md names a view without a picture, or when the UI changed since the
pictures were taken: run this script again then.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from playwright.sync_api import Page, sync_playwright  # noqa: E402

from durability.paths import receipts_dir  # noqa: E402
from tests.support.model_server import ScriptedModel  # noqa: E402
from tests.support.ui_server import UiServer, ui_env_for  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
#: docs/ui.md's view sections (their `## ` headings) and the picture each shows.
VIEWS = {
    "Chat": "chat.png",
    'Recovery panel: "Continue with confidence"': "recovery.png",
    "Plan panel": "plan.png",
    "Tasks": "tasks.png",
    "Work folder": "files.png",
    "Settings": "settings.png",
}
MANIFEST = "manifest.json"
UI_FILES = ("webui/index.html", "webui/css", "webui/js")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1180, "height": 760}
TIMEOUT = 60.0

ANSWER = """## Files in the work folder

I listed the folder and found **two** files:

| file | what it holds |
| --- | --- |
| `notes.md` | meeting notes |
| `report.csv` | the quarterly numbers |

The command I ran:

```bash
ls -1
```

Next I can summarise `report.csv` if you like."""

PLAN = {
    "title": "Quarterly report",
    "items": [
        {"id": "collect", "text": "Collect the numbers", "done": True},
        {"id": "chart", "text": "Draw the charts", "done": False},
        {"id": "send", "text": "Send the report to the team", "done": False},
    ],
}
MINE = {
    "title": "Quarterly report",
    "items": [
        {"id": "collect", "text": "Collect the numbers", "done": True},
        {"id": "chart", "text": "Draw the charts (bar charts only)", "done": True},
    ],
}


def ui_digest(root: Path = REPO) -> str:
    """One digest over the web UI's own files (the vendored libraries excluded)."""
    found = hashlib.sha256()
    for name in UI_FILES:
        path = root / name
        for item in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if item.is_file():
                found.update(item.relative_to(root).as_posix().encode() + b"\0")
                found.update(item.read_bytes() + b"\0")
    return found.hexdigest()


def write_manifest(out: Path) -> None:
    pictures = {
        name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in VIEWS.values()
    }
    manifest = {"ui_digest": ui_digest(), "views": VIEWS, "pictures": pictures}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out / MANIFEST}")


def wait_until(condition: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling interval of a deadline wait


def shoot(page: Page, out: Path, name: str) -> None:
    page.wait_for_timeout(300)  # let CSS settle (not a synchronisation: the state is checked)
    page.screenshot(path=str(out / name))
    print(f"wrote {out / name}")


def chat_and_plan(page: Page, server: UiServer, model: ScriptedModel, out: Path) -> str:
    work = server.usr_dir / "workdir"
    work.mkdir(parents=True, exist_ok=True)
    (work / "notes.md").write_text("# Notes\n- ship on Friday\n")
    (work / "report.csv").write_text("quarter,revenue\nQ1,120\nQ2,135\n")
    model.tool(
        "durable_plan",
        {"action": "replace", "expected_revision": 0, "plan": PLAN},
        headline="Writing down the plan",
    )
    model.tool(
        "code_execution_tool",
        {"runtime": "terminal", "session": 0, "code": "ls -1"},
        headline="Listing the work folder",
    )
    model.tool("response", {"text": ANSWER}, headline="Answering")
    reply = server.api_message("What is in my work folder? Plan the quarterly report.")
    ctx = reply.json()["context_id"]
    with server.ui_client() as client:  # the person's edit, made on revision 0: a conflict
        stale = {"context_id": ctx, "expected_revision": 0, "plan": MINE}
        assert client.post("/api/durable_plan_set", json=stale).status_code == 409

    page.goto(server.url)
    page.get_by_test_id("chat-item").first.click()
    page.get_by_test_id("log-response").locator("h2").wait_for(timeout=TIMEOUT * 1000)
    shoot(page, out, "chat.png")

    page.get_by_test_id("plan-open").click()
    page.get_by_test_id("plan-conflict").wait_for(timeout=TIMEOUT * 1000)
    shoot(page, out, "plan.png")
    page.get_by_test_id("plan-close").click()

    page.get_by_test_id("files-open").click()
    page.get_by_test_id("files-entry").first.wait_for(timeout=TIMEOUT * 1000)
    shoot(page, out, "files.png")
    page.get_by_test_id("files-close").click()

    tasks(page, server, out)

    page.get_by_test_id("settings-open").click()
    dialog = page.get_by_test_id("settings-dialog")
    dialog.get_by_test_id("chat_model_ctx_history").fill("1.5")
    dialog.get_by_test_id("settings-save").click()
    dialog.get_by_test_id("error-chat_model_ctx_history").wait_for(timeout=TIMEOUT * 1000)
    shoot(page, out, "settings.png")
    dialog.locator("#settings-cancel").click()
    page.get_by_test_id("confirm-ok").click()  # discard the unsaved edit (Cancel asks first)
    return ctx


def tasks(page: Page, server: UiServer, out: Path) -> None:
    """The Tasks view with a scheduled and a planned task."""
    with server.ui_client() as client:
        cron = {"minute": "0", "hour": "7", "weekday": "1-5", "timezone": "Europe/Berlin"}
        daily = {"name": "Morning report", "prompt": "Summarise the numbers.", "schedule": cron}
        planned = {
            "name": "Quarter close",
            "type": "planned",
            "prompt": "Draft the quarterly report.",
            "plan": ["2031-03-31T16:00:00", "2031-06-30T16:00:00"],
        }
        for task in (daily, planned):
            made = client.post("/api/scheduler_task_create", json=task)
            assert made.status_code == 200, made.text
    page.get_by_test_id("tasks-open").click()
    page.get_by_test_id("task-row").nth(1).wait_for(timeout=TIMEOUT * 1000)
    shoot(page, out, "tasks.png")
    page.get_by_test_id("tasks-close").click()


def crash_mid_shell_call(server: UiServer, model: ScriptedModel, gate: Path) -> int:
    """Start a shell command that waits on ``gate``, SIGKILL the server and the shell mid-call."""
    code = f"echo 'backup: 120 of 300 files copied'; while [ ! -e {gate} ]; do sleep 0.1; done"
    model.tool(
        "code_execution_tool",
        {"runtime": "terminal", "session": 0, "code": code},
        headline="Backing up the project",
    )
    model.tool("response", {"text": "The backup is **complete**."})

    def send() -> None:
        with contextlib.suppress(Exception):
            server.api_message("Back up the project folder", input_id="backup-1")

    threading.Thread(target=send, daemon=True).start()
    receipts = receipts_dir(server.usr_dir)
    outputs = wait_until(
        lambda: [p for p in receipts.glob("*.out") if "copied" in p.read_text()], "shell output"
    )
    start = outputs[0].with_suffix(".start")
    shell_pid = int(json.loads(start.read_text())["shell_pid"])
    server.kill()
    # the shell dies with it (as when a container stops): a shell that outlives the server
    # is adopted and its run goes on by itself, with nothing for the panel to show
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(shell_pid, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{shell_pid}").exists() or _zombie(shell_pid), "shell end")
    return shell_pid


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


def recovery(page: Page, server: UiServer, out: Path) -> None:
    page.goto(server.url)
    page.get_by_test_id("chat-item").first.click()
    page.get_by_test_id("held-open").click()
    page.get_by_test_id("receipt-evidence").wait_for(timeout=TIMEOUT * 1000)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": 1300})
    shoot(page, out, "recovery.png")
    page.set_viewport_size(VIEWPORT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    shell_pid = 0
    with tempfile.TemporaryDirectory(prefix="a0-shots-") as tmp, ScriptedModel() as model:
        usr = Path(tmp) / "usr"
        env = {**ui_env_for(model), "API_KEY_OTHER": "sk-screenshots-0123456789abcdef"}
        server = UiServer(usr, env=env)
        try:
            server.start(timeout=TIMEOUT)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport=VIEWPORT)
                chat_and_plan(page, server, model, out)
                gate = Path(tmp) / "gate"
                shell_pid = crash_mid_shell_call(server, model, gate)
                server = UiServer(usr, env=env)
                server.start(timeout=TIMEOUT)
                recovery(page, server, out)
                browser.close()
                gate.touch()
                write_manifest(out)
        finally:
            server.stop()
            if shell_pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(shell_pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
