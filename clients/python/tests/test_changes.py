"""watch_changes: the WatchChanges stream as an iterator of changes that keeps its cursor,
resumes from it, reconnects by itself (a connection cut by a proxy here; a ctxd restarted on
SIGTERM, from CTXD_BIN) and raises what retrying cannot help (OUT_OF_RANGE)."""

import asyncio
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import grpc
import pytest

import ctxd
from ctxd import errors
from ctxd.v1.conversations_pb2 import ChangeKind

FAST = ctxd.RetryPolicy(max_attempts=1_000, initial_backoff=0.05, max_backoff=0.5)
POKE = "pytest/changes/poke"


@pytest.fixture
def tenant() -> str:
    """A tenant of the test's own: a tenant-wide watch sees this test's changes only."""
    return f"pytest-changes-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tclient(target, tenant):
    with ctxd.Client(target, tenant=tenant, timeout=20.0) as c:
        yield c


def start_cursor(client: ctxd.Client) -> str:
    """A cursor every change the test makes next comes after. A watch from now opens as it is
    iterated, so the test cannot know when; appends to POKE are made until the stream sees one,
    and that change's cursor is the answer."""
    stream = client.watch_changes(conversation_id=POKE, timeout=30)
    stop = threading.Event()

    def poke():
        while not stop.is_set():
            client.append_message(POKE, [{"role": "user", "content": "poke"}])
            stop.wait(0.1)

    poker = threading.Thread(target=poke)
    poker.start()
    try:
        change = next(stream)
        assert stream.cursor == change.cursor != ""
        return stream.cursor
    finally:
        stop.set()
        poker.join()
        stream.close()


def kinds(changes) -> list[tuple[str, str, int, int]]:
    return [(c.conversation_id, ChangeKind.Name(c.kind), c.first_sequence, c.last_sequence) for c in changes]


def take(stream, n: int) -> list:
    out = []
    for change in stream:
        out.append(change)
        if len(out) == n:
            break
    return out


def test_changes_arrive_in_order_with_kinds(tclient, conv_id):
    cursor = start_cursor(tclient)
    fork = conv_id + "/fork"
    tclient.append_message(conv_id, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    tclient.append_message(conv_id, [{"role": "user", "content": "c"}])
    tclient.redact_message(conv_id, 2)
    tclient.rewind_conversation(conv_id, after_sequence=2)
    tclient.update_conversation(conv_id, title="renamed")
    tclient.fork_conversation(conv_id, through_sequence=1, new_conversation_id=fork)
    tclient.delete_conversation(conv_id)

    with tclient.watch_changes(cursor, conversation_id=conv_id, timeout=30) as stream:
        changes = take(stream, 6)
        assert stream.cursor == changes[-1].cursor
    assert [(ChangeKind.Name(c.kind), c.first_sequence, c.last_sequence) for c in changes[:4]] == [
        ("CHANGE_KIND_APPENDED", 1, 2),
        ("CHANGE_KIND_APPENDED", 3, 3),
        ("CHANGE_KIND_REDACTED", 2, 2),
        ("CHANGE_KIND_REWOUND", 3, 3),
    ]
    assert [ChangeKind.Name(c.kind) for c in changes[4:]] == ["CHANGE_KIND_UPDATED", "CHANGE_KIND_DELETED"]
    assert {c.conversation_id for c in changes} == {conv_id}
    assert len({c.cursor for c in changes}) == 6 and all(c.time.seconds > 0 for c in changes)

    # The tenant's changes from the same cursor: the fork's too, after the update and before the
    # delete, and the conversation's own in the same order.
    seen = []
    with tclient.watch_changes(cursor, timeout=30) as stream:
        for change in stream:
            if change.conversation_id != POKE:
                seen.append(change)
            if change.kind == ChangeKind.Value("CHANGE_KIND_DELETED"):
                break
    assert [c.cursor for c in seen if c.conversation_id == conv_id] == [c.cursor for c in changes]
    assert [k for k in kinds(seen) if k[0] == fork] == [(fork, "CHANGE_KIND_FORKED", 1, 1)]
    assert [c.conversation_id for c in seen][-3:] == [conv_id, fork, conv_id]


def test_rewind_first_sequence_and_messages(tclient, conv_id):
    cursor = start_cursor(tclient)
    tclient.append_message(conv_id, [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}])
    tclient.rewind_conversation(conv_id, after_sequence=1)
    with tclient.watch_changes(cursor, conversation_id=conv_id, include_messages=True, timeout=30) as stream:
        appended, rewound = take(stream, 2)
    assert (ChangeKind.Name(rewound.kind), rewound.first_sequence, rewound.last_sequence) == ("CHANGE_KIND_REWOUND", 2, 2)
    # Messages as the log holds them when delivered: the rewound one does not come.
    assert [m.content for m in appended.messages] == ["one"]


def test_resume_from_a_persisted_cursor_gets_only_later_changes(tclient, conv_id):
    cursor = start_cursor(tclient)
    tclient.append_message(conv_id, [{"role": "user", "content": "first"}])
    with tclient.watch_changes(cursor, conversation_id=conv_id, include_messages=True, timeout=30) as stream:
        (first,) = take(stream, 1)
        persisted = stream.cursor
    assert [m.content for m in first.messages] == ["first"] and persisted == first.cursor

    tclient.append_message(conv_id, [{"role": "user", "content": "second"}])
    tclient.append_message(conv_id, [{"role": "user", "content": "third"}])
    with tclient.watch_changes(persisted, conversation_id=conv_id, include_messages=True, timeout=30) as stream:
        later = take(stream, 2)
    assert [m.content for c in later for m in c.messages] == ["second", "third"]
    assert [(c.first_sequence, c.last_sequence) for c in later] == [(2, 2), (3, 3)]
    # Without messages, the change alone.
    with tclient.watch_changes(persisted, conversation_id=conv_id, timeout=30) as stream:
        assert [len(c.messages) for c in take(stream, 2)] == [0, 0]


def test_close_from_another_thread_ends_the_iteration(tclient):
    stream = tclient.watch_changes(conversation_id="pytest/changes/quiet")
    assert stream.cursor == "" and not stream.closed
    closer = threading.Timer(0.5, stream.close)
    closer.start()
    started = time.monotonic()
    assert list(stream) == []  # blocked on the stream until close() cancelled it
    assert stream.closed and 0.4 < time.monotonic() - started < 10
    assert list(stream) == []


def test_expired_cursor_raises_out_of_range_without_retrying(tclient):
    tclient.append_message("pytest/changes/any", [{"role": "user", "content": "x"}])
    expired = "c1.1.0.1000000."  # a change of 1970: older than any retention
    started = time.monotonic()
    with pytest.raises(errors.OutOfRange) as caught:
        next(tclient.watch_changes(expired))
    assert time.monotonic() - started < 5
    assert caught.value.code == grpc.StatusCode.OUT_OF_RANGE and caught.value.reason == "CURSOR_EXPIRED"
    assert caught.value.oldest_cursor and caught.value.oldest_cursor.startswith("c1.")
    # Another cursor the server never gave out is refused too.
    with pytest.raises(errors.InvalidArgument):
        next(tclient.watch_changes("not-a-cursor"))


async def test_async_watch_yields_changes_and_closes(target, tenant, conv_id):
    with ctxd.Client(target, tenant=tenant, timeout=20.0) as sync:
        cursor = start_cursor(sync)
    async with ctxd.AsyncClient(target, tenant=tenant, timeout=20.0) as client:
        await client.append_message(conv_id, [{"role": "user", "content": "hello"}])
        await client.redact_message(conv_id, 1)
        async with client.watch_changes(cursor, conversation_id=conv_id, include_messages=True, timeout=30) as stream:
            got = []
            async for change in stream:
                got.append(change)
                if len(got) == 2:
                    break
            assert stream.cursor == got[-1].cursor
        assert kinds(got) == [(conv_id, "CHANGE_KIND_APPENDED", 1, 1), (conv_id, "CHANGE_KIND_REDACTED", 1, 1)]
        # Redacted since: the message comes as its tombstone.
        assert len(got[0].messages) == 1 and got[0].messages[0].content != "hello"

        # aclose() from another task ends an iteration under way.
        quiet = client.watch_changes(conversation_id="pytest/changes/quiet")

        async def close_soon():
            await asyncio.sleep(0.5)
            await quiet.aclose()

        closing = asyncio.create_task(close_soon())
        assert [c async for c in quiet] == []
        await closing
        assert quiet.closed

        with pytest.raises(errors.OutOfRange):
            async for _ in client.watch_changes("c1.1.0.1000000."):
                pass


# -- reconnecting ---------------------------------------------------------------------------


class Proxy:
    """A TCP proxy to the server that can cut every connection and refuse new ones for a while:
    what a network outage (or a load balancer's restart) does to a stream."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = True
        self.connections = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                downstream.close()
                continue
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self.connections += 1
                self._open += [downstream, upstream]
            for a, b in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Cuts every connection and refuses new ones until `restore()`."""
        self.up = False
        with self._lock:
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self._open.clear()

    def restore(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self.listener.close()


def test_reconnects_after_a_lost_connection_and_resumes_from_its_cursor(target, tenant, conv_id):
    proxy = Proxy(target)
    try:
        with ctxd.Client(target, tenant=tenant, timeout=20.0) as direct, ctxd.Client(
            f"127.0.0.1:{proxy.port}", tenant=tenant
        ) as via_proxy:
            cursor = start_cursor(direct)
            direct.append_message(conv_id, [{"role": "user", "content": "before"}])
            stream = via_proxy.watch_changes(
                cursor, conversation_id=conv_id, include_messages=True, reconnect=FAST, timeout=60
            )
            with stream:
                (before,) = take(stream, 1)
                assert proxy.connections == 1
                proxy.cut()
                # Committed while the watcher cannot reach the server: delivered after it reconnects.
                direct.append_message(conv_id, [{"role": "user", "content": "during 1"}])
                direct.append_message(conv_id, [{"role": "user", "content": "during 2"}])
                threading.Timer(1.0, proxy.restore).start()
                during = take(stream, 2)
                direct.append_message(conv_id, [{"role": "user", "content": "after"}])
                (after,) = take(stream, 1)
                assert stream.cursor == after.cursor
            assert proxy.connections >= 2
            contents = [m.content for c in [before, *during, after] for m in c.messages]
            assert contents == ["before", "during 1", "during 2", "after"]  # none lost, none again
    finally:
        proxy.close()


async def test_async_reconnects_after_a_lost_connection(target, tenant, conv_id):
    proxy = Proxy(target)
    try:
        with ctxd.Client(target, tenant=tenant, timeout=20.0) as direct:
            cursor = start_cursor(direct)
            async with ctxd.AsyncClient(f"127.0.0.1:{proxy.port}", tenant=tenant) as client:
                stream = client.watch_changes(cursor, conversation_id=conv_id, reconnect=FAST, timeout=60)
                async with stream:
                    direct.append_message(conv_id, [{"role": "user", "content": "a"}])
                    first = await stream.__anext__()
                    proxy.cut()
                    direct.append_message(conv_id, [{"role": "user", "content": "b"}])
                    asyncio.get_running_loop().call_later(1.0, proxy.restore)
                    second = await stream.__anext__()
            assert [(first.first_sequence, second.first_sequence)] == [(1, 2)]
            assert proxy.connections >= 2
    finally:
        proxy.close()


def test_without_reconnect_a_lost_connection_raises(target, tenant):
    proxy = Proxy(target)
    try:
        with ctxd.Client(f"127.0.0.1:{proxy.port}", tenant=tenant) as client:
            stream = client.watch_changes(conversation_id="pytest/changes/quiet", reconnect=None, timeout=60)
            threading.Timer(0.5, proxy.cut).start()
            with pytest.raises(errors.Unavailable):
                next(stream)
    finally:
        proxy.close()


# -- a server restarted -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A ctxd of the test's own (CTXD_BIN, in-memory store, heartbeats every second)."""

    def __init__(self, binary: str, port: int) -> None:
        self.binary = binary
        self.port = port
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "CTXD_LISTEN": f"127.0.0.1:{self.port}"}
        env.pop("DATABASE_URL", None)
        self.process = subprocess.Popen(
            [self.binary, "--changes-heartbeat-secs", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert self.process.poll() is None, "ctxd exited"
            time.sleep(0.05)
        raise AssertionError("ctxd did not listen")

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(20)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_survives_a_server_restart(tenant):
    binary = os.environ.get("CTXD_BIN")
    if not binary:
        pytest.skip("CTXD_BIN (a built ctxd) is not set; clients/python/ci.sh sets it in CI")
    server = Server(binary, free_port())
    server.start()
    try:
        target = f"127.0.0.1:{server.port}"
        with ctxd.Client(target, tenant=tenant, timeout=20.0) as client:
            stream = client.watch_changes(reconnect=FAST, timeout=120)
            strict = client.watch_changes(reconnect=None, timeout=120)
            got: list = []
            failures: list = []

            def consume(s, into):
                try:
                    for change in s:
                        into.append(change)
                except Exception as e:  # noqa: BLE001 - the test looks at it
                    failures.append(e)

            threads = [
                threading.Thread(target=consume, args=(stream, got), daemon=True),
                threading.Thread(target=consume, args=(strict, []), daemon=True),
            ]
            for t in threads:
                t.start()
            # A heartbeat came: the stream is open, its cursor the server's horizon (no change yet).
            wait_for(lambda: stream.cursor != "" and strict.cursor != "", 30, "no heartbeat")
            heartbeat = stream.cursor

            assert server.stop() == 0  # SIGTERM: streams end with UNAVAILABLE, the server exits
            threads[1].join(10)
            assert len(failures) == 1 and isinstance(failures[0], errors.Unavailable), failures
            server.start()  # the same port, a new (empty) in-memory store

            client.append_message("after-restart", [{"role": "user", "content": "hello again"}])
            wait_for(lambda: got, 30, "no change after the restart")
            assert kinds(got) == [("after-restart", "CHANGE_KIND_APPENDED", 1, 1)]
            assert stream.cursor == got[0].cursor != heartbeat
            assert threads[0].is_alive() and not stream.closed
            stream.close()
            threads[0].join(10)
            assert not threads[0].is_alive() and len(failures) == 1
    finally:
        server.kill()


class _Done(Exception):
    pass


class _Db:
    """The README's `db`: a saved cursor that has expired, a resync, then changes from now."""

    def __init__(self, client: ctxd.Client) -> None:
        self.cursor: str | None = "c1.1.0.1000000."
        self.resyncs = 0
        self.applied: list = []
        self.poker = _Poker(client)

    def load_cursor(self):
        if self.cursor is None:
            self.poker.start()  # a watch from now sees the pokes that follow its opening
        return self.cursor

    def apply(self, change):
        self.applied.append(change)
        if len(self.applied) == 2:
            raise _Done

    def save_cursor(self, cursor):
        self.cursor = cursor

    def resync(self, client):
        self.resyncs += 1


class _Poker:
    def __init__(self, client: ctxd.Client) -> None:
        self.client = client
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.client.append_message(POKE, [{"role": "user", "content": "poke"}])
            self.stop.wait(0.1)


def test_readme_follow(tclient, readme):
    follow = readme("follow")
    db = _Db(tclient)
    try:
        with pytest.raises(_Done):
            follow(tclient, db)
    finally:
        db.poker.stop.set()
        db.poker.thread.join()
    assert db.resyncs == 1
    first, second = db.applied
    assert db.cursor == first.cursor != second.cursor
    assert [m.content for m in first.messages] == ["poke"]
