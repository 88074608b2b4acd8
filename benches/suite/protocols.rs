//! BuildContext over Connect JSON (HTTP/1.1, as curl, `fetch` and edge runtimes call it) against
//! gRPC, on the same conversation in the same run, calls interleaved so both see the same
//! server and database state: p50, p99 and their ratio.

use std::time::{Duration, Instant};

use ctxd::proto;
use serde_json::json;

use crate::{
    build::{history, seed},
    replica::{Replica, percentile},
};

pub(crate) async fn run(server: &Replica, quick: bool) -> anyhow::Result<()> {
    let (size, samples) = if quick { (200, 100) } else { (1_000, 1_000) };
    let conversation = format!("{}-protocols", history(size));
    let mut client = server.client().await?;
    seed(&client, &conversation, size).await?;
    // reqwest's rustls needs the process-wide provider, even for plain HTTP.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let url = format!("http://{}/ctxd.v1.ContextService/BuildContext", server.addr);
    let budget = proto::Budget {
        max_tokens: 8_000,
        reserve_output_tokens: 1_000,
        ..Default::default()
    };
    let grpc_request = proto::BuildContextRequest {
        conversation_id: conversation.clone(),
        budget: Some(budget),
        format: proto::Format::AnthropicMessages as i32,
        ..Default::default()
    };
    let body = json!({
        "conversationId": conversation,
        "budget": {"maxTokens": 8_000, "reserveOutputTokens": 1_000},
        "format": "FORMAT_ANTHROPIC_MESSAGES"
    })
    .to_string();
    let connect = || async {
        let response = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "Connect answered {}",
            response.status()
        );
        let answer: serde_json::Value = response.json().await?;
        Ok::<_, anyhow::Error>(answer["rendered"].as_str().unwrap_or_default().to_owned())
    };
    let via_grpc = client
        .build_context(grpc_request.clone())
        .await?
        .into_inner()
        .rendered;
    anyhow::ensure!(
        connect().await? == via_grpc,
        "Connect and gRPC rendered different packs"
    );
    for _ in 0..50 {
        client.build_context(grpc_request.clone()).await?;
        connect().await?;
    }
    let (mut grpc, mut json) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for _ in 0..samples {
        let start = Instant::now();
        client.build_context(grpc_request.clone()).await?;
        grpc.push(start.elapsed());
        let start = Instant::now();
        connect().await?;
        json.push(start.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (grpc_p50, grpc_p99) = (percentile(&mut grpc, 0.50), percentile(&mut grpc, 0.99));
    let (json_p50, json_p99) = (percentile(&mut json, 0.50), percentile(&mut json, 0.99));
    println!(
        "# BuildContext over Connect JSON (HTTP/1.1) vs gRPC, {size}-message history, {samples} calls each, interleaved"
    );
    println!(
        "grpc          p50={:>7.3} ms  p99={:>7.3} ms",
        ms(grpc_p50),
        ms(grpc_p99)
    );
    println!(
        "connect-json  p50={:>7.3} ms  p99={:>7.3} ms",
        ms(json_p50),
        ms(json_p99)
    );
    println!(
        "ratio connect-json/grpc p50 = {:.2}x (same rendered bytes)",
        json_p50.as_secs_f64() / grpc_p50.as_secs_f64()
    );
    Ok(())
}
