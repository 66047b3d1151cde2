"""The rows of several nodes, on every engine: actor rows, the outbox and the node registry."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store._errors import RetryableConflictError
from understudy._store._storage import SqlRepositories
from understudy._store.cluster import actor_key

if TYPE_CHECKING:
    from tests.backend.storage.conftest import Engine
    from understudy._store._ports import Storage


def test_an_actor_row_is_made_on_its_first_lock_and_kept(storage: Storage) -> None:
    with storage.transaction() as tx:
        row = tx.actors.lock("session", "", "s1")
        assert row is not None
        assert (row.key, row.sock_node, row.sock_serial, row.due_at) == (
            "session:s1",
            None,
            0,
            None,
        )
    with storage.transaction() as tx:
        again = tx.actors.lock("session", "", "s1")
    assert again == row


def test_socket_serials_only_grow_and_a_stale_release_changes_nothing(storage: Storage) -> None:
    key = actor_key("device", "acme", "d1")
    with storage.transaction() as tx:
        tx.actors.lock("device", "acme", "d1")
        first = tx.actors.claim_socket(key, "node-a", "be1", None)
        second = tx.actors.claim_socket(key, "node-b", "be1", None)
        assert second == first + 1
        assert not tx.actors.release_socket(key, first)  # superseded: the row stays node-b's
        tx.actors.said_hello(key, second, '{"type":"hello"}')
    with storage.read() as repos:
        row = repos.actors.get(key)
    assert row is not None and (row.sock_node, row.sock_serial, row.said_hello) == (
        "node-b",
        second,
        True,
    )
    with storage.transaction() as tx:
        assert tx.actors.release_socket(key, second)
        assert not tx.actors.release_socket(key, second)  # once
        gone = tx.actors.get(key)
    assert gone is not None and gone.sock_node is None and not gone.said_hello


def test_due_rows_are_taken_once_and_held_while_their_turn_runs(storage: Storage) -> None:
    with storage.transaction() as tx:
        for ident, due in (("s1", 100.0), ("s2", 300.0)):
            tx.actors.lock("session", "", ident)
            tx.actors.set_due(actor_key("session", "", ident), due)
    with storage.read() as repos:
        assert not repos.actors.any_due(99.0)
        assert repos.actors.any_due(200.0)
    with storage.transaction() as tx:
        taken = tx.actors.take_due(200.0, hold_s=5.0)
    assert [(ref.kind, ref.ident) for ref in taken] == [("session", "s1")]
    with storage.transaction() as tx:
        assert tx.actors.take_due(200.0, hold_s=5.0) == []  # held until 205
        assert [ref.ident for ref in tx.actors.take_due(206.0, hold_s=5.0)] == ["s1"]


def test_outbox_rows_come_back_in_order_once_and_only_for_their_node(storage: Storage) -> None:
    key = actor_key("session", "", "s1")
    with storage.transaction() as tx:
        tx.actors.lock("session", "", "s1")
        for frames, node in ((["one"], "node-a"), (["two", "three"], "node-a"), (["x"], "node-b")):
            seq = tx.actors.bump_outbox(key)
            tx.outbox.add(key=key, seq=seq, node=node, serial=1, frames=frames, close=None, now=1)
        seq = tx.actors.bump_outbox(key)
        tx.outbox.add(
            key=key, seq=seq, node="node-a", serial=1, frames=[], close=(4000, "bye"), now=1
        )
    with storage.transaction() as tx:
        assert tx.outbox.keys_for("node-a") == [key]
        taken = tx.outbox.take("node-a", key)
        assert tx.outbox.take("node-a", key) == []
    assert [row.frames for row in taken] == [["one"], ["two", "three"], []]
    assert [row.seq for row in taken] == sorted(row.seq for row in taken)
    assert taken[-1].close == (4000, "bye")
    with storage.transaction() as tx:
        assert [row.frames for row in tx.outbox.take("node-b", key)] == [["x"]]


def test_outbox_rows_and_sockets_of_gone_nodes_are_found_and_dropped(storage: Storage) -> None:
    key = actor_key("session", "", "s1")
    with storage.transaction() as tx:
        tx.nodes.register("alive")
        tx.nodes.register("stopped")
        tx.nodes.stopped("stopped")
        tx.actors.lock("session", "", "s1")
        serial = tx.actors.claim_socket(key, "stopped", "be1", 1)
        for node in ("alive", "stopped", "never-registered"):
            seq = tx.actors.bump_outbox(key)
            tx.outbox.add(key=key, seq=seq, node=node, serial=1, frames=["f"], close=None, now=1)
    with storage.transaction() as tx:
        assert tx.nodes.alive(5.0) == ["alive"]
        lost = tx.actors.sockets_of_dead_nodes(5.0, asking="alive")
        assert [(ref.key, got) for ref, got in lost] == [(key, serial)]
        # The node that asks never counts its own sockets, however late its heartbeat is.
        assert tx.actors.sockets_of_dead_nodes(5.0, asking="stopped") == []
        assert tx.outbox.drop_for_dead_nodes(5.0) == 2
        assert tx.outbox.keys_for("alive") == [key]


def test_a_takeover_releases_a_socket_only_while_its_node_is_still_gone(storage: Storage) -> None:
    key = actor_key("device", "acme", "d1")
    with storage.transaction() as tx:
        tx.nodes.register("back")
        tx.actors.lock("device", "acme", "d1")
        serial = tx.actors.claim_socket(key, "back", "be1", None)
    with storage.transaction() as tx:
        # Taken for gone by an earlier read; it heartbeated since: its socket stays.
        assert not tx.actors.release_socket(key, serial, dead_after_s=5.0)
        tx.nodes.stopped("back")
    with storage.transaction() as tx:
        assert tx.actors.release_socket(key, serial, dead_after_s=5.0)
        row = tx.actors.get(key)
    assert row is not None and row.sock_node is None


def test_a_heartbeat_says_how_old_the_previous_one_was_and_none_once_stopped(
    storage: Storage,
) -> None:
    with storage.transaction() as tx:
        tx.nodes.register("node-a")
    with storage.transaction() as tx:
        age = tx.nodes.heartbeat("node-a")
        assert age is not None and 0 <= age < 5
        assert tx.nodes.heartbeat("never-registered") is None
        tx.nodes.stopped("node-a")
    with storage.transaction() as tx:
        assert tx.nodes.heartbeat("node-a") is None  # taken for gone: it registers again
        assert tx.nodes.alive(5.0) == []


def test_a_row_another_transaction_holds_is_not_waited_for(engine: Engine) -> None:
    if engine.name != "postgresql":
        pytest.skip("SQLite has one writer: a transaction holds every row it reads")
    first, second = engine.open(), engine.open()
    first.migrate(1.0)
    with first.transaction() as tx:
        tx.actors.lock("tenant", "acme", "")
    with first.transaction() as tx:
        assert tx.actors.lock("tenant", "acme", "") is not None
        with pytest.raises(RetryableConflictError), second.transaction() as other:
            assert isinstance(other, SqlRepositories)
            other.actors.lock("tenant", "acme", "")
