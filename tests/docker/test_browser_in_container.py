"""browser_agent inside the project image: Debian's Chromium and Playwright are there, and a
task fills and submits a form served by the test on the engine's bridge, once (#21)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.docker._agent import AgentContainer, DockerSetup, agent_env
from tests.integration._browser_support import script
from tests.support.browser_site import BrowserSite
from tests.support.model_server import ScriptedModel

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture
def site(docker_setup: DockerSetup) -> Iterator[BrowserSite]:
    served = BrowserSite(host=docker_setup.engine.gateway).start()
    yield served
    served.stop()


def test_chromium_starts_inside_the_image(docker_setup):
    """Playwright launches Debian's Chromium as the image's user (a clear error otherwise)."""
    script = (
        "import asyncio\n"
        "from python.helpers.browser_session import BrowserSession\n"
        "async def main():\n"
        "    s = BrowserSession('probe', {}, __import__('pathlib').Path('/tmp/w'))\n"
        "    await s.start()\n"
        "    await s.page.set_content('<title>probe-ok</title>')\n"
        "    print(await s.page.title())\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
    )
    done = docker_setup.engine.docker(
        "run",
        "--rm",
        "--network",
        "none",
        "-e",
        "A0_USR_DIR=/tmp/usr",
        docker_setup.image,
        "python",
        "-c",
        script,
        check=False,
    )
    assert "probe-ok" in done.stdout, (done.stdout + done.stderr)[-4000:]


def test_browser_agent_submits_a_form_from_inside_the_container(docker_setup, site):
    plan = [
        {"action": "type", "index": 0, "text": "Alice"},
        {"action": "submit", "index": 0},
        {"action": "done", "response": "sent"},
    ]
    with ScriptedModel(host=docker_setup.engine.gateway) as model:
        script(model, f"Open {site.url}/form and send it as Alice", plan)
        agent = AgentContainer(docker_setup.engine, docker_setup.image, "a0-browser", "a0-br")
        try:
            # the bridge's gateway is a private address: allowed for this test's own site
            agent.run({**agent_env(model), "A0_SET_browser_allow_private_addresses": "true"})
            agent.wait_healthy()
            answer = agent.api_message("send the order", input_id="in-container")
            assert answer.status_code == 200, agent.logs()
            run = agent.run_of("in-container")
            [task] = [c for c in run["calls"] if c["name"] == "browser_agent"]
            assert "browser_agent failed" not in str(task["result"]), (task, agent.logs())
            assert answer.json()["response"] == "browser task finished", agent.logs()
            assert site.paths[0] == "/form", site.paths
            assert site.count == 1 and site.submissions[0] == {"name": ["Alice"]}
            assert run["status"] == "completed"
            names = [c["name"] for c in run["calls"]]
            assert names.count("browser_act") == 2 and "browser_read" in names
        finally:
            agent.engine.docker("rm", "-f", agent.name, check=False)
            agent.engine.docker("volume", "rm", "-f", agent.volume, check=False)
