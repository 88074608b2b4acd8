import json
import socket
import time

import grpc
import pytest

import ctxd
from ctxd import errors, packs


def test_append_build_list_round_trip(client, conv_id):
    r = client.append_message(conv_id, [{"role": "user", "content": "Weather in Paris?"}])
    assert (r.first_sequence, r.last_sequence) == (1, 1)
    client.append_message(
        conv_id,
        [
            {"role": "assistant", "toolCalls": [{"id": "call_1", "name": "weather", "arguments": '{"city":"Paris"}'}]},
            ctxd.messages_pb2.Message(role=ctxd.Role.Value("ROLE_TOOL"), tool_call_id="call_1", content="18C"),
            {"role": "assistant", "content": "It is 18C."},
        ],
    )
    chat = client.build_context(conv_id, max_tokens=4000, system_prompt="Be brief.")
    kwargs = packs.openai_chat_kwargs(chat)
    assert [m["role"] for m in kwargs["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    anthropic = packs.anthropic_kwargs(client.build_context(conv_id, max_tokens=4000, format="anthropic",
                                                            system_prompt="Be brief.", final_assistant="keep"))
    assert set(anthropic) == {"system", "messages"} and anthropic["messages"][0]["role"] == "user"
    no_system = packs.anthropic_kwargs(client.build_context(conv_id, max_tokens=4000, format="anthropic"))
    assert set(no_system) == {"messages"}
    responses = packs.openai_responses_kwargs(client.build_context(conv_id, max_tokens=4000, format="responses"))
    assert [i.get("type") for i in responses["input"]][1:3] == ["function_call", "function_call_output"]
    gemini = packs.gemini_kwargs(client.build_context(conv_id, max_tokens=4000, format="gemini", system_prompt="Be brief."))
    assert gemini["config"]["system_instruction"]["parts"][0]["text"].startswith("Be brief.")
    assert gemini["contents"][0]["role"] == "user"

    seqs = [m.sequence for m in client.iter_messages(conv_id, page_size=2)]
    assert seqs == [1, 2, 3, 4]
    page = client.list_messages(conv_id, format="chat")
    assert [m["role"] for m in json.loads(page.rendered)] == ["user", "assistant", "tool", "assistant"]
    assert client.get_conversation(conv_id).conversation.last_sequence == 4
    assert client.count_tokens("hello world", tokenizer="o200k_base").tokens == 2
    assert client.delete_conversation(conv_id).messages_deleted == 4


def test_invalid_argument_has_field_violations(client, conv_id):
    with pytest.raises(errors.InvalidArgument) as caught:
        client.append_message(conv_id, [{"role": "tool", "tool_call_id": "never-made", "content": "x"}])
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    fields = [v.field for v in caught.value.field_violations]
    assert fields == ["messages[0].tool_call_id"], caught.value.field_violations
    assert "never-made" in caught.value.field_violations[0].description
    with pytest.raises(errors.InvalidArgument) as caught:
        client.append_native(conv_id, [{"role": "user", "content": 5}], "responses")
    assert caught.value.field_violations and caught.value.field_violations[0].field.startswith("native.json[0]")


def test_aborted_carries_current_sequence(client, conv_id):
    client.append_message(conv_id, [{"role": "user", "content": "a"}])
    with pytest.raises(errors.Aborted) as caught:
        client.append_message(conv_id, [{"role": "user", "content": "b"}], expected_last_sequence=0)
    assert caught.value.current == 1 and caught.value.reason


def test_tenant_header_isolates(target, conv_id):
    with ctxd.Client(target, tenant="tenant-a") as a, ctxd.Client(target, tenant="tenant-b") as b:
        a.append_message(conv_id, [{"role": "user", "content": "mine"}])
        with pytest.raises(errors.NotFound):
            b.get_conversation(conv_id)
        a.delete_conversation(conv_id)


class _Record(grpc.UnaryUnaryClientInterceptor):
    def __init__(self):
        self.calls = []

    def intercept_unary_unary(self, continuation, details, request):
        self.calls.append(details)
        return continuation(details, request)


def test_deadline_and_auth_metadata(target, conv_id):
    seen = _Record()
    with ctxd.Client(target, api_key=None, tenant="pytest", timeout=7.0, interceptors=[seen]) as c:
        c.append_message(conv_id, [{"role": "user", "content": "x"}])
        c.get_conversation(conv_id, timeout=2.5, metadata=[("x-request-id", "r1")])
    first, second = seen.calls
    assert 6.0 < first.timeout <= 7.0 and 1.5 < second.timeout <= 2.5
    assert ("x-tenant-id", "pytest") in first.metadata and ("x-request-id", "r1") in second.metadata
    key = ctxd.Client(target, api_key="k1")._config.metadata
    assert key == (("authorization", "Bearer k1"),)


class _LoseFirstAnswer(grpc.UnaryUnaryClientInterceptor, grpc.aio.UnaryUnaryClientInterceptor):
    """Sends the first AppendMessage to the server, then reports UNAVAILABLE as a dropped
    connection would: the server stored it, the client never heard."""

    def __init__(self):
        self.attempts = []

    def _note(self, details, request):
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if method.endswith("/AppendMessage"):
            self.attempts.append(request.idempotency_key)
            return len(self.attempts) == 1
        return False

    def intercept_unary_unary(self, continuation, details, request):
        lose = self._note(details, request)
        outcome = continuation(details, request)
        if lose:
            outcome.result()  # the server has it
            raise _Unavailable()
        return outcome


class _AsyncLoseFirstAnswer(_LoseFirstAnswer):
    async def intercept_unary_unary(self, continuation, details, request):
        lose = self._note(details, request)
        call = await continuation(details, request)
        if lose:
            await call
            raise _Unavailable()
        return call


class _Unavailable(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return "connection reset (simulated)"

    def trailing_metadata(self):
        return ()


def test_retried_append_is_stored_once(target, conv_id):
    lose = _LoseFirstAnswer()
    policy = ctxd.RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)
    with ctxd.Client(target, tenant="pytest", retries=policy, interceptors=[lose]) as c:
        r = c.append_message(conv_id, [{"role": "user", "content": "once"}])
        assert r.replayed and r.last_sequence == 1
        assert len(lose.attempts) == 2 and lose.attempts[0] == lose.attempts[1] != ""
        assert [m.content for m in c.iter_messages(conv_id)] == ["once"]


async def test_async_retried_append_is_stored_once(target, conv_id):
    lose = _AsyncLoseFirstAnswer()
    policy = ctxd.RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)
    async with ctxd.AsyncClient(target, tenant="pytest", retries=policy, interceptors=[lose]) as c:
        r = await c.append_native(conv_id, [{"role": "user", "content": "once"}], "responses")
        assert r.replayed and r.last_sequence == 1
        assert len(lose.attempts) == 2 and lose.attempts[0] == lose.attempts[1]
        assert [m.content async for m in c.iter_messages(conv_id)] == ["once"]


def test_unavailable_is_retried_then_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    policy = ctxd.RetryPolicy(max_attempts=3, initial_backoff=0.05, max_backoff=0.05)
    with ctxd.Client(f"127.0.0.1:{port}", retries=policy, timeout=10) as c:
        started = time.monotonic()
        with pytest.raises(errors.Unavailable):
            c.get_conversation("x")
        assert time.monotonic() - started >= 0.05  # at least two backoffs happened


def test_append_native_sdk_objects(client, conv_id):
    from anthropic import types as at
    from google.genai import types as gt
    from openai.types import chat as ct
    from openai.types import responses as rt

    with pytest.raises(TypeError):
        client.append_native(conv_id, [{"role": "user", "content": "plain"}])
    client.append_native(conv_id, [{"role": "user", "content": "Hi"}], "chat")
    completion = ct.ChatCompletion(
        id="chatcmpl-1", object="chat.completion", created=1, model="gpt-4o",
        choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hello"}}],
    )
    client.append_native(conv_id, completion)
    chat = json.loads(client.list_messages(conv_id, format="chat").rendered)
    assert chat == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]

    conv2 = conv_id + "/r"
    client.append_native(conv2, [{"role": "user", "content": "Hi"}], "responses")
    response = rt.Response(
        id="resp_1", object="response", created_at=1.0, model="gpt-5", parallel_tool_calls=True, tool_choice="auto",
        tools=[], status="completed",
        output=[rt.ResponseReasoningItem(type="reasoning", id="rs_1", summary=[], encrypted_content="ENC"),
                rt.ResponseOutputMessage(type="message", id="msg_1", role="assistant", status="completed",
                                         content=[rt.ResponseOutputText(type="output_text", text="Yo", annotations=[])])],
    )
    client.append_native(conv2, response)
    items = json.loads(client.list_messages(conv2, format="responses").rendered)
    assert items[1:] == response.to_dict(mode="json")["output"]
    assert client.build_context(conv2, max_tokens=1000).previous_response_id == "resp_1"

    conv3 = conv_id + "/a"
    client.append_native(conv3, [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "anthropic")
    message = at.Message(id="msg_a", type="message", role="assistant", model="claude", stop_reason="end_turn",
                         stop_sequence=None, usage=at.Usage(input_tokens=3, output_tokens=2),
                         content=[at.ThinkingBlock(type="thinking", thinking="hm", signature="SIG"),
                                  at.TextBlock(type="text", text="Hello")])
    client.append_native(conv3, message)
    body = json.loads(client.list_messages(conv3, format="anthropic").rendered)
    assert body["messages"][1]["content"] == message.to_dict(mode="json")["content"]
    assert client.get_conversation(conv3).conversation.usage.output_tokens == 2

    conv4 = conv_id + "/g"
    client.append_native(conv4, [gt.Content(role="user", parts=[gt.Part(text="Hi")])])
    reply = gt.GenerateContentResponse(candidates=[gt.Candidate(content=gt.Content(
        role="model", parts=[gt.Part(text="Hello", thought_signature=b"\x01\xfe\xff")]))])
    client.append_native(conv4, reply)
    kwargs = packs.gemini_kwargs(client.build_context(conv4, max_tokens=1000, format="gemini",
                                                      final_assistant="keep", system_prompt="S"))
    contents = [gt.Content.model_validate(c) for c in kwargs["contents"]]  # the SDK takes them as they are
    assert contents[1].parts[0].thought_signature == b"\x01\xfe\xff"
    assert gt.GenerateContentConfig.model_validate(kwargs["config"]).system_instruction.parts[0].text == "S"
    for c in (conv_id, conv2, conv3, conv4):
        client.delete_conversation(c)


def test_update_fork_rewind_summarize(client, conv_id):
    for i in range(3):
        client.append_message(conv_id, [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"a{i}"}])
    conv = client.update_conversation(conv_id, title="T", labels={"suite": "py"}, status="idle").conversation
    assert conv.title == "T" and conv.labels["suite"] == "py"
    assert conv_id in [c.conversation_id for c in client.list_conversations(labels={"suite": "py"}).conversations]
    fork = client.fork_conversation(conv_id, through_sequence=2, new_conversation_id=conv_id + "/fork").conversation
    assert fork.last_sequence == 2 and fork.forked_from.conversation_id == conv_id
    s = client.summarize(conv_id, keep_recent_tokens=0)
    assert s.changed and s.summary.through_sequence > 0
    assert client.rewind_conversation(conv_id, after_sequence=4, expected_last_sequence=6).last_sequence == 4
    assert client.redact_message(conv_id, 1).message.content == "[redacted]"
    goals = {"goals": [{"text": "ship it", "sourceSequences": ["2"]}]}
    with pytest.raises(errors.Aborted):  # a first memory after a redaction or rewind needs log_changes
        client.update_working_memory(conv_id, goals)
    log_changes = client.get_working_memory(conv_id, prepare=True).prepared.log_changes
    assert log_changes == 2  # one rewind, one redaction
    memory = client.update_working_memory(conv_id, goals, expected_log_changes=log_changes).memory
    assert [g.text for g in memory.goals] == ["ship it"]
    assert client.get_working_memory(conv_id).memory.version == memory.version
    for c in (conv_id, conv_id + "/fork"):
        client.delete_conversation(c)


def test_native_detection_and_pack_errors():
    from openai.types import chat as ct

    completion = ct.ChatCompletion(id="c", object="chat.completion", created=1, model="m", choices=[])
    assert ctxd.native.to_native_items(completion).format == ctxd.Format.Value("FORMAT_OPENAI_CHAT")
    with pytest.raises(ValueError):
        ctxd.native.to_native_items(completion, "anthropic")
    assert ctxd.native.to_native_items('[{"role":"user","content":"x"}]', "gemini").format == ctxd.Format.Value("FORMAT_GEMINI")
    with pytest.raises(ValueError):
        packs.anthropic_kwargs('[{"role": "user", "content": "x"}]')  # a chat pack
    assert packs.anthropic_kwargs('{"messages": []}') == {"messages": []}
    assert packs.gemini_kwargs('{"contents": []}') == {"contents": []}


def _recall_log(n):
    log = [{"role": "user", "content": "The invoice number for the March order is INV-4471."},
           {"role": "assistant", "content": "Noted."}]
    for i in range(n):
        log += [{"role": "user", "content": f"Refactor parser module {i} so the tests pass."},
                {"role": "assistant", "content": f"Done with module {i}; the tests pass."}]
    return log


def test_search_messages_and_recall(client, conv_id):
    for start in range(0, 202, 100):
        client.append_message(conv_id, _recall_log(100)[start:start + 100])
    page = client.search_messages(conv_id, "which invoice did we get for the march order?", page_size=3)
    assert page.hits[0].sequence == 1 and "INV-4471" in page.hits[0].snippet
    users = client.search_messages(conv_id, "tests pass", roles=["assistant"], page_size=50)
    assert users.hits and all(h.role == ctxd.Role.Value("ROLE_ASSISTANT") for h in users.hits)
    first = client.search_messages(conv_id, "tests pass", page_size=5)
    second = client.search_messages(conv_id, "tests pass", page_size=5, page_token=first.next_page_token)
    assert {h.sequence for h in first.hits}.isdisjoint(h.sequence for h in second.hits)
    pack = client.build_context(conv_id, max_tokens=600, recall={"max_tokens": 150},
                                pending_messages=[{"role": "user", "content": "Which invoice was the March order?"}])
    assert pack.messages[-1].source == ctxd.context_pb2.CONTEXT_SOURCE_RECALL
    assert "INV-4471" in pack.messages[-1].content and pack.stats.messages_recalled == 1
    cleared = client.build_context(conv_id, max_tokens=600, recall=True, clear_tool_results={"keep_recent": 1})
    assert cleared.stats.budget_tokens == 600


async def test_async_search_messages(target, conv_id):
    async with ctxd.AsyncClient(target, tenant="pytest") as c:
        await c.append_message(conv_id, _recall_log(3))
        page = await c.search_messages(conv_id, "invoice march")
        assert page.hits[0].sequence == 1
