//! A client for OpenAI-compatible `/chat/completions` endpoints (OpenAI, vLLM, llama.cpp,
//! Ollama, LiteLLM): one timeout budget bounded by the call's deadline, bounded retries with
//! backoff on retryable failures only, strict answers, and the structured-output fallback that
//! servers without `json_schema` need.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::{
    config::OpenAiEndpoint,
    domain::{message::Message, violation::clip},
    runtime::deadline::Deadline,
};

/// The longest `Retry-After` honoured: a longer one is waited this long (within the call's
/// deadline).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Answers larger than this are parsed on the CPU pool.
const PARSE_OFF_WORKERS: usize = 64 * 1024;

/// Bytes of an upstream error body kept in statuses and logs.
const ERROR_BODY_BYTES: usize = 300;

/// Below this much time left, no attempt (or retry) is started.
const MIN_ATTEMPT: Duration = Duration::from_millis(50);

/// Why a call failed. The stored state is unchanged in every case.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiError {
    /// The endpoint could not be reached (connection refused or reset, DNS).
    #[error("endpoint unreachable")]
    Unreachable(#[source] reqwest::Error),
    /// No answer came within the time the call had.
    #[error("no answer within {} ms ({attempts} attempt(s))", .after.as_millis())]
    TimedOut {
        /// Time spent.
        after: Duration,
        /// Attempts made.
        attempts: u32,
    },
    /// The endpoint answered with an error status.
    #[error("endpoint answered HTTP {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The start of the answer's body (the endpoint's error text).
        body: String,
        /// What `Retry-After` asked for, if anything.
        retry_after: Option<Duration>,
    },
    /// The answer cannot be used: truncated, empty, too large, not of the schema.
    #[error("unusable answer: {0}")]
    BadAnswer(String),
    /// The request needs more context than the configured model has.
    #[error("{0}")]
    TooLong(String),
}

impl OpenAiError {
    /// Whether trying again later can succeed (UNAVAILABLE); the others are permanent until the
    /// configuration, the model or the conversation changes (FAILED_PRECONDITION).
    pub fn retryable(&self) -> bool {
        match self {
            OpenAiError::Unreachable(_) | OpenAiError::TimedOut { .. } => true,
            OpenAiError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            OpenAiError::BadAnswer(_) | OpenAiError::TooLong(_) => false,
        }
    }
}

/// Structured output the answer must have.
#[derive(Debug, Clone, Copy)]
pub struct JsonOutput<'a> {
    /// Schema name (`json_schema.name`).
    pub name: &'a str,
    /// The JSON schema.
    pub schema: &'a Value,
}

/// A configured endpoint.
#[derive(Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    options: OpenAiEndpoint,
    /// The endpoint refused `response_format: json_schema`: ask for `json_object` (with the
    /// schema alongside) from now on.
    json_object_only: AtomicBool,
}

/// One attempt's failure, with what the next attempt should change.
enum Failure {
    Error(OpenAiError),
    /// `json_schema` was refused: retry at once with `json_object`.
    SchemaRefused(OpenAiError),
}

impl OpenAiClient {
    /// Builds the HTTP client.
    pub fn new(options: OpenAiEndpoint) -> Result<Self, OpenAiError> {
        // reqwest's rustls needs a process-wide crypto provider; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // No redirect is followed (a 3xx is an error status): conversation text goes to the
        // configured origin or nowhere.
        let http = reqwest::Client::builder()
            .connect_timeout(options.timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(OpenAiError::Unreachable)?;
        Ok(Self {
            http,
            options,
            json_object_only: AtomicBool::new(false),
        })
    }

    /// The endpoint's settings.
    pub fn options(&self) -> &OpenAiEndpoint {
        &self.options
    }

    /// Sends a chat completion and returns the answer's text, which ended normally
    /// (`finish_reason: stop`) and is not empty. All attempts together end before `deadline`'s
    /// work does (the call's margin kept for the answer to travel back); an attempt that runs
    /// out of time is abandoned (its connection closed).
    #[tracing::instrument(
        target = "ctxd::otel",
        name = "chat",
        skip_all,
        fields(
            model = %self.options.model,
            messages = messages.len(),
            otel.name = %format_args!("chat {}", self.options.model),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.request.model = %self.options.model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            server.address = tracing::field::Empty,
            server.port = tracing::field::Empty,
        )
    )]
    pub async fn chat(
        &self,
        messages: &[Message],
        output: Option<JsonOutput<'_>>,
        max_tokens: usize,
        deadline: Option<&Deadline>,
    ) -> Result<String, OpenAiError> {
        crate::runtime::traces::record_server(&tracing::Span::current(), &self.options.base_url);
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect();
        let mut body = json!({
            "model": self.options.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
        });
        let url = format!("{}/chat/completions", self.options.base_url.trim_end_matches('/'));
        // The answer's body is read up to this size: the text and the JSON around it.
        let max_body = 64 * 1024 + max_tokens.saturating_mul(32);
        let started = Instant::now();
        let deadline = deadline.map(Deadline::work);
        let mut delay = Duration::from_millis(200);
        let mut attempts = 0;
        let mut retries = 0;
        loop {
            if let Some(output) = output {
                body["response_format"] = self.response_format(output);
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let allowed = left.map_or(self.options.timeout, |l| l.min(self.options.timeout));
            if allowed < MIN_ATTEMPT {
                let error = OpenAiError::TimedOut {
                    after: started.elapsed(),
                    attempts,
                };
                tracing::warn!(attempts, %error, "model call out of time");
                return Err(error);
            }
            attempts += 1;
            let outcome = match tokio::time::timeout(allowed, self.attempt(&url, &body, max_body)).await {
                Ok(outcome) => outcome,
                // Dropping the attempt closes its connection: the server stops generating.
                Err(_) => Err(Failure::Error(OpenAiError::TimedOut {
                    after: started.elapsed(),
                    attempts,
                })),
            };
            let error = match outcome {
                Ok(text) => return Ok(text),
                Err(Failure::SchemaRefused(error)) if !self.json_object_only.load(Ordering::Relaxed) => {
                    tracing::warn!(%error, "endpoint refused json_schema output; using json_object from now on");
                    self.json_object_only.store(true, Ordering::Relaxed);
                    continue;
                }
                Err(Failure::SchemaRefused(error) | Failure::Error(error)) => error,
            };
            // The endpoint's `Retry-After`, up to a cap, when it asks for longer than the backoff.
            let asked = match &error {
                OpenAiError::Status { retry_after, .. } => {
                    retry_after.unwrap_or_default().min(MAX_RETRY_AFTER)
                }
                _ => Duration::ZERO,
            };
            let delay_now = delay.max(asked);
            let time_for_retry = deadline.is_none_or(|d| Instant::now() + delay_now + MIN_ATTEMPT < d);
            if error.retryable() && retries < self.options.max_retries && time_for_retry {
                tracing::warn!(attempts, %error, "model call failed; retrying");
                tokio::time::sleep(delay_now).await;
                delay *= 2;
                retries += 1;
                continue;
            }
            tracing::warn!(attempts, %error, "model call failed");
            return Err(error);
        }
    }

    fn response_format(&self, output: JsonOutput<'_>) -> Value {
        match self.json_object_only.load(Ordering::Relaxed) {
            // llama.cpp's and llama-cpp-python's servers constrain `json_object` to a schema
            // given alongside; others ignore the extra key.
            true => json!({"type": "json_object", "schema": output.schema}),
            false => json!({
                "type": "json_schema",
                "json_schema": {"name": output.name, "strict": true, "schema": output.schema}
            }),
        }
    }

    async fn attempt(&self, url: &str, body: &Value, max_body: usize) -> Result<String, Failure> {
        let mut headers = reqwest::header::HeaderMap::new();
        crate::runtime::traces::inject_current(&mut headers);
        let mut request = self.http.post(url).headers(headers).json(body);
        if let Some(key) = &self.options.api_key {
            request = request.bearer_auth(key);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| Failure::Error(OpenAiError::Unreachable(e)))?;
        let status = response.status();
        let retry_after = crate::models::embeddings::retry_after(response.headers());
        let mut bytes = Vec::new();
        let limit = if status.is_success() { max_body } else { 16 * 1024 };
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| Failure::Error(OpenAiError::Unreachable(e)))?
        {
            if bytes.len() + chunk.len() > limit {
                if status.is_success() {
                    let problem = format!("the answer is larger than {limit} bytes");
                    return Err(Failure::Error(OpenAiError::BadAnswer(problem)));
                }
                bytes.extend_from_slice(&chunk[..limit - bytes.len()]);
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let error = OpenAiError::Status {
                status: status.as_u16(),
                body: error_text(&text),
                retry_after,
            };
            let refused_schema = matches!(status.as_u16(), 400 | 422 | 500)
                && body["response_format"]["type"] == "json_schema"
                && (text.contains("response_format") || text.contains("json_schema"));
            return Err(match refused_schema {
                true => Failure::SchemaRefused(error),
                false => Failure::Error(error),
            });
        }
        // A large answer is parsed on the CPU pool, off the async workers.
        let parsed = match bytes.len() > PARSE_OFF_WORKERS {
            true => crate::runtime::cpu::run("ctxd:summarizer", move |_| answer_and_usage(&bytes)).await,
            false => answer_and_usage(&bytes),
        };
        let (text, usage) = parsed.map_err(|e| Failure::Error(OpenAiError::BadAnswer(e)))?;
        let span = tracing::Span::current();
        if let Some(tokens) = usage["prompt_tokens"].as_u64() {
            span.record(
                "gen_ai.usage.input_tokens",
                i64::try_from(tokens).unwrap_or(i64::MAX),
            );
        }
        if let Some(tokens) = usage["completion_tokens"].as_u64() {
            span.record(
                "gen_ai.usage.output_tokens",
                i64::try_from(tokens).unwrap_or(i64::MAX),
            );
        }
        Ok(text)
    }
}

/// The text of a successful answer and its `usage` object (Null when it has none).
fn answer_and_usage(bytes: &[u8]) -> Result<(String, Value), String> {
    let mut answer: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let text = text_of(&answer)?;
    Ok((text, answer["usage"].take()))
}

/// The text of a successful answer: `choices[0]`, ended by `stop`, not empty.
#[cfg(test)]
fn answer_text(bytes: &[u8]) -> Result<String, String> {
    answer_and_usage(bytes).map(|(text, _)| text)
}

/// The text of a parsed answer: `choices[0]`, ended by `stop`, not empty.
fn text_of(answer: &Value) -> Result<String, String> {
    let choice = &answer["choices"][0];
    if !choice.is_object() {
        return Err("the answer has no choices[0]".into());
    }
    match choice["finish_reason"].as_str() {
        Some("stop") => {}
        Some(reason) => {
            return Err(format!(
                "finish_reason is {:?}, not \"stop\": the answer is incomplete",
                clip(reason, 40)
            ));
        }
        None => return Err("the answer has no finish_reason".into()),
    }
    let text = choice["message"]["content"]
        .as_str()
        .ok_or("choices[0].message.content is not text")?;
    if text.trim().is_empty() {
        return Err("the answer is empty".into());
    }
    // U+0000 cannot be stored (PostgreSQL text), and no model means it.
    Ok(text.replace('\0', ""))
}

/// An upstream error body for a status or log line: the error's message when the body is the
/// usual `{"error": {"message": ...}}`, else the body, on one line, clipped.
fn error_text(body: &str) -> String {
    let message = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let error = &v["error"];
        error["message"]
            .as_str()
            .or_else(|| error.as_str())
            .or_else(|| v["detail"].as_str())
            .or_else(|| v["message"].as_str())
            .map(str::to_owned)
    });
    let text = message.unwrap_or_else(|| body.to_owned());
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match line.trim() {
        "" => "(no body)".to_owned(),
        line => clip(line, ERROR_BODY_BYTES).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_must_be_complete_and_not_empty() {
        let answer = |finish: &str, content: &str| {
            let body = json!({"choices": [{"finish_reason": finish, "message": {"content": content}}]});
            answer_text(body.to_string().as_bytes())
        };
        assert_eq!(answer("stop", "fine").unwrap(), "fine");
        assert!(
            answer("length", "Goals: Goals: Goals:")
                .unwrap_err()
                .contains("incomplete")
        );
        assert!(answer("stop", "  \n").unwrap_err().contains("empty"));
        assert!(
            answer_text(b"{\"choices\": []}")
                .unwrap_err()
                .contains("choices[0]")
        );
        assert!(answer_text(b"<html>").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn error_bodies_are_one_clipped_line_with_the_message() {
        let openai =
            r#"{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}"#;
        assert_eq!(error_text(openai), "Incorrect API key provided");
        assert_eq!(error_text("line one\nline two"), "line one line two");
        assert_eq!(error_text(""), "(no body)");
        assert!(error_text(&"x".repeat(10_000)).len() <= ERROR_BODY_BYTES);
    }

    #[tokio::test]
    async fn only_transient_failures_are_retryable() {
        // Port 9 (discard) on loopback: nothing listens there in a test environment.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let refused = reqwest::get("http://127.0.0.1:9/").await.unwrap_err();
        assert!(OpenAiError::Unreachable(refused).retryable());
        let status = |status| OpenAiError::Status {
            status,
            body: String::new(),
            retry_after: None,
        };
        assert!(status(429).retryable() && status(503).retryable() && status(500).retryable());
        assert!(!status(401).retryable() && !status(400).retryable() && !status(422).retryable());
        assert!(!OpenAiError::BadAnswer("{}".into()).retryable());
    }
}
