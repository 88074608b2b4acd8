"""ctxd.adk against a live ctxd: a 100-turn tool loop through ADK's own Runner and LlmAgent with a
scripted `BaseLlm` (no provider network), sessions and state kept in ctxd, and a restart halfway.
Runs in the ADK tier's venv (requirements-adk.txt; ci.sh); skipped where google-adk is absent."""

import json
import os
import statistics

import pytest

pytest.importorskip("google.adk")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models import BaseLlm, LlmCapabilities, LlmRequest, LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.adk.tools import ToolContext  # noqa: E402
from google.genai import types  # noqa: E402

from ctxd.adk import CtxdSessionService, ctxd_before_model  # noqa: E402

BUDGET = 3_000
TURNS = 100


class ScriptedLlm(BaseLlm):
    """A scripted model: a user's question gets a function call, its response gets the answer.
    Records the contents of every request."""

    model: str = "scripted-test"
    seen: list = []

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False):
        self.seen.append(list(llm_request.contents))
        last = llm_request.contents[-1]
        response = next((p.function_response for p in last.parts or [] if p.function_response), None)
        if response is None:
            turn = int(last.parts[0].text.split()[1].rstrip(":"))
            call = types.FunctionCall(id=f"call_{turn}", name="lookup", args={"turn": turn})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]),
                              usage_metadata=types.GenerateContentResponseUsageMetadata(
                                  prompt_token_count=50, candidates_token_count=5))
        else:
            # ctxd's Gemini packs carry a tool result as {"output": <its text>} (docs/native.md).
            result = response.response
            turn = (json.loads(result["output"]) if "output" in result else result)["turn"]
            yield LlmResponse(content=types.Content(role="model", parts=[
                types.Part.from_text(text=f"Turn {turn}: the ledger says {turn * 7} crates.")]))


def lookup(turn: int, tool_context: ToolContext) -> dict:
    """Looks up the ledger row of a turn."""
    tool_context.state["last_turn"] = turn
    tool_context.state["user:lookups"] = tool_context.state.get("user:lookups", 0) + 1
    return {"turn": turn, "row": " ".join(f"crate-{turn}-{k}" for k in range(40))}


def _runner(aclient, packs):
    service = CtxdSessionService(aclient, prefix="adk-test/")
    model = ScriptedLlm()
    model.seen = []
    agent = LlmAgent(name="ledger", model=model, instruction="You keep the ledger.", tools=[lookup],
                     before_model_callback=ctxd_before_model(service, budget_tokens=BUDGET, on_pack=packs.append))
    return Runner(app_name="ledger-app", agent=agent, session_service=service), service, model


def _check_contents(contents):
    """Every function call is answered in the next content, and no response comes without its call."""
    open_calls = set()
    for content in contents:
        for part in content.parts or []:
            if part.function_response:
                assert part.function_response.id in open_calls, "a response without its call"
                open_calls.discard(part.function_response.id)
        assert not open_calls or content.role == "user", f"calls {open_calls} not answered next"
        open_calls |= {p.function_call.id for p in content.parts or [] if p.function_call}


async def _turns(runner, user, session_id, first, count, produced):
    for n in range(first, first + count):
        message = types.Content(role="user", parts=[types.Part.from_text(text=f"Turn {n}: how many crates?")])
        async for event in runner.run_async(user_id=user, session_id=session_id, new_message=message,
                                            yield_user_message=True):
            if not event.partial:
                produced.append(event)


async def test_a_100_turn_tool_loop_through_the_adk_runner_gets_packs_and_keeps_the_session(aclient, conv_id):
    user, session_id = "u-" + conv_id.rsplit("/", 1)[-1], conv_id.rsplit("/", 1)[-1]
    packs, produced = [], []
    runner, service, model = _runner(aclient, packs)
    created = await service.create_session(app_name="ledger-app", user_id=user, session_id=session_id,
                                           state={"k": 1, "app:tier": "free", "user:lang": "en", "temp:x": 0})
    assert created.state == {"k": 1, "app:tier": "free", "user:lang": "en"}
    half = TURNS // 2
    await _turns(runner, user, session_id, 0, half, produced)
    # The agent process restarts: a new service, runner and model; the session is in ctxd.
    runner, service, model2 = _runner(aclient, packs)
    await _turns(runner, user, session_id, half, TURNS - half, produced)

    inputs = model.seen + model2.seen
    assert len(inputs) == 2 * TURNS
    assert max(p.stats.total_tokens for p in packs) <= BUDGET
    for contents in inputs:
        _check_contents(contents)
    assert any("Turn 49: the ledger says 343 crates." in (p.text or "") for c in model2.seen[0] for p in c.parts or [])

    # The session is what the runner produced: every event, equal; the state as ADK keeps it.
    session = await service.get_session(app_name="ledger-app", user_id=user, session_id=session_id)
    assert len(session.events) == len(produced) == 4 * TURNS
    assert session.events == produced
    assert session.state["last_turn"] == TURNS - 1 and session.state["k"] == 1
    assert session.state["user:lookups"] == TURNS and session.state["app:tier"] == "free"
    assert not any(key.startswith("temp:") for key in session.state)
    recent = await service.get_session(app_name="ledger-app", user_id=user, session_id=session_id,
                                       config=GetSessionConfig(num_recent_events=3))
    assert recent.events == produced[-3:]
    listed = await service.list_sessions(app_name="ledger-app", user_id=user)
    assert [s.id for s in listed.sessions] == [session_id]

    def tokens(content) -> int:  # about 4 bytes a token
        return len(content.model_dump_json(exclude_none=True)) // 4

    whole = [sum(tokens(e.content) for e in produced[: 4 * n + 1] if e.content) for n in range(TURNS)]
    sent = [sum(tokens(c) for c in contents) for contents in inputs]
    print(f"\n{TURNS}-turn ADK tool loop, {len(session.events)} events: model input tokens (approximate) with ctxd "
          f"largest {max(sent)}, mean {statistics.mean(sent):.0f} (budget {BUDGET}); the framework's default "
          f"(every event) largest {max(whole)}, mean {statistics.mean(whole):.0f}")
    assert max(sent) < max(whole) / 3

    await service.delete_session(app_name="ledger-app", user_id=user, session_id=session_id)
    assert await service.get_session(app_name="ledger-app", user_id=user, session_id=session_id) is None




async def test_the_readme_turn_runs_as_shown(aclient, conv_id, readme):
    make, turn = readme("adk_runner"), readme("adk_turn")
    model = ScriptedLlm()
    model.seen = []
    runner = make(aclient, model, [lookup])
    session_id = conv_id.rsplit("/", 1)[-1]
    await runner.session_service.create_session(app_name="ledger-app", user_id="readme", session_id=session_id)
    assert await turn(runner, "readme", session_id, "Turn 3: how many crates?") == "Turn 3: the ledger says 21 crates."
    session = await runner.session_service.get_session(app_name="ledger-app", user_id="readme", session_id=session_id)
    assert len(session.events) == 4
    await runner.session_service.delete_session(app_name="ledger-app", user_id="readme", session_id=session_id)
