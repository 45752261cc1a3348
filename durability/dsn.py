"""A PostgreSQL connection string that never shows its password.

``PostgresDsn(text)`` accepts both forms libpq knows (``postgresql://user:pw@host/db`` and
``host=... password=...``). ``repr``/``str`` show the masked form; ``conninfo`` is the
real string, handed to the driver and to nothing else; ``mask(text)`` replaces the
password (raw, percent-encoded and decoded) in any text, such as a driver's error message.
"""

from __future__ import annotations

import re
import urllib.parse

from durability.errors import ConfigurationError

MASK = "***"
_URL_PASSWORD = re.compile(r"^(?P<scheme>[a-z]+://)(?P<user>[^:@/]*):(?P<pw>[^@/]*)@", re.I)
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)


class PostgresDsn:
    __slots__ = ("_conninfo", "_secrets", "masked")

    def __init__(self, conninfo: str) -> None:
        if not isinstance(conninfo, str) or not conninfo.strip():
            raise ConfigurationError(
                "the PostgreSQL DSN is empty", setting="A0_DURABILITY_POSTGRES_DSN"
            )
        self._conninfo = conninfo.strip()
        secrets: set[str] = set()
        url = _URL_PASSWORD.match(self._conninfo)
        if url and url.group("pw"):
            secrets.add(url.group("pw"))
            secrets.add(urllib.parse.unquote(url.group("pw")))
        for match in _KV_PASSWORD.finditer(self._conninfo):
            raw = match.group(2)
            secrets.add(raw)
            if raw.startswith("'") and raw.endswith("'") and len(raw) >= 2:
                secrets.add(re.sub(r"\\(.)", r"\1", raw[1:-1]))
        try:
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:  # the default install: parsed by the regexes above only
            parsed_password = None
        else:
            try:
                parsed_password = conninfo_to_dict(self._conninfo).get("password")
            except Exception:
                # libpq's message may quote the string: never show it
                raise ConfigurationError(
                    "the PostgreSQL DSN could not be parsed (check its syntax)",
                    setting="A0_DURABILITY_POSTGRES_DSN",
                ) from None
        if parsed_password:
            secrets.add(str(parsed_password))
            secrets.add(urllib.parse.quote(str(parsed_password), safe=""))
        # longest first, so a secret containing another is replaced whole
        self._secrets = sorted((s for s in secrets if s), key=len, reverse=True)
        masked = _URL_PASSWORD.sub(
            lambda m: f"{m.group('scheme')}{m.group('user')}:{MASK}@", self._conninfo
        )
        masked = _KV_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}", masked)
        self.masked = self._mask_secrets(masked)

    @property
    def conninfo(self) -> str:
        """The real connection string, password included: for the driver only."""
        return self._conninfo

    @property
    def has_password(self) -> bool:
        return bool(self._secrets)

    def _mask_secrets(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def mask(self, text: str) -> str:
        """``text`` with every form of the password replaced by ***."""
        return self._mask_secrets(str(text))

    def __repr__(self) -> str:
        return f"PostgresDsn({self.masked!r})"

    def __str__(self) -> str:
        return self.masked

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PostgresDsn) and other._conninfo == self._conninfo

    def __hash__(self) -> int:
        return hash(self._conninfo)

    def __reduce__(self) -> tuple[object, ...]:  # never pickled into a log or a queue by accident
        raise TypeError("a PostgresDsn is not serialisable")
