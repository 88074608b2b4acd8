//! A client for OpenAI-compatible `/embeddings` endpoints (OpenAI, llama.cpp `--embedding`,
//! Ollama, vLLM, TEI): the vectors semantic search stores and queries with (docs/design.md,
//! "Recall"). One attempt is bounded by the configured timeout; the caller retries.

use std::time::Duration;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use crate::{
    config::EmbeddingEndpoint,
    domain::{search::vectors::MAX_DIMENSIONS, violation::clip},
};

/// Bytes of an upstream error body kept in logs.
const ERROR_BODY_BYTES: usize = 300;
/// The largest answer read: a batch's vectors as base64 (64 texts of 4,096 dimensions are
/// 1.4 MB).
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The endpoint could not be reached, or did not answer in time.
    #[error("endpoint unreachable or too slow: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// The endpoint answered with an error status.
    #[error("endpoint answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    /// The answer cannot be used.
    #[error("unusable answer: {0}")]
    BadAnswer(String),
}

/// Whether a text is a query or a message's chunk (models such as e5 embed them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Query,
    Passage,
}

/// A configured endpoint.
#[derive(Debug)]
pub struct Embedder {
    http: reqwest::Client,
    options: EmbeddingEndpoint,
}

impl Embedder {
    /// Builds the HTTP client.
    pub fn new(options: EmbeddingEndpoint) -> Result<Self, EmbedError> {
        // reqwest's rustls needs a process-wide crypto provider; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(options.timeout.min(Duration::from_secs(5)))
            .timeout(options.timeout)
            .build()
            .map_err(EmbedError::Unreachable)?;
        Ok(Self { http, options })
    }

    /// The endpoint's settings.
    pub fn options(&self) -> &EmbeddingEndpoint {
        &self.options
    }

    /// The vectors of `texts` (each prefixed for its kind), in order. Every vector has the same
    /// number of dimensions, at most [`MAX_DIMENSIONS`].
    #[tracing::instrument(skip_all, fields(model = %self.options.model, texts = texts.len()))]
    pub async fn embed(&self, kind: Kind, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let prefix = match kind {
            Kind::Query => &self.options.query_prefix,
            Kind::Passage => &self.options.passage_prefix,
        };
        let input: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let mut body = json!({
            "model": self.options.model,
            "input": input,
            "encoding_format": "base64",
        });
        if let Some(dimensions) = self.options.dimensions {
            body["dimensions"] = json!(dimensions);
        }
        let url = format!("{}/embeddings", self.options.base_url.trim_end_matches('/'));
        let mut request = self.http.post(url).json(&body);
        if let Some(key) = &self.options.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(EmbedError::Unreachable)?;
        let status = response.status();
        let bytes = read_limited(response).await?;
        if !status.is_success() {
            let body = String::from_utf8_lossy(&bytes);
            return Err(EmbedError::Status {
                status: status.as_u16(),
                body: clip(&body, ERROR_BODY_BYTES).to_string(),
            });
        }
        let answer: Value =
            serde_json::from_slice(&bytes).map_err(|e| EmbedError::BadAnswer(format!("not JSON: {e}")))?;
        vectors(&answer, texts.len(), self.options.dimensions)
    }
}

/// The answer's body, refused past [`MAX_ANSWER_BYTES`].
async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, EmbedError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(EmbedError::Unreachable)? {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(EmbedError::BadAnswer(format!(
                "answer larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The vectors of an `/embeddings` answer for `count` inputs, by `index`; each a float array or
/// base64 of little-endian float32s.
fn vectors(answer: &Value, count: usize, dimensions: Option<usize>) -> Result<Vec<Vec<f32>>, EmbedError> {
    let bad = |what: &str| EmbedError::BadAnswer(what.to_string());
    let data = answer["data"].as_array().ok_or_else(|| bad("no `data` array"))?;
    if data.len() != count {
        return Err(EmbedError::BadAnswer(format!(
            "{} vectors for {count} inputs",
            data.len()
        )));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; count];
    for item in data {
        let index = item["index"]
            .as_u64()
            .ok_or_else(|| bad("a vector without `index`"))? as usize;
        let vector = match &item["embedding"] {
            Value::String(text) => {
                let raw = STANDARD
                    .decode(text)
                    .map_err(|_| bad("`embedding` is not base64"))?;
                if raw.len() % 4 != 0 {
                    return Err(bad("`embedding` is not float32s"));
                }
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            }
            Value::Array(values) => values
                .iter()
                .map(|v| v.as_f64().map(|f| f as f32))
                .collect::<Option<Vec<f32>>>()
                .ok_or_else(|| bad("`embedding` holds a non-number"))?,
            _ => return Err(bad("`embedding` is neither a list nor base64")),
        };
        let slot = out.get_mut(index).ok_or_else(|| bad("`index` out of range"))?;
        *slot = Some(vector);
    }
    let out: Vec<Vec<f32>> = out
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| bad("an input without a vector"))?;
    let first = out.first().map_or(0, Vec::len);
    if first == 0 || first > MAX_DIMENSIONS || out.iter().any(|v| v.len() != first) {
        return Err(EmbedError::BadAnswer(format!(
            "vectors of {first} dimensions or of differing sizes (at most {MAX_DIMENSIONS})"
        )));
    }
    if dimensions.is_some_and(|d| d != first) {
        return Err(EmbedError::BadAnswer(format!(
            "vectors of {first} dimensions, {} configured",
            dimensions.unwrap_or(0)
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_floats_or_base64_are_read_by_index() {
        let b64 = STANDARD.encode(
            [1.0f32, -2.0]
                .iter()
                .flat_map(|f| f.to_le_bytes())
                .collect::<Vec<u8>>(),
        );
        let answer = json!({"data": [
            {"index": 1, "embedding": b64},
            {"index": 0, "embedding": [0.5, 0.25]},
        ]});
        let v = vectors(&answer, 2, Some(2)).unwrap();
        assert_eq!(v, vec![vec![0.5, 0.25], vec![1.0, -2.0]]);
        assert!(vectors(&answer, 3, None).is_err());
        assert!(vectors(&answer, 2, Some(3)).is_err());
        let uneven =
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]});
        assert!(vectors(&uneven, 2, None).is_err());
        let twice = json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]});
        assert!(vectors(&twice, 2, None).is_err());
    }
}
