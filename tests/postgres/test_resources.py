"""Shared resources: encrypted at rest, restored only into a new private folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import uuid

import pytest
from psycopg import sql

from durability import (
    FencingLost,
    ResourceRefused,
    ResourceTooLarge,
    ResourceUndecryptable,
)
from durability.crypto import ResourceCipher, generate_key
from durability.resources import SharedResources, check_name
from tests.postgres.conftest import sha, wait_for
from tests.support.postgres import PG_BIN

pytestmark = pytest.mark.postgres

HOSTILE = [
    "../escape.txt",
    "a/../../escape.txt",
    "/tmp/absolute-escape.txt",
    "a//b",
    "./x",
    "",
    "nul\x00byte",
    "back\\slash",
    "x/..",
]


@pytest.fixture
def cipher():
    return ResourceCipher(generate_key())


@pytest.fixture
def resources(open_journal, cipher):
    return SharedResources(open_journal(), cipher, max_bytes=1_000_000)


def make_tree(root, files):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def read_tree(root):
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def listing(path):
    return sorted(str(p) for p in path.rglob("*"))


def test_a_work_folder_round_trips_into_a_new_private_folder(resources, tmp_path):
    work = tmp_path / "work"
    make_tree(work, {"a.txt": b"alpha", "sub/b.bin": bytes(range(256)), "sub/deep/c": b""})
    (work / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(work / "run.sh", 0o755)
    snap = resources.snapshot_folder(work, context_id="chat")
    assert snap.stored == 4 and snap.refused == []
    into = tmp_path / "restored"
    assert resources.restore(snap.id, into) == into
    assert read_tree(into) == read_tree(work)
    assert stat.S_IMODE(os.stat(into).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(into / "sub" / "deep").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(into / "a.txt").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(into / "run.sh").st_mode) == 0o700
    assert resources.latest("chat", "workdir").id == snap.id


def test_restore_never_merges_into_an_existing_folder(resources, tmp_path):
    work = tmp_path / "work"
    make_tree(work, {"a.txt": b"new"})
    snap = resources.snapshot_folder(work, context_id="chat")
    existing = tmp_path / "checkout"
    make_tree(existing, {"a.txt": b"someone's file"})
    with pytest.raises(ResourceRefused) as info:
        resources.restore(snap.id, existing)
    assert info.value.reason == "exists"
    assert read_tree(existing) == {"a.txt": b"someone's file"}


def test_only_changed_files_are_stored_again(resources, tmp_path, postgres_server, pg_namespace):
    work = tmp_path / "work"
    make_tree(work, {f"f{i}.txt": f"file {i}".encode() for i in range(5)})
    first = resources.snapshot_folder(work, context_id="chat")
    assert first.stored == 5
    (work / "f2.txt").write_bytes(b"changed")
    (work / "copy.txt").write_bytes(b"file 0")  # same bytes as f0: same address
    second = resources.snapshot_folder(work, context_id="chat", previous=first)
    assert second.stored == 1
    with postgres_server.connect() as conn:
        count = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.resource_files").format(sql.Identifier(pg_namespace))
        ).fetchone()[0]
    assert count == 6
    into = tmp_path / "restored"
    resources.restore(second.id, into)
    assert read_tree(into) == read_tree(work)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused(name):
    with pytest.raises(ResourceRefused):
        check_name(name)


def test_hostile_attachment_names_store_nothing(resources, postgres_server, pg_namespace):
    for name in HOSTILE:
        with pytest.raises(ResourceRefused):
            resources.store_attachments("chat", None, {"fine.txt": b"ok", name: b"x"})
    with postgres_server.connect() as conn:
        counts = conn.execute(
            sql.SQL(
                "SELECT (SELECT count(*) FROM {0}.resource_files),"
                " (SELECT count(*) FROM {0}.resource_snapshots)"
            ).format(sql.Identifier(pg_namespace))
        ).fetchone()
    assert counts == (0, 0)


def test_a_forged_manifest_with_hostile_names_writes_nothing_anywhere(resources, cipher, tmp_path):
    """Someone with the key wrote a manifest naming paths outside the folder: the restore
    refuses it before creating anything."""
    good = resources.store_attachments("chat", None, {"ok.txt": b"fine"})
    address = good.entries[0].address
    parent = tmp_path / "parent"
    parent.mkdir()
    before = listing(tmp_path)
    absolute = tmp_path / "absolute-target.txt"
    for name in [*HOSTILE, str(absolute), "ok.txt/inside"]:
        entries = [
            {"path": "ok.txt", "size": 4, "mode": 0o600, "address": address, "mtime_ns": 0},
            {"path": name, "size": 4, "mode": 0o600, "address": address, "mtime_ns": 0},
        ]
        manifest = cipher.encrypt(json.dumps({"v": 1, "entries": entries}).encode())
        forged = resources.store.write(
            lambda tx, m=manifest: tx.resources.insert_snapshot(
                "chat", None, "attachments", m, 8, 0.0
            )
        )
        with pytest.raises(ResourceRefused):
            resources.restore(forged, parent / "restored")
        assert listing(tmp_path) == before, f"{name!r} wrote something"
    assert not absolute.exists() and not (tmp_path / "escape.txt").exists()


def test_links_and_special_files_are_refused_and_never_read(
    resources, tmp_path, postgres_server, pg_namespace
):
    secret = tmp_path / "outside-secret.txt"
    planted = f"OUTSIDE-{uuid.uuid4().hex}"
    secret.write_text(planted)
    work = tmp_path / "work"
    make_tree(work, {"plain.txt": b"plain"})
    (work / "link-to-secret").symlink_to(secret)
    (work / "linked-dir").symlink_to(tmp_path)
    os.link(secret, work / "hard-link")
    os.mkfifo(work / "pipe")
    snap = resources.snapshot_folder(work, context_id="chat")
    assert [e.path for e in snap.entries] == ["plain.txt"]
    assert {r["path"]: r["reason"] for r in snap.refused} == {
        "hard-link": "hard_link",
        "link-to-secret": "link",
        "linked-dir": "link",
        "pipe": "special_file",
    }
    into = tmp_path / "restored"
    resources.restore(snap.id, into)
    assert read_tree(into) == {"plain.txt": b"plain"}
    assert planted.encode() not in _raw_dump(postgres_server, pg_namespace)


def test_the_size_limit_refuses_the_whole_snapshot(open_journal, cipher, tmp_path):
    small = SharedResources(open_journal(), cipher, max_bytes=10)
    work = tmp_path / "work"
    make_tree(work, {"a": b"12345", "b": b"678901"})
    with pytest.raises(ResourceTooLarge) as info:
        small.snapshot_folder(work, context_id="chat")
    assert (info.value.limit, info.value.size) == (10, 11)
    with pytest.raises(ResourceTooLarge):
        small.store_attachments("chat", None, {"big": b"x" * 11})
    assert small.latest("chat", "workdir") is None


def _raw_dump(server, namespace) -> bytes:
    """Every byte of every table of the namespace, as COPY writes it."""
    out = bytearray()
    with server.connect() as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (namespace,),
        ).fetchall()
        for (table,) in tables:
            query = sql.SQL("COPY (SELECT * FROM {}.{}) TO STDOUT").format(
                sql.Identifier(namespace), sql.Identifier(table)
            )
            with conn.cursor().copy(query) as copy:
                for chunk in copy:
                    out += bytes(chunk)
    return bytes(out)


def test_stored_bytes_are_unreadable_without_the_key(
    resources, tmp_path, postgres_server, pg_namespace
):
    planted = f"PLANTED-PLAINTEXT-{uuid.uuid4().hex}"
    name = f"planted-name-{uuid.uuid4().hex}.txt"
    work = tmp_path / "work"
    make_tree(work, {name: planted.encode() * 3, "other.txt": b"x"})
    snap = resources.snapshot_folder(work, context_id="chat")
    attached = resources.store_attachments("chat", None, {name: planted.encode()})
    dump = _raw_dump(postgres_server, pg_namespace)
    for needle in (planted, name):
        assert needle.encode() not in dump
    if postgres_server.own:  # and pg_dump, the way an operator would copy the database
        done = subprocess.run(
            [str(PG_BIN / "pg_dump"), "--dbname", postgres_server.dsn, "-n", pg_namespace],
            capture_output=True,
            timeout=120,
            check=True,
        )
        assert b"resource_files" in done.stdout
        assert planted.encode() not in done.stdout and name.encode() not in done.stdout
    other = SharedResources(resources.journal, ResourceCipher(generate_key()), max_bytes=10**6)
    for snapshot_id in (snap.id, attached.id):
        with pytest.raises(ResourceUndecryptable) as info:
            other.restore(snapshot_id, tmp_path / f"wrong-key-{snapshot_id}")
        assert info.value.code == "resource_undecryptable"
        assert not (tmp_path / f"wrong-key-{snapshot_id}").exists()


def test_a_rotated_key_still_reads_what_the_old_one_wrote(open_journal, tmp_path):
    old = generate_key()
    journal = open_journal()
    before = SharedResources(journal, ResourceCipher(old), max_bytes=10**6)
    snap = before.store_attachments("chat", None, {"a.txt": b"alpha"})
    after = SharedResources(journal, ResourceCipher(f"{generate_key()},{old}"), max_bytes=10**6)
    after.restore(snap.id, tmp_path / "restored")
    assert (tmp_path / "restored" / "a.txt").read_bytes() == b"alpha"


def test_a_run_snapshot_is_fenced_by_the_workers_claim(open_journal, cipher, tmp_path):
    w1 = open_journal("w1", lease_seconds=0.3)
    w2 = open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    work = tmp_path / "work"
    make_tree(work, {"a.txt": b"alpha"})
    mine = SharedResources(w1, cipher, max_bytes=10**6)
    assert mine.snapshot_folder(work, context_id="chat", run_id=run.id).run_id == run.id
    wait_for(lambda: w2.cluster.claim(run.id), what="the lease to expire")
    with pytest.raises(FencingLost):
        mine.snapshot_folder(work, context_id="chat", run_id=run.id)
    theirs = SharedResources(w2, cipher, max_bytes=10**6)
    latest = theirs.latest("chat", "workdir", run_id=run.id)
    theirs.restore(latest.id, tmp_path / "taken-over")
    assert (tmp_path / "taken-over" / "a.txt").read_bytes() == b"alpha"
