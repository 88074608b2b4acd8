"""Provider objects to `NativeItems` (docs/native.md): detect what an SDK object is and dump it to
the JSON its API sends, without importing any provider SDK.

| object                                                          | format                      |
|-----------------------------------------------------------------|-----------------------------|
| openai `ChatCompletion`                                          | FORMAT_OPENAI_CHAT          |
| openai `Response`, or a list of Responses output/input items    | FORMAT_OPENAI_RESPONSES     |
| anthropic `Message` (or `BetaMessage`)                           | FORMAT_ANTHROPIC_MESSAGES   |
| google-genai `GenerateContentResponse`, or a list of `Content`  | FORMAT_GEMINI               |
| plain dicts / lists / JSON text                                 | `format=` required          |

Dumps: openai and anthropic objects with `to_dict(mode="json")`; google-genai objects with
`model_dump(mode="json", by_alias=True, exclude_none=True)` (bytes become URL-safe base64, which
ctxd accepts).
"""

from __future__ import annotations

import json
from typing import Any

from .v1 import messages_pb2

__all__ = ["detect_format", "dump", "to_native_items", "parse_format"]

# google-genai fields that are SDK bookkeeping, not part of the REST response.
_GENAI_EXCLUDE = {"sdk_http_response", "automatic_function_calling_history", "parsed"}

_FORMAT_ALIASES = {
    "chat": messages_pb2.FORMAT_OPENAI_CHAT,
    "openai": messages_pb2.FORMAT_OPENAI_CHAT,
    "openai_chat": messages_pb2.FORMAT_OPENAI_CHAT,
    "anthropic": messages_pb2.FORMAT_ANTHROPIC_MESSAGES,
    "anthropic_messages": messages_pb2.FORMAT_ANTHROPIC_MESSAGES,
    "responses": messages_pb2.FORMAT_OPENAI_RESPONSES,
    "openai_responses": messages_pb2.FORMAT_OPENAI_RESPONSES,
    "gemini": messages_pb2.FORMAT_GEMINI,
}


def parse_format(value: Any) -> int:
    """A `Format` value from an int, `"FORMAT_GEMINI"`, or a short name (`"gemini"`,
    `"responses"`, `"anthropic"`, `"chat"`)."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        key = value.strip()
        if key.upper().startswith("FORMAT_"):
            return messages_pb2.Format.Value(key.upper())
        if key.lower() in _FORMAT_ALIASES:
            return _FORMAT_ALIASES[key.lower()]
    raise ValueError(f"unknown format {value!r}")


def _module(obj: Any) -> str:
    return type(obj).__module__ or ""


def _names(obj: Any) -> set[str]:
    return {cls.__name__ for cls in type(obj).__mro__}


def detect_format(obj: Any) -> int | None:
    """The format of an SDK object (or of the first SDK object of a list); None for plain data."""
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found = detect_format(item)
            if found is not None:
                return found
        return None
    module, names = _module(obj), _names(obj)
    if module.startswith("openai."):
        if "ChatCompletion" in names:
            return messages_pb2.FORMAT_OPENAI_CHAT
        if module.startswith("openai.types.responses") or "Response" in names:
            return messages_pb2.FORMAT_OPENAI_RESPONSES
        if module.startswith("openai.types.chat"):
            return messages_pb2.FORMAT_OPENAI_CHAT
    if module.startswith("anthropic."):
        return messages_pb2.FORMAT_ANTHROPIC_MESSAGES
    if module.startswith("google.genai"):
        return messages_pb2.FORMAT_GEMINI
    return None


def dump(obj: Any) -> Any:
    """The API JSON (as Python data) of an SDK object, a list of them, or plain data."""
    if isinstance(obj, (list, tuple)):
        return [dump(item) for item in obj]
    if isinstance(obj, (dict, str, int, float, bool)) or obj is None:
        return obj
    module = _module(obj)
    if module.startswith("google.genai"):
        return obj.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=_GENAI_EXCLUDE)
    if hasattr(obj, "to_dict"):
        return obj.to_dict(mode="json")
    if hasattr(obj, "model_dump"):  # other pydantic models: API field names, only the fields set
        return obj.model_dump(mode="json", by_alias=True, exclude_unset=True)
    raise TypeError(f"cannot dump {type(obj).__qualname__} to provider JSON")


def to_native_items(obj: Any, format: Any = None) -> messages_pb2.NativeItems:
    """`NativeItems` for an SDK object, a list of items, plain data or JSON text.

    `format` is required for plain dicts, lists and JSON text; when given with an SDK object it
    must agree with the detected one.
    """
    detected = detect_format(obj)
    wanted = parse_format(format) if format is not None else None
    if wanted is None and detected is None:
        raise TypeError(
            f"cannot tell the provider format of {type(obj).__qualname__}: pass format= "
            "(e.g. format='responses') for plain dicts, lists and JSON text"
        )
    if wanted is not None and detected is not None and wanted != detected:
        raise ValueError(
            f"format {messages_pb2.Format.Name(wanted)} given for a "
            f"{messages_pb2.Format.Name(detected)} object ({type(obj).__qualname__})"
        )
    fmt = wanted if wanted is not None else detected
    text = obj if isinstance(obj, str) else json.dumps(dump(obj), ensure_ascii=False, separators=(",", ":"))
    return messages_pb2.NativeItems(format=fmt, json=text)
