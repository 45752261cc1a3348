"""The project image itself: lean, configured as docs/docker.md says, non-root, and stopped
cleanly by `docker stop` (tini passes SIGTERM on to the server, which exits with 0)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.docker._agent import AgentContainer, DockerSetup

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]

MAX_IMAGE_BYTES = (
    1_200_000_000  # 1050 MB measured; Chromium for browser_agent (docs/docker.md, "Image size")
)


def in_image(setup: DockerSetup, script: str) -> str:
    """Run a shell script in a throw-away container, through the image's entry point."""
    done = setup.engine.docker("run", "--rm", "--network", "none", setup.image, "sh", "-c", script)
    return done.stdout


def test_the_image_is_lean_and_configured_like_the_docs_say(docker_setup):
    assert docker_setup.image_bytes < MAX_IMAGE_BYTES, f"{docker_setup.image_bytes / 1e6:.0f} MB"
    config = json.loads(
        docker_setup.engine.docker(
            "image", "inspect", "-f", "{{json .Config}}", docker_setup.image
        ).stdout
    )
    assert config["ExposedPorts"] == {"80/tcp": {}}
    assert config["Volumes"] == {"/a0/usr": {}}
    assert "/a0/docker/healthcheck.py" in config["Healthcheck"]["Test"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert (env["A0_USR_DIR"], env["WEB_UI_HOST"], env["WEB_UI_PORT"]) == (
        "/a0/usr",
        "0.0.0.0",
        "80",
    )

    report = in_image(
        docker_setup,
        "id -un; node --version; python -c 'import httpx, starlette, uvicorn; print(\"py-ok\")';"
        "python -c 'import importlib.util as u; "
        'print("sdk" if u.find_spec("openai") else "no-sdk")\';'
        "for t in gcc cc make g++ pip3; do command -v $t; done;"
        "ls -d /root/.cache /tmp/req /tmp/ca-bundle.pem 2>/dev/null;"
        "test -w /a0 && echo code-writable; test -w /a0/usr && echo usr-writable; true",
    ).split()
    assert report[0] == "a0", report  # the entry point dropped root
    assert report[1].startswith("v18."), report
    assert "py-ok" in report
    assert "no-sdk" in report, report  # the OpenAI SDK is a test tool, not a runtime dependency
    leftovers = [r for r in report if r.startswith("/")]
    assert leftovers == ["/opt/venv/bin/pip3"] or leftovers == [], report  # no compiler, no cache
    assert "code-writable" not in report and "usr-writable" in report, report


def test_the_build_ca_never_reaches_the_image(docker_setup):
    extra = sorted(Path("/usr/local/share/ca-certificates").glob("**/*.crt"))
    if not extra:
        pytest.skip("this machine passes no extra CA to the build")
    # a line of each certificate's body: found nowhere in the image's files
    needles = [p.read_text().splitlines()[2] for p in extra]
    script = "; ".join(
        f"grep -rlF -- '{n}' /etc /opt /root /tmp /usr/local /a0 2>/dev/null" for n in needles
    )
    assert in_image(docker_setup, script + "; true").strip() == ""


def test_docker_stop_ends_the_server_cleanly(docker_setup):
    agent = AgentContainer(docker_setup.engine, docker_setup.image, "a0-stop", "a0-stop-usr")
    try:
        agent.run({})
        agent.wait_healthy()
        started = time.monotonic()
        docker_setup.engine.docker("stop", "-t", "30", agent.name)
        assert time.monotonic() - started < 25, "SIGTERM reached the server and it stopped"
        assert agent.state("{{.State.ExitCode}}") == "0", agent.logs()
    finally:
        docker_setup.engine.docker("rm", "-f", "-v", agent.name, check=False)
        docker_setup.engine.docker("volume", "rm", "-f", agent.volume, check=False)
