//! A hostile OpenAI-compatible `/v1/embeddings` server on loopback (Hardening V), shared by the
//! API tests and the reliability suite: it hangs, refuses one message, answers NaN, zero or
//! other-sized vectors, answers 16 MiB, or redirects elsewhere, and counts the requests it got.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

/// What the endpoint does.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Mode {
    /// Answers batches (the model's mean, message backlogs), hangs on single texts (queries).
    HangQueries,
    /// Hangs on everything, from start-up.
    HangAll,
    /// Refuses (400) any request holding a text with `POISON`.
    Poison,
    /// NaN for `NANTEXT`, zeros for `ZEROTEXT`, 32 dimensions for `SHORTDIM`.
    BadVectors,
    /// A 16 MiB answer to everything.
    Huge,
    /// A redirect to the target, for everything.
    Redirect,
}

#[derive(Clone)]
struct Endpoint {
    mode: Mode,
    target: String,
    huge: Bytes,
    vector: fn(&str) -> Vec<f32>,
    requests: Arc<AtomicUsize>,
}

async fn answer(State(endpoint): State<Endpoint>, Json(body): Json<Value>) -> Response {
    endpoint.requests.fetch_add(1, Ordering::SeqCst);
    let inputs: Vec<String> = body["input"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let hang = match endpoint.mode {
        Mode::HangAll => true,
        Mode::HangQueries => inputs.len() == 1,
        _ => false,
    };
    if hang {
        tokio::time::sleep(Duration::from_secs(300)).await;
    }
    match endpoint.mode {
        Mode::Huge => {
            let headers = [(header::CONTENT_TYPE, "application/json")];
            return (headers, endpoint.huge.clone()).into_response();
        }
        Mode::Redirect => {
            let to = format!("{}/v1/embeddings", endpoint.target);
            return (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response();
        }
        Mode::Poison if inputs.iter().any(|i| i.contains("POISON")) => {
            let error = json!({"error": {"message": "input refused"}});
            return (StatusCode::BAD_REQUEST, Json(error)).into_response();
        }
        _ => {}
    }
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let vector = match text {
                t if t.contains("NANTEXT") => vec![f32::NAN; 64],
                t if t.contains("ZEROTEXT") => vec![0.0; 64],
                t if t.contains("SHORTDIM") => (endpoint.vector)(t)[..32].to_vec(),
                t => (endpoint.vector)(t),
            };
            let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
            json!({"object": "embedding", "index": i, "embedding": STANDARD.encode(bytes)})
        })
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

/// The endpoint in `mode` on a loopback port (`target`: where a redirect sends the caller;
/// `vector`: the model, 64 dimensions), with its request count.
pub async fn start(
    mode: Mode,
    target: &str,
    vector: fn(&str) -> Vec<f32>,
) -> std::io::Result<(SocketAddr, Arc<AtomicUsize>)> {
    // 16 MiB of floats for one vector: valid JSON, far larger than any input can take.
    let huge = match mode {
        Mode::Huge => {
            let floats = vec!["0.123456789"; (16 << 20) / 12].join(",");
            Bytes::from(format!(
                r#"{{"object":"list","data":[{{"index":0,"embedding":[{floats}]}}]}}"#
            ))
        }
        _ => Bytes::new(),
    };
    let state = Endpoint {
        mode,
        target: target.to_string(),
        huge,
        vector,
        requests: Arc::default(),
    };
    let requests = state.requests.clone();
    let app = Router::new()
        .route("/v1/embeddings", post(answer))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, requests))
}
