//! Production behaviour: API-key auth and tenant isolation across every RPC, request ids,
//! metrics, and no message content in logs even at the most verbose level.

use std::{process::Stdio, time::Duration};

use ctxd::{grpc::ApiKey, proto};
use tokio::io::AsyncReadExt;
use tonic::{Code, Request};

use crate::helpers::{TestApp, append, assistant, assistant_calling, fresh_database, spawn_on, user};

fn keyed<T>(key: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    request
}

async fn with_keys() -> TestApp {
    let keys = format!(
        "{}=acme,{}=globex",
        ApiKey::hash_hex("key-acme"),
        ApiKey::hash_hex("key-globex")
    );
    spawn_on(None, &["--api-keys", &keys]).await
}

#[tokio::test]
async fn calls_without_a_valid_key_are_unauthenticated_and_a_mismatched_tenant_is_denied() {
    let app = with_keys().await;
    let mut client = app.client.clone();
    let status = client
        .append_message(append("c", vec![user("hi")]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let status = client
        .append_message(keyed("wrong-key", append("c", vec![user("hi")])))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let mut mismatched = keyed("key-acme", append("c", vec![user("hi")]));
    mismatched
        .metadata_mut()
        .insert("x-tenant-id", "globex".parse().unwrap());
    assert_eq!(
        client.append_message(mismatched).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let mut matching = keyed("key-acme", append("c", vec![user("hi")]));
    matching
        .metadata_mut()
        .insert("x-tenant-id", "acme".parse().unwrap());
    assert_eq!(
        client
            .append_message(matching)
            .await
            .unwrap()
            .into_inner()
            .first_sequence,
        1
    );
}

#[tokio::test]
async fn no_rpc_lets_one_tenant_reach_another_tenants_conversation() {
    let app = with_keys().await;
    let mut c = app.client.clone();
    c.append_message(keyed(
        "key-acme",
        append("secret", vec![user("We decided to acquire Initech.")]),
    ))
    .await
    .unwrap();
    let conv = || "secret".to_string();
    let mut leaks = Vec::new();
    let mut check = |rpc: &str, code: Code| {
        if code != Code::NotFound {
            leaks.push(format!("{rpc}: {code:?}"));
        }
    };
    let g = "key-globex";
    let list = proto::ListMessagesRequest {
        conversation_id: conv(),
        ..Default::default()
    };
    check(
        "ListMessages",
        c.list_messages(keyed(g, list)).await.unwrap_err().code(),
    );
    let build = proto::BuildContextRequest {
        conversation_id: conv(),
        budget: Some(proto::Budget {
            max_tokens: 1000,
            ..Default::default()
        }),
        ..Default::default()
    };
    check(
        "BuildContext",
        c.build_context(keyed(g, build)).await.unwrap_err().code(),
    );
    let summarize = proto::SummarizeRequest {
        conversation_id: conv(),
        ..Default::default()
    };
    check(
        "Summarize",
        c.summarize(keyed(g, summarize)).await.unwrap_err().code(),
    );
    let get = proto::GetWorkingMemoryRequest {
        conversation_id: conv(),
        refresh: true,
        prepare: false,
    };
    check(
        "GetWorkingMemory",
        c.get_working_memory(keyed(g, get)).await.unwrap_err().code(),
    );
    let update = proto::UpdateWorkingMemoryRequest {
        conversation_id: conv(),
        memory: Some(proto::WorkingMemory {
            summary: "overwrite".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    check(
        "UpdateWorkingMemory",
        c.update_working_memory(keyed(g, update))
            .await
            .unwrap_err()
            .code(),
    );
    let delete = proto::DeleteConversationRequest {
        conversation_id: conv(),
    };
    check(
        "DeleteConversation",
        c.delete_conversation(keyed(g, delete)).await.unwrap_err().code(),
    );
    // Appending under the same id creates globex's own conversation: nothing of acme's shows.
    let own = c
        .append_message(keyed(g, append("secret", vec![user("hello")])))
        .await
        .unwrap()
        .into_inner();
    if own.first_sequence != 1 {
        leaks.push(format!(
            "AppendMessage continued acme's sequence: {}",
            own.first_sequence
        ));
    }
    assert!(leaks.is_empty(), "cross-tenant leaks: {leaks:?}");
    let acme = c
        .list_messages(keyed(
            "key-acme",
            proto::ListMessagesRequest {
                conversation_id: conv(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(acme.messages.len(), 1, "acme's conversation is untouched");
}

#[tokio::test]
async fn request_ids_are_echoed_or_generated() {
    let app = spawn_on(None, &[]).await;
    let mut request = Request::new(append("r", vec![user("hi")]));
    request
        .metadata_mut()
        .insert("x-request-id", "req-123".parse().unwrap());
    let response = app.client.clone().append_message(request).await.unwrap();
    assert_eq!(response.metadata().get("x-request-id").unwrap(), "req-123");
    let response = app
        .client
        .clone()
        .append_message(append("r", vec![user("again")]))
        .await
        .unwrap();
    assert!(!response.metadata().get("x-request-id").unwrap().is_empty());
}

#[tokio::test]
async fn metrics_are_served_on_their_own_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let app = spawn_on(None, &["--metrics-listen", &listen]).await;
    app.append_ok("m", vec![user("hi")]).await;
    let build = proto::BuildContextRequest {
        conversation_id: "m".into(),
        budget: Some(proto::Budget {
            max_tokens: 1000,
            ..Default::default()
        }),
        ..Default::default()
    };
    app.client.clone().build_context(build).await.unwrap();
    // A call refused before any store work is counted too, with its code.
    let refused = app
        .client
        .clone()
        .build_context(proto::BuildContextRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    app.client
        .clone()
        .summarize(proto::SummarizeRequest {
            conversation_id: "m".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut stream = tokio::net::TcpStream::connect(&listen).await.unwrap();
    use tokio::io::AsyncWriteExt;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    for name in [
        "ctxd_rpc_duration_seconds_bucket{code=\"OK\",method=\"AppendMessage\"",
        "ctxd_rpc_duration_seconds_count{code=\"OK\",method=\"BuildContext\"}",
        "ctxd_rpc_duration_seconds_count{code=\"INVALID_ARGUMENT\",method=\"BuildContext\"}",
        "ctxd_context_tokens_count",
        "ctxd_context_messages_dropped_total",
        "ctxd_summarizer_calls_total{engine=\"extractive\",outcome=\"ok\"}",
    ] {
        assert!(body.contains(name), "metrics lack {name}:\n{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_content_never_reaches_the_logs_even_at_trace_level() {
    let url = fresh_database().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .env("DATABASE_URL", &url)
        .env("CTXD_LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "CTXD_LOG",
            "trace,tokio_postgres=trace,tokio_postgres::query=trace",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Trace logging is voluminous: drain both pipes while the server runs, or it blocks on them.
    let drain = |mut pipe: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
        tokio::spawn(async move {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text).await;
            text
        })
    };
    let stdout = drain(Box::new(server.stdout.take().unwrap()));
    let stderr = drain(Box::new(server.stderr.take().unwrap()));
    let canary = "CANARY-7f3a9c-do-not-log";
    let mut client = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(c) =
            proto::context_service_client::ContextServiceClient::connect(format!("http://127.0.0.1:{port}"))
                .await
        {
            client = Some(c);
            break;
        }
    }
    let mut c = client.expect("server started");
    let message = proto::Message {
        name: format!("{canary}-name"),
        metadata: [("note".to_string(), format!("{canary}-meta"))].into(),
        ..user(&format!("We decided: {canary}. Must keep {canary}?"))
    };
    c.append_message(append("logs", vec![message])).await.unwrap();
    let bad = proto::Message {
        role: 2,
        tool_call_id: format!("{canary}-id"),
        ..user(canary)
    };
    let _ = c.append_message(append("logs", vec![bad])).await;
    // Rejections whose descriptions would echo caller values: an unknown call id, a huge
    // metadata key, a duplicated call id.
    let orphan = proto::Message {
        role: proto::Role::Tool as i32,
        tool_call_id: format!("{canary}-orphan"),
        ..user("out")
    };
    let huge_key = proto::Message {
        metadata: [(format!("{canary}{}", "k".repeat(10_000)), "v".to_string())].into(),
        ..user("x")
    };
    let twice = proto::Message {
        tool_calls: [
            assistant_calling(&[&format!("{canary}-dup")]).tool_calls,
            assistant_calling(&[&format!("{canary}-dup")]).tool_calls,
        ]
        .concat(),
        ..assistant("")
    };
    for rejected in [orphan, huge_key, twice] {
        let status = c
            .append_message(append("logs", vec![rejected]))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().len() < 8_192,
            "the status echoes at most a clipped value"
        );
    }
    c.summarize(proto::SummarizeRequest {
        conversation_id: "logs".into(),
        mode: proto::SummarizeMode::Provided as i32,
        summary_text: format!("{canary}-provided-summary"),
        through_sequence: 1,
        ..Default::default()
    })
    .await
    .unwrap();
    let build = proto::BuildContextRequest {
        conversation_id: "logs".into(),
        budget: Some(proto::Budget {
            max_tokens: 1000,
            ..Default::default()
        }),
        system_prompt: format!("{canary}-system"),
        pending_messages: vec![user(&format!("{canary}-pending"))],
        ..Default::default()
    };
    c.build_context(build).await.unwrap();
    c.summarize(proto::SummarizeRequest {
        conversation_id: "logs".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.get_working_memory(proto::GetWorkingMemoryRequest {
        conversation_id: "logs".into(),
        refresh: true,
        prepare: false,
    })
    .await
    .unwrap();
    c.list_messages(proto::ListMessagesRequest {
        conversation_id: "logs".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.count_tokens(proto::CountTokensRequest {
        text: canary.into(),
        tokenizer: 0,
    })
    .await
    .unwrap();
    drop(c);
    let pid = server.id().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), server.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "SIGTERM exits 0");
    let logs = stdout.await.unwrap() + &stderr.await.unwrap();
    assert!(logs.lines().count() > 50, "trace logging was on");
    let leaked: Vec<&str> = logs.lines().filter(|l| l.contains("CANARY")).collect();
    assert!(
        leaked.is_empty(),
        "message content in logs:\n{}",
        leaked.join("\n")
    );
}

fn pg_script(action: &str, dir: &std::path::Path) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/throwaway-postgres.sh");
    let output = std::process::Command::new("bash")
        .arg(script)
        .arg(action)
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{action}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

async fn health(addr: std::net::SocketAddr) -> Option<i32> {
    health_of(addr, "ctxd.v1.ContextService").await
}

/// `service` "" is liveness, `ctxd.v1.ContextService` readiness.
async fn health_of(addr: std::net::SocketAddr, service: &str) -> Option<i32> {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .ok()?;
    let request = HealthCheckRequest {
        service: service.into(),
    };
    HealthClient::new(channel)
        .check(request)
        .await
        .ok()
        .map(|r| r.into_inner().status)
}

async fn wait_for_health(addr: std::net::SocketAddr, wanted: i32, what: &str) -> Duration {
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if health(addr).await == Some(wanted) {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("health did not become {what} within 20 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_the_database_and_requests_keep_their_deadline_during_an_outage() {
    // A cluster of its own: this test stops it.
    let base = tempdir_for_postgres();
    let dir = base.join("pg");
    let url = pg_script("start", &dir);
    let flags = [
        "--health-probe-interval-ms",
        "200",
        "--db-connect-timeout-secs",
        "1",
        "--request-timeout-secs",
        "3",
    ];
    let app = spawn_on(Some(url), &flags).await;
    const SERVING: i32 = 1;
    const NOT_SERVING: i32 = 2;
    wait_for_health(app.addr, SERVING, "SERVING").await;
    app.append_ok("outage", vec![user("before")]).await;

    pg_script("pause", &dir);
    let down = wait_for_health(app.addr, NOT_SERVING, "NOT_SERVING").await;
    assert_eq!(
        health_of(app.addr, "").await,
        Some(SERVING),
        "liveness stays SERVING while the database is down: an outage must not restart replicas"
    );
    let mut request = Request::new(append("outage", vec![user("during")]));
    request.set_timeout(Duration::from_secs(2));
    let started = std::time::Instant::now();
    let status = app.client.clone().append_message(request).await.unwrap_err();
    let waited = started.elapsed();
    assert!(
        matches!(
            status.code(),
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled
        ),
        "{status:?}"
    );
    assert!(waited < Duration::from_secs(4), "the request hung for {waited:?}");

    pg_script("resume", &dir);
    let up = wait_for_health(app.addr, SERVING, "SERVING").await;
    let mut recovered = None;
    for _ in 0..50 {
        if let Ok(r) = app
            .client
            .clone()
            .append_message(append("outage", vec![user("after")]))
            .await
        {
            recovered = Some(r.into_inner());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let recovered = recovered.expect("appends work again after the database returns");
    println!(
        "outage: NOT_SERVING after {down:?}, failed request answered in {waited:?}, SERVING again {up:?} after restart"
    );
    let all = app.all_messages("outage").await.unwrap();
    assert_eq!(all.last().unwrap().sequence, recovered.last_sequence);
    assert_eq!(all[0].content, "before", "acknowledged data survived");
    drop(app);
    pg_script("stop", &dir);
    let _ = std::fs::remove_dir_all(base);
}

fn tempdir_for_postgres() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ctxd-outage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The cluster runs as the postgres user when the tests run as root.
    let _ = std::process::Command::new("chmod").arg("755").arg(&dir).status();
    dir
}

/// Responses stay within `--max-response-bytes` on both stores: a pack larger than it is
/// refused with RESOURCE_EXHAUSTED saying what to do, a ListMessages page is cut short and
/// continues where it stopped, a prepared summary covers the history in steps.
#[tokio::test]
async fn responses_stay_within_the_response_limit_on_both_stores() {
    for url in [None, Some(fresh_database().await)] {
        let store = if url.is_some() { "postgres" } else { "memory" };
        let app = spawn_on(url, &["--max-response-bytes", "200000"]).await;
        // 40 messages of 10 KB: 400 KB of history.
        for _ in 0..4 {
            let batch = (0..10)
                .map(|i| user(&format!("{i} {}", "word ".repeat(2_000))))
                .collect();
            app.append_ok("big", batch).await;
        }
        let refused = app
            .client
            .clone()
            .build_context(proto::BuildContextRequest {
                conversation_id: "big".into(),
                budget: Some(proto::Budget {
                    max_tokens: 1_000_000,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::ResourceExhausted,
            "{store}: {refused:?}"
        );
        assert!(
            refused.message().contains("CTXD_MAX_RESPONSE_BYTES"),
            "{store}: {}",
            refused.message()
        );
        // A budget whose pack fits is served.
        let fits = app
            .client
            .clone()
            .build_context(proto::BuildContextRequest {
                conversation_id: "big".into(),
                budget: Some(proto::Budget {
                    max_tokens: 10_000,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!fits.messages.is_empty(), "{store}");

        // The whole log, in pages cut by size: every message exactly once, in order.
        let (mut after, mut seen, mut pages) = (0, Vec::new(), 0);
        loop {
            let page = app
                .client
                .clone()
                .list_messages(proto::ListMessagesRequest {
                    conversation_id: "big".into(),
                    after_sequence: after,
                    page_size: 1_000,
                })
                .await
                .unwrap()
                .into_inner();
            pages += 1;
            seen.extend(page.messages.iter().map(|m| m.sequence));
            if page.next_after_sequence == 0 {
                break;
            }
            after = page.next_after_sequence;
        }
        assert_eq!(seen, (1..=40).collect::<Vec<u64>>(), "{store}");
        assert!(pages > 1, "{store}: one page of 400 KB");

        // A prepared summary reaches only part of the way; storing it lets the next one go on.
        let prepared = app
            .client
            .clone()
            .summarize(proto::SummarizeRequest {
                conversation_id: "big".into(),
                mode: proto::SummarizeMode::Prepare as i32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .prepared
            .unwrap();
        assert!(
            prepared.through_sequence < 40,
            "{store}: {}",
            prepared.through_sequence
        );
        assert!(prepared.rendered.len() < 400_000, "{store}");
    }
}
