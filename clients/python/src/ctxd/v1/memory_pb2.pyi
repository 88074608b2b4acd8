import datetime

from ctxd.v1 import context_pb2 as _context_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryItem(_message.Message):
    __slots__ = ("text", "source_sequences", "id", "superseded_by")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    text: str
    source_sequences: _containers.RepeatedScalarFieldContainer[int]
    id: str
    superseded_by: str
    def __init__(self, text: _Optional[str] = ..., source_sequences: _Optional[_Iterable[int]] = ..., id: _Optional[str] = ..., superseded_by: _Optional[str] = ...) -> None: ...

class GlossaryEntry(_message.Message):
    __slots__ = ("term", "definition", "source_sequences")
    TERM_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    term: str
    definition: str
    source_sequences: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, term: _Optional[str] = ..., definition: _Optional[str] = ..., source_sequences: _Optional[_Iterable[int]] = ...) -> None: ...

class WorkingMemory(_message.Message):
    __slots__ = ("summary", "goals", "requirements", "constraints", "decisions", "assumptions", "open_questions", "stakeholders", "glossary", "through_sequence", "version", "updated_at")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    GOALS_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    ASSUMPTIONS_FIELD_NUMBER: _ClassVar[int]
    OPEN_QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    STAKEHOLDERS_FIELD_NUMBER: _ClassVar[int]
    GLOSSARY_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    summary: str
    goals: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    requirements: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    constraints: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    decisions: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    assumptions: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    open_questions: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    stakeholders: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    glossary: _containers.RepeatedCompositeFieldContainer[GlossaryEntry]
    through_sequence: int
    version: int
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, summary: _Optional[str] = ..., goals: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ..., requirements: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ..., constraints: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ..., decisions: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ..., assumptions: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ..., open_questions: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ..., stakeholders: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ..., glossary: _Optional[_Iterable[_Union[GlossaryEntry, _Mapping]]] = ..., through_sequence: _Optional[int] = ..., version: _Optional[int] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetWorkingMemoryRequest(_message.Message):
    __slots__ = ("conversation_id", "refresh", "prepare")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    PREPARE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    refresh: bool
    prepare: bool
    def __init__(self, conversation_id: _Optional[str] = ..., refresh: _Optional[bool] = ..., prepare: _Optional[bool] = ...) -> None: ...

class GetWorkingMemoryResponse(_message.Message):
    __slots__ = ("memory", "prepared")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    PREPARED_FIELD_NUMBER: _ClassVar[int]
    memory: WorkingMemory
    prepared: _context_pb2.PreparedRequest
    def __init__(self, memory: _Optional[_Union[WorkingMemory, _Mapping]] = ..., prepared: _Optional[_Union[_context_pb2.PreparedRequest, _Mapping]] = ...) -> None: ...

class UpdateWorkingMemoryRequest(_message.Message):
    __slots__ = ("conversation_id", "memory", "expected_version", "expected_log_changes")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LOG_CHANGES_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    memory: WorkingMemory
    expected_version: int
    expected_log_changes: int
    def __init__(self, conversation_id: _Optional[str] = ..., memory: _Optional[_Union[WorkingMemory, _Mapping]] = ..., expected_version: _Optional[int] = ..., expected_log_changes: _Optional[int] = ...) -> None: ...

class UpdateWorkingMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: WorkingMemory
    def __init__(self, memory: _Optional[_Union[WorkingMemory, _Mapping]] = ...) -> None: ...
