//! Conversions between the wire contract (`proto`) and the domain. Requests are parsed with
//! every field destructured, so a field added to the proto is a compile error here until someone
//! decides what it means.

use super::ApiSettings;
use crate::{
    domain::{
        AppendBatch, AppendLimits, Attachment, AttachmentSource, ConversationId, IdempotencyKey, LlmError,
        Message, Role, Sequence, StoredMessage, ToolCall, Violations,
        append::{check_batch_size, check_message},
        context::{
            ContextMessage, ContextPack, ContextRequest, ContextStats, Format, Source, TokenBudget,
            TokenCounts,
        },
        memory::{Category, GlossaryEntry, MAX_MEMORY_ITEMS, WorkingMemory},
        summary::Summary,
    },
    proto,
    tokenize::Tokenizer,
};

/// Parses a conversation id field, recording a violation under `field`.
pub(crate) fn conversation_id(raw: String, field: &str, v: &mut Violations) -> Option<ConversationId> {
    ConversationId::parse(raw).map_err(|e| v.add(field, e)).ok()
}

/// Parses an AppendMessage request into a batch, with every violation found.
pub(crate) fn append_batch(
    request: proto::AppendMessageRequest,
    limits: &AppendLimits,
) -> Result<AppendBatch, Violations> {
    let proto::AppendMessageRequest {
        conversation_id: raw_id,
        messages: raw_messages,
        idempotency_key,
        expected_last_sequence,
    } = request;
    let mut v = Violations::default();
    let conversation_id = conversation_id(raw_id, "conversation_id", &mut v);
    let idempotency_key = IdempotencyKey::parse_optional(idempotency_key)
        .map_err(|e| v.add("idempotency_key", e))
        .ok();
    let expected_last_sequence = match expected_last_sequence.map(Sequence::parse).transpose() {
        Ok(expected) => expected,
        Err(e) => {
            v.add("expected_last_sequence", e);
            None
        }
    };
    v.extend(check_batch_size(raw_messages.len(), limits));
    let count = raw_messages.len().min(limits.max_messages_per_request);
    let mut messages = Vec::with_capacity(count);
    for (i, raw) in raw_messages.into_iter().take(count).enumerate() {
        let path = format!("messages[{i}]");
        match message(raw, &path) {
            Ok(m) => {
                v.extend(check_message(&m, &path, limits));
                messages.push(m);
            }
            Err(errors) => v.extend(errors),
        }
    }
    match (conversation_id, idempotency_key, v.is_empty()) {
        (Some(conversation_id), Some(idempotency_key), true) => Ok(AppendBatch {
            conversation_id,
            messages,
            idempotency_key,
            expected_last_sequence,
            tokens: Vec::new(),
        }),
        _ => Err(v),
    }
}

/// Parses one message; `path` prefixes the field names of violations.
pub(crate) fn message(raw: proto::Message, path: &str) -> Result<Message, Violations> {
    let proto::Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        attachments,
        metadata,
        exclude_from_context,
        pinned,
        error,
        response_id,
        // Server-set fields are ignored on input, as the contract says.
        sequence: _,
        created_at: _,
        tokens: _,
    } = raw;
    let mut v = Violations::default();
    let role = match proto::Role::try_from(role) {
        Ok(proto::Role::System) => Some(Role::System),
        Ok(proto::Role::User) => Some(Role::User),
        Ok(proto::Role::Assistant) => Some(Role::Assistant),
        Ok(proto::Role::Tool) => Some(Role::Tool),
        Ok(proto::Role::Unspecified) => {
            v.add(format!("{path}.role"), "role is required");
            None
        }
        Err(_) => {
            v.add(format!("{path}.role"), format!("unknown role value {role}"));
            None
        }
    };
    let attachments = attachments
        .into_iter()
        .enumerate()
        .filter_map(|(j, a)| {
            attachment(a)
                .map_err(|e| v.add(format!("{path}.attachments[{j}]"), e))
                .ok()
        })
        .collect();
    let tool_calls = tool_calls
        .into_iter()
        .map(|proto::ToolCall { id, name, arguments }| ToolCall { id, name, arguments })
        .collect();
    let error = error.map(
        |proto::LlmError {
             code,
             message,
             partial_output,
         }| LlmError {
            code,
            message,
            partial_output,
        },
    );
    let message = role.map(|role| Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id: Some(tool_call_id).filter(|id| !id.is_empty()),
        attachments,
        metadata,
        exclude_from_context,
        pinned,
        error,
        response_id,
    });
    match message {
        Some(m) if v.is_empty() => Ok(m),
        _ => Err(v),
    }
}

fn attachment(raw: proto::Attachment) -> Result<Attachment, &'static str> {
    let proto::Attachment {
        mime_type,
        filename,
        source,
    } = raw;
    let source = match source {
        Some(proto::attachment::Source::Data(data)) => AttachmentSource::Data(data),
        Some(proto::attachment::Source::Uri(uri)) => AttachmentSource::Uri(uri),
        None => return Err("an attachment needs data or uri"),
    };
    Ok(Attachment {
        mime_type,
        filename,
        source,
    })
}

/// The wire form of a stored message.
pub(crate) fn stored_message(stored: StoredMessage) -> proto::Message {
    let StoredMessage {
        sequence,
        created_at,
        message,
        tokens,
        call_sequence: _,
    } = stored;
    let Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        attachments,
        metadata,
        exclude_from_context,
        pinned,
        error,
        response_id,
    } = message;
    proto::Message {
        role: role_to_proto(role) as i32,
        content,
        name,
        tool_calls: tool_calls
            .into_iter()
            .map(|ToolCall { id, name, arguments }| proto::ToolCall { id, name, arguments })
            .collect(),
        tool_call_id: tool_call_id.unwrap_or_default(),
        attachments: attachments.into_iter().map(attachment_to_proto).collect(),
        metadata,
        exclude_from_context,
        pinned,
        error: error.map(
            |LlmError {
                 code,
                 message,
                 partial_output,
             }| proto::LlmError {
                code,
                message,
                partial_output,
            },
        ),
        response_id,
        sequence: sequence.get(),
        created_at: Some(created_at.into()),
        tokens: Some(proto::TokenCounts {
            o200k_base: tokens.o200k_base,
            cl100k_base: tokens.cl100k_base,
            approx: tokens.approx,
        }),
    }
}

fn attachment_to_proto(attachment: Attachment) -> proto::Attachment {
    let Attachment {
        mime_type,
        filename,
        source,
    } = attachment;
    let source = match source {
        AttachmentSource::Data(data) => proto::attachment::Source::Data(data),
        AttachmentSource::Uri(uri) => proto::attachment::Source::Uri(uri),
    };
    proto::Attachment {
        mime_type,
        filename,
        source: Some(source),
    }
}

/// The wire enum of a role.
pub(crate) fn role_to_proto(role: Role) -> proto::Role {
    match role {
        Role::System => proto::Role::System,
        Role::User => proto::Role::User,
        Role::Assistant => proto::Role::Assistant,
        Role::Tool => proto::Role::Tool,
    }
}

/// Parses a tokenizer enum field; unspecified means `default`.
pub(crate) fn tokenizer(raw: i32, field: &str, default: Tokenizer, v: &mut Violations) -> Tokenizer {
    match proto::Tokenizer::try_from(raw) {
        Ok(proto::Tokenizer::Unspecified) => default,
        Ok(proto::Tokenizer::O200kBase) => Tokenizer::O200kBase,
        Ok(proto::Tokenizer::Cl100kBase) => Tokenizer::Cl100kBase,
        Ok(proto::Tokenizer::Approx) => Tokenizer::Approx,
        Err(_) => {
            v.add(field, format!("unknown tokenizer value {raw}"));
            default
        }
    }
}

/// The wire enum of a tokenizer.
pub(crate) fn tokenizer_to_proto(tokenizer: Tokenizer) -> proto::Tokenizer {
    match tokenizer {
        Tokenizer::O200kBase => proto::Tokenizer::O200kBase,
        Tokenizer::Cl100kBase => proto::Tokenizer::Cl100kBase,
        Tokenizer::Approx => proto::Tokenizer::Approx,
    }
}

/// Parses a BuildContext request, with every violation found.
pub(crate) fn context_request(
    request: proto::BuildContextRequest,
    settings: &ApiSettings,
) -> Result<ContextRequest, Violations> {
    let proto::BuildContextRequest {
        conversation_id: raw_id,
        budget,
        tokenizer: raw_tokenizer,
        system_prompt,
        pending_messages,
        omit_summary,
        omit_working_memory,
        tool_output_max_tokens,
        format,
    } = request;
    let mut v = Violations::default();
    let conversation_id = conversation_id(raw_id, "conversation_id", &mut v);
    let proto::Budget {
        max_tokens,
        reserve_output_tokens,
        max_messages,
        max_turns,
    } = budget.unwrap_or_default();
    let budget = TokenBudget::parse(max_tokens, reserve_output_tokens, max_messages, max_turns)
        .map_err(|e| v.extend(e))
        .ok();
    let tokenizer = tokenizer(raw_tokenizer, "tokenizer", settings.default_tokenizer, &mut v);
    let limits = &settings.append;
    if system_prompt.len() > limits.max_content_bytes {
        v.add(
            "system_prompt",
            format!(
                "{} bytes; the limit is {}",
                system_prompt.len(),
                limits.max_content_bytes
            ),
        );
    }
    if pending_messages.len() > limits.max_messages_per_request {
        v.add(
            "pending_messages",
            format!(
                "{} pending messages; the limit is {}",
                pending_messages.len(),
                limits.max_messages_per_request
            ),
        );
    }
    let mut pending = Vec::new();
    for (i, raw) in pending_messages
        .into_iter()
        .take(limits.max_messages_per_request)
        .enumerate()
    {
        let path = format!("pending_messages[{i}]");
        match message(raw, &path) {
            Ok(m) => {
                v.extend(check_message(&m, &path, limits));
                pending.push(m);
            }
            Err(errors) => v.extend(errors),
        }
    }
    let format = match proto::Format::try_from(format) {
        Ok(proto::Format::Unspecified | proto::Format::OpenaiChat) => Format::OpenAiChat,
        Ok(proto::Format::AnthropicMessages) => Format::AnthropicMessages,
        Err(_) => {
            v.add("format", format!("unknown format value {format}"));
            Format::OpenAiChat
        }
    };
    match (conversation_id, budget, v.is_empty()) {
        (Some(conversation_id), Some(budget), true) => Ok(ContextRequest {
            conversation_id,
            budget,
            tokenizer,
            system_prompt,
            pending,
            include_summary: !omit_summary,
            include_memory: !omit_working_memory,
            tool_output_max_tokens: (tool_output_max_tokens > 0).then_some(tool_output_max_tokens),
            format,
        }),
        _ => Err(v),
    }
}

/// The wire form of a pack.
pub(crate) fn context_response(pack: ContextPack, rendered: String) -> proto::BuildContextResponse {
    let ContextPack {
        messages,
        stats,
        needs_summary,
        previous_response_id,
    } = pack;
    proto::BuildContextResponse {
        messages: messages.into_iter().map(context_message).collect(),
        rendered,
        stats: Some(context_stats(stats)),
        needs_summary,
        previous_response_id: previous_response_id.unwrap_or_default(),
    }
}

fn context_message(context: ContextMessage) -> proto::ContextMessage {
    let ContextMessage {
        source,
        sequence,
        tokens,
        message,
    } = context;
    let proto::Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        attachments,
        error,
        response_id,
        ..
    } = stored_message(StoredMessage {
        sequence: Sequence::ZERO,
        created_at: std::time::UNIX_EPOCH,
        tokens: TokenCounts::default(),
        call_sequence: None,
        message,
    });
    let source = match source {
        Source::SystemPrompt => proto::ContextSource::SystemPrompt,
        Source::Summary => proto::ContextSource::Summary,
        Source::WorkingMemory => proto::ContextSource::WorkingMemory,
        Source::TruncationNotice => proto::ContextSource::TruncationNotice,
        Source::History => proto::ContextSource::History,
        Source::Pending => proto::ContextSource::Pending,
    };
    proto::ContextMessage {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        attachments,
        error,
        response_id,
        source: source as i32,
        sequence: sequence.map_or(0, Sequence::get),
        tokens,
    }
}

fn context_stats(stats: ContextStats) -> proto::ContextStats {
    let ContextStats {
        total_tokens,
        system_prompt_tokens,
        summary_tokens,
        working_memory_tokens,
        truncation_notice_tokens,
        history_tokens,
        pending_tokens,
        budget_tokens,
        messages_considered,
        messages_included,
        messages_dropped,
        tool_groups_dropped,
        incomplete_tool_groups,
        oldest_included_sequence,
        summary_through_sequence,
        log_last_sequence,
        truncated,
        over_budget,
    } = stats;
    proto::ContextStats {
        total_tokens,
        system_prompt_tokens,
        summary_tokens,
        working_memory_tokens,
        truncation_notice_tokens,
        history_tokens,
        pending_tokens,
        budget_tokens,
        messages_considered,
        messages_included,
        messages_dropped,
        tool_groups_dropped,
        incomplete_tool_groups,
        oldest_included_sequence,
        summary_through_sequence,
        log_last_sequence,
        truncated,
        over_budget,
    }
}

/// The wire form of a summary, its tokens counted with `tokenizer`.
pub(crate) fn summary(summary: &Summary, tokenizer: Tokenizer) -> proto::Summary {
    proto::Summary {
        text: summary.text.clone(),
        through_sequence: summary.through_sequence.get(),
        tokens: u32::try_from(tokenizer.count(&summary.text)).unwrap_or(u32::MAX),
        summarizer: summary.summarizer.clone(),
        version: summary.version,
        updated_at: Some(summary.updated_at.into()),
    }
}

/// A plain role + content message (prepared LLM requests).
pub(crate) fn plain_message(message: Message) -> proto::Message {
    proto::Message {
        role: role_to_proto(message.role) as i32,
        content: message.content,
        ..Default::default()
    }
}

fn sequences_to_proto(sequences: &[Sequence]) -> Vec<u64> {
    sequences.iter().map(|s| s.get()).collect()
}

/// The wire form of a working memory.
pub(crate) fn memory_to_proto(memory: &WorkingMemory) -> proto::WorkingMemory {
    let items = |category: Category| {
        memory
            .items(category)
            .iter()
            .map(|i| proto::MemoryItem {
                text: i.text.clone(),
                source_sequences: sequences_to_proto(&i.source_sequences),
                id: i.id.clone(),
                superseded_by: i.superseded_by.clone().unwrap_or_default(),
            })
            .collect()
    };
    proto::WorkingMemory {
        summary: memory.summary.clone(),
        goals: items(Category::Goals),
        requirements: items(Category::Requirements),
        constraints: items(Category::Constraints),
        decisions: items(Category::Decisions),
        assumptions: items(Category::Assumptions),
        open_questions: items(Category::OpenQuestions),
        stakeholders: items(Category::Stakeholders),
        glossary: memory
            .glossary
            .iter()
            .map(|e| proto::GlossaryEntry {
                term: e.term.clone(),
                definition: e.definition.clone(),
                source_sequences: sequences_to_proto(&e.source_sequences),
            })
            .collect(),
        through_sequence: memory.through_sequence.get(),
        version: memory.version,
        updated_at: memory.updated_at.map(Into::into),
    }
}

/// Parses a caller's working memory update; violations are recorded under `memory.*`.
pub(crate) fn memory_from_proto(
    raw: proto::WorkingMemory,
    limits: &AppendLimits,
    v: &mut Violations,
) -> WorkingMemory {
    let proto::WorkingMemory {
        summary,
        goals,
        requirements,
        constraints,
        decisions,
        assumptions,
        open_questions,
        stakeholders,
        glossary,
        through_sequence,
        // Server-set.
        version: _,
        updated_at: _,
    } = raw;
    let mut sequences = |field: String, raw: Vec<u64>| -> Vec<Sequence> {
        raw.into_iter()
            .filter_map(|s| Sequence::parse(s).map_err(|e| v.add(field.clone(), e)).ok())
            .collect()
    };
    let mut memory = WorkingMemory::default();
    let lists = [
        (Category::Goals, goals),
        (Category::Requirements, requirements),
        (Category::Constraints, constraints),
        (Category::Decisions, decisions),
        (Category::Assumptions, assumptions),
        (Category::OpenQuestions, open_questions),
        (Category::Stakeholders, stakeholders),
    ];
    let mut too_long = Vec::new();
    for (category, items) in lists {
        if items.len() > MAX_MEMORY_ITEMS {
            too_long.push((
                format!("memory.{}", category.name()),
                format!("{} items; the limit is {MAX_MEMORY_ITEMS}", items.len()),
            ));
            continue;
        }
        for (i, item) in items.into_iter().enumerate() {
            let proto::MemoryItem {
                text,
                source_sequences,
                id,
                superseded_by,
            } = item;
            let path = format!("memory.{}[{i}]", category.name());
            if text.trim().is_empty() || text.len() > limits.max_content_bytes {
                too_long.push((
                    format!("{path}.text"),
                    format!("must be 1 to {} bytes", limits.max_content_bytes),
                ));
            }
            let sources = sequences(format!("{path}.source_sequences"), source_sequences);
            memory.push_item(
                category,
                id,
                text,
                sources,
                Some(superseded_by).filter(|s| !s.is_empty()),
            );
        }
    }
    if glossary.len() > MAX_MEMORY_ITEMS {
        too_long.push((
            "memory.glossary".into(),
            format!("{} entries; the limit is {MAX_MEMORY_ITEMS}", glossary.len()),
        ));
    }
    for (i, entry) in glossary.into_iter().take(MAX_MEMORY_ITEMS).enumerate() {
        let proto::GlossaryEntry {
            term,
            definition,
            source_sequences,
        } = entry;
        if term.trim().is_empty() || definition.trim().is_empty() {
            too_long.push((
                format!("memory.glossary[{i}]"),
                "term and definition are required".into(),
            ));
        }
        let sources = sequences(format!("memory.glossary[{i}].source_sequences"), source_sequences);
        memory.glossary.push(GlossaryEntry {
            term,
            definition,
            source_sequences: sources,
        });
    }
    if summary.len() > limits.max_content_bytes {
        too_long.push((
            "memory.summary".into(),
            format!(
                "{} bytes; the limit is {}",
                summary.len(),
                limits.max_content_bytes
            ),
        ));
    }
    for (field, description) in too_long {
        v.add(field, description);
    }
    memory.summary = summary;
    memory.through_sequence = Sequence::parse(through_sequence)
        .map_err(|e| v.add("memory.through_sequence", e))
        .unwrap_or_default();
    memory
}
