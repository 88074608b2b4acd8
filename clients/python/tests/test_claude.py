"""ctxd.claude against a live ctxd: the Claude Agent SDK's own session store conformance suite
(`claude_agent_sdk.testing.run_session_store_conformance`, every optional contract the store
implements), then a transcript read back by the SDK's store helpers. No CLI or network."""

import uuid

import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk import get_session_messages_from_store, list_sessions_from_store  # noqa: E402
from claude_agent_sdk.testing import run_session_store_conformance  # noqa: E402

from ctxd.claude import CtxdSessionStore  # noqa: E402


async def test_the_sdk_conformance_suite_passes(aclient):
    # Each contract gets a store of its own: a prefix of its own on the shared server.
    await run_session_store_conformance(
        lambda: CtxdSessionStore(aclient, prefix=f"claude-test/{uuid.uuid4().hex[:12]}/"),
        skip_optional=frozenset({"list_session_summaries"}),
    )


async def test_a_transcript_reads_back_through_the_sdk_helpers(aclient):
    store = CtxdSessionStore(aclient, prefix=f"claude-test/{uuid.uuid4().hex[:12]}/")
    session_id = str(uuid.uuid4())
    project = "/home/dev/ledger"
    from claude_agent_sdk import project_key_for_directory

    key = {"project_key": project_key_for_directory(project), "session_id": session_id}
    user = {"type": "user", "uuid": str(uuid.uuid4()), "parentUuid": None, "sessionId": session_id,
            "timestamp": "2026-11-28T10:00:00.000Z", "cwd": project,
            "message": {"role": "user", "content": "How many crates are in the ledger?"}}
    assistant = {"type": "assistant", "uuid": str(uuid.uuid4()), "parentUuid": user["uuid"], "sessionId": session_id,
                 "timestamp": "2026-11-28T10:00:01.000Z", "cwd": project,
                 "message": {"role": "assistant", "content": [{"type": "text", "text": "343 crates."}]}}
    await store.append(key, [user])
    await store.append(key, [assistant])
    assert await store.load(key) == [user, assistant]
    sessions = list_sessions_from_store(store, directory=project)
    sessions = await sessions if hasattr(sessions, "__await__") else sessions
    assert [s.session_id for s in sessions] == [session_id]
    messages = get_session_messages_from_store(store, session_id, directory=project)
    messages = await messages if hasattr(messages, "__await__") else messages
    assert [m.type for m in messages] == ["user", "assistant"]
