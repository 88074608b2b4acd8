import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_TOOL: _ClassVar[Role]

class Tokenizer(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOKENIZER_UNSPECIFIED: _ClassVar[Tokenizer]
    TOKENIZER_O200K_BASE: _ClassVar[Tokenizer]
    TOKENIZER_CL100K_BASE: _ClassVar[Tokenizer]
    TOKENIZER_APPROX: _ClassVar[Tokenizer]

class Format(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FORMAT_UNSPECIFIED: _ClassVar[Format]
    FORMAT_OPENAI_CHAT: _ClassVar[Format]
    FORMAT_ANTHROPIC_MESSAGES: _ClassVar[Format]
    FORMAT_OPENAI_RESPONSES: _ClassVar[Format]
    FORMAT_GEMINI: _ClassVar[Format]

class Provider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROVIDER_UNSPECIFIED: _ClassVar[Provider]
    PROVIDER_ANTHROPIC: _ClassVar[Provider]
    PROVIDER_OPENAI: _ClassVar[Provider]
    PROVIDER_GEMINI: _ClassVar[Provider]
ROLE_UNSPECIFIED: Role
ROLE_SYSTEM: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_TOOL: Role
TOKENIZER_UNSPECIFIED: Tokenizer
TOKENIZER_O200K_BASE: Tokenizer
TOKENIZER_CL100K_BASE: Tokenizer
TOKENIZER_APPROX: Tokenizer
FORMAT_UNSPECIFIED: Format
FORMAT_OPENAI_CHAT: Format
FORMAT_ANTHROPIC_MESSAGES: Format
FORMAT_OPENAI_RESPONSES: Format
FORMAT_GEMINI: Format
PROVIDER_UNSPECIFIED: Provider
PROVIDER_ANTHROPIC: Provider
PROVIDER_OPENAI: Provider
PROVIDER_GEMINI: Provider

class NativeItems(_message.Message):
    __slots__ = ("format", "json")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    format: Format
    json: str
    def __init__(self, format: _Optional[_Union[Format, str]] = ..., json: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments", "signature", "item_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments: str
    signature: str
    item_id: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ..., signature: _Optional[str] = ..., item_id: _Optional[str] = ...) -> None: ...

class Reasoning(_message.Message):
    __slots__ = ("provider", "type", "text", "signature", "data", "id", "summary", "position")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    provider: Provider
    type: str
    text: str
    signature: str
    data: str
    id: str
    summary: _containers.RepeatedScalarFieldContainer[str]
    position: int
    def __init__(self, provider: _Optional[_Union[Provider, str]] = ..., type: _Optional[str] = ..., text: _Optional[str] = ..., signature: _Optional[str] = ..., data: _Optional[str] = ..., id: _Optional[str] = ..., summary: _Optional[_Iterable[str]] = ..., position: _Optional[int] = ...) -> None: ...

class Attachment(_message.Message):
    __slots__ = ("mime_type", "filename", "data", "uri", "width", "height")
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    mime_type: str
    filename: str
    data: bytes
    uri: str
    width: int
    height: int
    def __init__(self, mime_type: _Optional[str] = ..., filename: _Optional[str] = ..., data: _Optional[bytes] = ..., uri: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class LlmError(_message.Message):
    __slots__ = ("code", "message", "partial_output")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    partial_output: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., partial_output: _Optional[str] = ...) -> None: ...

class TokenCounts(_message.Message):
    __slots__ = ("o200k_base", "cl100k_base", "approx")
    O200K_BASE_FIELD_NUMBER: _ClassVar[int]
    CL100K_BASE_FIELD_NUMBER: _ClassVar[int]
    APPROX_FIELD_NUMBER: _ClassVar[int]
    o200k_base: int
    cl100k_base: int
    approx: int
    def __init__(self, o200k_base: _Optional[int] = ..., cl100k_base: _Optional[int] = ..., approx: _Optional[int] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "name", "tool_calls", "tool_call_id", "attachments", "metadata", "exclude_from_context", "pinned", "error", "response_id", "sequence", "created_at", "tokens", "reasoning", "content_item_id", "content_signature", "reasoning_tokens", "content_phase", "native", "usage", "occurred_at")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FROM_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    CONTENT_ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_PHASE_FIELD_NUMBER: _ClassVar[int]
    NATIVE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    role: Role
    content: str
    name: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    attachments: _containers.RepeatedCompositeFieldContainer[Attachment]
    metadata: _containers.ScalarMap[str, str]
    exclude_from_context: bool
    pinned: bool
    error: LlmError
    response_id: str
    sequence: int
    created_at: _timestamp_pb2.Timestamp
    tokens: TokenCounts
    reasoning: _containers.RepeatedCompositeFieldContainer[Reasoning]
    content_item_id: str
    content_signature: str
    reasoning_tokens: TokenCounts
    content_phase: str
    native: NativeItems
    usage: Usage
    occurred_at: _timestamp_pb2.Timestamp
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ..., name: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[Attachment, _Mapping]]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., exclude_from_context: _Optional[bool] = ..., pinned: _Optional[bool] = ..., error: _Optional[_Union[LlmError, _Mapping]] = ..., response_id: _Optional[str] = ..., sequence: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tokens: _Optional[_Union[TokenCounts, _Mapping]] = ..., reasoning: _Optional[_Iterable[_Union[Reasoning, _Mapping]]] = ..., content_item_id: _Optional[str] = ..., content_signature: _Optional[str] = ..., reasoning_tokens: _Optional[_Union[TokenCounts, _Mapping]] = ..., content_phase: _Optional[str] = ..., native: _Optional[_Union[NativeItems, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
