"""A private OpenSSH server for tests: its own host key, port, authorized key and pid file.

``Sshd(tmp).start()`` runs ``/usr/sbin/sshd -D -e -f <config>`` on a free port of 127.0.0.1
as the current user (root here), accepting only the test's own key. ``new_host_key()`` plus
``restart()`` plays a host whose key changed; ``stop()`` makes it unreachable.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def available() -> bool:
    return Path(SSHD).exists() and shutil.which("ssh-keygen") is not None and os.geteuid() == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


class Sshd:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        self.port = free_port()
        self.user = getpass.getuser()
        self.client_key = self.folder / "client_key"
        self.host_key = self.folder / "host_key"
        self.proc: subprocess.Popen[bytes] | None = None
        _keygen(self.client_key)
        _keygen(self.host_key)
        (self.folder / "authorized_keys").write_text((self.folder / "client_key.pub").read_text())
        self.config = self.folder / "sshd_config"
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.folder / 'authorized_keys'}",
                    f"PidFile {self.folder / 'sshd.pid'}",
                    "StrictModes no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "LogLevel ERROR",
                    "",
                ]
            )
        )

    def start(self, timeout: float = 30.0) -> Sshd:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation folder
        with open(self.folder / "sshd.log", "ab") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)], stdout=subprocess.DEVNULL, stderr=log
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.folder / "sshd.log").read_text(errors="replace")
                raise RuntimeError(f"sshd exited: {log[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return self
            except OSError:
                pass
            time.sleep(0.05)  # polling for the listener, not synchronising a result
        raise RuntimeError("sshd did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def new_host_key(self) -> None:
        for path in (self.host_key, Path(f"{self.host_key}.pub")):
            path.unlink(missing_ok=True)
        _keygen(self.host_key)
