"""Google ADK sessions and model calls backed by ctxd (`pip install ctxd[adk]`).

    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from ctxd.adk import CtxdSessionService, ctxd_before_model

    service = CtxdSessionService(ctxd.AsyncClient("localhost:50051"))
    agent = LlmAgent(name="helper", model=model, tools=tools,
                     before_model_callback=ctxd_before_model(service, budget_tokens=32_000))
    runner = Runner(app_name="app", agent=agent, session_service=service)

Follows google-adk 2.13 (`google.adk.sessions.BaseSessionService`, `LlmAgent`'s
`before_model_callback`) and google-genai 2.34, the versions the tests pin.

`CtxdSessionService` is a `BaseSessionService`: each ADK session is one ctxd conversation,
`<prefix><app>/<user>/<session>` (percent-encoded where ctxd ids need printable ASCII), labelled
`adk-app` and `adk-user` so that `list_sessions` is ListConversations by labels.

- Events map to the messages a model sees: a user event's text as a user message, an agent
  event's text and function calls as an assistant message (`tool_calls`, arguments as JSON),
  each function response as a tool message answering its call. The first message of each event
  carries the whole event (`Event.model_dump_json`) in metadata `adk.event`, so `get_session`
  returns events equal (`==`) to those appended. An event with nothing a model reads (a state
  change alone) is a UI-only message (`exclude_from_context`).
- State is ADK's: the session's own keys are the state `create_session` was given plus every
  event's `state_delta` (replayed from the log), `temp:` keys are never kept, and `app:` and
  `user:` keys live in conversations of their own (`<prefix><app>/-app`,
  `<prefix><app>/<user>/-user`), one UI-only message per change, shared by every session of that
  app or user.
- `get_session` honours `GetSessionConfig` (`num_recent_events`, `after_timestamp`);
  `delete_session` is DeleteConversation.

`ctxd_before_model(service, ...)` is a `before_model_callback`: the `LlmRequest`'s contents become
BuildContext's Gemini pack of the session (the event just appended included), within
`budget_tokens` with the agent's instruction counted, never a call without its response; the
pack's summary, working memory and truncation notice are added to the system instruction.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session, State
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.genai import types

from . import errors
from ._requests import id_part
from .client import AsyncClient
from .v1 import messages_pb2

__all__ = ["CtxdSessionService", "ctxd_before_model"]

_EVENT = "adk.event"
_EVENT_ID = "adk.event_id"
_STATE = "adk.state"
_APP_LABEL = "adk-app"
_USER_LABEL = "adk-user"


def _is_user(event: Event) -> bool:
    return event.author == "user"


def event_messages(event: Event) -> list[dict[str, Any]]:
    """`event` as ctxd messages (proto3 JSON dicts): its text and calls, then each response."""
    parts = list(event.content.parts or []) if event.content else []
    texts = "".join(p.text for p in parts if p.text and not p.thought)
    calls = [p.function_call for p in parts if p.function_call]
    responses = [p.function_response for p in parts if p.function_response]
    out: list[dict[str, Any]] = []
    if texts or calls:
        message: dict[str, Any] = {"role": "user" if _is_user(event) and not calls else "assistant", "content": texts}
        if calls:
            message["toolCalls"] = [
                {"id": c.id or "", "name": c.name or "", "arguments": json.dumps(c.args or {})} for c in calls
            ]
        if not _is_user(event):
            message["name"] = event.author
        usage = event.usage_metadata
        if usage and not _is_user(event):
            message["usage"] = {
                "inputTokens": usage.prompt_token_count or 0,
                "outputTokens": (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
                "cachedInputTokens": usage.cached_content_token_count or 0,
                "reasoningTokens": usage.thoughts_token_count or 0,
            }
        out.append(message)
    for r in responses:
        out.append({"role": "tool", "toolCallId": r.id or "", "content": json.dumps(r.response or {}, default=str)})
    if not out:
        # Nothing a model reads: a state change, an escalation, an empty turn.
        out.append({"role": "user", "content": "(ADK event)", "excludeFromContext": True})
    out[0].setdefault("metadata", {})[_EVENT] = event.model_dump_json(exclude_none=True)
    for m in out:
        m.setdefault("metadata", {})[_EVENT_ID] = event.id
    return out


def _state_message(delta: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": "(ADK state)",
        "excludeFromContext": True,
        "metadata": {_STATE: json.dumps(delta, default=str)},
    }


class CtxdSessionService(BaseSessionService):
    """ADK sessions kept in ctxd (module docstring)."""

    def __init__(self, client: AsyncClient, *, prefix: str = "adk/") -> None:
        self.client = client
        self.prefix = prefix

    # -- where things are

    def conversation_id(self, app_name: str, user_id: str, session_id: str) -> str:
        return f"{self.prefix}{id_part(app_name)}/{id_part(user_id)}/{id_part(session_id)}"

    def _app_state_id(self, app_name: str) -> str:
        return f"{self.prefix}{id_part(app_name)}/-app"

    def _user_state_id(self, app_name: str, user_id: str) -> str:
        return f"{self.prefix}{id_part(app_name)}/{id_part(user_id)}/-user"

    # -- reading

    async def _messages(self, conversation: str) -> list[messages_pb2.Message] | None:
        try:
            return [m async for m in self.client.iter_messages(conversation)]
        except errors.NotFound:
            return None

    async def _shared_state(self, conversation: str, prefix: str) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for m in await self._messages(conversation) or []:
            if _STATE in m.metadata:
                state.update(json.loads(m.metadata[_STATE]))
        return {prefix + k: v for k, v in state.items()}

    async def _merged_state(self, app_name: str, user_id: str, own: dict[str, Any]) -> dict[str, Any]:
        state = dict(own)
        state.update(await self._shared_state(self._app_state_id(app_name), State.APP_PREFIX))
        state.update(await self._shared_state(self._user_state_id(app_name, user_id), State.USER_PREFIX))
        return state

    @staticmethod
    def _events_and_state(messages: list[messages_pb2.Message]) -> tuple[list[Event], dict[str, Any]]:
        events: list[Event] = []
        own: dict[str, Any] = {}
        for m in messages:
            if _STATE in m.metadata:
                own.update(json.loads(m.metadata[_STATE]))
            if _EVENT in m.metadata:
                event = Event.model_validate_json(m.metadata[_EVENT])
                events.append(event)
                for key, value in (event.actions.state_delta or {}).items():
                    if not key.startswith((State.APP_PREFIX, State.USER_PREFIX, State.TEMP_PREFIX)):
                        own[key] = value
        return events, own

    # -- BaseSessionService

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        conversation = self.conversation_id(app_name, user_id, session_id)
        if await self._messages(conversation) is not None:
            raise errors.AlreadyExists(f"session {session_id!r} of {app_name!r}/{user_id!r} exists already")
        own, app, user = _split(state or {})
        await self.client.append_message(conversation, [_state_message(own)], expected_last_sequence=0)
        await self.client.update_conversation(conversation, labels={_APP_LABEL: app_name[:256], _USER_LABEL: user_id[:256]})
        if app:
            await self.client.append_message(self._app_state_id(app_name), [_state_message(app)])
        if user:
            await self.client.append_message(self._user_state_id(app_name, user_id), [_state_message(user)])
        merged = await self._merged_state(app_name, user_id, own)
        return Session(id=session_id, app_name=app_name, user_id=user_id, state=merged, events=[],
                       last_update_time=time.time())

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        messages = await self._messages(self.conversation_id(app_name, user_id, session_id))
        if messages is None:
            return None
        events, own = self._events_and_state(messages)
        last_update = events[-1].timestamp if events else (messages[0].created_at.ToSeconds() if messages else 0.0)
        if config is not None:
            if config.num_recent_events is not None:
                events = events[-config.num_recent_events:] if config.num_recent_events else []
            if config.after_timestamp is not None:
                events = [e for e in events if e.timestamp >= config.after_timestamp]
        state = await self._merged_state(app_name, user_id, own)
        return Session(id=session_id, app_name=app_name, user_id=user_id, state=state, events=events,
                       last_update_time=last_update)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        labels = {_APP_LABEL: app_name[:256]}
        if user_id is not None:
            labels[_USER_LABEL] = user_id[:256]
        sessions: list[Session] = []
        async for c in self.client.iter_conversations(labels=labels):
            user = c.labels.get(_USER_LABEL, "")
            session_id = urllib.parse.unquote(c.conversation_id.rsplit("/", 1)[-1])
            state = await self._merged_state(app_name, user, {})
            sessions.append(Session(id=session_id, app_name=app_name, user_id=user, state=state, events=[],
                                    last_update_time=c.updated_at.ToSeconds()))
        sessions.sort(key=lambda s: s.last_update_time)
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        try:
            await self.client.delete_conversation(self.conversation_id(app_name, user_id, session_id))
        except errors.NotFound:
            pass

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        delta = dict(event.actions.state_delta or {}) if event.actions else {}
        event = await super().append_event(session, event)
        session.last_update_time = event.timestamp
        conversation = self.conversation_id(session.app_name, session.user_id, session.id)
        await self.client.append_message(conversation, event_messages(event), idempotency_key=f"adk-{event.id}")
        _, app, user = _split({k: v for k, v in delta.items() if not k.startswith(State.TEMP_PREFIX)})
        if app:
            await self.client.append_message(self._app_state_id(session.app_name), [_state_message(app)])
        if user:
            await self.client.append_message(self._user_state_id(session.app_name, session.user_id), [_state_message(user)])
        return event


def _split(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """`state` as (the session's own keys, app keys, user keys), prefixes removed; `temp:` keys go."""
    own, app, user = {}, {}, {}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            app[key[len(State.APP_PREFIX):]] = value
        elif key.startswith(State.USER_PREFIX):
            user[key[len(State.USER_PREFIX):]] = value
        elif not key.startswith(State.TEMP_PREFIX):
            own[key] = value
    return own, app, user


def ctxd_before_model(
    service: CtxdSessionService,
    *,
    budget_tokens: int = 32_000,
    reserve_output_tokens: int = 0,
    recall: Any = None,
    clear_tool_results: Any = None,
    history_policy: Any = None,
    on_pack: Callable[[Any], None] | None = None,
) -> Callable[..., Any]:
    """A `before_model_callback` that hands the model BuildContext's Gemini pack of the session."""

    async def before_model(callback_context: Any, llm_request: Any) -> None:
        session = callback_context.session
        conversation = service.conversation_id(session.app_name, session.user_id, session.id)
        instruction = llm_request.config.system_instruction if llm_request.config else None
        system = instruction if isinstance(instruction, str) else _text(instruction)
        pack = await service.client.build_context(
            conversation,
            max_tokens=budget_tokens,
            reserve_output_tokens=reserve_output_tokens,
            format="gemini",
            system_prompt=system or "",
            recall=recall,
            clear_tool_results=clear_tool_results,
            history_policy=history_policy,
        )
        if on_pack is not None:
            on_pack(pack)
        rendered = json.loads(pack.rendered)
        llm_request.contents = [types.Content.model_validate(c) for c in rendered.get("contents", [])]
        packed_system = rendered.get("systemInstruction") or rendered.get("system_instruction")
        if packed_system is not None:
            llm_request.config.system_instruction = types.Content.model_validate(packed_system)
        return None

    return before_model


def _text(content: Any) -> str:
    if content is None:
        return ""
    parts = getattr(content, "parts", None) or []
    return "".join(getattr(p, "text", "") or "" for p in parts)
