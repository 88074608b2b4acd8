"""CI check of the indexer example against a running ctxd: the index mirrors the log through
appends, redactions, rewinds, forks and deletes, across a SIGKILL of the indexer mid-stream.

    python examples/indexer/check.py HOST:PORT
"""
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import ctxd
from ctxd.v1 import messages_pb2

HERE = os.path.dirname(os.path.abspath(__file__))


def indexer(addr, index, *extra):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "indexer.py"), addr, index, *extra])


def rows(index, conversation):
    db = sqlite3.connect(index)
    try:
        return db.execute(
            "SELECT sequence, role, content FROM messages WHERE conversation_id = ? ORDER BY sequence", (conversation,)
        ).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        db.close()


def log(client, conversation):
    try:
        messages = client.list_messages(conversation, page_size=1000).messages
    except ctxd.errors.NotFound:
        return []
    return [(m.sequence, messages_pb2.Role.Name(m.role), m.content) for m in messages]


def wait_for(what, check, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.1)
    sys.exit(f"indexer check: {what} did not happen within {seconds} s")


def main():
    addr = sys.argv[1]
    client = ctxd.Client(addr)
    run = f"indexer-check/{uuid.uuid4().hex[:8]}"
    a, b, c, fork = f"{run}/a", f"{run}/b", f"{run}/c", f"{run}/fork"
    index = os.path.join(tempfile.mkdtemp(), "index.db")

    first = indexer(addr, index)
    # The indexer follows from the moment its stream opens: appended until it shows one.
    n = 0
    def probe_indexed():
        nonlocal n
        n += 1
        client.append_message(a, [{"role": "user", "content": f"probe {n}: is the indexer listening?"}])
        return len(rows(index, a)) > 0
    wait_for("the first change indexed", probe_indexed)

    client.append_message(a, [{"role": "user", "content": "The deploy failed on the payments service."},
                              {"role": "assistant", "content": "Rolling back payments to build 41."}])
    client.append_message(b, [{"role": "user", "content": "My card is 4111 1111 1111 1111, book the flight."}])
    client.redact_message(b, 1)
    client.append_message(c, [{"role": "user", "content": f"step {i} of the migration"} for i in range(6)])
    client.rewind_conversation(c, after_sequence=3)
    client.fork_conversation(a, through_sequence=2, new_conversation_id=fork)

    # Appends keep coming while the indexer is killed and while it is down.
    stop = threading.Event()
    def keep_appending():
        i = 0
        while not stop.is_set():
            i += 1
            client.append_message(c, [{"role": "user", "content": f"late message {i} about the ledger"}])
            time.sleep(0.01)
    writer = threading.Thread(target=keep_appending)
    writer.start()
    time.sleep(1.0)
    first.send_signal(signal.SIGKILL)
    first.wait()
    time.sleep(0.5)
    stop.set()
    writer.join()
    client.delete_conversation(fork)
    client.append_message(b, [{"role": "user", "content": "Also book a hotel near the venue."}])
    # Larger than one response (2 MiB of messages): the change carries what fits, the rest is read.
    client.append_message(b, [{"role": "assistant", "content": f"itinerary day {day}. " * 50_000} for day in range(3)])

    # Started again, it resumes from the cursor it saved and stops once idle.
    second = indexer(addr, index, "--idle", "3")
    if second.wait(timeout=120) != 0:
        sys.exit("indexer check: the resumed indexer failed")

    for conversation in (a, b, c, fork):
        mirrored, expected = rows(index, conversation), log(client, conversation)
        if mirrored != expected:
            sys.exit(f"indexer check: {conversation} differs\n index: {mirrored}\n log:   {expected}")
    search = lambda q: subprocess.run([sys.executable, os.path.join(HERE, "indexer.py"), "search", index, q],
                                      capture_output=True, text=True, check=True).stdout
    if "4111" in search("4111") or run + "/b" in search("4111"):
        sys.exit("indexer check: the redacted card number is still in the index")
    if a not in search("payments"):
        sys.exit("indexer check: an appended message is not found")
    if fork in search("payments"):
        sys.exit("indexer check: the deleted fork is still in the index")
    total = sum(len(rows(index, conv)) for conv in (a, b, c, fork))
    print(f"indexer check: the index equals the log ({total} messages in 4 conversations) after a SIGKILL and a resume")


if __name__ == "__main__":
    main()
