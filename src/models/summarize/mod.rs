//! Summarizers and extractors: the embedded deterministic ones (`extractive`, `rules`) and the
//! `openai` ones that call any OpenAI-compatible chat-completions endpoint.

use std::sync::Arc;

use crate::{
    domain::tokenize::Tokenizer,
    domain::{
        ids::Sequence,
        message::{Message, StoredMessage},
        summary::{Summary, extractive_summary},
        working_memory::{WorkingMemory, extract_rules},
    },
    runtime::deadline::Deadline,
};

pub mod chunk;
pub mod cut;
pub mod openai;
pub mod prompts;

use chunk::{next_chunk, request_tokens};
use cut::fit_chunk;
use prompts::{
    EXTRACTION_SCHEMA_NAME, extraction_max_tokens, extraction_request, extraction_schema, parse_extraction,
    summary_request,
};

pub use openai::{JsonOutput, OpenAiClient, OpenAiError};

/// Which engine failed: statuses and logs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelRole {
    /// The summarizer (Summarize SERVER, background summaries).
    Summarizer,
    /// The working-memory extractor (GetWorkingMemory with refresh).
    Extractor,
}

impl std::fmt::Display for ModelRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ModelRole::Summarizer => "summarizer",
            ModelRole::Extractor => "extractor",
        })
    }
}

/// A summarizer or extractor failure; the stored state is unchanged.
#[derive(Debug, thiserror::Error)]
#[error("{role}: {source}")]
pub struct ModelError {
    /// Which engine.
    pub role: ModelRole,
    /// What failed.
    #[source]
    pub source: OpenAiError,
}

/// Which summarizer runs for SUMMARIZE_MODE_SERVER.
#[derive(Debug, Clone)]
pub enum Summarizer {
    /// Deterministic, no network.
    Extractive,
    /// An OpenAI-compatible endpoint.
    OpenAi(Arc<OpenAiClient>),
}

impl Summarizer {
    /// The name stored with each summary.
    pub fn name(&self) -> &'static str {
        match self {
            Summarizer::Extractive => "extractive",
            Summarizer::OpenAi(_) => "openai",
        }
    }

    /// Folds `messages` (oldest first) into `previous`. The embedded summarizer runs on the
    /// CPU pool ([`crate::runtime::cpu`]). An endpoint's answer must be complete, not empty, and at
    /// most [`summary_limit`] tokens.
    pub async fn summarize(
        &self,
        previous: Option<&Summary>,
        messages: &[StoredMessage],
        max_summary_tokens: usize,
        tokenizer: Tokenizer,
        caller: Caller<'_>,
    ) -> Result<String, ModelError> {
        let result = match self {
            Summarizer::Extractive => {
                let previous = previous.cloned();
                let messages = messages.to_vec();
                Ok(crate::runtime::cpu::run(caller.owner, move |cancel| {
                    extractive_summary(
                        previous.as_ref(),
                        &messages,
                        max_summary_tokens,
                        tokenizer,
                        &|| cancel.is_cancelled(),
                    )
                })
                .await)
            }
            Summarizer::OpenAi(client) => {
                fold_in_chunks(client, previous, messages, max_summary_tokens, tokenizer, caller).await
            }
        };
        result.map_err(|source| ModelError {
            role: ModelRole::Summarizer,
            source,
        })
    }
}

/// Folds `messages` into `previous` one chunk at a time (see [`chunk`]): each request fits
/// the model's context, and each answer, checked, is the previous summary of the next.
async fn fold_in_chunks(
    client: &OpenAiClient,
    previous: Option<&Summary>,
    messages: &[StoredMessage],
    max_summary_tokens: usize,
    tokenizer: Tokenizer,
    caller: Caller<'_>,
) -> Result<String, OpenAiError> {
    let context = client.options().context_tokens;
    let mut folded: Option<(String, Sequence)> = previous.map(|s| (s.text.clone(), s.through_sequence));
    let mut at = 0;
    while at < messages.len() {
        let previous = folded.as_ref().map(|(text, through)| (text.as_str(), *through));
        let (request, len) = summary_chunk(previous, &messages[at..], max_summary_tokens, context)?;
        let text = client
            .chat(&request, None, max_summary_tokens, caller.deadline)
            .await?;
        let text = check_summary_size(text, max_summary_tokens, tokenizer, caller.owner).await?;
        at += len;
        folded = Some((text, messages[at - 1].sequence));
    }
    Ok(folded.map(|(text, _)| text).unwrap_or_default())
}

/// The summary request over the first chunk of `messages` that fits a model context of
/// `context_tokens` (see [`chunk`]), and how many messages it covers.
pub fn summary_chunk(
    previous: Option<(&str, Sequence)>,
    messages: &[StoredMessage],
    max_summary_tokens: usize,
    context_tokens: usize,
) -> Result<(Vec<Message>, usize), OpenAiError> {
    let fixed = request_tokens(&summary_request(previous, &[], max_summary_tokens)) + max_summary_tokens;
    let next = next_chunk(messages, fixed, context_tokens)?;
    let chunk = fit_chunk(&messages[..next.len], next.room);
    Ok((summary_request(previous, &chunk, max_summary_tokens), next.len))
}

/// The extraction request over the first chunk of `messages` that fits a model context of
/// `context_tokens` (see [`chunk`]) with `memory`'s facts, how many messages it covers, and
/// the answer's size limit.
pub fn extraction_chunk(
    memory: &WorkingMemory,
    messages: &[StoredMessage],
    context_tokens: usize,
) -> Result<(Vec<Message>, usize, usize), OpenAiError> {
    let max_tokens = extraction_max_tokens(context_tokens);
    let fixed = request_tokens(&extraction_request(memory, &[])) + max_tokens;
    let next = next_chunk(messages, fixed, context_tokens)?;
    let chunk = fit_chunk(&messages[..next.len], next.room);
    Ok((extraction_request(memory, &chunk), next.len, max_tokens))
}

/// The most tokens (the caller's tokenizer) a model's summary may have for `max_summary_tokens`:
/// the model counts with its own tokenizer, so a quarter more, and a little for short limits.
pub fn summary_limit(max_summary_tokens: usize) -> usize {
    max_summary_tokens + max_summary_tokens / 4 + 16
}

async fn check_summary_size(
    text: String,
    max_summary_tokens: usize,
    tokenizer: Tokenizer,
    owner: &str,
) -> Result<String, OpenAiError> {
    let limit = summary_limit(max_summary_tokens);
    // No tokenizer yields fewer than one token per 16 bytes of text.
    let too_large = |tokens: usize| {
        OpenAiError::BadAnswer(format!(
            "the summary has {tokens} tokens; the limit is {limit} (max_summary_tokens {max_summary_tokens})"
        ))
    };
    if text.len() > limit.saturating_mul(16) {
        return Err(too_large(text.len() / 16));
    }
    let (text, tokens) = crate::runtime::cpu::run(owner, move |_| {
        let tokens = tokenizer.count(&text);
        (text, tokens)
    })
    .await;
    match tokens > limit {
        true => Err(too_large(tokens)),
        false => Ok(text),
    }
}

/// Who a summarization or extraction runs for: the owner (tenant) whose share of the CPU pool
/// its embedded work takes ([`crate::runtime::cpu`]), and the call's deadline, if it serves one.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The tenant.
    pub owner: &'a str,
    /// The call's deadline; `None` for background work.
    pub deadline: Option<&'a Deadline>,
}

/// Which extractor refreshes working memory.
#[derive(Debug, Clone)]
pub enum Extractor {
    /// Deterministic patterns, no network.
    Rules,
    /// An OpenAI-compatible endpoint with JSON-schema structured output.
    OpenAi(Arc<OpenAiClient>),
}

impl Extractor {
    /// The engine's name, as metrics label its runs.
    pub fn name(&self) -> &'static str {
        match self {
            Extractor::Rules => "rules",
            Extractor::OpenAi(_) => "openai-extractor",
        }
    }

    /// Folds the facts of `messages` (oldest first) into `memory` and moves its watermark. The
    /// embedded extractor runs on the CPU pool ([`crate::runtime::cpu`]). An endpoint's answer must be
    /// of the schema and pass UpdateWorkingMemory's checks (texts of at most `max_text_bytes`);
    /// it is folded in by content ([`WorkingMemory::absorb`]). On error `memory` is unchanged.
    pub async fn extract(
        &self,
        memory: &mut WorkingMemory,
        messages: &Arc<[StoredMessage]>,
        max_text_bytes: usize,
        caller: Caller<'_>,
    ) -> Result<(), ModelError> {
        let result = self.run(memory, messages, max_text_bytes, caller).await;
        result.map_err(|source| ModelError {
            role: ModelRole::Extractor,
            source,
        })
    }

    async fn run(
        &self,
        memory: &mut WorkingMemory,
        messages: &Arc<[StoredMessage]>,
        max_text_bytes: usize,
        caller: Caller<'_>,
    ) -> Result<(), OpenAiError> {
        let Some(last) = messages.last() else {
            return Ok(());
        };
        match self {
            Extractor::Rules => {
                let mut owned = std::mem::take(memory);
                let messages = Arc::clone(messages);
                *memory = crate::runtime::cpu::run(caller.owner, move |cancel| {
                    extract_rules(&mut owned, &messages, &|| cancel.is_cancelled());
                    owned
                })
                .await;
            }
            Extractor::OpenAi(client) => {
                // Chunk by chunk (see [`chunk`]) on a copy: `memory` changes only when all
                // chunks were extracted.
                let mut extracted = memory.clone();
                let schema = extraction_schema();
                let output = JsonOutput {
                    name: EXTRACTION_SCHEMA_NAME,
                    schema: &schema,
                };
                let context = client.options().context_tokens;
                let mut at = 0;
                while at < messages.len() {
                    let (request, len, max_tokens) = extraction_chunk(&extracted, &messages[at..], context)?;
                    let answer = client
                        .chat(&request, Some(output), max_tokens, caller.deadline)
                        .await?;
                    let extraction = parse_extraction(&answer)
                        .map_err(|e| OpenAiError::BadAnswer(format!("not of the extraction schema: {e}")))?;
                    at += len;
                    extraction
                        .check(max_text_bytes, messages[at - 1].sequence)
                        .map_err(|v| OpenAiError::BadAnswer(format!("extracted facts refused: {v}")))?;
                    extracted.absorb(extraction);
                }
                extracted.through_sequence = extracted.through_sequence.max(last.sequence);
                *memory = extracted;
            }
        }
        Ok(())
    }
}
