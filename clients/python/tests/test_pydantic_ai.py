"""ctxd.pydantic_ai.CtxdConversationStore with Pydantic AI's own test models."""

import json
from datetime import datetime, timezone

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationStore
from pydantic_ai.messages import ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import UsageLimits

import ctxd
from ctxd.pydantic_ai import CtxdConversationStore


def weather_agent(model) -> Agent:
    agent = Agent(model, instructions="Answer briefly.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"18C in {city}"

    return agent


class Scripted:
    """A FunctionModel function: think and call the tool, then answer; records what it was sent."""

    def __init__(self):
        self.calls = []

    def __call__(self, messages, info: AgentInfo) -> ModelResponse:
        self.calls.append(list(messages))
        if any(p.part_kind == "tool-return" for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart(f"Answer {len(self.calls)}: 18C.")])
        return ModelResponse(parts=[
            ThinkingPart("I need the weather.", id="th_1", signature="SIG-1", provider_name="anthropic"),
            ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="call_1"),
        ])




async def run_turn(store, agent, conv_id, prompt, scope=None):
    conversation = await store.load(conv_id, scope=scope) or Conversation(conversation_id=conv_id)
    result = await agent.run(prompt, conversation=conversation)
    await store.save(result, scope=scope)
    return result


async def test_two_turn_run_with_function_model(aclient, conv_id):
    store = CtxdConversationStore(aclient)
    assert isinstance(store, ConversationStore)
    script = Scripted()
    agent = weather_agent(FunctionModel(script))
    first = await run_turn(store, agent, conv_id, "Weather in Paris?")
    second = await run_turn(store, agent, conv_id, "And now?")
    # The second turn's model input holds the first turn, as saved.
    assert script.calls[2][: len(first.all_messages())] == first.all_messages()

    loaded = await store.load(conv_id)
    assert loaded.messages == second.all_messages()  # lossless
    assert loaded.revision == f"8:{(await store.load_entries(conv_id))[-1].id}"

    page = await aclient.list_messages(conv_id)
    assert [ctxd.Role.Name(m.role) for m in page.messages] == [
        "ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL", "ROLE_ASSISTANT"] * 2
    user, call, result, answer = page.messages[:4]
    assert user.content == "Weather in Paris?" and answer.content == "Answer 2: 18C."
    assert call.tool_calls[0].name == "get_weather" and json.loads(call.tool_calls[0].arguments) == {"city": "Paris"}
    assert call.tool_calls[0].id == "call_1~2" and result.tool_call_id == "call_1~2" and result.content == "18C in Paris"
    assert call.reasoning[0].type == "thinking" and call.reasoning[0].signature == "SIG-1"
    stored = json.loads(call.metadata["pydantic_ai.message"])
    assert stored["parts"][0] == {**stored["parts"][0], "id": "th_1", "signature": "SIG-1", "part_kind": "thinking"}
    assert all("pydantic_ai.entry" in m.metadata for m in page.messages)
    assert "pydantic_ai.record" in page.messages[-1].metadata
    # ctxd packs the pydantic-ai history for any provider, with the reasoning for its own.
    pack = await aclient.build_context(conv_id, max_tokens=8000, format="anthropic", reasoning="all")
    blocks = json.loads(pack.rendered)["messages"][1]["content"]
    assert blocks[0] == {"type": "thinking", "thinking": "I need the weather.", "signature": "SIG-1"}
    assert (await aclient.get_conversation(conv_id)).conversation.usage.output_tokens > 0


async def test_two_turn_run_with_test_model(aclient, conv_id):
    store = CtxdConversationStore(aclient)
    agent = weather_agent(TestModel())
    first = await run_turn(store, agent, conv_id, "Weather?")
    second = await run_turn(store, agent, conv_id, "Again?")  # TestModel reuses its tool call ids
    assert second.all_messages()[: len(first.all_messages())] == first.all_messages()
    assert (await store.load(conv_id)).messages == second.all_messages()
    ids = [c.id for m in (await aclient.list_messages(conv_id)).messages for c in m.tool_calls]
    assert ids and len(set(ids)) == len(ids)


async def test_stale_revision_conflicts(aclient, conv_id):
    store = CtxdConversationStore(aclient)
    agent = weather_agent(TestModel())
    await run_turn(store, agent, conv_id, "One")
    a = await store.load(conv_id)
    b = await store.load(conv_id)
    await store.save(await agent.run("From a", conversation=a))
    with pytest.raises(ConversationConflict):
        await store.save(await agent.run("From b", conversation=b))
    with pytest.raises(ConversationConflict):
        await store.save(Conversation(conversation_id=conv_id, messages=a.messages))  # not loaded: exists


async def test_branch_fork_list_delete(aclient, conv_id):
    store = CtxdConversationStore(aclient)
    agent = weather_agent(FunctionModel(Scripted()))
    await run_turn(store, agent, conv_id, "One", scope="team-1")
    await run_turn(store, agent, conv_id, "Two", scope="team-1")
    loaded = await store.load(conv_id)
    assert len(loaded.messages) == 8
    old_tip = (await store.load_entries(conv_id))[-1].id

    branched = await store.branch(conv_id, at=4, expected_revision=loaded.revision)
    assert len(branched.messages) == 4
    record = await store.read_record(conv_id)
    assert record.branches == [old_tip] and record.scope == "team-1"
    await store.save(await agent.run("Two, again", conversation=branched))
    assert len((await store.load(conv_id)).messages) == 8
    assert (await aclient.get_conversation(conv_id)).conversation.last_sequence == 8

    back = await store.branch(conv_id, from_entry=old_tip, expected_revision=(await store.load(conv_id)).revision)
    assert back.messages == loaded.messages
    assert len((await store.read_record(conv_id)).branches) == 1

    fork = await store.fork(conv_id, at=4, new_conversation_id=conv_id + "/fork")  # ctxd ForkConversation
    assert fork.messages == loaded.messages[:4]
    assert (await aclient.get_conversation(conv_id + "/fork")).conversation.forked_from.conversation_id == conv_id
    inside = await store.fork(conv_id, at=2, new_conversation_id=conv_id + "/fork2")  # inside a tool call: a copy
    assert inside.messages == loaded.messages[:2]
    assert (await store.read_record(conv_id + "/fork2")).forked_from == conv_id
    listed = [r.conversation_id for r in await store.list_conversations(scope="team-1")]
    assert {conv_id, conv_id + "/fork", conv_id + "/fork2"} <= set(listed)

    await store.delete(conv_id)
    await store.delete(conv_id + "/fork")
    await store.delete(conv_id + "/fork2")
    assert await store.load(conv_id) is None
    assert not (await aclient.list_conversations(labels={"pydantic-ai.branch-of": conv_id})).conversations


async def test_round_trip_is_equal_with_provider_timestamps(aclient, conv_id):
    """OpenAI, Google, Mistral and Hugging Face models put the provider's timestamp, a datetime,
    in `provider_details`, a dict of Any that JSON gives back as a string: the store puts it back."""
    def answer(messages, info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[TextPart("18C.", provider_details={"created": datetime(2026, 1, 2, tzinfo=timezone.utc),
                                                      "note": "2026-01-02T00:00:00Z"})],
            provider_name="openai",
            provider_details={"timestamp": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "service_tier": "default"},
        )

    store = CtxdConversationStore(aclient)
    agent = weather_agent(FunctionModel(answer))
    await run_turn(store, agent, conv_id, "Weather?")
    second = await run_turn(store, agent, conv_id, "Again?")
    loaded = await store.load(conv_id)
    assert loaded.messages == second.all_messages()
    response = loaded.messages[-1]
    assert response.provider_details["timestamp"] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert response.parts[0].provider_details["note"] == "2026-01-02T00:00:00Z"  # a string stays a string
    stored = (await aclient.list_messages(conv_id)).messages[-1]
    assert json.loads(stored.metadata["pydantic_ai.datetimes"]) == [
        ["parts", 0, "provider_details", "created"], ["provider_details", "timestamp"]]
    # A save of the loaded conversation (compared by ==, not by the load's marks) stores nothing new.
    assert await store.save(Conversation(conversation_id=conv_id, messages=loaded.messages,
                                         revision=loaded.revision)) == []


class Sensor:
    """A FunctionModel function: reads a sensor (a few hundred tokens) on each prompt, then
    answers; records what each request was sent."""

    def __init__(self):
        self.calls = []

    def __call__(self, messages, info: AgentInfo) -> ModelResponse:
        self.calls.append(list(messages))
        if any(p.part_kind == "tool-return" for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart(f"Turn {len(self.calls) // 2}: normal.")])
        return ModelResponse(parts=[ToolCallPart("read_sensor", {"turn": len(self.calls)}, tool_call_id="call_1")])


async def test_budgeted_load_packs_and_save_appends(aclient, conv_id):
    script = Sensor()
    agent = Agent(FunctionModel(script), instructions="Report the readings.")

    @agent.tool_plain
    def read_sensor(turn: int) -> str:
        """The sensor's readings."""
        return " ".join(f"sensor-{turn}-reading-{k}" for k in range(60))

    store = CtxdConversationStore(aclient, budget_tokens=2000)
    summaries = 0
    for turn in range(1, 31):
        conversation = await store.load(conv_id) or Conversation(conversation_id=conv_id)
        if turn > 1:
            stats = store.last_pack.stats
            assert stats.total_tokens <= stats.budget_tokens == 1500
            summaries += stats.summary_through_sequence > 0
        # A conversation's usage carries over, and UsageLimits count it: 60 requests is over the default 50.
        result = await agent.run(f"Turn {turn}: read the sensor.", conversation=conversation,
                                 usage_limits=UsageLimits(request_limit=None))
        await store.save(result)

    whole = await store.load(conv_id, budget_tokens=None)
    assert len(whole.messages) == 30 * 4 and (await store.read_record(conv_id)).branches == []
    assert [p.content for p in whole.messages[-4].parts if p.part_kind == "user-prompt"] == ["Turn 30: read the sensor."]
    packed = await store.load(conv_id)
    # The pack: the summary as a system prompt, then the newest stored messages, unchanged.
    notes, *recent = packed.messages
    assert notes.parts[0].part_kind == "system-prompt" and notes.parts[0].content.startswith("Summary of the conversation")
    assert 4 <= len(recent) < 40 and recent == whole.messages[-len(recent):]
    assert recent[0].parts[0].part_kind == "user-prompt"
    assert summaries > 10
    # What the model was sent on the last turn began with the summary.
    assert script.calls[-1][0].parts[0].content.startswith("Summary of the conversation")
    assert len(script.calls[-1]) < 40


async def test_readme_chat_turn(aclient, conv_id, readme):
    chat_turn = readme("chat_turn")
    script = Scripted()
    agent = weather_agent(FunctionModel(script))
    assert await chat_turn(aclient, agent, conv_id, "Weather in Paris?") == "Answer 2: 18C."
    assert await chat_turn(aclient, agent, conv_id, "And now?") == "Answer 4: 18C."
    assert [p.content for p in script.calls[2][0].parts if p.part_kind == "user-prompt"] == ["Weather in Paris?"]
    assert len((await CtxdConversationStore(aclient).load(conv_id)).messages) == 8
