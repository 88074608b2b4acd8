//! A client for OpenAI-compatible `/embeddings` endpoints (OpenAI, llama.cpp `--embedding`,
//! Ollama, vLLM, TEI): the vectors semantic search stores and queries with (docs/design.md,
//! "Recall"). One attempt is bounded by the configured timeout; the caller retries.
//!
//! The endpoint is treated as an adversary (docs/reliability.md, "Hardening V"): redirects are
//! not followed (a text is sent to the configured origin or nowhere); an answer is refused past
//! the size its inputs and dimensions can take, is read into memory reserved from the
//! replica's response budget, and is parsed off the async workers when large; a vector that is
//! not finite, is zero, or has other dimensions than the model's first answer is refused.

use std::{
    sync::OnceLock,
    time::{Duration, SystemTime},
};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use crate::{
    config::EmbeddingEndpoint,
    domain::{native::parse_memory, search::vectors::MAX_DIMENSIONS, violation::clip},
    runtime::response_budget::{Reservation, ResponseBudget},
};

/// Bytes of an upstream error body kept in logs.
const ERROR_BODY_BYTES: usize = 300;
/// The largest answer read, whatever the inputs: 64 texts of 4,096 dimensions as base64 are
/// 1.4 MB, as JSON floats about 6 MB.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// What one dimension of one vector may take in an answer: a JSON float with its separator
/// (`-0.0123456789012345,` and some room), more than base64's 5.4 bytes.
const BYTES_PER_DIMENSION: usize = 26;
/// What one vector may take besides its dimensions (`{"object":"embedding","index":12,...}`),
/// and the whole answer besides its vectors (`model`, `usage`).
const BYTES_PER_VECTOR: usize = 256;
const BYTES_PER_ANSWER: usize = 4_096;
/// Answers larger than this are parsed on the CPU pool, off the async workers.
const PARSE_OFF_WORKERS: usize = 64 * 1024;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The endpoint could not be reached, or did not answer in time.
    #[error("endpoint unreachable or too slow: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// The endpoint answered with an error status (a redirect among them: none is followed).
    #[error("endpoint answered HTTP {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the body, clipped.
        body: String,
        /// What `Retry-After` asked for, if anything.
        retry_after: Option<Duration>,
    },
    /// The answer cannot be used: not JSON, a vector short, one not finite or zero.
    #[error("unusable answer: {0}")]
    BadAnswer(String),
    /// A vector of other dimensions than the model's (the configured
    /// `CTXD_EMBEDDINGS_DIMENSIONS`, or the first answer's).
    #[error("a vector of {got} dimensions; the model's are {expected}")]
    Dimensions {
        /// What the answer had.
        got: usize,
        /// What the model's vectors have.
        expected: usize,
    },
    /// The answer was larger than its inputs can take, or than the memory the replica had free
    /// to read it.
    #[error("answer refused: {0}")]
    TooLarge(String),
}

impl EmbedError {
    /// Whether the endpoint refused the texts themselves: the same texts would be refused
    /// again (a 400, 413 or 422, or an unusable vector for them), so they are skipped rather
    /// than retried, and never stop the texts beside them.
    pub fn refuses_input(&self) -> bool {
        match self {
            EmbedError::Status { status, .. } => matches!(status, 400 | 413 | 422),
            EmbedError::BadAnswer(_) | EmbedError::Dimensions { .. } => true,
            EmbedError::Unreachable(_) | EmbedError::TooLarge(_) => false,
        }
    }

    /// Whether trying again soon may help: the endpoint was unreachable, timed out, was busy
    /// or failed (408, 429, 5xx).
    pub fn retryable(&self) -> bool {
        match self {
            EmbedError::Unreachable(_) => true,
            EmbedError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            EmbedError::BadAnswer(_) | EmbedError::Dimensions { .. } | EmbedError::TooLarge(_) => false,
        }
    }

    /// How long the endpoint asked to be left alone (`Retry-After`), if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            EmbedError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
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
    /// The model's dimensions: the configured ones, or the first answer's.
    dimensions: OnceLock<usize>,
}

impl Embedder {
    /// Builds the HTTP client: no redirect is followed (a 3xx is an error status), so texts
    /// only ever go to the configured origin.
    pub fn new(options: EmbeddingEndpoint) -> Result<Self, EmbedError> {
        // reqwest's rustls needs a process-wide crypto provider; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(options.timeout.min(Duration::from_secs(5)))
            .timeout(options.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(EmbedError::Unreachable)?;
        let dimensions = OnceLock::new();
        if let Some(configured) = options.dimensions {
            let _ = dimensions.set(configured);
        }
        Ok(Self {
            http,
            options,
            dimensions,
        })
    }

    /// The model's dimensions, once known (configured, or learned from the first answer).
    pub fn dimensions(&self) -> Option<usize> {
        self.dimensions.get().copied()
    }

    /// The largest answer `count` vectors may come in.
    fn max_answer_bytes(&self, count: usize) -> usize {
        let dimensions = self.dimensions().unwrap_or(MAX_DIMENSIONS);
        let per_vector = dimensions * BYTES_PER_DIMENSION + BYTES_PER_VECTOR;
        count
            .saturating_mul(per_vector)
            .saturating_add(BYTES_PER_ANSWER)
            .min(MAX_ANSWER_BYTES)
    }

    /// The endpoint's settings.
    pub fn options(&self) -> &EmbeddingEndpoint {
        &self.options
    }

    /// The vectors of `texts` (each prefixed for its kind), in order: finite, not zero, each
    /// of the model's dimensions. The answer is read in memory reserved from `budget` for
    /// `owner` (a tenant, or the replica's own work) and parsed on the CPU pool when large.
    #[tracing::instrument(
        target = "ctxd::otel",
        name = "embeddings",
        skip_all,
        fields(
            model = %self.options.model,
            texts = texts.len(),
            otel.name = %format_args!("embeddings {}", self.options.model),
            otel.kind = "client",
            gen_ai.operation.name = "embeddings",
            gen_ai.request.model = %self.options.model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            server.address = tracing::field::Empty,
            server.port = tracing::field::Empty,
        )
    )]
    pub async fn embed(
        &self,
        kind: Kind,
        texts: &[&str],
        budget: &ResponseBudget,
        owner: &str,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
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
        let span = tracing::Span::current();
        crate::runtime::traces::record_server(&span, &self.options.base_url);
        let mut headers = reqwest::header::HeaderMap::new();
        crate::runtime::traces::inject_current(&mut headers);
        let mut request = self.http.post(url).headers(headers).json(&body);
        if let Some(key) = &self.options.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(EmbedError::Unreachable)?;
        let status = response.status();
        let mut reservation = budget.reserve_up_to(MAX_ANSWER_BYTES * 8).of_tenant(owner);
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let bytes = read_limited(response, ERROR_BODY_BYTES * 4, &mut reservation).await?;
            let body = String::from_utf8_lossy(&bytes);
            return Err(EmbedError::Status {
                status: status.as_u16(),
                body: clip(&body, ERROR_BODY_BYTES).to_string(),
                retry_after,
            });
        }
        let limit = self.max_answer_bytes(texts.len());
        let bytes = read_limited(response, limit, &mut reservation).await?;
        let (count, expected) = (texts.len(), self.dimensions());
        let parse = move |_: &crate::runtime::cpu::Cancel| parse_answer(&bytes, count, expected, reservation);
        let (vectors, input_tokens) = match limit > PARSE_OFF_WORKERS {
            true => crate::runtime::cpu::run(owner, parse).await?,
            false => parse(&crate::runtime::cpu::Cancel::default())?,
        };
        if let Some(tokens) = input_tokens {
            span.record(
                "gen_ai.usage.input_tokens",
                i64::try_from(tokens).unwrap_or(i64::MAX),
            );
        }
        let first = vectors.first().map_or(0, Vec::len);
        let learned = *self.dimensions.get_or_init(|| first);
        if learned != first {
            return Err(EmbedError::Dimensions {
                got: first,
                expected: learned,
            });
        }
        Ok(vectors)
    }
}

/// `Retry-After` in seconds or as an HTTP date, as a wait from now.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// The answer's body, refused past `limit` bytes or past the memory `reservation` may take.
async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
    reservation: &mut Reservation,
) -> Result<Vec<u8>, EmbedError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(EmbedError::Unreachable)? {
        if bytes.len() + chunk.len() > limit {
            return Err(EmbedError::TooLarge(format!(
                "larger than the {limit} bytes its inputs can take"
            )));
        }
        reservation
            .grow(chunk.len())
            .map_err(|refusal| EmbedError::TooLarge(refusal.to_string()))?;
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The vectors of an answer's `bytes` for `count` inputs, parsed in memory reserved first;
/// each of `expected` dimensions when the model's are known. With them, the input tokens the
/// answer's `usage` reports.
fn parse_answer(
    bytes: &[u8],
    count: usize,
    expected: Option<usize>,
    mut reservation: Reservation,
) -> Result<(Vec<Vec<f32>>, Option<u64>), EmbedError> {
    let text = std::str::from_utf8(bytes).map_err(|_| EmbedError::BadAnswer("not UTF-8".into()))?;
    reservation
        .grow(parse_memory(text))
        .map_err(|refusal| EmbedError::TooLarge(refusal.to_string()))?;
    let answer: Value =
        serde_json::from_str(text).map_err(|e| EmbedError::BadAnswer(format!("not JSON: {e}")))?;
    let vectors = vectors(&answer, count, expected)?;
    drop(reservation);
    Ok((vectors, answer["usage"]["prompt_tokens"].as_u64()))
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
    if let Some(expected) = dimensions.filter(|d| *d != first) {
        return Err(EmbedError::Dimensions { got: first, expected });
    }
    if out.iter().any(|v| v.iter().any(|x| !x.is_finite())) {
        return Err(bad("a vector that is not finite (NaN or infinite)"));
    }
    if out.iter().any(|v| v.iter().all(|x| *x == 0.0)) {
        return Err(bad("a zero vector"));
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

    #[test]
    fn vectors_that_are_not_finite_or_zero_are_refused_as_the_inputs_fault() {
        let nan = STANDARD.encode(
            [f32::NAN, 1.0]
                .iter()
                .flat_map(|f| f.to_le_bytes())
                .collect::<Vec<u8>>(),
        );
        for embedding in [json!(nan), json!([0.0, 0.0]), json!([1e39, 1.0])] {
            let answer = json!({"data": [{"index": 0, "embedding": embedding}]});
            let error = vectors(&answer, 1, None).unwrap_err();
            assert!(error.refuses_input(), "{error}");
        }
        let other = json!({"data": [{"index": 0, "embedding": [1.0, 2.0, 3.0]}]});
        assert!(matches!(
            vectors(&other, 1, Some(2)),
            Err(EmbedError::Dimensions { got: 3, expected: 2 })
        ));
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_as_a_date() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        headers.insert(reqwest::header::RETRY_AFTER, later.parse().unwrap());
        let wait = retry_after(&headers).unwrap();
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
    }
}
