"""Claude Agent SDK session storage in ctxd (`pip install ctxd[claude]`).

    from claude_agent_sdk import ClaudeAgentOptions, query
    from ctxd.claude import CtxdSessionStore

    options = ClaudeAgentOptions(session_store=CtxdSessionStore(ctxd.AsyncClient("localhost:50051")))

Follows claude-agent-sdk 0.2.189 (`claude_agent_sdk.SessionStore`), the version the tests pin.
The SDK mirrors the Claude Code CLI's transcript (JSONL entries) into the store as it runs and
reads it back to resume a session elsewhere (`resume=`, `continue_conversation=`); the CLI keeps
building its own context, so this is durable, shared storage of the transcript, not a pack.

`CtxdSessionStore` implements `append` and `load` and the optional `list_sessions`, `delete` and
`list_subkeys` (the SDK derives summaries by loading when a store has no
`list_session_summaries`). Each session (and each subagent's transcript, a `subpath`) is one ctxd
conversation, `<prefix><project>/<session>[/~<subpath>]`, labelled so that the listings are
ListConversations by labels; each entry is one UI-only message (`exclude_from_context`) holding
the entry as JSON in metadata `claude.entry`, so `load` returns the entries as appended, in order.
Deleting a session deletes its subagents' transcripts too. Checked by the SDK's own
`run_session_store_conformance`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import errors
from ._requests import id_part
from .client import AsyncClient

__all__ = ["CtxdSessionStore"]

_ENTRY = "claude.entry"
_PROJECT = "claude-project"
_SESSION = "claude-session"
_KIND = "claude-kind"
_SUBPATH = "claude-subpath"


def _project_label(project_key: str) -> str:
    """A project key as a label value: a hash (keys are paths, longer than a label may be)."""
    return hashlib.sha256(project_key.encode()).hexdigest()[:40]


class CtxdSessionStore:
    """A `claude_agent_sdk.SessionStore` kept in ctxd (module docstring)."""

    def __init__(self, client: AsyncClient, *, prefix: str = "claude/") -> None:
        self.client = client
        self.prefix = prefix

    def conversation_id(self, key: dict[str, Any]) -> str:
        base = f"{self.prefix}{id_part(key['project_key'])}/{id_part(key['session_id'])}"
        subpath = key.get("subpath")
        return f"{base}/~{id_part(subpath)}" if subpath else base

    def _labels(self, key: dict[str, Any]) -> dict[str, str]:
        labels = {
            _PROJECT: _project_label(key["project_key"]),
            _SESSION: key["session_id"][:256],
            _KIND: "sub" if key.get("subpath") else "main",
            "claude-prefix": _project_label(self.prefix),
        }
        if key.get("subpath"):
            labels[_SUBPATH] = key["subpath"][:256]
        return labels

    async def append(self, key: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        conversation = self.conversation_id(key)
        messages = [
            {
                "role": "user",
                "content": str(entry.get("type") or "entry"),
                "excludeFromContext": True,
                "metadata": {_ENTRY: json.dumps(entry, ensure_ascii=False)},
            }
            for entry in entries
        ]
        first = None
        for start in range(0, len(messages), 100):
            appended = await self.client.append_message(conversation, messages[start:start + 100])
            first = appended.first_sequence if first is None else first
        if first == 1:
            await self.client.update_conversation(conversation, labels=self._labels(key))

    async def load(self, key: dict[str, Any]) -> list[dict[str, Any]] | None:
        try:
            return [
                json.loads(m.metadata[_ENTRY])
                async for m in self.client.iter_messages(self.conversation_id(key))
                if _ENTRY in m.metadata
            ]
        except errors.NotFound:
            return None

    async def _conversations(self, labels: dict[str, str]) -> list[Any]:
        labels = {**labels, "claude-prefix": _project_label(self.prefix)}
        return [c async for c in self.client.iter_conversations(labels=labels)]

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        listed = await self._conversations({_PROJECT: _project_label(project_key), _KIND: "main"})
        return [
            {"session_id": c.labels[_SESSION], "mtime": c.updated_at.ToMilliseconds()}
            for c in listed
        ]

    async def list_subkeys(self, key: dict[str, Any]) -> list[str]:
        listed = await self._conversations(
            {_PROJECT: _project_label(key["project_key"]), _SESSION: key["session_id"][:256], _KIND: "sub"}
        )
        return sorted(c.labels[_SUBPATH] for c in listed)

    async def delete(self, key: dict[str, Any]) -> None:
        targets = [self.conversation_id(key)]
        if not key.get("subpath"):
            targets += [self.conversation_id({**key, "subpath": sub}) for sub in await self.list_subkeys(key)]
        for conversation in targets:
            try:
                await self.client.delete_conversation(conversation)
            except errors.NotFound:
                pass
