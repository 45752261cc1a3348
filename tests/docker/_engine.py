"""A private Docker engine for the container tests (docs/docker.md, "How the tests run it").

Nothing here touches the machine's own Docker: the engine is a `dockerd` with its own
data-root, exec-root, socket and pidfile in a temporary folder, and its own Linux bridge
(`a0dk<hex>`, a free private /24) instead of docker0. It runs with `--iptables=false
--ip-forward=false --ip-masq=false`: no firewall rule and no sysctl of the host changes,
containers reach the host's address on that bridge and nothing beyond it, and published
ports go through docker-proxy. Builds use `--network host`, so apt and pip inside a build
reach the Debian mirror and the package index the way the host does.

No registry is reachable, so the `debian:bookworm-slim` base is made here: debootstrap
(minbase) from the host's Debian mirror, trimmed like the official slim image, and
`docker import`ed under that name.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support.ui_server import REPO

#: Debian's client: its `docker build` speaks BuildKit itself (newer clients need buildx).
DOCKER_CLIENT = "/usr/bin/docker"
BASE_IMAGE = "debian:bookworm-slim"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The official slim image keeps these out of every later package installation too.
SLIM_DPKG_EXCLUDES = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
"""
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
SLIM_REMOVE = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)


class EngineError(RuntimeError):
    pass


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run the container tests (scripts/test.sh installs them)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (dockerd and debootstrap need it)")
    for tool, package in (
        ("/usr/sbin/dockerd", "docker.io"),
        (DOCKER_CLIENT, "docker.io"),
        ("/usr/sbin/debootstrap", "debootstrap"),
    ):
        if not os.access(tool, os.X_OK):
            missing.append(f"{tool} (Debian package {package})")
    if shutil.which("ip") is None:
        missing.append("ip (Debian package iproute2)")
    return missing


def host_mirror() -> str:
    """The Debian mirror the host's apt uses for the main suite."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for stanza in sources.read_text(encoding="utf-8").split("\n\n"):
            fields = dict(
                line.split(":", 1)
                for line in stanza.splitlines()
                if re.match(r"^[A-Za-z-]+:", line)
            )
            if SUITE in fields.get("Suites", "").split():
                return fields.get("URIs", DEFAULT_MIRROR).split()[0]
    listing = Path("/etc/apt/sources.list")
    if listing.exists():
        for line in listing.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1]
    return DEFAULT_MIRROR


def _free_subnet() -> ipaddress.IPv4Network:
    used = (
        subprocess.run(
            ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
        ).stdout
        + subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    )
    taken = [
        ipaddress.ip_network(m, strict=False) for m in re.findall(r"\d+\.\d+\.\d+\.\d+/\d+", used)
    ]
    for _ in range(200):
        net = ipaddress.ip_network(
            f"10.{secrets.randbelow(50) + 200}.{secrets.randbelow(256)}.0/24"
        )
        if not any(net.overlaps(other) for other in taken):
            return net
    raise EngineError("no free private /24 for the test bridge")


# containerd 1.6 puts its shims' sockets here whatever its own folders are
SHIM_SOCKETS = Path("/run/containerd")
TMPFS_SIZE = "3g"  # the engine uses about 0.6 GB (base image, build stages, containers)
TMPFS_MIN_AVAILABLE_KB = 6 * 1024 * 1024


def memory_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


class Engine:
    """A dockerd of our own. `start()`, then `docker(...)`; `stop()` removes everything.

    With enough free memory the engine's folder is a tmpfs: dpkg's many fsyncs
    (debootstrap, apt in the build) then cost nothing, and removing ~100,000 files at the
    end is one unmount.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.on_tmpfs = False
        self._shim_dir_existed = True
        self.socket = self.root / "docker.sock"
        self.bridge = f"a0dk{secrets.token_hex(3)}"
        self.subnet = _free_subnet()
        self.gateway = str(next(self.subnet.hosts()))  # the host's address on the bridge
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.root / "dockerd.log"
        self._bridge_made = False
        self.stop_timings: dict[str, float] = {}

    # lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 60) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._shim_dir_existed = SHIM_SOCKETS.exists()
        if memory_available_kb() >= TMPFS_MIN_AVAILABLE_KB:
            options = f"size={TMPFS_SIZE},mode=0700"
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "a0dk-engine", str(self.root)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise EngineError(f"mount tmpfs: {done.stderr.strip()}")
            self.on_tmpfs = True
        self._ip("link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        self._ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        self._ip("link", "set", self.bridge, "up")
        argv = [
            "/usr/sbin/dockerd",
            f"--data-root={self.root / 'data'}",
            f"--exec-root={self.root / 'exec'}",
            f"--host=unix://{self.socket}",
            f"--pidfile={self.root / 'dockerd.pid'}",
            f"--bridge={self.bridge}",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EngineError(f"dockerd exited with {self.process.returncode}:\n{self.log()}")
            if self.socket.exists() and self.docker("info", check=False).returncode == 0:
                return
            time.sleep(0.2)  # polling interval of the readiness wait
        raise EngineError(f"dockerd not ready after {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        """Remove every container, stop the daemon, unmount, delete the folder and bridge."""
        mark = time.monotonic()

        def lap(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            self.stop_timings[name] = now - mark
            mark = now

        try:
            if self.process is not None and self.process.poll() is None:
                ids = self.docker("ps", "-aq", check=False).stdout.split()
                if ids:
                    self.docker("rm", "-f", "-v", *ids, check=False, timeout=120)
                # networks made by Compose have bridges of their own on the host
                self.docker("network", "prune", "-f", check=False, timeout=60)
                lap("containers")
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(60)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(10)
                lap("dockerd")
            self._kill_pidfile(self.root / "exec" / "containerd" / "containerd.pid")
            self._unmount_all()  # the tmpfs itself last: everything in it goes at once
            shutil.rmtree(self.root, ignore_errors=True)
            if not self._shim_dir_existed:  # containerd's shims made it: remove it if empty
                for folder in (SHIM_SOCKETS / "s", SHIM_SOCKETS):
                    with contextlib.suppress(OSError):
                        folder.rmdir()
            lap("files")
        finally:
            if self._bridge_made:
                subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
                self._bridge_made = False

    def log(self, tail: int = 4000) -> str:
        with contextlib.suppress(FileNotFoundError):
            return self.log_path.read_text(errors="replace")[-tail:]
        return ""

    # the client -----------------------------------------------------------------------
    def docker(
        self, *args: str, check: bool = True, timeout: float = 300, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DOCKER_HOST": f"unix://{self.socket}", "DOCKER_BUILDKIT": "1"}
        env.pop("DOCKER_CONTEXT", None)
        done = subprocess.run(
            [DOCKER_CLIENT, *args],
            env=env,
            input=stdin.decode() if stdin is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise EngineError(
                f"docker {' '.join(args[:3])} failed ({done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def inspect(self, name: str, template: str) -> str:
        return self.docker("inspect", "-f", template, name).stdout.strip()

    def volume_path(self, volume: str) -> Path:
        """Where a named volume's files are on this host (we own the data-root)."""
        return Path(
            self.docker("volume", "inspect", "-f", "{{.Mountpoint}}", volume).stdout.strip()
        )

    # images ---------------------------------------------------------------------------
    def import_base_image(self, workdir: Path, mirror: str | None = None) -> None:
        """debootstrap a minimal bookworm, trim it like the slim image, import it."""
        rootfs = workdir / "rootfs"
        done = subprocess.run(
            [
                "/usr/sbin/debootstrap",
                "--variant=minbase",
                SUITE,
                str(rootfs),
                mirror or host_mirror(),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise EngineError(f"debootstrap failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        for rel in SLIM_REMOVE:
            folder = rootfs / rel
            for child in folder.glob("*"):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        (rootfs / "etc/dpkg/dpkg.cfg.d/docker").write_text(SLIM_DPKG_EXCLUDES, encoding="utf-8")
        # the suites the official slim image lists: Debian keeps chromium current only
        # through bookworm-security (the image's browser_agent needs it, docs/browser.md)
        base = mirror or host_mirror()
        (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
        (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(
            f"Types: deb\nURIs: {base}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
            f"Types: deb\nURIs: {SECURITY_MIRROR}\nSuites: {SUITE}-security\n"
            "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
            encoding="utf-8",
        )
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE
        )
        env = {**os.environ, "DOCKER_HOST": f"unix://{self.socket}"}
        imported = subprocess.run(
            [DOCKER_CLIENT, "import", "-", BASE_IMAGE],
            stdin=tar.stdout,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait(60)
        shutil.rmtree(rootfs, ignore_errors=True)
        if imported.returncode != 0 or tar.returncode != 0:
            raise EngineError(f"docker import failed:\n{imported.stderr[-3000:]}")

    def build_project_image(
        self, tag: str, workdir: Path, build_args: dict[str, str] | None = None
    ) -> None:
        """docker/Dockerfile on the repository; the host's extra CAs as the build secret."""
        args = ["build", "--network", "host", "-f", str(REPO / "docker/Dockerfile"), "-t", tag]
        for name, value in (build_args or {}).items():
            args += ["--build-arg", f"{name}={value}"]
        extra = sorted(Path("/usr/local/share/ca-certificates").glob("**/*.crt"))
        if extra:
            ca = workdir / "build-ca.pem"
            ca.write_text("".join(p.read_text(encoding="utf-8") + "\n" for p in extra))
            args += ["--secret", f"id=ca,src={ca}"]
        try:
            self.docker(*args, str(REPO), timeout=1200)
        finally:
            (workdir / "build-ca.pem").unlink(missing_ok=True)

    def build_image(self, tag: str, context: Path) -> None:
        """The Dockerfile in ``context`` (apt only: no build secret needed)."""
        self.docker("build", "--network", "host", "-t", tag, str(context), timeout=1200)

    def image_bytes(self, tag: str) -> int:
        return int(self.docker("image", "inspect", "-f", "{{.Size}}", tag).stdout)

    # helpers --------------------------------------------------------------------------
    @staticmethod
    def _ip(*args: str) -> None:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineError(f"ip {' '.join(args)}: {done.stderr.strip()}")

    @staticmethod
    def _kill_pidfile(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int(path.read_text().strip()), signal.SIGKILL)

    def _unmount_all(self) -> None:
        """Lazily unmount whatever a killed daemon left mounted below our folder."""
        root = str(self.root.resolve())
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        points = [line.split()[1] for line in mounts]
        below = [p for p in points if p == root or p.startswith(root + "/")]
        for point in sorted(below, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
