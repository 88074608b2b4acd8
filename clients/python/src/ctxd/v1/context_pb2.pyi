import datetime

from ctxd.v1 import messages_pb2 as _messages_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReasoningPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASONING_POLICY_UNSPECIFIED: _ClassVar[ReasoningPolicy]
    REASONING_POLICY_CURRENT_TURN: _ClassVar[ReasoningPolicy]
    REASONING_POLICY_ALL: _ClassVar[ReasoningPolicy]

class ContextSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTEXT_SOURCE_UNSPECIFIED: _ClassVar[ContextSource]
    CONTEXT_SOURCE_SYSTEM_PROMPT: _ClassVar[ContextSource]
    CONTEXT_SOURCE_SUMMARY: _ClassVar[ContextSource]
    CONTEXT_SOURCE_WORKING_MEMORY: _ClassVar[ContextSource]
    CONTEXT_SOURCE_TRUNCATION_NOTICE: _ClassVar[ContextSource]
    CONTEXT_SOURCE_HISTORY: _ClassVar[ContextSource]
    CONTEXT_SOURCE_PENDING: _ClassVar[ContextSource]
    CONTEXT_SOURCE_PLACEHOLDER: _ClassVar[ContextSource]
    CONTEXT_SOURCE_RECALL: _ClassVar[ContextSource]

class HistoryPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HISTORY_POLICY_UNSPECIFIED: _ClassVar[HistoryPolicy]
    HISTORY_POLICY_CACHE_STABLE: _ClassVar[HistoryPolicy]
    HISTORY_POLICY_NEWEST: _ClassVar[HistoryPolicy]

class FinalAssistant(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINAL_ASSISTANT_UNSPECIFIED: _ClassVar[FinalAssistant]
    FINAL_ASSISTANT_KEEP: _ClassVar[FinalAssistant]
    FINAL_ASSISTANT_OMIT: _ClassVar[FinalAssistant]

class SummarizeMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUMMARIZE_MODE_UNSPECIFIED: _ClassVar[SummarizeMode]
    SUMMARIZE_MODE_SERVER: _ClassVar[SummarizeMode]
    SUMMARIZE_MODE_PREPARE: _ClassVar[SummarizeMode]
    SUMMARIZE_MODE_PROVIDED: _ClassVar[SummarizeMode]
REASONING_POLICY_UNSPECIFIED: ReasoningPolicy
REASONING_POLICY_CURRENT_TURN: ReasoningPolicy
REASONING_POLICY_ALL: ReasoningPolicy
CONTEXT_SOURCE_UNSPECIFIED: ContextSource
CONTEXT_SOURCE_SYSTEM_PROMPT: ContextSource
CONTEXT_SOURCE_SUMMARY: ContextSource
CONTEXT_SOURCE_WORKING_MEMORY: ContextSource
CONTEXT_SOURCE_TRUNCATION_NOTICE: ContextSource
CONTEXT_SOURCE_HISTORY: ContextSource
CONTEXT_SOURCE_PENDING: ContextSource
CONTEXT_SOURCE_PLACEHOLDER: ContextSource
CONTEXT_SOURCE_RECALL: ContextSource
HISTORY_POLICY_UNSPECIFIED: HistoryPolicy
HISTORY_POLICY_CACHE_STABLE: HistoryPolicy
HISTORY_POLICY_NEWEST: HistoryPolicy
FINAL_ASSISTANT_UNSPECIFIED: FinalAssistant
FINAL_ASSISTANT_KEEP: FinalAssistant
FINAL_ASSISTANT_OMIT: FinalAssistant
SUMMARIZE_MODE_UNSPECIFIED: SummarizeMode
SUMMARIZE_MODE_SERVER: SummarizeMode
SUMMARIZE_MODE_PREPARE: SummarizeMode
SUMMARIZE_MODE_PROVIDED: SummarizeMode

class Budget(_message.Message):
    __slots__ = ("max_tokens", "reserve_output_tokens", "max_messages", "max_turns")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESERVE_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    reserve_output_tokens: int
    max_messages: int
    max_turns: int
    def __init__(self, max_tokens: _Optional[int] = ..., reserve_output_tokens: _Optional[int] = ..., max_messages: _Optional[int] = ..., max_turns: _Optional[int] = ...) -> None: ...

class BuildContextRequest(_message.Message):
    __slots__ = ("conversation_id", "budget", "tokenizer", "system_prompt", "pending_messages", "omit_summary", "omit_working_memory", "tool_output_max_tokens", "format", "history_policy", "reasoning", "final_assistant", "omit_messages", "clear_tool_results", "recall")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    PENDING_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OMIT_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    OMIT_WORKING_MEMORY_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTPUT_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_POLICY_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    FINAL_ASSISTANT_FIELD_NUMBER: _ClassVar[int]
    OMIT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CLEAR_TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    budget: Budget
    tokenizer: _messages_pb2.Tokenizer
    system_prompt: str
    pending_messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Message]
    omit_summary: bool
    omit_working_memory: bool
    tool_output_max_tokens: int
    format: _messages_pb2.Format
    history_policy: HistoryPolicy
    reasoning: ReasoningPolicy
    final_assistant: FinalAssistant
    omit_messages: bool
    clear_tool_results: ClearToolResults
    recall: Recall
    def __init__(self, conversation_id: _Optional[str] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., tokenizer: _Optional[_Union[_messages_pb2.Tokenizer, str]] = ..., system_prompt: _Optional[str] = ..., pending_messages: _Optional[_Iterable[_Union[_messages_pb2.Message, _Mapping]]] = ..., omit_summary: _Optional[bool] = ..., omit_working_memory: _Optional[bool] = ..., tool_output_max_tokens: _Optional[int] = ..., format: _Optional[_Union[_messages_pb2.Format, str]] = ..., history_policy: _Optional[_Union[HistoryPolicy, str]] = ..., reasoning: _Optional[_Union[ReasoningPolicy, str]] = ..., final_assistant: _Optional[_Union[FinalAssistant, str]] = ..., omit_messages: _Optional[bool] = ..., clear_tool_results: _Optional[_Union[ClearToolResults, _Mapping]] = ..., recall: _Optional[_Union[Recall, _Mapping]] = ...) -> None: ...

class Recall(_message.Message):
    __slots__ = ("query", "max_tokens", "max_items")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEMS_FIELD_NUMBER: _ClassVar[int]
    query: str
    max_tokens: int
    max_items: int
    def __init__(self, query: _Optional[str] = ..., max_tokens: _Optional[int] = ..., max_items: _Optional[int] = ...) -> None: ...

class ClearToolResults(_message.Message):
    __slots__ = ("keep_recent", "exclude_tools", "clear_arguments")
    KEEP_RECENT_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CLEAR_ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    keep_recent: int
    exclude_tools: _containers.RepeatedScalarFieldContainer[str]
    clear_arguments: bool
    def __init__(self, keep_recent: _Optional[int] = ..., exclude_tools: _Optional[_Iterable[str]] = ..., clear_arguments: _Optional[bool] = ...) -> None: ...

class ContextMessage(_message.Message):
    __slots__ = ("role", "content", "name", "tool_calls", "tool_call_id", "attachments", "error", "response_id", "source", "sequence", "tokens", "reasoning", "content_item_id", "content_signature", "content_phase")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    CONTENT_ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_PHASE_FIELD_NUMBER: _ClassVar[int]
    role: _messages_pb2.Role
    content: str
    name: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_messages_pb2.ToolCall]
    tool_call_id: str
    attachments: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Attachment]
    error: _messages_pb2.LlmError
    response_id: str
    source: ContextSource
    sequence: int
    tokens: int
    reasoning: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Reasoning]
    content_item_id: str
    content_signature: str
    content_phase: str
    def __init__(self, role: _Optional[_Union[_messages_pb2.Role, str]] = ..., content: _Optional[str] = ..., name: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_messages_pb2.ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[_messages_pb2.Attachment, _Mapping]]] = ..., error: _Optional[_Union[_messages_pb2.LlmError, _Mapping]] = ..., response_id: _Optional[str] = ..., source: _Optional[_Union[ContextSource, str]] = ..., sequence: _Optional[int] = ..., tokens: _Optional[int] = ..., reasoning: _Optional[_Iterable[_Union[_messages_pb2.Reasoning, _Mapping]]] = ..., content_item_id: _Optional[str] = ..., content_signature: _Optional[str] = ..., content_phase: _Optional[str] = ...) -> None: ...

class ContextStats(_message.Message):
    __slots__ = ("total_tokens", "system_prompt_tokens", "summary_tokens", "working_memory_tokens", "truncation_notice_tokens", "history_tokens", "pending_tokens", "budget_tokens", "messages_considered", "messages_included", "messages_dropped", "tool_groups_dropped", "incomplete_tool_groups", "oldest_included_sequence", "summary_through_sequence", "log_last_sequence", "truncated", "over_budget", "stable_prefix_tokens", "history_step_tokens", "reasoning_tokens", "reasoning_tokens_omitted", "summary_cut", "final_assistant_omitted", "tool_results_cleared", "tool_result_tokens_cleared", "recall_tokens", "messages_recalled", "compaction_sequence")
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WORKING_MEMORY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_NOTICE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_CONSIDERED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_INCLUDED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_DROPPED_FIELD_NUMBER: _ClassVar[int]
    TOOL_GROUPS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    INCOMPLETE_TOOL_GROUPS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_INCLUDED_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LOG_LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    OVER_BUDGET_FIELD_NUMBER: _ClassVar[int]
    STABLE_PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_STEP_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_OMITTED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_CUT_FIELD_NUMBER: _ClassVar[int]
    FINAL_ASSISTANT_OMITTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULTS_CLEARED_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_TOKENS_CLEARED_FIELD_NUMBER: _ClassVar[int]
    RECALL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_RECALLED_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    total_tokens: int
    system_prompt_tokens: int
    summary_tokens: int
    working_memory_tokens: int
    truncation_notice_tokens: int
    history_tokens: int
    pending_tokens: int
    budget_tokens: int
    messages_considered: int
    messages_included: int
    messages_dropped: int
    tool_groups_dropped: int
    incomplete_tool_groups: int
    oldest_included_sequence: int
    summary_through_sequence: int
    log_last_sequence: int
    truncated: bool
    over_budget: bool
    stable_prefix_tokens: int
    history_step_tokens: int
    reasoning_tokens: int
    reasoning_tokens_omitted: int
    summary_cut: bool
    final_assistant_omitted: int
    tool_results_cleared: int
    tool_result_tokens_cleared: int
    recall_tokens: int
    messages_recalled: int
    compaction_sequence: int
    def __init__(self, total_tokens: _Optional[int] = ..., system_prompt_tokens: _Optional[int] = ..., summary_tokens: _Optional[int] = ..., working_memory_tokens: _Optional[int] = ..., truncation_notice_tokens: _Optional[int] = ..., history_tokens: _Optional[int] = ..., pending_tokens: _Optional[int] = ..., budget_tokens: _Optional[int] = ..., messages_considered: _Optional[int] = ..., messages_included: _Optional[int] = ..., messages_dropped: _Optional[int] = ..., tool_groups_dropped: _Optional[int] = ..., incomplete_tool_groups: _Optional[int] = ..., oldest_included_sequence: _Optional[int] = ..., summary_through_sequence: _Optional[int] = ..., log_last_sequence: _Optional[int] = ..., truncated: _Optional[bool] = ..., over_budget: _Optional[bool] = ..., stable_prefix_tokens: _Optional[int] = ..., history_step_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., reasoning_tokens_omitted: _Optional[int] = ..., summary_cut: _Optional[bool] = ..., final_assistant_omitted: _Optional[int] = ..., tool_results_cleared: _Optional[int] = ..., tool_result_tokens_cleared: _Optional[int] = ..., recall_tokens: _Optional[int] = ..., messages_recalled: _Optional[int] = ..., compaction_sequence: _Optional[int] = ...) -> None: ...

class BuildContextResponse(_message.Message):
    __slots__ = ("messages", "rendered", "stats", "needs_summary", "previous_response_id")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    NEEDS_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ContextMessage]
    rendered: str
    stats: ContextStats
    needs_summary: bool
    previous_response_id: str
    def __init__(self, messages: _Optional[_Iterable[_Union[ContextMessage, _Mapping]]] = ..., rendered: _Optional[str] = ..., stats: _Optional[_Union[ContextStats, _Mapping]] = ..., needs_summary: _Optional[bool] = ..., previous_response_id: _Optional[str] = ...) -> None: ...

class Summary(_message.Message):
    __slots__ = ("text", "through_sequence", "tokens", "summarizer", "version", "updated_at")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    text: str
    through_sequence: int
    tokens: int
    summarizer: str
    version: int
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, text: _Optional[str] = ..., through_sequence: _Optional[int] = ..., tokens: _Optional[int] = ..., summarizer: _Optional[str] = ..., version: _Optional[int] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PreparedRequest(_message.Message):
    __slots__ = ("rendered", "messages", "base_through_sequence", "through_sequence", "response_format", "max_output_tokens", "log_changes")
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    BASE_THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOG_CHANGES_FIELD_NUMBER: _ClassVar[int]
    rendered: str
    messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Message]
    base_through_sequence: int
    through_sequence: int
    response_format: str
    max_output_tokens: int
    log_changes: int
    def __init__(self, rendered: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_messages_pb2.Message, _Mapping]]] = ..., base_through_sequence: _Optional[int] = ..., through_sequence: _Optional[int] = ..., response_format: _Optional[str] = ..., max_output_tokens: _Optional[int] = ..., log_changes: _Optional[int] = ...) -> None: ...

class SummarizeRequest(_message.Message):
    __slots__ = ("conversation_id", "keep_recent_tokens", "tokenizer", "mode", "summary_text", "through_sequence", "expected_through_sequence", "max_summary_tokens", "expected_log_changes")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_TEXT_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MAX_SUMMARY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LOG_CHANGES_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    keep_recent_tokens: int
    tokenizer: _messages_pb2.Tokenizer
    mode: SummarizeMode
    summary_text: str
    through_sequence: int
    expected_through_sequence: int
    max_summary_tokens: int
    expected_log_changes: int
    def __init__(self, conversation_id: _Optional[str] = ..., keep_recent_tokens: _Optional[int] = ..., tokenizer: _Optional[_Union[_messages_pb2.Tokenizer, str]] = ..., mode: _Optional[_Union[SummarizeMode, str]] = ..., summary_text: _Optional[str] = ..., through_sequence: _Optional[int] = ..., expected_through_sequence: _Optional[int] = ..., max_summary_tokens: _Optional[int] = ..., expected_log_changes: _Optional[int] = ...) -> None: ...

class SummarizeResponse(_message.Message):
    __slots__ = ("summary", "changed", "prepared")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    PREPARED_FIELD_NUMBER: _ClassVar[int]
    summary: Summary
    changed: bool
    prepared: PreparedRequest
    def __init__(self, summary: _Optional[_Union[Summary, _Mapping]] = ..., changed: _Optional[bool] = ..., prepared: _Optional[_Union[PreparedRequest, _Mapping]] = ...) -> None: ...
