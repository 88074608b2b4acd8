"""A downstream indexer: mirrors a tenant's conversations into a local full-text index (SQLite
FTS5) by following ctxd's change feed, and keeps it equal to the log: appends are indexed,
redactions replace the text with ctxd's tombstone, rewinds and deletes remove what they removed,
forks copy their prefix. On its first start it takes the feed's current cursor, copies every
conversation as it stands, then follows from that cursor (changes are applied idempotently, so
those the copy already holds do no harm). Killed at any point, it resumes from the cursor it
saved with the last change it applied (in the same SQLite transaction), so nothing is missed and
nothing is applied half.

    pip install ./clients/python
    python examples/indexer/indexer.py HOST:PORT index.db            # follow until stopped
    python examples/indexer/indexer.py HOST:PORT index.db --idle 3   # ... or until 3 s pass with no change
    python examples/indexer/indexer.py search index.db "deploy failed"
"""
import argparse
import itertools
import sqlite3
import sys
import threading

import ctxd
import ctxd.errors
import grpc
from ctxd.v1 import context_service_pb2_grpc, conversations_pb2, messages_pb2

KIND = conversations_pb2.ChangeKind

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL, sequence INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
    PRIMARY KEY (conversation_id, sequence));
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, conversation_id UNINDEXED, sequence UNINDEXED, content='messages', content_rowid='rowid');
CREATE TRIGGER IF NOT EXISTS messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, conversation_id, sequence)
    VALUES (new.rowid, new.content, new.conversation_id, new.sequence); END;
CREATE TRIGGER IF NOT EXISTS messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, conversation_id, sequence)
    VALUES ('delete', old.rowid, old.content, old.conversation_id, old.sequence); END;
CREATE TRIGGER IF NOT EXISTS messages_au AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, conversation_id, sequence)
    VALUES ('delete', old.rowid, old.content, old.conversation_id, old.sequence);
    INSERT INTO messages_fts(rowid, content, conversation_id, sequence)
    VALUES (new.rowid, new.content, new.conversation_id, new.sequence); END;
CREATE TABLE IF NOT EXISTS feed (id INTEGER PRIMARY KEY CHECK (id = 1), cursor TEXT NOT NULL);
"""


def open_index(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(SCHEMA)
    return db


def saved_cursor(db):
    row = db.execute("SELECT cursor FROM feed WHERE id = 1").fetchone()
    return row[0] if row else None


def put(db, conversation_id, messages):
    for m in messages:
        db.execute(
            "INSERT INTO messages (conversation_id, sequence, role, content) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (conversation_id, sequence) DO UPDATE SET role = excluded.role, content = excluded.content",
            (conversation_id, m.sequence, messages_pb2.Role.Name(m.role), m.content),
        )


def read_log(client, conversation_id, first, last):
    """Messages first..last of a conversation as the log holds them now ([] once it is gone)."""
    messages, after = [], first - 1
    while after < last:
        try:
            page = client.list_messages(conversation_id, after_sequence=after, page_size=min(last - after, 1000))
        except ctxd.errors.NotFound:
            return []
        messages += [m for m in page.messages if m.sequence <= last]
        # A page stops short of page_size when its messages are large (next_after_sequence).
        if not page.next_after_sequence:
            break
        after = page.next_after_sequence
    return messages


def apply(db, client, change):
    """Applies one change; idempotent, since the feed delivers at least once."""
    cid = change.conversation_id
    if change.kind == KIND.CHANGE_KIND_APPENDED:
        put(db, cid, change.messages)
        if change.messages_truncated:
            # An append larger than one response: the rest from the log.
            carried = change.messages[-1].sequence if change.messages else change.first_sequence - 1
            put(db, cid, read_log(client, cid, carried + 1, change.last_sequence))
        # Anything past the append's end was appended before a rewind this feed will deliver next.
    elif change.kind == KIND.CHANGE_KIND_REDACTED:
        # The text is gone from ctxd: take the tombstone it keeps in its place.
        put(db, cid, read_log(client, cid, change.first_sequence, change.last_sequence))
    elif change.kind == KIND.CHANGE_KIND_REWOUND:
        db.execute("DELETE FROM messages WHERE conversation_id = ? AND sequence >= ?", (cid, change.first_sequence))
    elif change.kind in (KIND.CHANGE_KIND_DELETED, KIND.CHANGE_KIND_EXPIRED):
        db.execute("DELETE FROM messages WHERE conversation_id = ?", (cid,))
    elif change.kind == KIND.CHANGE_KIND_FORKED:
        db.execute("DELETE FROM messages WHERE conversation_id = ?", (cid,))
        if change.last_sequence:
            put(db, cid, read_log(client, cid, 1, change.last_sequence))


def current_cursor(addr):
    """The feed's cursor now: every WatchChanges stream opens with a heartbeat holding it."""
    with grpc.insecure_channel(addr) as channel:
        call = context_service_pb2_grpc.ContextServiceStub(channel).WatchChanges(
            conversations_pb2.WatchChangesRequest(), timeout=30
        )
        try:
            return next(iter(call)).heartbeat.cursor
        finally:
            call.cancel()


def copy_everything(db, client, cursor):
    """The first start: every conversation as it stands, and the cursor to follow from."""
    db.execute("BEGIN")
    token = ""
    while True:
        page = client.list_conversations(page_size=100, page_token=token)
        for conversation in page.conversations:
            cid = conversation.conversation_id
            after = 0
            for _ in itertools.count():
                messages = client.list_messages(cid, after_sequence=after, page_size=1000)
                put(db, cid, messages.messages)
                if not messages.next_after_sequence:
                    break
                after = messages.next_after_sequence
        token = page.next_page_token
        if not token:
            break
    db.execute("INSERT INTO feed (id, cursor) VALUES (1, ?)", (cursor,))
    db.execute("COMMIT")


def follow(addr, path, idle=None):
    db = open_index(path)
    client = ctxd.Client(addr)
    if saved_cursor(db) is None:
        copy_everything(db, client, current_cursor(addr))
    stream = client.watch_changes(after_cursor=saved_cursor(db), include_messages=True)
    timer = None
    if idle:
        # Closing the stream from another thread ends the iteration.
        timer = threading.Timer(idle, stream.close)
        timer.start()
    applied = 0
    for change in stream:
        if timer:
            timer.cancel()
        db.execute("BEGIN")
        apply(db, client, change)
        db.execute("INSERT INTO feed (id, cursor) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET cursor = excluded.cursor",
                   (change.cursor,))
        db.execute("COMMIT")
        applied += 1
        if idle:
            timer = threading.Timer(idle, stream.close)
            timer.start()
    print(f"indexer: applied {applied} changes, cursor saved", file=sys.stderr)


def search(path, query):
    db = open_index(path)
    rows = db.execute(
        "SELECT conversation_id, sequence, snippet(messages_fts, 0, '[', ']', '...', 12) FROM messages_fts"
        " WHERE messages_fts MATCH ? ORDER BY rank LIMIT 10",
        (query,),
    ).fetchall()
    for conversation_id, sequence, snippet in rows:
        print(f"{conversation_id} #{sequence}: {snippet}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "search":
        search(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addr")
    parser.add_argument("index")
    parser.add_argument("--idle", type=float, default=None, help="stop after this many seconds without a change")
    args = parser.parse_args()
    follow(args.addr, args.index, args.idle)


if __name__ == "__main__":
    main()
