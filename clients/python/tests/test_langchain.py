"""ctxd.langchain against a live ctxd: the message mapping both ways, the chat history, and a
100-turn tool loop through LangChain's own `create_agent` with a scripted fake model (no
provider network)."""

import json
import statistics

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxd.langchain import CtxdChatMessageHistory, CtxdContextMiddleware, from_ctxd, to_ctxd
from ctxd.v1 import messages_pb2

BUDGET = 3_000
TURNS = 100


def _sample_messages():
    return [
        SystemMessage("You are terse.", id="s1"),
        HumanMessage(
            [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
            ],
            id="h1",
            name="ann",
        ),
        AIMessage(
            "Let me look.",
            id="a1",
            tool_calls=[{"name": "lookup", "args": {"q": "cat", "n": 2}, "id": "call_a1", "type": "tool_call"}],
            usage_metadata={
                "input_tokens": 120,
                "output_tokens": 15,
                "total_tokens": 135,
                "input_token_details": {"cache_read": 100},
                "output_token_details": {"reasoning": 5},
            },
            response_metadata={"model_name": "scripted", "finish_reason": "tool_calls"},
            additional_kwargs={"refusal": None},
        ),
        ToolMessage("no such cat", tool_call_id="call_a1", id="t1", status="error", artifact={"rows": [1, 2]}),
        AIMessage("", id="a2"),
        HumanMessage("thanks", id="h2"),
    ]


def test_messages_map_both_ways_losslessly(client, conv_id):
    history = CtxdChatMessageHistory(client, conv_id)
    sent = _sample_messages()
    history.add_messages(sent)
    assert history.messages == sent
    # What ctxd models, it has as its own fields: packs and search see them.
    stored = list(client.iter_messages(conv_id))
    assert stored[1].attachments[0].uri == "https://example.com/cat.png"
    assert stored[1].attachments[1].data == b"\x89PNG\r\n\x1a\n"
    assert stored[2].tool_calls[0].name == "lookup"
    assert json.loads(stored[2].tool_calls[0].arguments) == {"q": "cat", "n": 2}
    assert (stored[2].usage.input_tokens, stored[2].usage.cached_input_tokens) == (120, 100)
    assert stored[3].tool_call_id == "call_a1"
    history.clear()
    assert history.messages == []


async def test_the_async_history_reads_what_the_sync_one_wrote(client, aclient, conv_id):
    CtxdChatMessageHistory(client, conv_id).add_messages(_sample_messages()[:3])
    history = CtxdChatMessageHistory(client, conv_id, async_client=aclient)
    assert await history.aget_messages() == _sample_messages()[:3]
    await history.aadd_messages([HumanMessage("more", id="h9")])
    assert (await history.aget_messages())[-1] == HumanMessage("more", id="h9")
    await history.aclear()
    assert await history.aget_messages() == []


def test_a_message_round_trips_through_its_ctxd_form():
    for message in _sample_messages():
        form = to_ctxd(message)
        assert form["role"] in ("system", "user", "assistant", "tool")


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model with tools bound as a no-op, recording every input: a user
    turn gets a tool call, a tool result gets the answer."""

    inputs: list = []

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.inputs.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _script(first_turn: int, turns: int):
    for n in range(first_turn, first_turn + turns):
        yield AIMessage(
            "",
            tool_calls=[{"name": "lookup", "args": {"turn": n}, "id": f"call_{n}", "type": "tool_call"}],
            usage_metadata={"input_tokens": 50, "output_tokens": 5, "total_tokens": 55},
        )
        yield AIMessage(
            f"Turn {n}: the ledger says {n * 7} crates.",
            usage_metadata={"input_tokens": 60, "output_tokens": 9, "total_tokens": 69},
        )


@tool
def lookup(turn: int) -> str:
    """Looks up the ledger row of a turn."""
    return f"ledger row {turn}: " + " ".join(f"crate-{turn}-{k}" for k in range(40))


def _agent(client, script, saver):
    model = ScriptedModel(messages=script)
    model.inputs = []
    packs = []
    middleware = CtxdContextMiddleware(
        client, budget_tokens=BUDGET, format="openai_chat", thread_id_prefix="lc/", on_pack=packs.append
    )
    agent = create_agent(model, [lookup], system_prompt="You keep the ledger.", middleware=[middleware],
                         checkpointer=saver)
    return agent, model, packs


def _check_inputs(inputs):
    """Every call's input: tool calls each followed by their results, no result without its call."""
    for messages in inputs:
        open_calls = set()
        for m in messages:
            if isinstance(m, ToolMessage):
                assert m.tool_call_id in open_calls, "a result without its call"
                open_calls.discard(m.tool_call_id)
            else:
                assert not open_calls, f"calls {open_calls} not followed by their results"
            if isinstance(m, AIMessage):
                open_calls = {c["id"] for c in m.tool_calls}


def test_a_100_turn_tool_loop_through_create_agent_gets_packs_and_keeps_the_log(client, conv_id):
    thread = conv_id
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": thread}}
    half = TURNS // 2
    agent, model, packs = _agent(client, _script(0, half), saver)
    whole = []  # what the framework's default would send: the whole state
    for n in range(half):
        state = agent.invoke({"messages": [{"role": "user", "content": f"Turn {n}: how many crates?"}]}, config)
        whole.append(count_tokens_approximately(state["messages"]))
    first_run = state["messages"]

    # The agent process restarts: a new agent, model and checkpointer (nothing of the first
    # run's state); the same thread continues the same ctxd conversation.
    agent, model2, packs2 = _agent(client, _script(half, TURNS - half), InMemorySaver())
    for n in range(half, TURNS):
        state = agent.invoke({"messages": [{"role": "user", "content": f"Turn {n}: how many crates?"}]}, config)
        whole.append(count_tokens_approximately(first_run) + count_tokens_approximately(state["messages"]))
    inputs = model.inputs + model2.inputs
    assert len(inputs) == 2 * TURNS

    # Every model input within the budget, by ctxd's count of the pack.
    totals = [p.stats.total_tokens for p in packs + packs2]
    assert max(totals) <= BUDGET, max(totals)
    _check_inputs(inputs)
    # After the restart the model still sees the first run's turns (from ctxd, not the state).
    assert any("Turn 49: the ledger says 343 crates." in str(m.content) for m in model2.inputs[0])

    # The log is what the framework produced, message for message.
    logged = [from_ctxd(m) for m in client.iter_messages(f"lc/{thread}")]
    assert logged == list(first_run) + list(state["messages"])
    sent = [count_tokens_approximately(i) for i in inputs]
    print(
        f"\n{TURNS}-turn tool loop, {len(logged)} messages logged: model input tokens (approximate) with ctxd "
        f"largest {max(sent)}, mean {statistics.mean(sent):.0f} (budget {BUDGET}); the framework's default "
        f"(whole history) largest {max(whole)}, mean {statistics.mean(whole):.0f}"
    )
    assert max(sent) < max(whole) / 3


@pytest.mark.parametrize("turns", [3])
async def test_the_async_agent_uses_the_same_hooks(client, aclient, conv_id, turns):
    model = ScriptedModel(messages=_script(0, turns))
    model.inputs = []
    middleware = CtxdContextMiddleware(client, async_client=aclient, conversation_id=conv_id, budget_tokens=BUDGET)
    agent = create_agent(model, [lookup], middleware=[middleware])
    for n in range(turns):
        state = await agent.ainvoke({"messages": [{"role": "user", "content": f"Turn {n}?"}]})
    logged = [from_ctxd(m) async for m in aclient.iter_messages(conv_id)]
    assert logged[-4:] == list(state["messages"])[-4:]
    assert len(logged) == 4 * turns




def test_the_readme_turn_runs_as_shown(client, conv_id, readme):
    make, turn = readme("langchain_agent"), readme("langchain_turn")
    model = ScriptedModel(messages=_script(0, 2))
    model.inputs = []
    agent = make(client, model, [lookup])
    assert turn(agent, conv_id, "Turn 0: how many crates?") == "Turn 0: the ledger says 0 crates."
    assert turn(agent, conv_id, "Turn 1: how many crates?") == "Turn 1: the ledger says 7 crates."
    logged = list(client.iter_messages(conv_id))
    assert [m.role for m in logged].count(messages_pb2.ROLE_USER) == 2  # both user turns, once each
    assert len(logged) == 8


def test_an_interrupt_before_the_tools_resumes_with_the_log_intact(client, conv_id):
    """Human in the loop: the run stops before the tools (LangGraph's `interrupt_before`), a
    person approves, the same thread resumes; the log holds every message once, in order."""
    model = ScriptedModel(messages=_script(0, 1))
    model.inputs = []
    middleware = CtxdContextMiddleware(client, budget_tokens=BUDGET, thread_id_prefix="hitl/")
    agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver(),
                         interrupt_before=["tools"])
    config = {"configurable": {"thread_id": conv_id}}
    paused = agent.invoke({"messages": [{"role": "user", "content": "Turn 0: how many crates?"}]}, config)
    assert paused["messages"][-1].tool_calls, "stopped before running the call"
    assert agent.get_state(config).next == ("tools",)
    state = agent.invoke(None, config)  # approved: the run goes on from the checkpoint
    assert state["messages"][-1].content == "Turn 0: the ledger says 0 crates."
    logged = [from_ctxd(m) for m in client.iter_messages(f"hitl/{conv_id}")]
    assert logged == list(state["messages"])
