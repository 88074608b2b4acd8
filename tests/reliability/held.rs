//! Memory that clients hold on purpose, against one replica with the shipped Deployment's
//! 512 MiB in mind: one tenant ("mallory") opens 192 streams on one connection, each sending
//! all but the last 100 bytes of a 16 MiB request and never finishing; then 40 large
//! ListMessages on a connection whose window is zero (it never reads). Meanwhile another
//! tenant ("alice") runs BuildContext, ListMessages and appends: at least 99% must succeed, the
//! replica's peak RSS must stay under 512 MiB, and the unread responses must be let go within
//! the request timeout.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use ctxd::proto;
use tokio::task::JoinSet;
use tonic::Code;

use crate::{
    Report,
    appenders::{as_tenant, user},
    replica::{Cluster, Replica},
};

const LIMIT_MIB: u64 = 512;
const STREAMS: usize = 192;
const REQUEST_BYTES: usize = 16 << 20;
const READERS: usize = 40;
/// The replica's request timeout here: the longest an unread response may hold its memory.
const TIMEOUT: Duration = Duration::from_secs(6);
const BIG: &str = "held-big";
const SMALL: &str = "held-small";

pub(crate) async fn held_memory(binary: &Path, cluster: &Cluster, work: &Path) -> anyhow::Result<Report> {
    let mut report = Report::new("bodies never finished and responses never read, 1 replica (512 MiB)");
    seed_big_conversation(&cluster.url).await?;
    let timeout = TIMEOUT.as_secs().to_string();
    let env = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("CTXD_REQUEST_TIMEOUT_SECS", timeout.as_str()),
        ("RUST_LOG", "info"),
    ];
    let replica = Replica::start(binary, &env, work, "replica-held").await?;
    let mut alice = replica.client().await?;
    alice
        .append_message(as_tenant(
            "alice",
            proto::AppendMessageRequest {
                conversation_id: SMALL.into(),
                messages: (0..20).map(|i| user(format!("hello {i}"))).collect(),
                ..Default::default()
            },
        ))
        .await?;

    // Half-sent bodies.
    let attack = tokio::spawn(half_sent_bodies(replica.addr));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (ok, total) = other_tenant(&replica, Duration::from_secs(4)).await?;
    let rss = peak_rss_mib(&replica).unwrap_or(u64::MAX);
    let refused = attack.await??;
    report.figure(
        "192 half-sent 16 MiB bodies: alice's calls",
        format!("{ok} of {total} succeeded; mallory's streams refused: {refused}"),
    );
    report.figure("peak RSS after the half-sent bodies", format!("{rss} MiB"));
    report.expect(
        ok * 100 >= total * 99,
        "fewer than 99% of alice's calls succeeded",
    );
    report.expect(total >= 20, format!("only {total} calls of alice's were tried"));
    report.expect(
        rss < LIMIT_MIB,
        format!("peak RSS {rss} MiB is over {LIMIT_MIB} MiB"),
    );

    // Responses never read.
    let readers = zero_window_readers(replica.addr).await?;
    let (ok, total) = other_tenant(&replica, Duration::from_secs(4)).await?;
    let rss = peak_rss_mib(&replica).unwrap_or(u64::MAX);
    report.figure(
        "40 large ListMessages never read: alice's calls",
        format!(
            "{ok} of {total} succeeded; mallory's calls: {} answered, {} refused RESOURCE_EXHAUSTED",
            readers.answered, readers.refused
        ),
    );
    report.figure("peak RSS after the unread responses", format!("{rss} MiB"));
    report.expect(
        ok * 100 >= total * 99,
        "fewer than 99% of alice's calls succeeded",
    );
    report.expect(
        rss < LIMIT_MIB,
        format!("peak RSS {rss} MiB is over {LIMIT_MIB} MiB"),
    );
    report.expect(
        readers.answered > 0,
        "none of mallory's ListMessages was answered",
    );
    // Past the request timeout the unread responses are dropped: mallory's share is free
    // again although the connection that holds them is still open.
    tokio::time::sleep(TIMEOUT + Duration::from_secs(1)).await;
    let mut mallory = replica.client().await?;
    let freed = large_page(&mut mallory).await;
    report.figure(
        "mallory's next large page, after the timeout",
        format!("{freed:?}"),
    );
    report.expect(
        freed == Code::Ok,
        "the unread responses still held mallory's share",
    );
    drop(readers);
    Ok(report)
}

/// 2,000 messages of 16 KB for mallory, straight into PostgreSQL.
async fn seed_big_conversation(url: &str) -> anyhow::Result<()> {
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    db.batch_execute(&format!(
        "INSERT INTO conversations (tenant_id, conversation_id, last_sequence)
             VALUES ('mallory', '{BIG}', 2000) ON CONFLICT DO NOTHING;
         INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name, tool_calls,
             attachments, metadata, exclude_from_context, pinned, response_id, created_at,
             tokens_o200k, tokens_cl100k, tokens_approx)
         SELECT 'mallory', '{BIG}', s, 'user', left(repeat(md5(s::text), 600), 16000), '', '[]',
             '[]', '{{}}', false, false, '', now(), 4000, 4000, 4000
         FROM generate_series(1, 2000) s ON CONFLICT DO NOTHING"
    ))
    .await?;
    drop(db);
    let _ = connection.await;
    Ok(())
}

/// Alice's calls for `period`: (succeeded, tried).
async fn other_tenant(replica: &Replica, period: Duration) -> anyhow::Result<(usize, usize)> {
    let mut client = replica.client().await?;
    let (mut ok, mut total) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < period {
        let build = client
            .build_context(as_tenant(
                "alice",
                proto::BuildContextRequest {
                    conversation_id: SMALL.into(),
                    budget: Some(proto::Budget {
                        max_tokens: 8_000,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ))
            .await;
        let list = client
            .list_messages(as_tenant(
                "alice",
                proto::ListMessagesRequest {
                    conversation_id: SMALL.into(),
                    page_size: 100,
                    ..Default::default()
                },
            ))
            .await;
        let append = client
            .append_message(as_tenant(
                "alice",
                proto::AppendMessageRequest {
                    conversation_id: format!("{SMALL}-{total}"),
                    messages: vec![user("more".into())],
                    ..Default::default()
                },
            ))
            .await;
        ok += usize::from(build.is_ok()) + usize::from(list.is_ok()) + usize::from(append.is_ok());
        total += 3;
    }
    Ok((ok, total))
}

async fn large_page(
    client: &mut proto::context_service_client::ContextServiceClient<tonic::transport::Channel>,
) -> Code {
    let request = as_tenant(
        "mallory",
        proto::ListMessagesRequest {
            conversation_id: BIG.into(),
            page_size: 1_000,
            ..Default::default()
        },
    );
    client
        .list_messages(request)
        .await
        .err()
        .map_or(Code::Ok, |s| s.code())
}

/// Opens [`STREAMS`] AppendMessage streams as mallory, each sending all but the last 100 bytes
/// of a [`REQUEST_BYTES`] request, and keeps them open; returns how many the server ended.
async fn half_sent_bodies(addr: std::net::SocketAddr) -> anyhow::Result<usize> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (send, connection) = h2::client::handshake(stream).await?;
    tokio::spawn(connection);
    let message_len = REQUEST_BYTES - 200;
    let mut body = vec![0u8; 5 + message_len - 100];
    body[1..5].copy_from_slice(&(message_len as u32).to_be_bytes());
    let body = Bytes::from(body);
    let ended = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut streams = JoinSet::new();
    for _ in 0..STREAMS {
        let (send, body, ended) = (send.clone(), body.clone(), ended.clone());
        let authority = addr.to_string();
        streams.spawn(async move {
            let request = http::Request::builder()
                .method("POST")
                .uri(format!("http://{authority}/ctxd.v1.ContextService/AppendMessage"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("x-tenant-id", "mallory")
                .body(())?;
            let mut send = send.ready().await?;
            let (response, mut stream) = send.send_request(request, false)?;
            if send_slowly(&mut stream, body).await.is_err() {
                ended.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            // Held open, unfinished, until the test moves on.
            tokio::time::sleep(Duration::from_secs(6)).await;
            drop((response, stream));
            anyhow::Ok(())
        });
    }
    while let Some(joined) = streams.join_next().await {
        joined??;
    }
    Ok(ended.load(std::sync::atomic::Ordering::Relaxed))
}

/// Sends `data` as the server's flow control allows; an error once the server ends the stream.
async fn send_slowly(stream: &mut h2::SendStream<Bytes>, mut data: Bytes) -> anyhow::Result<()> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len().min(1 << 20));
        let capacity = futures::future::poll_fn(|cx| stream.poll_capacity(cx))
            .await
            .ok_or_else(|| anyhow::anyhow!("stream ended"))??;
        let chunk = data.split_to(capacity.min(data.len()));
        stream.send_data(chunk, false)?;
    }
    Ok(())
}

/// What became of mallory's unread ListMessages.
struct Readers {
    answered: usize,
    refused: usize,
    _held: Vec<h2::RecvStream>,
}

/// [`READERS`] large ListMessages on a connection that never opens its window.
async fn zero_window_readers(addr: std::net::SocketAddr) -> anyhow::Result<Readers> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake(stream)
        .await?;
    tokio::spawn(connection);
    let request = proto::ListMessagesRequest {
        conversation_id: BIG.into(),
        page_size: 1_000,
        ..Default::default()
    };
    let body = crate::raw::framed(0, &prost::Message::encode_to_vec(&request));
    let mut pending = Vec::new();
    for _ in 0..READERS {
        let http = http::Request::builder()
            .method("POST")
            .uri(format!("http://{addr}/ctxd.v1.ContextService/ListMessages"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("x-tenant-id", "mallory")
            .body(())?;
        let mut send = send.clone().ready().await?;
        let (response, mut stream) = send.send_request(http, false)?;
        stream.send_data(Bytes::from(body.clone()), true)?;
        pending.push(response);
    }
    let mut readers = Readers {
        answered: 0,
        refused: 0,
        _held: Vec::new(),
    };
    for response in pending {
        let response = response.await?;
        match response.headers().get("grpc-status").map(|v| v.as_bytes()) {
            Some(b"8") => readers.refused += 1,
            Some(_) => {}
            None => {
                readers.answered += 1;
                readers._held.push(response.into_body());
            }
        }
    }
    Ok(readers)
}

/// The process's peak resident set size in MiB, from /proc.
fn peak_rss_mib(replica: &Replica) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", replica.pid()?)).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? / 1024)
}
