"""The HTTP edge of a real run_ui.py under hostile bodies (issue #17, points 1, 5 and 9).

Huge bodies are generated while they are sent (never held by the test) over a raw socket,
so the test sees how far the server let them get: an unauthenticated 1 GiB JSON body and a
2 GiB multipart part are cut off after a few megabytes, the server's resident memory grows
by less than 100 MB and its temporary folder stays empty.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.integration

GIB = 1024**3
MIB = 1024**2
CHUNK = b"x" * (256 * 1024)
RSS_GROWTH_LIMIT = 100 * MIB


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def temp_bytes(pid: int, folder: Path) -> int:
    """Bytes in ``folder``: its files, and the server's open files there that have no name
    (Python's temporary files are unlinked at once, or made with O_TMPFILE)."""
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
            if target.startswith(f"{folder}/") and target.endswith(" (deleted)"):
                total += fd.stat().st_size
        except OSError:  # closed meanwhile
            continue
    return total


@dataclass
class Upload:
    """One request whose body is generated while it is sent; ``sent`` counts body bytes."""

    sent: int = 0
    status: int | None = None  # None: the server closed the connection before answering
    error: str = ""


def stream_body(
    port: int, head: str, body: Iterator[bytes], stop: threading.Event, *, chunked: bool
) -> Upload:
    result = Upload()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        try:
            sock.sendall(head.encode("latin-1"))
            for piece in body:
                if stop.is_set():
                    break
                data = b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
                sock.sendall(data)
                result.sent += len(piece)
        except OSError as exc:  # the server closed the connection on the rest: expected
            result.error = type(exc).__name__
        try:
            sock.settimeout(30)
            answer = sock.recv(65536)
            if answer.startswith(b"HTTP/1.1 "):
                result.status = int(answer.split(b" ", 2)[1])
        except OSError as exc:
            result.error = result.error or type(exc).__name__
    return result


def request_head(path: str, content_type: str, length: int | None = None, **headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return "\r\n".join(lines) + "\r\n\r\n"


def json_body(total: int) -> Iterator[bytes]:
    yield b'{"message": "'
    for _ in range(total // len(CHUNK)):
        yield CHUNK


def multipart_body(total: int, boundary: str) -> Iterator[bytes]:
    yield (
        f'--{boundary}\r\nContent-Disposition: form-data; name="attachments"; '
        f'filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    for _ in range(total // len(CHUNK)):
        yield CHUNK


def run_uploads(
    jobs: list[Callable[[threading.Event], Upload]], watch: Callable[[], bool]
) -> tuple[list[Upload], int]:
    """Run the uploads in threads while ``watch`` samples the server; ``watch`` returning
    False stops every upload at once (the old server buffering it all fails fast)."""
    stop = threading.Event()
    results: list[Upload] = [Upload() for _ in jobs]

    def run(i: int) -> None:
        try:
            results[i] = jobs[i](stop)
        except OSError as exc:
            results[i] = Upload(error=type(exc).__name__)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    samples = 0
    while any(t.is_alive() for t in threads):
        samples += 1
        if not watch():
            stop.set()
        threads[0].join(0.02)  # the sampling interval while the uploads run
    for thread in threads:
        thread.join(60)
    return results, samples


@pytest.fixture
def edge_server(tmp_path: Path, model_server) -> Iterator[UiServer]:
    """run_ui.py with its own temporary folder (TMPDIR), where spooled uploads would go."""
    server = UiServer(tmp_path / "usr", env=ui_env_for(model_server))
    server.tmp = tmp_path / "server-tmp"  # type: ignore[attr-defined]
    server.tmp.mkdir()  # type: ignore[attr-defined]
    server.env["TMPDIR"] = str(server.tmp)  # type: ignore[attr-defined]
    server.start(timeout=SLOW_START)
    try:
        yield server
    finally:
        server.kill()


def test_unauthenticated_1gib_json_bodies_are_cut_off_and_cost_no_memory(edge_server):
    """Four 1 GiB JSON bodies at once to /api/api_message with no key: each is refused
    after at most the JSON limit (10 MiB) plus socket buffers, and the server's RSS grows by
    less than 100 MB (the probe saw 2.1 GB for one, 5.8 GB for four)."""
    server = edge_server
    pid = server.process.pid
    warm = httpx.post(f"{server.url}/api/api_message", json={"message": "x" * MIB}, timeout=30)
    assert warm.status_code == 401 and warm.json()["error"]["code"] == "unauthorized"
    baseline = rss_bytes(pid)
    peak = baseline

    def watch() -> bool:
        nonlocal peak
        peak = max(peak, rss_bytes(pid))
        return peak - baseline < RSS_GROWTH_LIMIT

    head = request_head("/api/api_message", "application/json")
    jobs = [
        lambda stop: stream_body(server.port, head, json_body(GIB), stop, chunked=True)
        for _ in range(4)
    ]
    results, samples = run_uploads(jobs, watch)
    watch()
    assert samples > 0
    assert peak - baseline < RSS_GROWTH_LIMIT, f"RSS grew by {(peak - baseline) // MIB} MiB"
    for result in results:
        assert result.sent < 64 * MIB, result  # cut off near the 10 MiB limit, not 1 GiB
        assert result.status in (None, 401, 413), result
    declared = stream_body(
        server.port,
        request_head("/api/api_message", "application/json", length=GIB),
        iter([]),
        threading.Event(),
        chunked=False,
    )
    assert declared.status == 413  # refused on its Content-Length, before any byte is read
    assert httpx.get(f"{server.url}/api/health", timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("path", "why"),
    [("/api/api_message", "no API key"), ("/api/upload_work_dir_files", "no CSRF token")],
)
def test_a_2gib_multipart_part_without_credentials_writes_nothing(edge_server, path, why):
    """The probe's 2 GiB part with no credentials grew the temp folder by 2 GB before the
    401: the credentials are checked first, so not a byte of it reaches a file."""
    server = edge_server
    tmp = server.tmp  # type: ignore[attr-defined]
    pid = server.process.pid
    before = temp_bytes(pid, tmp)
    grew = 0

    def watch() -> bool:
        nonlocal grew
        grew = max(grew, temp_bytes(pid, tmp) - before)
        return grew == 0

    head = request_head(path, "multipart/form-data; boundary=XyZ")
    job = lambda stop: stream_body(  # noqa: E731
        server.port, head, multipart_body(2 * GIB, "XyZ"), stop, chunked=True
    )
    results, _ = run_uploads([job], watch)
    watch()
    assert grew == 0, f"{why}: the temporary folder grew by {grew} bytes"
    assert results[0].sent < 64 * MIB, results[0]
    assert results[0].status in (None, 401, 403), results[0]


def test_malformed_forms_are_4xx_and_leave_no_traceback(edge_server):
    """The probe's bodies each gave 500 and a traceback in the log."""
    server = edge_server
    fields = "".join(
        f'--b\r\nContent-Disposition: form-data; name="f{i}"\r\n\r\nx\r\n' for i in range(1001)
    )
    big_field = '--b\r\nContent-Disposition: form-data; name="text"\r\n\r\n' + "x" * 2_000_000
    bodies = [
        ("multipart/form-data", b"--b\r\n\r\n--b--\r\n"),
        ("multipart/form-data; boundary=b", (fields + "--b--\r\n").encode()),
        ("multipart/form-data; boundary=b", (big_field + "\r\n--b--\r\n").encode()),
        ("application/x-www-form-urlencoded", "&".join(f"f{i}=1" for i in range(2000)).encode()),
        ("multipart/form-data; boundary=b", b"--b\r\nContent-Disposition: form-data\r\n\r\n"),
    ]
    with server.ui_client() as client:
        for endpoint in ("message", "upload_work_dir_files", "chat_create"):
            for content_type, raw in bodies:
                response = client.post(
                    f"/api/{endpoint}", content=raw, headers={"Content-Type": content_type}
                )
                what = f"{endpoint} {content_type} {raw[:40]!r}"
                assert 400 <= response.status_code < 500, f"{what}: {response.text[:300]}"
                error = response.json()["error"]
                assert error["code"] in ("bad_request", "payload_too_large"), what
    assert server.stop() == 0
    output = server.output()
    assert "Traceback" not in output and "internal error" not in output, output[-3000:]


def test_the_api_key_in_a_url_is_refused_and_never_logged(edge_server):
    server = edge_server
    marker = "k3y-1n-the-url"
    for path in ("/api/api_message", "/api/health", "/api/poll"):
        response = httpx.post(
            f"{server.url}{path}?api_key={marker}", json={"message": "hi"}, timeout=30
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "api_key_in_url"
    with_header = server.api_message("hi")
    assert with_header.status_code == 200, with_header.text
    assert server.stop() == 0
    output = server.output()
    assert "/api/health?api_key=..." in output  # the access log still names the request
    assert marker not in output


def test_the_ui_is_served_with_its_security_headers(edge_server):
    for path in ("/", "/login", "/js/app.js", "/vendor/marked/marked.esm.js", "/api/health"):
        response = httpx.get(f"{edge_server.url}{path}", timeout=10)
        assert response.status_code == 200, path
        policy = response.headers["content-security-policy"]
        assert "img-src 'self' data: blob:" in policy and "script-src 'self'" in policy
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
