//! A client for OpenAI-compatible `/chat/completions` endpoints (OpenAI, vLLM, Ollama,
//! LiteLLM): timeouts, bounded retries with backoff on 429/5xx and transport errors.

use std::time::Duration;

use serde_json::{Value, json};

use crate::domain::message::Message;

/// Where and how to call the endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiOptions {
    /// Base URL up to the API version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer token, if the endpoint needs one.
    pub api_key: Option<String>,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
}

/// Why a call failed. Every variant means "the old summary stands" (UNAVAILABLE).
#[derive(Debug, thiserror::Error)]
pub enum OpenAiError {
    /// The endpoint could not be reached or timed out.
    #[error("summarizer endpoint unreachable: {0}")]
    Transport(String),
    /// The endpoint answered with an error status.
    #[error("summarizer endpoint answered {status}")]
    Status {
        /// HTTP status.
        status: u16,
    },
    /// The answer was not the expected shape.
    #[error("summarizer endpoint answered unexpectedly: {0}")]
    BadAnswer(String),
}

/// A configured endpoint.
#[derive(Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    options: OpenAiOptions,
}

impl OpenAiClient {
    /// Builds the HTTP client.
    pub fn new(options: OpenAiOptions) -> Result<Self, OpenAiError> {
        // reqwest's rustls needs a process-wide crypto provider; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| OpenAiError::Transport(e.to_string()))?;
        Ok(Self { http, options })
    }

    /// Sends a chat completion and returns the answer's text.
    #[tracing::instrument(skip_all, fields(model = %self.options.model, messages = messages.len()))]
    pub async fn chat(
        &self,
        messages: &[Message],
        response_format: Option<Value>,
        max_tokens: usize,
    ) -> Result<String, OpenAiError> {
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
        if let Some(format) = response_format {
            body["response_format"] = format;
        }
        let url = format!("{}/chat/completions", self.options.base_url.trim_end_matches('/'));
        let mut delay = Duration::from_millis(200);
        let mut attempt = 0;
        loop {
            match self.attempt(&url, &body).await {
                Ok(text) => return Ok(text),
                Err(error) if attempt < self.options.max_retries && retryable(&error) => {
                    tracing::warn!(attempt, %error, "summarizer call failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
                Err(error) => {
                    tracing::error!(attempt, %error, "summarizer call failed");
                    return Err(error);
                }
            }
        }
    }

    async fn attempt(&self, url: &str, body: &Value) -> Result<String, OpenAiError> {
        let mut request = self.http.post(url).json(body);
        if let Some(key) = &self.options.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| OpenAiError::Transport(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(OpenAiError::Status {
                status: status.as_u16(),
            });
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|e| OpenAiError::BadAnswer(e.to_string()))?;
        answer["choices"][0]["message"]["content"]
            .as_str()
            .filter(|text| !text.trim().is_empty())
            // U+0000 cannot be stored (PostgreSQL text), and no model means it.
            .map(|text| text.replace('\0', ""))
            .ok_or_else(|| OpenAiError::BadAnswer("no choices[0].message.content".into()))
    }
}

fn retryable(error: &OpenAiError) -> bool {
    match error {
        OpenAiError::Transport(_) => true,
        OpenAiError::Status { status } => *status == 429 || *status >= 500,
        OpenAiError::BadAnswer(_) => false,
    }
}
