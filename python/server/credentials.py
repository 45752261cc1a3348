"""The web UI's login: the password's scrypt verifier, usr/.login.json, and the one-time
password made on the first start on a public address.

The password is never stored: usr/.login.json (mode 0600) holds the login name and an
scrypt verifier (random salt) of the password. With ``AUTH_LOGIN``/``AUTH_PASSWORD`` set
(process environment or usr/.env), the file only remembers their verifier, so that the
sessions' *generation* (a fingerprint of the verifier, durability/web_sessions.py) stays
the same across restarts and changes with the password. Without them, a server listening
on an address other than loopback makes a login ``admin`` with a random password, writes
its verifier to the file and prints the password once in the log; later starts use the
file. ``A0_ALLOW_NO_LOGIN=true`` opts out (no login at all).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("a0.auth")

LOGIN_FILE = ".login.json"
GENERATED_LOGIN = "admin"
OPT_OUT = "A0_ALLOW_NO_LOGIN"
#: scrypt's cost: 2^14 blocks of 8 x 128 bytes (16 MiB, tens of milliseconds per check).
SCRYPT_N, SCRYPT_R, SCRYPT_P, KEY_BYTES = 2**14, 8, 1, 32
NO_LOGIN_GENERATION = "no-login"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    secret = password.encode("utf-8", "surrogatepass")
    return hashlib.scrypt(secret, salt=salt, n=n, r=r, p=p, maxmem=256 * 1024 * 1024, dklen=32)


def make_verifier(password: str) -> str:
    """``scrypt$<n>$<r>$<p>$<salt>$<key>`` for ``password``, with a fresh random salt."""
    salt = secrets.token_bytes(16)
    key = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


def check_verifier(verifier: str, password: str) -> bool:
    """True when ``password`` matches; the keys are compared in constant time. A malformed
    verifier matches nothing (the KDF still runs, so the answer takes as long)."""
    try:
        kind, n, r, p, salt, key = verifier.split("$")
        params = (int(n), int(r), int(p))
        expected, salt_bytes = _unb64(key), _unb64(salt)
        if kind != "scrypt" or params != (SCRYPT_N, SCRYPT_R, SCRYPT_P) or len(expected) != 32:
            raise ValueError(kind)
    except ValueError:
        expected, salt_bytes = b"\0" * KEY_BYTES, b"\0" * 16
        params, kind = (SCRYPT_N, SCRYPT_R, SCRYPT_P), ""
    derived = _scrypt(password, salt_bytes, *params)
    return hmac.compare_digest(derived, expected) and kind == "scrypt"


def generation_of(login: str, verifier: str) -> str:
    """The fingerprint sessions are made under (it changes with the login or password)."""
    if not login:
        return NO_LOGIN_GENERATION
    return hashlib.sha256(f"{login}\0{verifier}".encode()).hexdigest()[:32]


def is_loopback_bind(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Resolved:
    login: str
    verifier: str
    #: the generation of the credentials the previous start used, when they changed
    previous_generation: str | None = None
    #: the one-time password made by this start (printed once, never stored)
    generated_password: str = ""


def _read_file(usr: Path) -> dict[str, object]:
    try:
        data = json.loads((usr / LOGIN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_file(usr: Path, login: str, verifier: str, generated: bool) -> None:
    """Write usr/.login.json (0600) atomically: a temporary file, then a rename."""
    usr.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"login": login, "verifier": verifier, "generated": generated})
    fd, tmp = tempfile.mkstemp(dir=usr, prefix=".login.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, usr / LOGIN_FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def resolve(
    usr: Path, login: str, password: str, env: Mapping[str, str], bind_host: str | None
) -> Resolved:
    """The login to use (see the module's text); writes usr/.login.json when needed."""
    stored = _read_file(usr)
    s_login, s_verifier = str(stored.get("login") or ""), str(stored.get("verifier") or "")
    s_generated = stored.get("generated") is True
    before = generation_of(s_login, s_verifier) if s_login and s_verifier else None
    if login:
        if s_login == login and not s_generated and check_verifier(s_verifier, password):
            return Resolved(login, s_verifier)
        verifier = make_verifier(password)
        _write_file(usr, login, verifier, generated=False)
        return Resolved(login, verifier, previous_generation=before)
    if s_generated and s_login and s_verifier:
        return Resolved(s_login, s_verifier)
    if bind_host is None or is_loopback_bind(bind_host) or _truthy(env.get(OPT_OUT, "")):
        return Resolved("", "", previous_generation=before)
    new_password = secrets.token_urlsafe(18)
    verifier = make_verifier(new_password)
    _write_file(usr, GENERATED_LOGIN, verifier, generated=True)
    return Resolved(GENERATED_LOGIN, verifier, before, generated_password=new_password)


def announce(login: str, password: str, host: str, path: Path) -> None:
    """Print the one-time password once, in a block that stands out in the log."""
    rule = "=" * 72
    logger.warning(
        "\n%s\nNo login is configured and the server listens on %s, so a login was made:\n"
        "    login:    %s\n    password: %s\n"
        "It is shown only this once; only its scrypt verifier is kept (%s).\n"
        "Set AUTH_LOGIN/AUTH_PASSWORD to choose your own, or delete that file and restart\n"
        "for a new one; %s=true turns the login off (docs/security.md).\n%s",
        rule,
        host,
        login,
        password,
        path,
        OPT_OUT,
        rule,
    )
