"""The SQL of shared resources (durability/resources.py): encrypted bytes only."""

from __future__ import annotations

from typing import Any


def existing_addresses(conn: Any, addresses: list[str]) -> set[str]:
    if not addresses:
        return set()
    rows = conn.execute(
        "SELECT address FROM resource_files WHERE address = ANY(%s)", (addresses,)
    ).fetchall()
    return {str(r[0]) for r in rows}


def insert_file(conn: Any, address: str, size: int, data: bytes, now: float) -> None:
    conn.execute(
        "INSERT INTO resource_files (address, size, data, created_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT DO NOTHING",
        (address, size, data, now),
    )


def insert_snapshot(
    conn: Any,
    context_id: str,
    run_id: str | None,
    kind: str,
    manifest: bytes,
    total: int,
    now: float,
) -> int:
    row = conn.execute(
        "INSERT INTO resource_snapshots (context_id, run_id, kind, manifest, total_size,"
        " created_at) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
        (context_id, run_id, kind, manifest, total, now),
    ).fetchone()
    return int(row[0])


_SNAPSHOT_COLUMNS = "id, context_id, run_id, kind, manifest, total_size, created_at"


def get_snapshot(conn: Any, snapshot_id: int) -> tuple[Any, ...] | None:
    row = conn.execute(
        f"SELECT {_SNAPSHOT_COLUMNS} FROM resource_snapshots WHERE id = %s", (snapshot_id,)
    ).fetchone()
    return None if row is None else tuple(row)


def latest_snapshot(
    conn: Any, context_id: str, kind: str, run_id: str | None
) -> tuple[Any, ...] | None:
    if run_id is None:
        row = conn.execute(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM resource_snapshots WHERE context_id = %s"
            " AND kind = %s ORDER BY id DESC LIMIT 1",
            (context_id, kind),
        ).fetchone()
    else:
        row = conn.execute(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM resource_snapshots WHERE run_id = %s"
            " AND kind = %s ORDER BY id DESC LIMIT 1",
            (run_id, kind),
        ).fetchone()
    return None if row is None else tuple(row)


def get_files(conn: Any, addresses: list[str]) -> dict[str, bytes]:
    if not addresses:
        return {}
    rows = conn.execute(
        "SELECT address, data FROM resource_files WHERE address = ANY(%s)", (addresses,)
    ).fetchall()
    return {str(a): bytes(d) for a, d in rows}
