from ctxd.v1 import context_pb2 as _context_pb2
from ctxd.v1 import conversations_pb2 as _conversations_pb2
from ctxd.v1 import memory_pb2 as _memory_pb2
from ctxd.v1 import messages_pb2 as _messages_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AppendMessageRequest(_message.Message):
    __slots__ = ("conversation_id", "messages", "idempotency_key", "expected_last_sequence", "native")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NATIVE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Message]
    idempotency_key: str
    expected_last_sequence: int
    native: _messages_pb2.NativeItems
    def __init__(self, conversation_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_messages_pb2.Message, _Mapping]]] = ..., idempotency_key: _Optional[str] = ..., expected_last_sequence: _Optional[int] = ..., native: _Optional[_Union[_messages_pb2.NativeItems, _Mapping]] = ...) -> None: ...

class AppendMessageResponse(_message.Message):
    __slots__ = ("first_sequence", "last_sequence", "conversation_last_sequence", "replayed")
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    first_sequence: int
    last_sequence: int
    conversation_last_sequence: int
    replayed: bool
    def __init__(self, first_sequence: _Optional[int] = ..., last_sequence: _Optional[int] = ..., conversation_last_sequence: _Optional[int] = ..., replayed: _Optional[bool] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ("conversation_id", "after_sequence", "page_size", "format")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    after_sequence: int
    page_size: int
    format: _messages_pb2.Format
    def __init__(self, conversation_id: _Optional[str] = ..., after_sequence: _Optional[int] = ..., page_size: _Optional[int] = ..., format: _Optional[_Union[_messages_pb2.Format, str]] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ("messages", "next_after_sequence", "rendered")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Message]
    next_after_sequence: int
    rendered: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_messages_pb2.Message, _Mapping]]] = ..., next_after_sequence: _Optional[int] = ..., rendered: _Optional[str] = ...) -> None: ...

class DeleteConversationRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class DeleteConversationResponse(_message.Message):
    __slots__ = ("messages_deleted",)
    MESSAGES_DELETED_FIELD_NUMBER: _ClassVar[int]
    messages_deleted: int
    def __init__(self, messages_deleted: _Optional[int] = ...) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ("text", "tokenizer")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    text: str
    tokenizer: _messages_pb2.Tokenizer
    def __init__(self, text: _Optional[str] = ..., tokenizer: _Optional[_Union[_messages_pb2.Tokenizer, str]] = ...) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ("tokens", "tokenizer")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    tokenizer: _messages_pb2.Tokenizer
    def __init__(self, tokens: _Optional[int] = ..., tokenizer: _Optional[_Union[_messages_pb2.Tokenizer, str]] = ...) -> None: ...

class SearchMessagesRequest(_message.Message):
    __slots__ = ("conversation_id", "query", "page_size", "roles", "tool_names", "page_token")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    query: str
    page_size: int
    roles: _containers.RepeatedScalarFieldContainer[_messages_pb2.Role]
    tool_names: _containers.RepeatedScalarFieldContainer[str]
    page_token: str
    def __init__(self, conversation_id: _Optional[str] = ..., query: _Optional[str] = ..., page_size: _Optional[int] = ..., roles: _Optional[_Iterable[_Union[_messages_pb2.Role, str]]] = ..., tool_names: _Optional[_Iterable[str]] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("sequence", "role", "snippet", "score", "tool_name", "relevance")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    role: _messages_pb2.Role
    snippet: str
    score: float
    tool_name: str
    relevance: float
    def __init__(self, sequence: _Optional[int] = ..., role: _Optional[_Union[_messages_pb2.Role, str]] = ..., snippet: _Optional[str] = ..., score: _Optional[float] = ..., tool_name: _Optional[str] = ..., relevance: _Optional[float] = ...) -> None: ...

class SearchMessagesResponse(_message.Message):
    __slots__ = ("hits", "next_page_token")
    HITS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    next_page_token: str
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
