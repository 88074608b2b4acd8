#!/usr/bin/env python3
"""Checks rendered BuildContext packs against the providers' official SDK request types and
against the API rules of docs/design.md, "Provider rules" and 2.2.2, which the types alone do not express.

    python scripts/conformance.py packs.jsonl   # one {"format", "rendered", "case"?} per line
    python scripts/conformance.py --self-test   # the checker rejects deliberately broken packs

Formats: openai_chat (Chat Completions `messages`), anthropic_messages (`{system, messages}`),
openai_responses (Responses API `input` items), gemini (`{systemInstruction, contents}`).
Optional record fields: `expect_thinking` (every assistant reply came from a thinking Claude
model: the open tool loop must keep its thinking) and `expect_signatures` (the target is a
Gemini 3 model, which validates thought signatures).

Needs the `openai`, `anthropic` and `google-genai` packages (PyPI). Exit status 1 on any
violation. Each rule names the provider error or documentation it comes from.
"""
import json
import re
import sys
from collections import Counter

from pydantic import TypeAdapter, ValidationError

ANTHROPIC_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
# Thinking block types, and the field that carries what the API verifies.
THINKING = {"thinking": "signature", "redacted_thinking": "data"}
# The pack generator plants these in provider-native data (signatures, redacted thinking,
# reasoning ids, encrypted content): a provider must never receive another one's.
MARKERS = {"ANTHROPIC-NATIVE", "OPENAI-NATIVE", "GEMINI-NATIVE"}
OWN_MARKER = {"anthropic_messages": "ANTHROPIC-NATIVE", "openai_responses": "OPENAI-NATIVE",
              "gemini": "GEMINI-NATIVE"}
# Gemini's Part is a protobuf oneof: "required oneof field 'data' must have one initialized field".
GEMINI_DATA = ("text", "inlineData", "fileData", "functionCall", "functionResponse",
               "executableCode", "codeExecutionResult")


def materialize(value):
    """pydantic validates `Iterable[...]` fields lazily: walk the result so every block is
    actually validated."""
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    try:
        return [materialize(v) for v in value]
    except TypeError:
        return value


def sdk_types():
    # pydantic resolves the SDKs' postponed annotations in this frame too: a local named
    # `Content` (google-genai's) would replace the OpenAI reasoning item's `Content`.
    from anthropic.types import MessageParam, TextBlockParam
    from anthropic.types.beta import BetaMessageParam
    from google.genai import types as genai
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputParam

    return {
        "openai_chat": TypeAdapter(list[ChatCompletionMessageParam]),
        "anthropic_messages": TypeAdapter(list[MessageParam]),
        # Compaction blocks are in the beta types only (anthropic 2.14: `compact-2026-01-12`).
        "anthropic_messages_beta": TypeAdapter(list[BetaMessageParam]),
        "anthropic_system": TypeAdapter(str | list[TextBlockParam]),
        "openai_responses": TypeAdapter(ResponseInputParam),
        "gemini_contents": TypeAdapter(list[genai.Content]),
        "gemini_content": TypeAdapter(genai.Content),
    }


# --- SDK types -------------------------------------------------------------------------------

def unknown_keys(sent, kept, path=""):
    """Keys pydantic dropped while validating. The OpenAI and Anthropic request types are
    TypedDicts, which ignore keys they do not declare, so a stray `reasoning_content`, a tool
    call `signature` or a `cache_control` on a thinking block only shows up as a missing key."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        found = [f"{path}.{k}" for k in sent if k not in kept]
        for k in sent.keys() & kept.keys():
            found += unknown_keys(sent[k], kept[k], f"{path}.{k}")
        return found
    if isinstance(sent, list) and isinstance(kept, list):
        return [p for i, (a, b) in enumerate(zip(sent, kept)) for p in unknown_keys(a, b, f"{path}[{i}]")]
    return []


def validation_error(e, where):
    """One error of many: an untagged union reports every variant's, and the telling one comes
    from a variant whose `type` (or `role`) matched."""
    errors = e.errors()
    mismatched = [err["loc"][:-1] for err in errors
                  if err["type"] == "literal_error" and err["loc"][-1] in ("type", "role")]
    telling = [err for err in errors if not any(err["loc"][: len(v)] == v for v in mismatched)]
    first = (telling or errors)[0]
    loc = ".".join(str(part) for part in first["loc"])
    return f"SDK types ({where}): {e.error_count()} errors, e.g. at {loc}: {first['msg']}"


def sdk_problems(adapter, value, where):
    """Strict validation against an SDK type, plus the keys that type does not declare."""
    try:
        kept = materialize(adapter.validate_python(value, strict=True))
    except ValidationError as e:
        return [validation_error(e, where)]
    return [f"{where}{path}: key not in the SDK types" for path in unknown_keys(value, kept)]


def top_keys(pack, allowed):
    return [f"unexpected top-level key {k!r}" for k in pack if k not in allowed]


def chat_types(adapters, pack):
    return sdk_problems(adapters["openai_chat"], pack, "messages")


def has_compaction(messages):
    return any(b.get("type") == "compaction" for m in messages or [] for b in blocks_of(m))


def anthropic_types(adapters, pack):
    problems = top_keys(pack, ("system", "messages"))
    kind = "anthropic_messages_beta" if has_compaction(pack.get("messages")) else "anthropic_messages"
    problems += sdk_problems(adapters[kind], pack.get("messages"), "messages")
    if "system" in pack:
        problems += sdk_problems(adapters["anthropic_system"], pack["system"], "system")
    return problems


def responses_types(adapters, pack):
    return sdk_problems(adapters["openai_responses"], pack, "input")


def snake_case_keys(value, path=""):
    """The API and google-genai take snake_case names too, but the rules below read the
    camelCase ones ctxd renders, so a snake_case key would slip past them. Function arguments
    and responses are the caller's data and may use any names."""
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in snake_case_keys(v, f"{path}[{i}]")]
    if not isinstance(value, dict):
        return []
    found = [f"{path}.{k}".lstrip(".") for k in value if "_" in k]
    for k, v in value.items():
        if k not in ("args", "response"):
            found += snake_case_keys(v, f"{path}.{k}")
    return found


def gemini_types(adapters, pack):
    """google-genai's models forbid unknown keys and decode bytes fields (thoughtSignature,
    inlineData.data) as base64 in JSON mode, as the REST API does."""
    problems = top_keys(pack, ("systemInstruction", "contents"))
    problems += [f"{path}: snake_case key" for path in snake_case_keys(pack)]
    checks = [("contents", "gemini_contents")]
    if "systemInstruction" in pack:
        checks.append(("systemInstruction", "gemini_content"))
    for key, adapter in checks:
        try:
            adapters[adapter].validate_json(json.dumps(pack.get(key)), strict=True)
        except ValidationError as e:
            problems.append(validation_error(e, key))
    return problems


def foreign_markers(fmt, rendered):
    foreign = sorted(MARKERS - {OWN_MARKER.get(fmt)})
    return [f"carries {marker}: another provider's native data" for marker in foreign if marker in rendered]


# --- OpenAI Chat Completions -----------------------------------------------------------------

def json_object(text):
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False


# Images both OpenAI APIs take (PNG, JPEG, WEBP, non-animated GIF); a Chat Completions `file`
# part takes PDF only (platform.openai.com/docs/guides/images-vision, guides/file-inputs).
OPENAI_IMAGE_TYPES = {"image/png", "image/jpeg", "image/webp", "image/gif"}
# The Responses API's `input_file` types (developers.openai.com, "File inputs", full list of
# accepted file types); it tells a file's type by its name's extension and refuses a name
# without one: "Expected context stuffing file type to be a supported format: ... but got none".
# The same list's extensions by category; every listed type not named here is text or code.
INPUT_FILE_CATEGORIES = [
    ({"pdf"}, {"application/pdf"}),
    ({"xla", "xlb", "xlc", "xlm", "xls", "xlsx", "xlt", "xlw"},
     {"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "application/vnd.ms-excel"}),
    ({"csv", "tsv", "iif"}, {"text/csv", "application/csv", "text/tsv", "text/x-iif", "application/x-iif",
                             "application/vnd.google-apps.spreadsheet"}),
    ({"doc", "docx", "dot", "odt", "rtf", "pot", "ppa", "pps", "ppt", "pptx", "pwz", "wiz"}, {"application/vnd.apple.iwork"}),
    ({"doc", "docx", "dot", "odt", "rtf"},
     {"application/vnd.openxmlformats-officedocument.wordprocessingml.document", "application/msword",
      "application/rtf", "text/rtf", "application/vnd.oasis.opendocument.text", "application/vnd.apple.pages",
      "application/vnd.google-apps.document"}),
    ({"pot", "ppa", "pps", "ppt", "pptx", "pwz", "wiz"},
     {"application/vnd.openxmlformats-officedocument.presentationml.presentation", "application/vnd.ms-powerpoint",
      "application/vnd.apple.keynote", "application/vnd.google-apps.presentation"}),
]
TEXT_EXTENSIONS = set(
    "asm bat c cc conf cpp css cxx def dic eml h hh htm html ics ifb in js json ksh list log markdown md mht "
    "mhtml mime mjs nws pl py rst s sql srt text txt vcf vtt xml".split())
INPUT_FILE_TYPES = {m.lower() for m in [
    "application/csv", "application/graphql", "application/javascript", "application/json",
    "application/json5", "application/msword", "application/pdf", "application/rtf", "application/toml",
    "application/typescript", "application/vnd.apple.iwork", "application/vnd.apple.keynote",
    "application/vnd.apple.pages", "application/vnd.google-apps.document",
    "application/vnd.google-apps.presentation", "application/vnd.google-apps.spreadsheet",
    "application/vnd.ms-excel", "application/vnd.ms-powerpoint", "application/vnd.oasis.opendocument.text",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "application/x-awk",
    "application/x-bash", "application/x-graphql", "application/x-httpd-php",
    "application/x-httpd-php-source", "application/x-iif", "application/x-json5", "application/x-ndjson",
    "application/x-patch", "application/x-php", "application/x-powershell", "application/x-protobuf",
    "application/x-rust", "application/x-scala", "application/x-sql", "application/x-subrip",
    "application/x-terraform", "application/x-toml", "application/x-yaml", "application/yaml",
    "message/rfc822", "text/calendar", "text/css", "text/csv", "text/html", "text/javascript", "text/jsx",
    "text/markdown", "text/plain", "text/rtf", "text/srt", "text/tsv", "text/tsx", "text/vbscript",
    "text/vtt", "text/x-asm", "text/x-astro", "text/x-awk", "text/x-bash", "text/x-c", "text/x-c++",
    "text/x-clojure", "text/x-cmake", "text/x-csharp", "text/x-dart", "text/x-diff", "text/x-dockerfile",
    "text/x-ejs", "text/x-elixir", "text/x-erb", "text/x-erlang", "text/x-go", "text/x-golang",
    "text/x-gradle", "text/x-graphql", "text/x-groovy", "text/x-handlebars", "text/x-haskell", "text/x-hcl",
    "text/x-iif", "text/x-ini", "text/x-jade", "text/x-java", "text/x-jinja2", "text/x-julia",
    "text/x-kotlin", "text/x-less", "text/x-liquid", "text/x-lisp", "text/x-lua", "text/x-makefile",
    "text/x-mustache", "text/x-objectivec", "text/x-objectivec++", "text/x-patch", "text/x-perl",
    "text/x-php", "text/x-properties", "text/x-protobuf", "text/x-pug", "text/x-python", "text/x-R",
    "text/x-r", "text/x-rst", "text/x-ruby", "text/x-rust", "text/x-sass", "text/x-scala",
    "text/x-script.python", "text/x-scss", "text/x-sh", "text/x-shellscript", "text/x-sql", "text/x-subrip",
    "text/x-swift", "text/x-terraform", "text/x-tex", "text/x-tmpl", "text/x-toml", "text/x-twig",
    "text/x-typescript", "text/x-vcard", "text/x-yaml", "text/x-zsh", "text/xml",
]}


def data_uri_type(uri):
    """The media type of a `data:` URI, None for any other URI."""
    if not isinstance(uri, str) or not uri.startswith("data:"):
        return None
    return uri[len("data:"):].split(";", 1)[0].split(",", 1)[0]


def openai_part_rules(i, part):
    kind = part.get("type")
    # A file the format takes inline (a PDF) must go as a file, not as its base64 in text.
    if kind in ("text", "input_text") and re.search(r"data:application/pdf;base64,", part.get("text") or "", re.I):
        return [f"[{i}] a PDF's data sent as text"]
    if kind in ("image_url", "input_image"):
        url = part["image_url"]["url"] if kind == "image_url" else part.get("image_url")
        media = data_uri_type(url)
        if media is not None and media not in OPENAI_IMAGE_TYPES:
            return [f"[{i}] image of type {media}"]
    if kind == "file":
        media = data_uri_type(part["file"].get("file_data"))
        if media != "application/pdf":
            return [f"[{i}] Chat Completions file part of type {media} (PDF only)"]
    if kind == "input_file" and part.get("file_data") is not None:
        media = (data_uri_type(part["file_data"]) or "").lower()
        base = re.split(r"[/\\]", part.get("filename") or "")[-1]
        stem, dot, extension = base.rpartition(".")
        if media not in INPUT_FILE_TYPES:
            return [f"[{i}] input_file of type {media}"]
        if not (dot and stem and extension.lower() in input_file_extensions(media)):
            return [f"[{i}] input_file of type {media} named {part.get('filename')!r}"]
    return []


def input_file_extensions(media):
    """The extensions the File inputs list accepts for a type, by its category."""
    for extensions, types in INPUT_FILE_CATEGORIES:
        if media in types:
            return extensions
    return TEXT_EXTENSIONS


def content_parts(message):
    content = message.get("content")
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


# "Invalid 'messages[5].name': string does not match pattern. Expected a string that matches the
# pattern '^[a-zA-Z0-9_-]+$'" (FlowiseAI/Flowise#2948), likewise
# 'messages[9].tool_calls[0].function.name' (mcp-use/mcp-use#90); 64 characters at most.
OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def openai_rules(pack, record):
    problems = [p for i, m in enumerate(pack) for part in content_parts(m) for p in openai_part_rules(i, part)]
    waiting = set()
    seen_ids = set()
    for i, m in enumerate(pack):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in waiting:
                problems.append(f"[{i}] tool message answers no pending call")
            waiting.discard(m.get("tool_call_id"))
            continue
        if waiting:
            problems.append(f"[{i}] {role} message before calls {sorted(waiting)} were answered")
            waiting = set()
        if "name" in m and not OPENAI_NAME.fullmatch(str(m["name"])):
            problems.append(f"[{i}] name {m['name']!r} is not {OPENAI_NAME.pattern}")
        # OpenAI: `content` is "Required unless `tool_calls` or `function_call` is specified";
        # LangChain's convert_to_messages and llama.cpp's server refuse a null one even then.
        if m.get("content") is None:
            problems.append(f"[{i}] {role} message without content (null or missing)")
        if role == "assistant":
            calls = m.get("tool_calls") or []
            waiting = {c["id"] for c in calls}
            for c in calls:
                if c["id"] in seen_ids:
                    problems.append(f"[{i}] call id {c['id']!r} used twice")
                # "Invalid 'messages[N].tool_calls[0].id': string too long. Expected a string
                # with maximum length 40" (e.g. agno-agi/agno#5382, openclaw/openclaw#875).
                if len(c["id"]) > 40:
                    problems.append(f"[{i}] call id {c['id']!r} is over 40 characters")
                if not OPENAI_NAME.fullmatch(c["function"]["name"]):
                    problems.append(f"[{i}] function name {c['function']['name']!r} is not {OPENAI_NAME.pattern}")
                seen_ids.add(c["id"])
                # Client libraries and OpenAI-compatible servers parse the arguments as JSON.
                if not json_object(c["function"]["arguments"]):
                    problems.append(f"[{i}] arguments of {c['id']!r} are not a JSON object")
    if waiting:
        problems.append(f"calls {sorted(waiting)} are never answered")
    return problems


# --- Anthropic Messages ----------------------------------------------------------------------

def blank(text):
    return not isinstance(text, str) or text.strip() == ""


def blocks_of(message):
    """A message's content as blocks: a string is one text block."""
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else content or []


# "messages.N.content.M.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'" (the same
# for tool_result.tool_use_id; e.g. BerriAI/litellm#21215, maximhq/bifrost#5097).
ANTHROPIC_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")


def tool_id_rules(messages):
    problems = []
    for i, m in enumerate(messages):
        for block in blocks_of(m):
            key = {"tool_use": "id", "tool_result": "tool_use_id"}.get(block.get("type"))
            if key and not ANTHROPIC_TOOL_ID.fullmatch(str(block.get(key, ""))):
                problems.append(f"[{i}] {block['type']}.{key} {block.get(key)!r} is not ^[a-zA-Z0-9_-]+$")
    return problems


def has_tool_result(message):
    return any(b.get("type") == "tool_result" for b in blocks_of(message))


def anthropic_rules(pack, record):
    messages = pack.get("messages") or []
    if not messages:
        return ["messages is empty"]
    # A compaction block opens the conversation itself, in the message the API returned it in.
    opens_compacted = (blocks_of(messages[0]) or [{}])[0].get("type") == "compaction"
    problems = [] if messages[0].get("role") == "user" or opens_compacted else ["the first message is not user"]
    problems += compaction_rules(messages)
    problems += [f"[{i + 1}] roles do not alternate" for i, (a, b) in enumerate(zip(messages, messages[1:]))
                 if a.get("role") == b.get("role")]
    problems += system_rules(pack.get("system")) + cache_rules(pack.get("system"), messages)
    problems += block_rules(messages) + tool_use_rules(messages) + prefill_rules(messages)
    problems += thinking_rules(messages) + open_loop_thinking_rule(messages, record)
    problems += final_turn_rule(messages[-1].get("role"), "assistant", record)
    problems += tool_id_rules(messages)
    return problems


def compaction_rules(messages):
    """anthropic 2.14's beta errors: `compaction_block_misplaced` ("The `compaction` block is not
    the first block of the conversation, or is in a `system` message") and
    `compaction_block_ambiguous` (more than one `compaction` block with content)."""
    problems = []
    places = [(i, j, b) for i, m in enumerate(messages) for j, b in enumerate(blocks_of(m))
              if b.get("type") == "compaction"]
    for i, j, _ in places:
        if (i, j) != (0, 0):
            problems.append(f"[{i}] a compaction block at block {j}, not the conversation's first")
    if sum(1 for _, _, b in places if b.get("content") is not None) > 1:
        problems.append("more than one compaction block with content")
    return problems


def final_turn_rule(role, model_role, record):
    """Claude 4.6 and later answer 400 "This model does not support assistant message prefill.
    The conversation must end with a user message." (platform.claude.com, "What's new in Claude
    4.6": prefill removal); Gemini 3 models "Requests ending with a model turn are not
    supported" (anomalyco/opencode#45359, #47034, on gemini-3.7 and 3.8 flash). A pack may end on
    the model only where the corpus line says the request allowed it."""
    if role != model_role or record.get("final_assistant_allowed", True):
        return []
    return [f"the pack ends on a {model_role} turn, which current models refuse"]


def system_rules(system):
    if isinstance(system, str) and blank(system):
        return ["system is empty or whitespace-only"]
    if isinstance(system, list) and (not system or any(blank(b.get("text")) for b in system)):
        return ["system has no block or an empty or whitespace-only text block"]
    return []


def cache_rules(system, messages):
    # Prompt caching: at most 4 breakpoints per request (tools, system and messages together).
    blocks = (system if isinstance(system, list) else []) + [b for m in messages for b in blocks_of(m)]
    marks = [b["cache_control"] for b in blocks if "cache_control" in b]
    problems = [f"{len(marks)} cache_control breakpoints; the API allows 4"] if len(marks) > 4 else []
    if any(mark != {"type": "ephemeral"} for mark in marks):
        problems.append("a cache_control breakpoint that is not {\"type\": \"ephemeral\"}")
    return problems


def block_rules(messages):
    problems = []
    tool_use_ids = set()
    for i, m in enumerate(messages):
        blocks = blocks_of(m)
        if not blocks:
            problems.append(f"[{i}] empty content")
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and blank(block.get("text")):
                problems.append(f"[{i}] empty or whitespace-only text block")
            if kind == "tool_use":
                if block.get("id") in tool_use_ids:
                    problems.append(f"[{i}] tool_use id {block.get('id')!r} used twice")
                tool_use_ids.add(block.get("id"))
            if kind == "tool_result" and isinstance(block.get("content"), str) and blank(block["content"]):
                problems.append(f"[{i}] whitespace-only tool_result content")
            source = block.get("source") if kind in ("image", "document") else None
            # URL sources are fetched by Anthropic over https; a data: URL is refused (its data
            # goes as a base64 source).
            if isinstance(source, dict) and source.get("type") == "url" \
                    and not str(source.get("url", "")).startswith("https://"):
                problems.append(f"[{i}] {kind} url source {str(source.get('url'))[:40]!r} is not https")
            if kind == "image" and block.get("source", {}).get("type") == "base64":
                if block["source"].get("media_type") not in ANTHROPIC_IMAGE_TYPES:
                    problems.append(f"[{i}] image of type {block['source'].get('media_type')}")
                # "image exceeds 5 MB maximum: ... bytes > 5242880 bytes", on the base64 text.
                if len(block["source"].get("data") or "") > 5 * 1024 * 1024:
                    problems.append(f"[{i}] inline image over 5 MB of base64")
    return problems


def tool_use_rules(messages):
    """Every tool_use is answered by tool_result blocks opening the very next message, and
    every tool_result answers a tool_use of the message right before it."""
    problems = []
    previous_calls = set()
    for i, m in enumerate(messages):
        blocks = blocks_of(m)
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        problems += [f"[{i}] tool_result {r!r} answers no tool_use of the previous message"
                     for r in results if r not in previous_calls]
        calls = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        previous_calls = set(calls)
        if m.get("role") == "assistant" and calls:
            problems += tool_results_follow(i, calls, messages)
    return problems


def tool_results_follow(i, calls, messages):
    nxt = messages[i + 1] if i + 1 < len(messages) else None
    if nxt is None or not isinstance(nxt.get("content"), list):
        return [f"[{i}] tool_use {calls} not answered in the next message"]
    kinds = [b.get("type") for b in nxt["content"]]
    results = [b.get("tool_use_id") for b in nxt["content"] if b.get("type") == "tool_result"]
    problems = [] if set(results) == set(calls) else [f"[{i}] tool_use {calls} answered by {results}"]
    if kinds[: len(results)] != ["tool_result"] * len(results):
        problems.append(f"[{i + 1}] tool_result blocks do not come first")
    return problems


def prefill_rules(messages):
    """A final assistant message is the prefill the model continues."""
    last = messages[-1]
    if last.get("role") != "assistant":
        return []
    problems = []
    content = last.get("content")
    tail = content if isinstance(content, str) else (content or [{}])[-1].get("text", "x")
    if isinstance(tail, str) and tail != tail.rstrip():
        problems.append("the final assistant message ends in whitespace")
    # "When thinking is disabled, an `assistant` message in the final position cannot contain
    # `thinking`" (tailcallhq/forgecode#1853); with thinking enabled, the docs rule out prefill.
    if any(b.get("type") in THINKING for b in blocks_of(last)):
        problems.append(f"[{len(messages) - 1}] the final assistant message (a prefill) carries thinking")
    return problems


def thinking_rules(messages):
    problems = []
    for i, m in enumerate(messages):
        for block in blocks_of(m):
            if block.get("type") in THINKING:
                problems += thinking_block_rules(i, m.get("role"), block)
        # "The final block in an assistant message cannot be `thinking`" (tailcallhq/forgecode#2107).
        if m.get("role") == "assistant" and (blocks_of(m) or [{}])[-1].get("type") == "thinking":
            problems.append(f"[{i}] assistant message ends with a thinking block")
    return problems


def thinking_block_rules(i, role, block):
    kind = block.get("type")
    problems = [] if role == "assistant" else [f"[{i}] {kind} block in a {role} message"]
    # The API verifies the signature (or the encrypted data) of every thinking block it gets.
    if blank(block.get(THINKING[kind])):
        problems.append(f"[{i}] {kind} block without its {THINKING[kind]}")
    # "messages.N.content.0.thinking.cache_control: Extra inputs are not permitted".
    if "cache_control" in block:
        problems.append(f"[{i}] cache_control on a {kind} block")
    return problems


def open_loop_thinking_rule(messages, record):
    """With thinking on, "a final `assistant` message must start with a thinking block
    (preceeding the lastmost set of `tool_use` and `tool_result` blocks)". A tool loop is one
    assistant turn, and the API names the turn's first assistant message (messages.1 in agent
    loops with one prompt); later steps of the loop think only with interleaved thinking."""
    last = messages[-1]
    if not (record.get("expect_thinking") and carries_thinking(messages)
            and last.get("role") == "user" and has_tool_result(last)):
        return []
    first = open_loop_opener(messages)
    # A compaction block opening the conversation stands before the turn's thinking.
    opener = [b for b in blocks_of(messages[first]) if b.get("type") != "compaction"] if first is not None else []
    kind = (opener or [{}])[0].get("type") if first is not None else None
    if first is None or kind in THINKING:
        return []
    return [f"[{first}] the assistant message opening the open tool loop starts with {kind!r}, not thinking"]


def carries_thinking(messages):
    assistant_blocks = (b for m in messages if m.get("role") == "assistant" for b in blocks_of(m))
    return any(b.get("type") in THINKING for b in assistant_blocks)


def open_loop_opener(messages):
    """The first assistant message after the last user message that is not tool results."""
    start = max((i + 1 for i, m in enumerate(messages) if m.get("role") == "user" and not has_tool_result(m)),
                default=0)
    return next((i for i in range(start, len(messages)) if messages[i].get("role") == "assistant"), None)


# --- OpenAI Responses ------------------------------------------------------------------------

def item_kind(item):
    return item.get("type", "message")


# Output items a response produces besides reasoning, calls and messages: the server's own tool
# work and compaction (ctxd keeps them as the API returned them, docs/native.md).
SERVER_OUTPUT_ITEMS = ("web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
                       "mcp_call", "mcp_list_tools", "mcp_approval_request", "compaction", "custom_tool_call",
                       "computer_call", "local_shell_call", "shell_call", "apply_patch_call", "tool_search_call",
                       "tool_search_output", "program", "program_output", "additional_tools")


def is_output(item):
    """An item a model response produced: reasoning, a call, an assistant message, or one of
    the server's own items."""
    return item_kind(item) in ("reasoning", "function_call") + SERVER_OUTPUT_ITEMS or (
        item_kind(item) == "message" and item.get("role") == "assistant")


def responses_rules(items, record):
    parts = [p for i, m in enumerate(items) for part in content_parts(m) for p in openai_part_rules(i, part)]
    return (parts + responses_call_rules(items) + responses_reasoning_rules(items) + duplicate_item_ids(items)
            + responses_compaction_rules(items))


def responses_compaction_rules(items):
    """The OpenAI compaction guide: "you can drop items that came before the most recent
    compaction item... The latest compaction item carries the necessary context". A pack sends
    the newest compaction item and nothing it replaced: only instructions (system, developer)
    and a `/responses/compact` window's user messages before it, and no older compaction."""
    at = [i for i, item in enumerate(items) if item_kind(item) == "compaction"]
    if not at:
        return []
    problems = [f"[{i}] an older compaction item is sent too" for i in at[:-1]]
    for i, item in enumerate(items[:at[-1]]):
        if item_kind(item) != "message" or item.get("role") not in ("system", "developer", "user"):
            problems.append(f"[{i}] a {item_kind(item)} item before the compaction item, which replaced it")
    return problems


def duplicate_item_ids(items):
    """"Duplicate item found with id fc_…" (MacPaw/OpenAI#432)."""
    ids = [item["id"] for item in items if "id" in item]
    return [f"item id {item_id!r} used twice" for item_id, n in Counter(ids).items() if n > 1]


# Calls the client runs, each answered by the item of its type + "_output".
CLIENT_CALLS = ("function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call",
                "apply_patch_call")


def responses_call_rules(items):
    """"No tool output found for function call X" and "No tool call found for function call
    output with call_id X". OpenAI pairs by call_id wherever the output sits, stricter
    Responses servers (DeepSeek) only when adjacent; packs keep results right after their
    calls, as in Chat Completions (docs/design.md, "Provider rules")."""
    problems, waiting, called = [], {}, set()
    for i, item in enumerate(items):
        kind, call_id = item_kind(item), item.get("call_id")
        if kind == "local_shell_call_output":
            call_id = item.get("id")
        if kind.endswith("_output") and kind[:-len("_output")] in CLIENT_CALLS:
            # Each built-in call has its own output type: a function_call_output does not
            # answer a shell_call.
            call_kind = kind[:-len("_output")]
            if waiting.get(call_id) != call_kind:
                problems.append(f"[{i}] {kind} {call_id!r} answers no pending {call_kind}")
            waiting.pop(call_id, None)
        elif kind in CLIENT_CALLS and kind != "function_call":
            if call_id in called:
                problems.append(f"[{i}] call_id {call_id!r} used twice")
            waiting[call_id] = kind
            called.add(call_id)
        elif kind == "function_call":
            if call_id in called:
                problems.append(f"[{i}] call_id {call_id!r} used twice")
            if not json_object(item.get("arguments")):
                problems.append(f"[{i}] arguments of {call_id!r} are not a JSON object")
            if not OPENAI_NAME.fullmatch(str(item.get("name"))):
                problems.append(f"[{i}] function name {item.get('name')!r} is not {OPENAI_NAME.pattern}")
            waiting[call_id] = kind
            called.add(call_id)
        elif kind == "message" and waiting:
            problems.append(f"[{i}] {item.get('role')} message before calls {sorted(waiting)} were answered")
            waiting = {}
    return problems + ([f"calls {sorted(waiting)} are never answered"] if waiting else [])


def responses_reasoning_rules(items):
    """"Item 'rs_…' of type 'reasoning' was provided without its required following item": the
    API pairs a reasoning item with the output item right after it, by that item's id. And
    "Item 'fc_…' of type 'function_call' was provided without its required 'reasoning' item":
    an output item keeps its id only beside the reasoning of its response."""
    problems = []
    for i, item in enumerate(items):
        if item_kind(item) == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else {}
            if not (is_output(nxt) and item_kind(nxt) != "reasoning" and "id" in nxt):
                problems.append(f"[{i}] reasoning {item.get('id')!r} is not followed by its output item "
                                "(a call, server item or assistant message carrying its id)")
        # A compaction item stands for earlier context, not for this response's work: its id
        # pairs with no reasoning.
        elif is_output(item) and "id" in item and item_kind(item) != "compaction" and not reasoning_before(items, i):
            problems.append(f"[{i}] {item_kind(item)} keeps its id {item['id']!r} without its reasoning item")
    return problems


def reasoning_before(items, i):
    """Whether the run of output items that `items[i]` belongs to has reasoning before it."""
    for item in reversed(items[:i]):
        if not is_output(item):
            return False
        if item_kind(item) == "reasoning":
            return True
    return False


# --- Gemini ----------------------------------------------------------------------------------

def parts_of(content):
    return content.get("parts") or []


def present(part, key):
    """Whether a part sets `key`: JSON null leaves a protobuf field unset."""
    return part.get(key) is not None


def calls_of(content):
    return [p["functionCall"] for p in parts_of(content) if present(p, "functionCall")]


def responses_of(content):
    return [p["functionResponse"] for p in parts_of(content) if present(p, "functionResponse")]


def gemini_rules(pack, record):
    contents = pack.get("contents") or []
    if not contents:
        return ["contents is empty"]
    problems = gemini_system_rules(pack.get("systemInstruction")) + gemini_role_rules(contents)
    for i, content in enumerate(contents):
        problems += [f"[{i}] contents.parts must not be empty"] if not parts_of(content) else []
        problems += [p for part in parts_of(content) for p in gemini_part_rules(i, content.get("role"), part)]
    problems += gemini_call_rules(contents) + gemini_response_rules(contents)
    problems += final_turn_rule(contents[-1].get("role"), "model", record)
    if record.get("expect_signatures"):
        problems += gemini_signature_rules(contents)
    return problems


def gemini_system_rules(system):
    if system is None:
        return []
    parts = parts_of(system)
    if not parts or any(set(p) != {"text"} or blank(p["text"]) for p in parts):
        return ["systemInstruction needs text parts, none empty or whitespace-only"]
    return []


def gemini_role_rules(contents):
    roles = [c.get("role") for c in contents]
    problems = [] if roles[0] == "user" else ["the first content is not user"]
    problems += [f"[{i}] role {r!r} is neither user nor model"
                 for i, r in enumerate(roles) if r not in ("user", "model")]
    # "Please ensure that multiturn requests alternate between user and model." The one user
    # content that may follow another is a new turn's start after a content of function
    # responses alone: Gemini 3 segments turns there (see gemini_response_rules).
    problems += [f"[{i + 1}] roles do not alternate" for i, (a, b) in enumerate(zip(roles, roles[1:]))
                 if a == b and not turn_boundary(contents[i], contents[i + 1])]
    return problems


def turn_boundary(content, nxt):
    only_responses = parts_of(content) and len(responses_of(content)) == len(parts_of(content))
    return content.get("role") == "user" and only_responses and not responses_of(nxt)


def gemini_response_rules(contents):
    """A content with functionResponse parts carries nothing else: Gemini 3 ends a step at it
    and answers 400 when text or files come with the responses (reported from production on
    gemini-3.6-flash and reproduced on Vertex AI)."""
    return [f"[{i}] functionResponse parts share their content with other parts"
            for i, c in enumerate(contents) if responses_of(c) and len(responses_of(c)) != len(parts_of(c))]


def gemini_part_rules(i, role, part):
    data = [k for k in GEMINI_DATA if present(part, k)]
    problems = [] if len(data) == 1 else [f"[{i}] a part with data fields {data}; exactly one is allowed"]
    # "Unable to submit request because it has an empty text parameter"; a model part may be
    # empty text carrying only a thought signature, as the model returned it.
    if present(part, "text") and blank(part["text"]) and not present(part, "thoughtSignature"):
        problems.append(f"[{i}] empty or whitespace-only text part")
    if (present(part, "functionCall") or part.get("thought")) and role != "model":
        problems.append(f"[{i}] a functionCall or thought part in a {role} content")
    if present(part, "functionResponse") and role != "user":
        problems.append(f"[{i}] a functionResponse part in a {role} content")
    if present(part, "functionCall") and not isinstance(part["functionCall"].get("args"), dict):
        problems.append(f"[{i}] functionCall args are not an object")
    if present(part, "functionResponse") and not isinstance(part["functionResponse"].get("response"), dict):
        problems.append(f"[{i}] functionResponse response is not an object")
    # fileData URIs are fetched by Gemini: https or gs:// (a data: URI's data goes as inlineData).
    if present(part, "fileData"):
        uri = str(part["fileData"].get("fileUri", ""))
        if not uri.startswith(("https://", "gs://")):
            problems.append(f"[{i}] fileData.fileUri {uri[:40]!r} is not https or gs://")
    # Gemini's image types: png, jpeg, webp, heic, heif (no GIF).
    for key in ("inlineData", "fileData"):
        if present(part, key) and str(part[key].get("mimeType", "")).lower() == "image/gif":
            problems.append(f"[{i}] {key} of type image/gif")
    return problems


def gemini_call_rules(contents):
    problems = []
    for i, content in enumerate(contents):
        previous = contents[i - 1] if i > 0 else {}
        if responses_of(content) and not calls_of(previous):
            problems.append(f"[{i}] functionResponse parts answer no functionCall of the previous content")
        if not calls_of(content):
            continue
        if previous.get("role") != "user":
            problems.append(f"[{i}] function call turn not right after a user or function response turn")
        problems += gemini_answers(i, content, contents[i + 1] if i + 1 < len(contents) else None)
    return problems


def gemini_answers(i, content, nxt):
    """"Please ensure that the number of function response parts is equal to the number of
    function call parts of the function call turn": the next content answers every call, by
    id and name, with its functionResponse parts first."""
    asked = sorted(f"{c.get('name')}#{c.get('id')}" for c in calls_of(content))
    if nxt is None:
        return [f"[{i}] function calls {asked} are never answered"]
    answered = sorted(f"{r.get('name')}#{r.get('id')}" for r in responses_of(nxt))
    problems = [] if answered == asked else [f"[{i + 1}] functionResponse parts {answered} do not match calls {asked}"]
    is_response = [present(p, "functionResponse") for p in parts_of(nxt)]
    n = sum(is_response)
    if is_response[:n] != [True] * n:
        problems.append(f"[{i + 1}] functionResponse parts do not come first")
    return problems


def gemini_signature_rules(contents):
    """Gemini 3 validates the current turn: from the last user content with standard content
    (not functionResponse), the first functionCall part of every model step must carry its
    thoughtSignature (ai.google.dev/gemini-api/docs/thought-signatures); earlier turns are
    not validated."""
    starts = [i for i, c in enumerate(contents)
              if c.get("role") == "user" and any(not present(p, "functionResponse") for p in parts_of(c))]
    problems = []
    for i in range(max(starts, default=0), len(contents)):
        first = next((p for p in parts_of(contents[i]) if present(p, "functionCall")), None)
        if first is not None and not present(first, "thoughtSignature"):
            problems.append(f"[{i}] the first functionCall part of a current-turn step has no thoughtSignature")
    return problems


# --- Driver ----------------------------------------------------------------------------------

FORMATS = {
    "openai_chat": (list, chat_types, openai_rules),
    "anthropic_messages": (dict, anthropic_types, anthropic_rules),
    "openai_responses": (list, responses_types, responses_rules),
    "gemini": (dict, gemini_types, gemini_rules),
}


def check(adapters, fmt, rendered, record=None):
    """Problems of one rendered pack; `record` carries the corpus line's other fields."""
    if fmt not in FORMATS:
        return [f"unknown format {fmt!r}"]
    shape, types, rules = FORMATS[fmt]
    pack = json.loads(rendered)
    if not isinstance(pack, shape):
        return [f"the pack is not a JSON {shape.__name__}"]
    problems = foreign_markers(fmt, rendered) + types(adapters, pack)
    try:
        problems += rules(pack, record or {})
    except (AttributeError, KeyError, TypeError):
        # The rules read well-typed packs; a malformed one is already reported above, but a
        # crash on a well-typed pack is a checker bug that must not pass silently.
        if not problems:
            raise
    return problems


# --- Self-test -------------------------------------------------------------------------------
# Each case is (format, pack) or (format, pack, record fields). Provider-native values carry
# the markers the generator plants; Gemini's are base64 text, as the API's bytes fields want.

def chat_call(call_id, arguments="{}"):
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": arguments}}


def tool_use(call_id, **extra):
    return {"type": "tool_use", "id": call_id, "name": "f", "input": {}, **extra}


def tool_result(call_id, content="r"):
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def thinking(signature="ANTHROPIC-NATIVE-sig", **extra):
    return {"type": "thinking", "thinking": "plan", "signature": signature, **extra}


def user(content):
    return {"role": "user", "content": content}


def assistant(content):
    return {"role": "assistant", "content": content}


def item(role, content, **extra):
    return {"content": content, "role": role, "type": "message", **extra}


def reasoning(rs_id="rs_OPENAI-NATIVE-1", **extra):
    return {"id": rs_id, "summary": [{"text": "plan", "type": "summary_text"}], "type": "reasoning", **extra}


def output_message(msg_id="msg_OPENAI-NATIVE-1", text="done"):
    return {"content": [{"annotations": [], "text": text, "type": "output_text"}], "id": msg_id,
            "role": "assistant", "status": "completed", "type": "message"}


def call(call_id, arguments="{}", **extra):
    return {"arguments": arguments, "call_id": call_id, "name": "f", "type": "function_call", **extra}


def output(call_id):
    return {"call_id": call_id, "output": "r", "type": "function_call_output"}


def text(value, **extra):
    return {"text": value, **extra}


def contents(*turns, **pack):
    return {**pack, "contents": [{"parts": parts, "role": role} for role, parts in turns]}


def fcall(call_id, name="f", **extra):
    return {"functionCall": {"args": {}, "id": call_id, "name": name}, **extra}


def fresponse(call_id, name="f"):
    return {"functionResponse": {"id": call_id, "name": name, "response": {"output": "r"}}}


SIGNED = {"thoughtSignature": "GEMINI-NATIVE-sigA"}
ASK = ("user", [text("q")])

BROKEN = [
    # Provider compaction: an Anthropic block that is not the conversation's first, two with
    # content, and a Responses item sent after what it replaced.
    ("anthropic_messages", {"messages": [user("q"), assistant([
        {"type": "compaction", "content": "summary", "signature": "c2ln"}, {"type": "text", "text": "a"}]),
        user("next")]}),
    ("anthropic_messages", {"messages": [assistant([
        {"type": "compaction", "content": "summary", "signature": "c2ln"},
        {"type": "compaction", "content": "again", "signature": "c2ln"}, {"type": "text", "text": "a"}]),
        user("next")]}),
    ("openai_responses", [{"type": "message", "role": "assistant", "content": "earlier"},
                          {"type": "compaction", "encrypted_content": "gAAA"}, item("user", "next")]),
    # A data-URI PDF rendered as a text note holding its base64.
    ("openai_chat", [user([{"type": "text", "text": "[attachment doc.pdf (application/pdf): data:application/pdf;base64,JVBERi0xLjQK]"}])]),
    ("openai_responses", [item("user", [{"type": "input_text", "text": "[attachment doc.pdf (application/pdf): data:application/pdf;base64,JVBERi0xLjQK]"}])]),
    # A refusal rendered without content, and calls with a null one (LangChain refuses both).
    ("openai_chat", [user("q"), {"role": "assistant", "refusal": "I can't help with that."}]),
    ("openai_chat", [user("q"), {"role": "assistant", "content": None, "tool_calls": [chat_call("a")]},
                     {"role": "tool", "tool_call_id": "a", "content": "r"}]),
    ("openai_chat", [{"role": "tool", "tool_call_id": "a", "content": "x"}]),
    ("openai_chat", [{"role": "assistant", "content": None, "tool_calls": [chat_call("a")]}, user("hurry")]),
    ("openai_chat", [{"role": "wizard", "content": "x"}]),
    ("anthropic_messages", {"messages": [assistant("hi")]}),
    ("anthropic_messages", {"messages": []}),
    ("anthropic_messages", {"messages": [user([{"type": "text", "text": " "}])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([{"type": "text", "text": "a "}])]}),
    ("anthropic_messages", {"messages": [user([{"type": "image", "source": {
        "type": "base64", "media_type": "image/svg+xml", "data": "AA=="}}])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([tool_use("a")]), user("no result")]}),
    ("anthropic_messages", {"messages": [user([{"type": "texx", "text": "q"}])]}),
    ("openai_chat", [user("q"), {"role": "assistant", "content": None, "tool_calls": [chat_call("a", "[1, 2]")]},
                     {"role": "tool", "tool_call_id": "a", "content": "r"}]),
    ("anthropic_messages", {"messages": [user([tool_result("a", "orphan")])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([tool_use("a")]), user([tool_result("a", "  ")])]}),
    ("anthropic_messages", {"system": " ", "messages": [user("q")]}),
    ("anthropic_messages", {"system": [{"type": "text", "text": " "}], "messages": [user("q")]}),
    ("anthropic_messages", {"messages": [user([
        {"type": "text", "text": f"q{i}", "cache_control": {"type": "ephemeral"}} for i in range(5)])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([{**tool_use("a"), "input": []}]),
                                         user([tool_result("a")])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([tool_use("a")]),
                                         user([{"type": "text", "text": "hurry"}, tool_result("a")])]}),
    # OpenAI images are PNG, JPEG, WEBP or GIF; a Chat Completions file is a PDF.
    ("openai_chat", [user([{"type": "image_url", "image_url": {"url": "data:image/svg+xml;base64,AA=="}}])]),
    ("openai_chat", [user([{"type": "file", "file": {"filename": "a.txt", "file_data": "data:text/plain;base64,AA=="}}])]),
    ("openai_responses", [item("user", [{"type": "input_image", "image_url": "data:image/bmp;base64,Qk0=",
                                         "detail": "auto"}])]),
    ("anthropic_messages", {"messages": [user("q"), assistant([tool_use("functions.f:0")]),
                                         user([tool_result("functions.f:0")])]}),
    ("openai_chat", [user("q"), {"role": "assistant", "content": None, "tool_calls": [chat_call("c" * 41)]},
                     {"role": "tool", "tool_call_id": "c" * 41, "content": "r"}]),
    ("openai_chat", [{"role": "user", "content": "q", "name": "Ann Lee"}]),
    ("openai_responses", [item("user", "q"), call("c1", name="mcp.search"), output("c1")]),
    ("anthropic_messages", {"messages": [user([{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "A" * (5 * 1024 * 1024 + 4)}}])]}),
    # Current Claude and Gemini models refuse a request that ends on the model's turn.
    ("anthropic_messages", {"messages": [user("q"), assistant("a")]}, {"final_assistant_allowed": False}),
    ("gemini", contents(ASK, ("model", [text("a")])), {"final_assistant_allowed": False}),
    ("openai_responses", [item("user", [{"type": "input_file", "filename": "voice.mp3",
                                         "file_data": "data:audio/mpeg;base64,AA=="}])]),
    ("openai_responses", [item("user", [{"type": "input_file", "filename": "README",
                                         "file_data": "data:text/markdown;base64,AA=="}])]),
    ("openai_responses", [item("user", [{"type": "input_file", "filename": "v1.2/notes",
                                         "file_data": "data:text/plain;base64,AA=="}])]),
    ("openai_responses", [item("user", [{"type": "input_file", "filename": "report.final",
                                         "file_data": "data:application/pdf;base64,AA=="}])]),
    # A phase is OpenAI Responses' and one of its two labels.
    ("openai_chat", [user("q"), {"role": "assistant", "content": "a", "phase": "final_answer"}]),
    ("openai_responses", [item("user", "q"), item("assistant", "a", phase="final")]),
    # Chat Completions carries no reasoning, signature or item id, nor another provider's data.
    ("openai_chat", [user("q"), {"role": "assistant", "content": "a", "reasoning_content": "plan"}]),
    ("openai_chat", [user("q"), {"role": "assistant", "content": None, "tool_calls": [
        {**chat_call("a"), "signature": "sig"}]}, {"role": "tool", "tool_call_id": "a", "content": "r"}]),
    ("openai_chat", [user("q"), assistant("OPENAI-NATIVE-msg")]),
    # Thinking: assistant only, signed, uncached, never last in a message or in the prefill.
    ("anthropic_messages", {"messages": [user([thinking(), {"type": "text", "text": "q"}])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([thinking(""), tool_use("a")]),
                                         user([tool_result("a")])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([{"type": "redacted_thinking", "data": ""},
                                                               tool_use("a")]), user([tool_result("a")])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([thinking(cache_control={"type": "ephemeral"}),
                                                               tool_use("a")]), user([tool_result("a")])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([{"type": "text", "text": "a"}, thinking()]),
                                         user("more")]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([thinking(), {"type": "text", "text": "a"}])]}),
    ("anthropic_messages", {"messages": [user("q"), assistant([thinking("OPENAI-NATIVE-sig"), tool_use("a")]),
                                         user([tool_result("a")])]}),
    # The open tool loop lost its thinking, while earlier turns kept theirs.
    ("anthropic_messages", {"messages": [
        user("q"), assistant([thinking(), {"type": "text", "text": "a"}]), user("again"),
        assistant([tool_use("a")]), user([tool_result("a")])]}, {"expect_thinking": True}),
    # Responses: calls and outputs pair up, one call_id each, arguments an object.
    ("openai_responses", [item("user", "q"), output("c1")]),
    ("openai_responses", [item("user", "q"), call("c1")]),
    ("openai_responses", [item("user", "q"), call("c1"), item("user", "hurry"), output("c1")]),
    ("openai_responses", [item("user", "q"), call("c1"), call("c1"), output("c1")]),
    ("openai_responses", [item("user", "q"), call("c1", "[1]"), output("c1")]),
    ("openai_responses", [item("user", "q"), {"type": "function_call_output", "output": "r"}]),
    # A built-in call is answered by its own output type (a shell call is not a function).
    ("openai_responses", [item("user", "q"), {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}},
                          output("s1")]),
    ("openai_responses", [item("user", "q"), call("c1"),
                          {"type": "apply_patch_call_output", "call_id": "c1", "status": "completed"}]),
    ("openai_responses", [item("user", "q"), call("c1", signature="sig"), output("c1")]),
    ("openai_responses", [item("user", "q"), item("assistant", "GEMINI-NATIVE-leak")]),
    # Responses: reasoning is followed by its own output item, found by that item's id.
    ("openai_responses", [item("user", "q"), reasoning()]),
    ("openai_responses", [item("user", "q"), reasoning(), item("assistant", "done")]),
    ("openai_responses", [item("user", "q"), reasoning(), reasoning("rs_OPENAI-NATIVE-2"),
                          output_message()]),
    ("openai_responses", [item("user", "q"), call("c1", id="fc_OPENAI-NATIVE-1"), output("c1")]),
    ("openai_responses", [item("user", "q"), reasoning(), output_message(), item("user", "again"),
                          reasoning("rs_OPENAI-NATIVE-2"), output_message()]),
    # Gemini: alternating turns that open with the user, one data field per part, no blanks.
    ("gemini", contents(("model", [text("hi")]), ASK)),
    ("gemini", contents(ASK, ("user", [text("more")]))),
    ("gemini", contents(("user", []))),
    ("gemini", contents(("user", [text(" ")]))),
    ("gemini", contents(("user", [text("q", inlineData={"data": "AA==", "mimeType": "image/png"})]))),
    ("gemini", contents(ASK, ("assistant", [text("a")]))),
    ("gemini", contents(ASK, systemInstruction={"parts": [text(" ")]})),
    ("gemini", contents(("user", [text("q", bogus=1)]))),
    ("gemini", contents(("user", [{"inline_data": {"data": "AA==", "mime_type": "image/png"}}]))),
    ("gemini", contents(ASK, ("model", [text("a", thoughtSignature="GEMINI-NATIVE-sig1")]))),
    ("gemini", contents(ASK, ("model", [text("a", thoughtSignature="ANTHROPIC-NATIVE-sig")]))),
    # Gemini: function responses alone in their content; only a new turn's user text may follow them.
    ("gemini", contents(ASK, ("model", [fcall("c1")]), ("user", [fresponse("c1"), text("hurry")]))),
    ("gemini", contents(ASK, ("model", [fcall("c1")]), ("user", [fresponse("c1")]), ("user", [fresponse("c1")]))),
    # Gemini: calls only from the model, right after a user turn, all answered first thing next.
    ("gemini", contents(("model", [fcall("c1")]), ("user", [fresponse("c1")]))),
    ("gemini", contents(ASK, ("model", [fcall("c1"), fcall("c2")]), ("user", [fresponse("c1")]))),
    ("gemini", contents(ASK, ("model", [fcall("c1")]), ("user", [fresponse("c9")]))),
    ("gemini", contents(ASK, ("model", [fcall("c1")]), ("user", [text("hurry"), fresponse("c1")]))),
    ("gemini", contents(ASK, ("model", [fcall("c1")]))),
    ("gemini", contents(ASK, ("model", [text("a")]), ("user", [fresponse("c1")]))),
    ("gemini", contents(ASK, ("model", [fcall("c1"), fresponse("c1")]), ("user", [fresponse("c1")]))),
    ("gemini", contents(("user", [text("q"), fcall("c1")]))),
    ("gemini", contents(("user", [text("q", thought=True)]))),
    ("gemini", contents(ASK, ("model", [{"functionCall": {"args": [1], "id": "c1", "name": "f"}}]),
                        ("user", [fresponse("c1")]))),
    # Gemini 3: the current turn's steps keep the signature of their first call.
    ("gemini", contents(ASK, ("model", [fcall("c1", **SIGNED)]), ("user", [fresponse("c1")]),
                        ("model", [fcall("c2")]), ("user", [fresponse("c2")])), {"expect_signatures": True}),
    # data: URIs and http URLs sent where the provider fetches URLs (issue 39).
    ("anthropic_messages", {"messages": [user([text("q"), {"type": "image", "source": {
        "type": "url", "url": "data:image/png;base64,iVBORw=="}}])]}),
    ("anthropic_messages", {"messages": [user([text("q"), {"type": "document", "source": {
        "type": "url", "url": "http://example.com/a.pdf"}}])]}),
    ("gemini", contents(("user", [text("q"), {"fileData": {"fileUri": "data:image/png;base64,iVBORw==",
                                                            "mimeType": "image/png"}}]))),
    ("gemini", contents(("user", [text("q"), {"inlineData": {"data": "R0lGODlh", "mimeType": "image/gif"}}]))),
]

VALID = [
    # A pack that starts from an Anthropic compaction block, and one from a Responses window.
    ("anthropic_messages", {"messages": [assistant([
        {"type": "compaction", "content": "summary", "signature": "c2ln"}, {"type": "text", "text": "a"}]),
        user("next")]}),
    ("openai_responses", [item("user", "q"), {"type": "compaction", "encrypted_content": "gAAA"},
                          item("user", "next")]),
    ("openai_responses", [item("user", "q"), {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}},
                          {"type": "shell_call_output", "call_id": "s1", "output": [
                              {"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}]),
    ("openai_chat", [{"role": "system", "content": "s"}, user("q"),
                     {"role": "assistant", "content": "", "tool_calls": [chat_call("a")]},
                     {"role": "tool", "tool_call_id": "a", "content": "r"}, assistant("done")]),
    ("anthropic_messages", {"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
                            "messages": [
        user([{"type": "text", "text": "q"}]),
        assistant([tool_use("a")]),
        user([tool_result("a"), {"type": "text", "text": "thanks"}]),
        assistant([{"type": "text", "text": "done"}])]}),
    # Thinking opens the tool loop; a later step of the same loop may come without (no
    # interleaved thinking); an earlier turn keeps redacted thinking.
    ("anthropic_messages", {"system": [{"type": "text", "text": "s"}], "messages": [
        user("q"),
        assistant([{"type": "redacted_thinking", "data": "ANTHROPIC-NATIVE-data"}, {"type": "text", "text": "a"}]),
        user("again"),
        assistant([thinking(), {"type": "text", "text": "looking"}, tool_use("a")]),
        user([tool_result("a")]),
        assistant([tool_use("b", cache_control={"type": "ephemeral"})]),
        user([tool_result("b") | {"cache_control": {"type": "ephemeral"}}])]}, {"expect_thinking": True}),
    ("openai_responses", [
        item("system", "s"),
        item("user", [{"type": "input_text", "text": "q"},
                      {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
                      {"type": "input_image", "image_url": "data:image/png;base64,iVBORw==", "detail": "auto"},
                      {"type": "input_file", "filename": "a.pdf",
                       "file_data": "data:application/pdf;base64,JVBERg=="}]),
        reasoning(encrypted_content="OPENAI-NATIVE-enc"),
        call("c1", id="fc_OPENAI-NATIVE-1"), call("c2", '{"x": 1}', id="fc_OPENAI-NATIVE-2"),
        output("c1"), output("c2"),
        reasoning("rs_OPENAI-NATIVE-2", content=[{"text": "t", "type": "reasoning_text"}]),
        output_message(),
        item("user", "thanks"), call("c3"), output("c3"), item("assistant", "you're welcome", phase="final_answer")]),
    # Only the first of parallel calls is signed; a signature may come on an empty text part.
    ("gemini", contents(
        ("user", [text("q"), {"inlineData": {"data": "iVBORw==", "mimeType": "image/png"}},
                  {"fileData": {"fileUri": "https://example.com/a.pdf", "mimeType": "application/pdf"}}]),
        ("model", [text("plan", thought=True), fcall("c1", **SIGNED), fcall("c2", "g")]),
        ("user", [fresponse("c1"), fresponse("c2", "g")]),
        ("user", [text("hurry")]),
        ("model", [text("checking"), fcall("c3", **SIGNED)]),
        ("user", [fresponse("c3")]),
        ("model", [text("done"), text("", thoughtSignature="GEMINI-NATIVE-sigQ")]),
        systemInstruction={"parts": [text("s")]}), {"expect_signatures": True}),
]


def run(adapters, case):
    fmt, pack, *record = case
    return check(adapters, fmt, json.dumps(pack), record[0] if record else None)


def self_test(adapters):
    accepted = [case for case in BROKEN if not run(adapters, case)]
    for fmt, pack, *_ in accepted:
        print(f"checker accepted a broken {fmt} pack: {json.dumps(pack)}")
    rejected = [(case[0], problems) for case in VALID if (problems := run(adapters, case))]
    for fmt, problems in rejected:
        print(f"checker rejected a valid {fmt} pack: {problems}")
    print(f"self-test: {len(BROKEN) - len(accepted)} of {len(BROKEN)} broken packs rejected, "
          f"{len(VALID) - len(rejected)} of {len(VALID)} valid packs accepted")
    return 1 if accepted or rejected else 0


def main():
    adapters = sdk_types()
    if sys.argv[1:] == ["--self-test"]:
        return self_test(adapters)
    failures = total = 0
    for line in open(sys.argv[1]):
        record = json.loads(line)
        total += 1
        problems = check(adapters, record["format"], record["rendered"], record)
        if problems:
            failures += 1
            if failures <= 20:
                print(f"{record.get('case', total)} {record['format']}: {'; '.join(problems)}")
    print(f"{total} packs checked, {failures} with violations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
