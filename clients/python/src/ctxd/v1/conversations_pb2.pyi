import datetime

from ctxd.v1 import messages_pb2 as _messages_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConversationStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONVERSATION_STATUS_UNSPECIFIED: _ClassVar[ConversationStatus]
    CONVERSATION_STATUS_ACTIVE: _ClassVar[ConversationStatus]
    CONVERSATION_STATUS_AWAITING_ANSWER: _ClassVar[ConversationStatus]
    CONVERSATION_STATUS_IDLE: _ClassVar[ConversationStatus]
    CONVERSATION_STATUS_CLOSED: _ClassVar[ConversationStatus]

class ChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANGE_KIND_UNSPECIFIED: _ClassVar[ChangeKind]
    CHANGE_KIND_APPENDED: _ClassVar[ChangeKind]
    CHANGE_KIND_REDACTED: _ClassVar[ChangeKind]
    CHANGE_KIND_REWOUND: _ClassVar[ChangeKind]
    CHANGE_KIND_DELETED: _ClassVar[ChangeKind]
    CHANGE_KIND_EXPIRED: _ClassVar[ChangeKind]
    CHANGE_KIND_FORKED: _ClassVar[ChangeKind]
    CHANGE_KIND_UPDATED: _ClassVar[ChangeKind]
    CHANGE_KIND_SUMMARIZED: _ClassVar[ChangeKind]
    CHANGE_KIND_MEMORY_UPDATED: _ClassVar[ChangeKind]
CONVERSATION_STATUS_UNSPECIFIED: ConversationStatus
CONVERSATION_STATUS_ACTIVE: ConversationStatus
CONVERSATION_STATUS_AWAITING_ANSWER: ConversationStatus
CONVERSATION_STATUS_IDLE: ConversationStatus
CONVERSATION_STATUS_CLOSED: ConversationStatus
CHANGE_KIND_UNSPECIFIED: ChangeKind
CHANGE_KIND_APPENDED: ChangeKind
CHANGE_KIND_REDACTED: ChangeKind
CHANGE_KIND_REWOUND: ChangeKind
CHANGE_KIND_DELETED: ChangeKind
CHANGE_KIND_EXPIRED: ChangeKind
CHANGE_KIND_FORKED: ChangeKind
CHANGE_KIND_UPDATED: ChangeKind
CHANGE_KIND_SUMMARIZED: ChangeKind
CHANGE_KIND_MEMORY_UPDATED: ChangeKind

class Conversation(_message.Message):
    __slots__ = ("conversation_id", "title", "status", "labels", "created_at", "updated_at", "last_sequence", "summary_through_sequence", "memory_version", "expire_time", "forked_from", "usage")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    title: str
    status: ConversationStatus
    labels: _containers.ScalarMap[str, str]
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    last_sequence: int
    summary_through_sequence: int
    memory_version: int
    expire_time: _timestamp_pb2.Timestamp
    forked_from: ForkOrigin
    usage: _messages_pb2.Usage
    def __init__(self, conversation_id: _Optional[str] = ..., title: _Optional[str] = ..., status: _Optional[_Union[ConversationStatus, str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_sequence: _Optional[int] = ..., summary_through_sequence: _Optional[int] = ..., memory_version: _Optional[int] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., forked_from: _Optional[_Union[ForkOrigin, _Mapping]] = ..., usage: _Optional[_Union[_messages_pb2.Usage, _Mapping]] = ...) -> None: ...

class ForkOrigin(_message.Message):
    __slots__ = ("conversation_id", "sequence")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    sequence: int
    def __init__(self, conversation_id: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...

class GetConversationRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class GetConversationResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: Conversation
    def __init__(self, conversation: _Optional[_Union[Conversation, _Mapping]] = ...) -> None: ...

class UpdateConversationRequest(_message.Message):
    __slots__ = ("conversation", "update_mask", "allow_missing")
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MISSING_FIELD_NUMBER: _ClassVar[int]
    conversation: Conversation
    update_mask: _field_mask_pb2.FieldMask
    allow_missing: bool
    def __init__(self, conversation: _Optional[_Union[Conversation, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., allow_missing: _Optional[bool] = ...) -> None: ...

class UpdateConversationResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: Conversation
    def __init__(self, conversation: _Optional[_Union[Conversation, _Mapping]] = ...) -> None: ...

class ListConversationsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "labels", "status")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    labels: _containers.ScalarMap[str, str]
    status: ConversationStatus
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., status: _Optional[_Union[ConversationStatus, str]] = ...) -> None: ...

class ListConversationsResponse(_message.Message):
    __slots__ = ("conversations", "next_page_token")
    CONVERSATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    conversations: _containers.RepeatedCompositeFieldContainer[Conversation]
    next_page_token: str
    def __init__(self, conversations: _Optional[_Iterable[_Union[Conversation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ForkConversationRequest(_message.Message):
    __slots__ = ("conversation_id", "through_sequence", "new_conversation_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NEW_CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    through_sequence: int
    new_conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ..., through_sequence: _Optional[int] = ..., new_conversation_id: _Optional[str] = ...) -> None: ...

class ForkConversationResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: Conversation
    def __init__(self, conversation: _Optional[_Union[Conversation, _Mapping]] = ...) -> None: ...

class RedactMessageRequest(_message.Message):
    __slots__ = ("conversation_id", "sequence")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    sequence: int
    def __init__(self, conversation_id: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...

class RewindConversationRequest(_message.Message):
    __slots__ = ("conversation_id", "after_sequence", "expected_last_sequence")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    after_sequence: int
    expected_last_sequence: int
    def __init__(self, conversation_id: _Optional[str] = ..., after_sequence: _Optional[int] = ..., expected_last_sequence: _Optional[int] = ...) -> None: ...

class RewindConversationResponse(_message.Message):
    __slots__ = ("messages_removed", "last_sequence", "summaries_removed", "summary_through_sequence", "memory_version")
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_VERSION_FIELD_NUMBER: _ClassVar[int]
    messages_removed: int
    last_sequence: int
    summaries_removed: int
    summary_through_sequence: int
    memory_version: int
    def __init__(self, messages_removed: _Optional[int] = ..., last_sequence: _Optional[int] = ..., summaries_removed: _Optional[int] = ..., summary_through_sequence: _Optional[int] = ..., memory_version: _Optional[int] = ...) -> None: ...

class RedactMessageResponse(_message.Message):
    __slots__ = ("message", "summaries_removed", "summary_through_sequence", "memory_version")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_VERSION_FIELD_NUMBER: _ClassVar[int]
    message: _messages_pb2.Message
    summaries_removed: int
    summary_through_sequence: int
    memory_version: int
    def __init__(self, message: _Optional[_Union[_messages_pb2.Message, _Mapping]] = ..., summaries_removed: _Optional[int] = ..., summary_through_sequence: _Optional[int] = ..., memory_version: _Optional[int] = ...) -> None: ...

class WatchChangesRequest(_message.Message):
    __slots__ = ("after_cursor", "conversation_id", "include_messages")
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    after_cursor: str
    conversation_id: str
    include_messages: bool
    def __init__(self, after_cursor: _Optional[str] = ..., conversation_id: _Optional[str] = ..., include_messages: _Optional[bool] = ...) -> None: ...

class Change(_message.Message):
    __slots__ = ("cursor", "conversation_id", "kind", "first_sequence", "last_sequence", "messages", "time", "messages_truncated")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    conversation_id: str
    kind: ChangeKind
    first_sequence: int
    last_sequence: int
    messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Message]
    time: _timestamp_pb2.Timestamp
    messages_truncated: bool
    def __init__(self, cursor: _Optional[str] = ..., conversation_id: _Optional[str] = ..., kind: _Optional[_Union[ChangeKind, str]] = ..., first_sequence: _Optional[int] = ..., last_sequence: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[_messages_pb2.Message, _Mapping]]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., messages_truncated: _Optional[bool] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("cursor", "time")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, cursor: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WatchChangesResponse(_message.Message):
    __slots__ = ("changes", "heartbeat")
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[Change]
    heartbeat: Heartbeat
    def __init__(self, changes: _Optional[_Iterable[_Union[Change, _Mapping]]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...
