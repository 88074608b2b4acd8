"""ctxd.agents.CtxdSession with the OpenAI Agents SDK's own scripted model (agents.testing)."""

import json

import pytest
from agents import Agent, RunConfig, RunContextWrapper, Runner, function_tool
from agents.memory.session import Session, is_openai_responses_compaction_aware_session
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

import ctxd
from ctxd.agents import CompactionResult, CtxdSession


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
        # The answer came from a model call without reasoning: a pack sends it without its id
        # (the API refuses an output item's id without its response's reasoning item).
        {"type": "message", "role": "assistant", "content": "It is 18C and sunny in Paris."},
    ]
    # The second turn's model input is the pack built before it: the first turn, still the
    # current one then (every item, the reasoning and the ids that pair with it), + the new prompt.
    assert model.calls[2].input == turn_one + [{"content": "What did I ask?", "role": "user"}]

    # The log keeps every item...
    page = await aclient.list_messages(conv_id, format="responses")
    answer_two = {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                  "content": [{"type": "output_text", "text": "You asked about the weather in Paris.",
                               "annotations": [], "logprobs": []}]}
    answer_one = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                  "content": [{"type": "output_text", "text": "It is 18C and sunny in Paris.",
                               "annotations": [], "logprobs": []}]}
    logged = turn_one[:-1] + [answer_one]
    assert rendered(page) == logged + [{"content": "What did I ask?", "role": "user"}, answer_two]
    roles = [ctxd.Role.Name(m.role) for m in page.messages]
    assert roles == ["ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL", "ROLE_ASSISTANT", "ROLE_USER", "ROLE_ASSISTANT"]
    call_message = page.messages[1]
    assert call_message.reasoning[0].id == "rs_1" and call_message.reasoning[0].data == "ENC-RS-1"
    assert call_message.tool_calls[0].id == "call_1" and call_message.tool_calls[0].item_id == "fc_1"
    assert page.messages[3].content_item_id == "msg_1"
    # ...and the session hands the model a pack of it: the completed first turn without its
    # reasoning (and the item ids that pair with it), the current turn.
    pack = [
        {"content": "Weather in Paris?", "role": "user"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C and sunny in Paris"},
        {"type": "message", "role": "assistant", "content": "It is 18C and sunny in Paris."},
        {"content": "What did I ask?", "role": "user"},
        # An answer without reasoning goes without its id (see above).
        {"type": "message", "role": "assistant", "content": "You asked about the weather in Paris."},
    ]
    assert await session.get_items() == pack
    assert session.last_pack.stats.reasoning_tokens_omitted > 0
    assert await session.get_items(limit=2) == pack[-2:]
    # whole_log=True: the log as it is.
    whole = CtxdSession(conv_id, aclient, whole_log=True)
    assert await whole.get_items() == rendered(page)
    assert await whole.get_items(limit=2) == rendered(page)[-2:]


async def test_pack_options_reach_build_context(aclient, conv_id):
    for t in range(1, 13):
        reading = " ".join(f"sensor-{t}-reading-{k}" for k in range(60))
        await aclient.append_native(conv_id, [
            {"role": "user", "content": f"Turn {t}: read sensor {t}."},
            {"type": "function_call", "call_id": f"c{t}", "name": "read_sensor", "arguments": f'{{"turn":{t}}}'},
            {"type": "function_call_output", "call_id": f"c{t}",
             "output": reading + (" The boiler pressure is 3 bar." if t == 2 else "")},
            {"type": "message", "role": "assistant", "content": f"Turn {t}: normal."}], "responses")
    await aclient.append_native(conv_id, [{"role": "user", "content": "What was the boiler pressure?"}], "responses")
    session = CtxdSession(conv_id, aclient, budget_tokens=2500, reserve_tokens=500, tokenizer="o200k_base",
                          working_memory=False, recall={"max_items": 2}, clear_tool_results={"keep_recent": 1},
                          history_policy="newest")
    items = await session.get_items()
    stats = session.last_pack.stats
    assert stats.budget_tokens == 2000 and stats.total_tokens <= 2000
    assert stats.tool_results_cleared > 0 and stats.messages_recalled == 1
    outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
    assert outputs[0].startswith("[tool result cleared") and outputs[-1].startswith("sensor-12-reading-0")
    assert items[-1]["role"] == "user" and "boiler pressure is 3 bar" in items[-1]["content"]  # recalled
    assert_pairs(items)


async def test_pop_item_returns_the_last_item_of_a_message(aclient, conv_id):
    session = CtxdSession(conv_id, aclient, whole_log=True)
    assert await session.pop_item() is None
    items = [
        {"role": "user", "content": "Go"},
        {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "E9"},
        {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "get_weather", "arguments": "{}"},
    ]
    await session.add_items(items)
    page = await aclient.list_messages(conv_id)
    assert len(page.messages) == 2  # the model's run of items is one ctxd message
    # A pack leaves the call out until its output is stored.
    assert await CtxdSession(conv_id, aclient).get_items() == items[:1]
    assert await session.pop_item() == items[2]
    assert await session.get_items() == items[:2]
    assert await session.pop_item() == items[1]
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None
    assert await session.get_items() == []


# -- a long tool loop: packing, pairs, usage ------------------------------------------------------


@function_tool
def read_sensor(turn: int) -> str:
    """The readings of a sensor for a turn (a few hundred tokens)."""
    return " ".join(f"sensor-{turn}-reading-{k}" for k in range(60))



def comparable(items: list) -> list:
    """Responses items with what a pack may drop left out: the ids of calls and answers, the
    output form of an answer (its text is what counts)."""
    out = []
    for item in items:
        item = dict(item)
        if item.get("type") == "function_call":
            item.pop("id", None)
        if item.get("type") == "message" and item.get("role") == "assistant":
            content = item.get("content")
            text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
            item = {"role": "assistant", "text": text}
        out.append(item)
    return out

class ToolLoop:
    """A ScriptedModel responder: calls `read_sensor` on a user turn, answers once its output is
    in. Each call reports a distinct usage, and what it was sent is checked against ctxd."""

    def __init__(self, client, probe_id: str, budget: int):
        self.client, self.probe_id, self.budget = client, probe_id, budget
        self.turn = 0
        self.calls = 0
        self.reported = [0, 0, 0, 0]  # input, output, cached input, reasoning
        self.largest = 0
        self.first_input: list = []

    async def input_tokens(self, items: list) -> int:
        """The input's tokens as ctxd counts a Responses pack of exactly these items."""
        try:
            await self.client.delete_conversation(self.probe_id)
        except ctxd.errors.NotFound:
            pass
        await self.client.append_native(self.probe_id, items, "responses")
        pack = await self.client.build_context(self.probe_id, max_tokens=10_000_000, format="responses",
                                               history_policy="newest", reasoning="all", omit_messages=True)
        # Counted as sent (a pack drops the ids that no reasoning item pairs with).
        assert comparable(json.loads(pack.rendered)) == comparable(items)
        return pack.stats.total_tokens

    async def __call__(self, call: ModelCall) -> ModelStep:
        items = call.input
        assert_pairs(items)
        self.calls += 1
        n = self.calls
        answering = items[-1].get("type") == "function_call_output"
        if answering:
            # The turn's second call: its input is the first call's plus the call and its output,
            # so counting this one bounds both.
            assert items[: len(self.first_input)] == self.first_input
            tokens = await self.input_tokens(items)
            assert tokens <= self.budget, (self.turn, tokens)
            self.largest = max(self.largest, tokens)
        else:
            self.first_input = items
        usage = Usage(requests=1, input_tokens=1000 + n, output_tokens=20 + n % 7,
                      input_tokens_details=InputTokensDetails(cached_tokens=n % 50, cache_write_tokens=0),
                      output_tokens_details=OutputTokensDetails(reasoning_tokens=n % 3))
        for i, value in enumerate((usage.input_tokens, usage.output_tokens, n % 50, n % 3)):
            self.reported[i] += value
        if answering:
            return ModelStep(output=[assistant_message(f"Turn {self.turn}: all readings normal.", item_id=f"msg_{n}")],
                             usage=usage)
        call_id = f"call_{self.turn}"
        return ModelStep(output=[function_call("read_sensor", {"turn": self.turn}, call_id=call_id, item_id=f"fc_{n}")],
                         usage=usage)


def assert_pairs(items: list) -> None:
    """Every function_call is answered by its function_call_output after it, and every output
    answers a call before it."""
    open_calls: set[str] = set()
    for item in items:
        if item.get("type") == "function_call":
            open_calls.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            assert item["call_id"] in open_calls, item
            open_calls.remove(item["call_id"])
    assert not open_calls, open_calls


async def test_300_turn_tool_loop_stays_within_budget_and_stores_usage(aclient, conv_id):
    budget = 4000
    session = CtxdSession(conv_id, aclient, budget_tokens=budget, reserve_tokens=1000)
    loop = ToolLoop(aclient, conv_id + "/probe", budget)
    model = ScriptedModel()
    agent = Agent(name="monitor", instructions="Report the sensor readings.", model=model, tools=[read_sensor])
    summaries = watermark = 0
    runner_usage = Usage()
    for turn in range(1, 301):
        loop.turn = turn
        model.extend([ModelStep.respond(loop), ModelStep.respond(loop)])
        result = await Runner.run(agent, f"Turn {turn}: check the sensor.", session=session)
        assert result.final_output == f"Turn {turn}: all readings normal."
        runner_usage.add(result.context_wrapper.usage)
        through = session.last_pack.stats.summary_through_sequence  # the compaction check's pack
        summaries, watermark = summaries + (through > watermark), through
    model.assert_complete()
    assert loop.calls == 600

    conv = (await aclient.get_conversation(conv_id)).conversation
    assert conv.last_sequence == 300 * 4  # user, call, output, answer: the log keeps everything
    # Packing mattered: the log is far over the budget, the runner compacted on tokens, and the
    # last packs opened with the summary.
    assert loop.largest > budget // 2
    assert summaries >= 10 and conv.summary_through_sequence > 1000
    last_input = model.calls[-1].input
    assert last_input[0]["role"] == "system" and last_input[0]["content"].startswith("Summary of the conversation")
    # The usage the scripted model reported (and the Runner totalled) is the conversation's, to the token.
    usage = conv.usage
    assert [usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usage.reasoning_tokens] == loop.reported
    assert [runner_usage.input_tokens, runner_usage.output_tokens, runner_usage.input_tokens_details.cached_tokens,
            runner_usage.output_tokens_details.reasoning_tokens] == loop.reported
    # ...stored on the model's messages, which kept their items JSON-equal.
    page = await aclient.list_messages(conv_id, page_size=4, format="responses")
    assert [m.usage.input_tokens > 0 for m in page.messages] == [False, True, False, True]
    assert rendered(page)[1] == {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_sensor",
                                 "arguments": '{"turn":1}'}


async def test_usage_goes_on_the_model_message_and_a_failed_batch_is_rewound(aclient, conv_id):
    session = CtxdSession(conv_id, aclient)
    wrapper = RunContextWrapper(context=None)  # what the Runner hands a session
    await session.get_items(wrapper=wrapper)  # a run starts: none of its usage is stored
    wrapper.usage.add(Usage(requests=1, input_tokens=120, output_tokens=8))
    user = {"role": "user", "content": "Go"}
    call = {"type": "function_call", "call_id": "c1", "name": "book", "arguments": "{}"}
    with pytest.raises(ctxd.errors.InvalidArgument):  # the output answers no call: the last part fails
        await session.add_items([user, call, {"type": "function_call_output", "call_id": "c2", "output": "x"}],
                                wrapper=wrapper)
    assert (await aclient.get_conversation(conv_id)).conversation.last_sequence == 0  # the first parts rewound
    output = {"type": "function_call_output", "call_id": "c1", "output": "Booked."}
    await session.add_items([user, call, output], wrapper=wrapper)
    answer = {"type": "message", "role": "assistant", "content": "Done."}
    await session.add_items([answer], wrapper=wrapper)  # no new usage: nothing more counted
    page = await aclient.list_messages(conv_id, format="responses")
    assert rendered(page) == [user, call, output, answer]
    assert [m.usage.input_tokens for m in page.messages] == [0, 120, 0, 0]
    usage = (await aclient.get_conversation(conv_id)).conversation.usage
    assert (usage.input_tokens, usage.output_tokens) == (120, 8)


async def test_model_input_filter_repacks_every_call_of_a_run(aclient, conv_id):
    budget = 3000
    session = CtxdSession(conv_id, aclient, budget_tokens=budget)
    loop = ToolLoop(aclient, conv_id + "/probe", budget)
    oldest: list[list[str]] = []  # per run, the oldest user turn each call was sent

    async def four_tools(call: ModelCall) -> ModelStep:
        # Each run calls the tool 4 times (about 1,600 tokens of outputs), then answers.
        assert_pairs(call.input)
        assert await loop.input_tokens(call.input) <= budget
        oldest[-1].append(next(i["content"] for i in call.input if i.get("role") == "user"))
        done = sum(i.get("type") == "function_call_output" for i in call.input[call.input.index(run_input):])
        if done < 4:
            return ModelStep(output=[function_call("read_sensor", {"turn": done}, call_id=f"call_{len(oldest)}_{done}")])
        return ModelStep(output=[assistant_message(f"Run {len(oldest)}: all normal.")])

    model = ScriptedModel()
    agent = Agent(name="monitor", model=model, tools=[read_sensor])
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    for run in range(1, 7):
        run_input = {"content": f"Run {run}: read the sensor 4 times.", "role": "user"}
        oldest.append([])
        model.extend([ModelStep.respond(four_tools) for _ in range(5)])
        result = await Runner.run(agent, run_input["content"], session=session, run_config=config)
        assert result.final_output == f"Run {run}: all normal."
    model.assert_complete()
    # As a run's outputs came in, earlier turns made room for them within the run.
    assert any(calls[0] != calls[-1] for calls in oldest)
    assert (await aclient.get_conversation(conv_id)).conversation.last_sequence == 6 * (1 + 4 * 2 + 1)


# -- compaction -----------------------------------------------------------------------------------


async def test_compaction_is_summarize(aclient, conv_id):
    session = CtxdSession(conv_id, aclient, keep_recent_tokens=0)
    model = scripted()
    agent = Agent(name="weather", model=model, tools=[get_weather])
    await Runner.run(agent, "Weather in Paris?", session=session)
    await Runner.run(agent, "What did I ask?", session=session)
    before = await session.get_items()
    log = rendered(await aclient.list_messages(conv_id, format="responses"))
    # The Runner asked after each turn; the pack held everything, so nothing was summarized.
    assert (await aclient.get_conversation(conv_id)).conversation.summary_through_sequence == 0
    not_needed = await session.run_compaction({"response_id": "resp-789"})
    assert not not_needed and not_needed.reason.startswith("not needed")

    done = await session.run_compaction({"force": True})
    assert isinstance(done, CompactionResult) and done.compacted and done.summary.through_sequence == 4
    conv = (await aclient.get_conversation(conv_id)).conversation
    assert conv.summary_through_sequence == 4  # the first turn; the last one stays verbatim
    compacted = await session.get_items()
    assert compacted[0]["role"] == "system" and "get_weather" in compacted[0]["content"]
    assert compacted[1:] == before[-2:]
    # The log itself stays whole.
    assert rendered(await aclient.list_messages(conv_id, format="responses")) == log
    # pop_item still undoes the newest item.
    assert await session.pop_item() == log[-1]
    assert await session.get_items() == compacted[:-1]


async def test_forced_compaction_on_a_short_session_summarizes_or_says_why_not(aclient, conv_id):
    session = CtxdSession(conv_id, aclient)  # keep_recent_tokens 12,000: far more than the session holds
    empty = await session.run_compaction({"force": True})
    assert not empty and empty.reason == "the session is empty: nothing to summarize"

    # Summarizes what it can: everything before the open call (a summary never splits a group).
    await session.add_items([{"role": "user", "content": "Book a table for two."},
                             {"type": "function_call", "call_id": "c1", "name": "book", "arguments": "{}"}])
    first = await session.run_compaction({"force": True})
    assert first and first.summary.through_sequence == 1 and "Book a table" in first.summary.text
    # ...and then says why not.
    waiting = await session.run_compaction({"force": True})
    assert not waiting and waiting.summary is None
    assert waiting.reason == ("messages 2 to 2 cannot be summarized yet: the book call c1 (message 2) has no "
                              "output, and a summary never splits a call from its output")

    await session.add_items([{"type": "function_call_output", "call_id": "c1", "output": "Booked for 8pm."}])
    second = await session.run_compaction({"force": True})
    assert second and second.summary.through_sequence == 3 and "Booked for 8pm" in second.summary.text
    covered = await session.run_compaction({"force": True})
    assert not covered and covered.reason == "nothing to fold in: the summary already covers every message (1 to 3)"
    assert (await aclient.get_conversation(conv_id)).conversation.summary_through_sequence == 3


async def test_automatic_compaction_on_tokens_and_own_summarizer(aclient, conv_id):
    seen = []

    def summarizer(prepared):
        seen.append(json.loads(prepared.rendered))
        return f"The user asked for the weather {len(seen)} times: 18C."

    # A token threshold instead of needs_summary: compact once the pack fills a third of the budget.
    session = CtxdSession(conv_id, aclient, budget_tokens=400, reserve_tokens=100, keep_recent_tokens=0,
                          summarizer=summarizer,
                          should_compact=lambda pack: pack.stats.total_tokens > pack.stats.budget_tokens / 3)
    model = ScriptedModel()
    agent = Agent(name="weather", model=model, tools=[get_weather])
    model.extend(scripted()._steps[:2])
    await Runner.run(agent, "Weather in Paris?", session=session)  # about 70 tokens: not yet
    assert not seen and (await aclient.get_conversation(conv_id)).conversation.summary_through_sequence == 0
    model.extend([[assistant_message("You asked about the weather in Paris " + "again " * 40, item_id="msg_2")]])
    await Runner.run(agent, "What did I ask?", session=session)  # over a third: the Runner compacts
    assert len(seen) == 1 and (await aclient.get_conversation(conv_id)).conversation.summary_through_sequence == 4
    model.extend([[assistant_message("Paris.", item_id="msg_3")]])
    await Runner.run(agent, "Which city?", session=session)
    # The third turn was sent the summary instead of the first turn.
    assert model.calls[-1].input[0]["content"].endswith("The user asked for the weather 1 times: 18C.")
    assert model.calls[-1].input[-1] == {"content": "Which city?", "role": "user"}
    assert all(item.get("type") != "function_call" for item in model.calls[-1].input)


async def test_clear_session_and_blocking_client(client, conv_id):
    session = CtxdSession(conv_id, client)
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await session.get_items() == [{"role": "user", "content": "hi"}]
    await session.clear_session()
    await session.clear_session()  # already clear
    assert await session.get_items() == []
    with pytest.raises(ctxd.errors.NotFound):
        client.get_conversation(conv_id)


async def test_readme_support_turn(aclient, conv_id, readme):
    support_turn = readme("support_turn")
    model = scripted()
    agent = Agent(name="weather", instructions="Answer briefly.", model=model, tools=[get_weather])
    assert await support_turn(aclient, agent, conv_id, "Weather in Paris?") == "It is 18C and sunny in Paris."
    assert await support_turn(aclient, agent, conv_id, "What did I ask?") == "You asked about the weather in Paris."
    assert model.calls[-1].input[0] == {"content": "Weather in Paris?", "role": "user"}
    conv = (await aclient.get_conversation(conv_id + "/support")).conversation
    assert conv.last_sequence == 6
