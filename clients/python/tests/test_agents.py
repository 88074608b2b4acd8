"""ctxd.agents.CtxdSession with the OpenAI Agents SDK's own scripted model (agents.testing)."""

import json

import pytest
from agents import Agent, Runner, function_tool
from agents.memory.session import Session, is_openai_responses_compaction_aware_session
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

import ctxd
from ctxd.agents import CtxdSession


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"18C and sunny in {city}"


def scripted() -> ScriptedModel:
    return ScriptedModel(
        [
            [
                ResponseReasoningItem(type="reasoning", id="rs_1", encrypted_content="ENC-RS-1",
                                      summary=[Summary(type="summary_text", text="Look up the weather.")]),
                function_call("get_weather", {"city": "Paris"}, call_id="call_1", item_id="fc_1"),
            ],
            [assistant_message("It is 18C and sunny in Paris.", item_id="msg_1")],
            [assistant_message("You asked about the weather in Paris.", item_id="msg_2")],
        ]
    )


def rendered(page) -> list:
    return json.loads(page.rendered)


async def test_two_turn_run_keeps_every_item(aclient, conv_id):
    session = CtxdSession(conv_id, aclient)
    assert isinstance(session, Session) and is_openai_responses_compaction_aware_session(session)
    model = scripted()
    agent = Agent(name="weather", instructions="Answer briefly.", model=model, tools=[get_weather])
    first = await Runner.run(agent, "Weather in Paris?", session=session)
    assert first.final_output == "It is 18C and sunny in Paris."
    second = await Runner.run(agent, "What did I ask?", session=session)
    assert second.final_output == "You asked about the weather in Paris."
    model.assert_complete()

    turn_one = [
        {"content": "Weather in Paris?", "role": "user"},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC-RS-1",
         "summary": [{"type": "summary_text", "text": "Look up the weather."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C and sunny in Paris"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "It is 18C and sunny in Paris.", "annotations": [], "logprobs": []}]},
    ]
    # The second turn's model input is the first turn (every item, reasoning and ids) + the new prompt.
    assert model.calls[2].input == turn_one + [{"content": "What did I ask?", "role": "user"}]

    page = await aclient.list_messages(conv_id, format="responses")
    assert rendered(page) == turn_one + [{"content": "What did I ask?", "role": "user"}] + [
        {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "You asked about the weather in Paris.", "annotations": [], "logprobs": []}]}]
    roles = [ctxd.Role.Name(m.role) for m in page.messages]
    assert roles == ["ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL", "ROLE_ASSISTANT", "ROLE_USER", "ROLE_ASSISTANT"]
    call_message = page.messages[1]
    assert call_message.reasoning[0].id == "rs_1" and call_message.reasoning[0].data == "ENC-RS-1"
    assert call_message.tool_calls[0].id == "call_1" and call_message.tool_calls[0].item_id == "fc_1"
    assert page.messages[3].content_item_id == "msg_1"
    assert await session.get_items() == rendered(page)
    assert await session.get_items(limit=2) == rendered(page)[-2:]


async def test_pop_item_returns_the_last_item_of_a_message(aclient, conv_id):
    session = CtxdSession(conv_id, aclient)
    assert await session.pop_item() is None
    items = [
        {"role": "user", "content": "Go"},
        {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "E9"},
        {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "get_weather", "arguments": "{}"},
    ]
    await session.add_items(items)
    page = await aclient.list_messages(conv_id)
    assert len(page.messages) == 2  # the model's run of items is one ctxd message
    assert await session.pop_item() == items[2]
    assert await session.get_items() == items[:2]
    assert await session.pop_item() == items[1]
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None
    assert await session.get_items() == []


async def test_compaction_is_summarize(aclient, conv_id):
    session = CtxdSession(conv_id, aclient, keep_recent_tokens=0)
    model = scripted()
    agent = Agent(name="weather", model=model, tools=[get_weather])
    await Runner.run(agent, "Weather in Paris?", session=session)
    await Runner.run(agent, "What did I ask?", session=session)
    before = await session.get_items()
    assert (await aclient.get_conversation(conv_id)).conversation.summary_through_sequence == 0  # under threshold

    await session.run_compaction({"force": True})
    conv = (await aclient.get_conversation(conv_id)).conversation
    assert conv.summary_through_sequence == 4  # the first turn; the last one stays verbatim
    compacted = await session.get_items()
    assert compacted[0]["role"] == "system" and "get_weather" in compacted[0]["content"]
    assert compacted[1:] == before[-2:]
    # The log itself stays whole.
    assert json.loads((await aclient.list_messages(conv_id, format="responses")).rendered) == before
    # pop_item still undoes the newest item.
    assert await session.pop_item() == before[-1]
    assert await session.get_items() == compacted[:-1]


async def test_automatic_compaction_and_own_summarizer(aclient, conv_id):
    seen = []

    def summarizer(prepared):
        seen.append(json.loads(prepared.rendered))
        return "The user asked for the weather in Paris: 18C."

    session = CtxdSession(conv_id, aclient, keep_recent_tokens=0, summarizer=summarizer,
                          should_trigger_compaction=lambda ctx: len(ctx["compaction_candidate_items"]) >= 4)
    model = scripted()
    agent = Agent(name="weather", model=model, tools=[get_weather])
    await Runner.run(agent, "Weather in Paris?", session=session)  # 4 candidates: the Runner compacts
    assert seen and (await aclient.get_conversation(conv_id)).conversation.summary_through_sequence == 4
    await Runner.run(agent, "What did I ask?", session=session)
    # The second turn was sent the summary instead of the first turn.
    assert model.calls[2].input[0]["content"].endswith("The user asked for the weather in Paris: 18C.")
    assert model.calls[2].input[1:] == [{"content": "What did I ask?", "role": "user"}]


async def test_clear_session_and_blocking_client(client, conv_id):
    session = CtxdSession(conv_id, client)
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await session.get_items() == [{"role": "user", "content": "hi"}]
    await session.clear_session()
    await session.clear_session()  # already clear
    assert await session.get_items() == []
    with pytest.raises(ctxd.errors.NotFound):
        client.get_conversation(conv_id)
