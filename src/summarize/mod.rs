//! Summarizers and extractors: the embedded deterministic ones (`extractive`, `rules`) and the
//! `openai` ones that call any OpenAI-compatible chat-completions endpoint.

use std::sync::Arc;

use crate::{
    domain::{
        memory::{WorkingMemory, extract_rules},
        message::StoredMessage,
        summary::{Summary, extractive_summary},
    },
    metrics::METRICS,
    tokenize::Tokenizer,
};

pub mod openai;
pub mod prompts;

use prompts::{extraction_request, extraction_schema, parse_extraction, summary_request};

pub use openai::{OpenAiClient, OpenAiError, OpenAiOptions};

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
    /// CPU pool ([`crate::cpu`]).
    pub async fn summarize(
        &self,
        previous: Option<&Summary>,
        messages: &[StoredMessage],
        max_summary_tokens: usize,
        tokenizer: Tokenizer,
    ) -> Result<String, OpenAiError> {
        let result = match self {
            Summarizer::Extractive => {
                let previous = previous.cloned();
                let messages = messages.to_vec();
                Ok(crate::cpu::run(move |cancel| {
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
                let request = summary_request(previous, messages, max_summary_tokens);
                client.chat(&request, None, max_summary_tokens).await
            }
        };
        count_call(self.name(), &result);
        result
    }
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
    /// Folds the facts of `messages` (oldest first) into `memory` and moves its watermark. The
    /// embedded extractor runs on the CPU pool ([`crate::cpu`]).
    pub async fn extract(
        &self,
        memory: &mut WorkingMemory,
        messages: &Arc<[StoredMessage]>,
    ) -> Result<(), OpenAiError> {
        let result = self.run(memory, messages).await;
        let engine = match self {
            Extractor::Rules => "rules",
            Extractor::OpenAi(_) => "openai-extractor",
        };
        count_call(engine, &result);
        result
    }

    async fn run(
        &self,
        memory: &mut WorkingMemory,
        messages: &Arc<[StoredMessage]>,
    ) -> Result<(), OpenAiError> {
        match self {
            Extractor::Rules => {
                let mut owned = std::mem::take(memory);
                let messages = Arc::clone(messages);
                *memory = crate::cpu::run(move |cancel| {
                    extract_rules(&mut owned, &messages, &|| cancel.is_cancelled());
                    owned
                })
                .await;
            }
            Extractor::OpenAi(client) => {
                let request = extraction_request(memory, messages);
                let format = serde_json::json!({
                    "type": "json_schema",
                    "json_schema": {"name": "working_memory", "strict": true, "schema": extraction_schema()}
                });
                let answer = client.chat(&request, Some(format), 4_000).await?;
                let extracted =
                    parse_extraction(&answer).map_err(|e| OpenAiError::BadAnswer(e.to_string()))?;
                memory.merge(extracted);
                if let Some(last) = messages.last() {
                    memory.through_sequence = memory.through_sequence.max(last.sequence);
                }
            }
        }
        Ok(())
    }
}

fn count_call<T>(engine: &str, result: &Result<T, OpenAiError>) {
    let outcome = if result.is_ok() { "ok" } else { "error" };
    METRICS
        .summarizer_calls
        .with_label_values(&[engine, outcome])
        .inc();
}
