//! Hostile bodies against one replica with API keys on (docs/reliability.md, "Hostile
//! bodies"): a request refused for its entries, its size or its missing key is refused before
//! it is decoded or read, and native JSON is parsed only in memory reserved for it. Each case
//! is printed beside the figure the attack that found it measured (Hardening IV), and the
//! replica's peak RSS must stay within its memory budget plus a documented overhead.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use bytes::Bytes;
use ctxd::{grpc::ApiKey, proto};
use prost::Message as _;
use tokio::task::JoinSet;

use crate::{
    Report, memory, raw,
    replica::{Cluster, Replica},
};

const KEY: &str = "reliability-bodies-key";
/// The default memory budget of calls (CTXD_RESPONSE_MEMORY_MIB).
const BUDGET_MIB: u64 = 256;
/// What the replica may hold beyond the budget: the request bodies tonic and hyper buffer while
/// they arrive (counted, but held twice on the way) and the allocator's slack.
const OVERHEAD_MIB: u64 = 128;
/// Empty `messages` entries (two bytes each) in a 16 MiB body.
const EMPTY_ENTRIES: usize = 8_388_571;

pub(crate) async fn hostile_bodies(binary: &Path, cluster: &Cluster, work: &Path) -> anyhow::Result<Report> {
    let mut report = Report::new("hostile bodies, 1 replica with API keys");
    let keys = format!("{}=acme", ApiKey::hash_hex(KEY));
    let env = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("CTXD_API_KEYS", keys.as_str()),
        ("CTXD_MAX_REQUEST_BYTES", "16777216"),
        ("CTXD_REQUEST_TIMEOUT_SECS", "30"),
        ("RUST_LOG", "info"),
    ];
    let replica = Replica::start(binary, &env, work, "replica-bodies").await?;
    let start_mib = memory::peak_rss_mib(&replica).unwrap_or(0);
    let bearer = format!("Bearer {KEY}");
    let empty_messages: Vec<u8> = [0x12, 0x00].repeat(EMPTY_ENTRIES);

    // 1. Two 16 MiB protobuf AppendMessages of empty entries at once, over gRPC.
    let started = Instant::now();
    let mut calls = JoinSet::new();
    for _ in 0..2 {
        let (addr, body, bearer) = (replica.addr, raw::framed(0, &empty_messages), bearer.clone());
        calls.spawn(async move {
            let send = raw::connect(addr).await?;
            let headers = [("authorization", bearer.as_str())];
            raw::unary(&send, &addr.to_string(), APPEND, &headers, body).await
        });
    }
    let codes = calls
        .join_all()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<u32>>>()?;
    report.figure(
        "gRPC: 2 x 16 MiB of 8.4 M empty messages",
        format!(
            "then 2.7-4.0 GB decoded each, 7.4 GB for two; now {} in {:.2} s",
            names(&codes),
            started.elapsed().as_secs_f64()
        ),
    );
    report.expect(
        codes.iter().all(|c| *c == INVALID_ARGUMENT),
        format!("gRPC: {codes:?}"),
    );

    // 2. The same as Connect JSON and Connect proto.
    let json = format!("{{\"messages\":[{}{{}}]}}", "{},".repeat(EMPTY_ENTRIES / 2));
    let (status, elapsed) = connect(&replica, "application/json", json.into_bytes(), Some(&bearer)).await?;
    report.figure(
        "Connect JSON: {\"messages\":[{},{},...]}, 16 MiB",
        format!("then 2.7 GB; now HTTP {status} in {elapsed:.2} s"),
    );
    report.expect(status == 400, format!("Connect JSON: HTTP {status}"));
    let (status, elapsed) = connect(
        &replica,
        "application/proto",
        empty_messages.clone(),
        Some(&bearer),
    )
    .await?;
    report.figure(
        "Connect proto: 8.4 M empty messages, 16 MiB",
        format!("now HTTP {status} in {elapsed:.2} s"),
    );
    report.expect(status == 400, format!("Connect proto: HTTP {status}"));

    // 3. Eight unauthenticated 16 MiB Connect bodies at once: refused at their headers.
    let started = Instant::now();
    let mut calls = JoinSet::new();
    for _ in 0..8 {
        let (body, addr) = (empty_messages.clone(), replica.addr);
        calls.spawn(async move { connect_to(addr, "application/proto", body, None::<String>).await });
    }
    let outcomes = calls
        .join_all()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let statuses: Vec<u16> = outcomes.iter().map(|(s, _)| *s).collect();
    report.figure(
        "8 x 16 MiB Connect bodies without a key",
        format!(
            "then 1.1 GB and 12-16 s of CPU, a keyed tenant waiting 7.5 s; now HTTP {statuses:?} in {:.2} s",
            started.elapsed().as_secs_f64()
        ),
    );
    report.expect(
        statuses.iter().all(|s| *s == 401),
        format!("unauthenticated: {statuses:?}"),
    );

    // 4. A 14 MiB Anthropic reply with a 7 M-item opaque `server_tool_use.input`.
    let zeros = "0,".repeat(7 << 20);
    let reply = format!(
        "{{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{{\"type\":\"server_tool_use\",\
         \"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{{\"q\":[{zeros}0]}}}}]}}"
    );
    let request = proto::AppendMessageRequest {
        conversation_id: "bodies-native".into(),
        native: Some(proto::NativeItems {
            format: proto::Format::AnthropicMessages as i32,
            json: reply,
        }),
        ..Default::default()
    };
    let started = Instant::now();
    let send = raw::connect(replica.addr).await?;
    let headers = [("authorization", bearer.as_str())];
    let code = raw::unary(
        &send,
        &replica.addr.to_string(),
        APPEND,
        &headers,
        raw::framed(0, &request.encode_to_vec()),
    )
    .await?;
    report.figure(
        "native: 14 MiB reply, 7 M-item opaque array",
        format!(
            "then 2.6 GB peak, 2.5 GB held after; now {} in {:.2} s",
            names(&[code]),
            started.elapsed().as_secs_f64()
        ),
    );
    report.expect(code == RESOURCE_EXHAUSTED, format!("native: {code}"));

    let peak = memory::peak_rss_mib(&replica).unwrap_or(u64::MAX);
    report.figure(
        "replica peak RSS (VmHWM)",
        format!("{peak} MiB (at start {start_mib} MiB; budget {BUDGET_MIB} + {OVERHEAD_MIB} MiB)"),
    );
    report.expect(
        peak <= start_mib + BUDGET_MIB + OVERHEAD_MIB,
        format!("peak RSS {peak} MiB is over {start_mib} + {BUDGET_MIB} + {OVERHEAD_MIB} MiB"),
    );
    Ok(report)
}

const APPEND: &str = "/ctxd.v1.ContextService/AppendMessage";
const INVALID_ARGUMENT: u32 = 3;
const RESOURCE_EXHAUSTED: u32 = 8;

fn names(codes: &[u32]) -> String {
    let name = |code: &u32| match *code {
        INVALID_ARGUMENT => "INVALID_ARGUMENT".to_owned(),
        RESOURCE_EXHAUSTED => "RESOURCE_EXHAUSTED".to_owned(),
        16 => "UNAUTHENTICATED".to_owned(),
        other => format!("code {other}"),
    };
    codes.iter().map(name).collect::<Vec<_>>().join(", ")
}

/// A Connect AppendMessage over HTTP/2 with `body` sent whole: the HTTP status and the time
/// the answer took.
async fn connect(
    replica: &Replica,
    content_type: &str,
    body: Vec<u8>,
    bearer: Option<&str>,
) -> anyhow::Result<(u16, f64)> {
    connect_to(replica.addr, content_type, body, bearer.map(str::to_owned)).await
}

async fn connect_to(
    addr: std::net::SocketAddr,
    content_type: &str,
    body: Vec<u8>,
    bearer: impl Into<Option<String>>,
) -> anyhow::Result<(u16, f64)> {
    let started = Instant::now();
    let send = raw::connect(addr).await?;
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{APPEND}"))
        .header("content-type", content_type);
    if let Some(bearer) = bearer.into() {
        request = request.header("authorization", bearer);
    }
    let mut send = send.ready().await?;
    let (response, mut stream) = send.send_request(request.body(())?, false)?;
    // The server may answer (and reset the stream) before the body is sent: that is the point.
    let _ = stream.send_data(Bytes::from(body), true);
    let response = tokio::time::timeout(Duration::from_secs(60), response).await??;
    Ok((response.status().as_u16(), started.elapsed().as_secs_f64()))
}
