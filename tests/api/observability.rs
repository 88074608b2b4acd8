//! What operators see: request ids, metrics on their own port, and no message content in logs
//! even at the most verbose level.

use std::{process::Stdio, time::Duration};

use ctxd::proto;
use tokio::io::AsyncReadExt;
use tonic::Request;

use crate::helpers::{append, assistant, assistant_calling, fresh_database, spawn_on, user};

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
    let listen = free_listen();
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
    let body = scrape(&listen).await;
    for name in [
        "ctxd_rpc_duration_seconds_bucket{code=\"OK\",method=\"AppendMessage\"",
        "ctxd_rpc_duration_seconds_count{code=\"OK\",method=\"BuildContext\",protocol=\"grpc\"}",
        "ctxd_rpc_duration_seconds_count{code=\"INVALID_ARGUMENT\",method=\"BuildContext\",protocol=\"grpc\"}",
        "ctxd_context_tokens_count",
        "ctxd_context_messages_dropped_total",
        "ctxd_summarizer_calls_total{engine=\"extractive\",outcome=\"ok\"}",
    ] {
        assert!(body.contains(name), "metrics lack {name}:\n{body}");
    }
}

/// A free loopback address for a metrics port.
pub(crate) fn free_listen() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// The metrics text a server serves at `listen`.
pub(crate) async fn scrape(listen: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(listen).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    body
}

/// The value of the metric line that starts with `series` (0 when absent).
pub(crate) fn figure(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn two_servers_in_one_process_count_their_own_calls_packs_and_pages() {
    let database = fresh_database().await;
    let (first_listen, second_listen) = (free_listen(), free_listen());
    let first = spawn_on(Some(database.clone()), &["--metrics-listen", &first_listen]).await;
    let second = spawn_on(Some(database), &["--metrics-listen", &second_listen]).await;
    first.append_ok("counted", vec![user("hi")]).await;
    let build = proto::BuildContextRequest {
        conversation_id: "counted".into(),
        budget: Some(proto::Budget {
            max_tokens: 1000,
            ..Default::default()
        }),
        ..Default::default()
    };
    for _ in 0..3 {
        first.client.clone().build_context(build.clone()).await.unwrap();
    }
    second.client.clone().build_context(build).await.unwrap();
    let (first, second) = (scrape(&first_listen).await, scrape(&second_listen).await);
    assert_eq!(figure(&first, "ctxd_context_tokens_count"), 3.0, "{first}");
    assert_eq!(figure(&second, "ctxd_context_tokens_count"), 1.0, "{second}");
    let pages = |body: &str| {
        figure(body, "ctxd_context_pages_total{source=\"cache\"}")
            + figure(body, "ctxd_context_pages_total{source=\"database\"}")
    };
    assert_eq!(pages(&first), 3.0, "{first}");
    assert_eq!(pages(&second), 1.0, "{second}");
    let appends = "ctxd_rpc_duration_seconds_count{code=\"OK\",method=\"AppendMessage\",protocol=\"grpc\"}";
    assert_eq!(figure(&first, appends), 1.0, "{first}");
    assert_eq!(figure(&second, appends), 0.0, "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_content_never_reaches_the_logs_even_at_trace_level() {
    let url = fresh_database().await;
    let (server, mut c) = LoggedServer::start(
        Some(&url),
        "trace,tokio_postgres=trace,tokio_postgres::query=trace",
    )
    .await;
    let canary = "CANARY-7f3a9c-do-not-log";
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
    let logs = server.stop().await;
    assert!(logs.lines().count() > 50, "trace logging was on");
    let leaked: Vec<&str> = logs.lines().filter(|l| l.contains("CANARY")).collect();
    assert!(
        leaked.is_empty(),
        "message content in logs:\n{}",
        leaked.join("\n")
    );
}

/// An append logs one line at the default level (issue 62: the second line cost every append
/// CPU), and that line says what the append did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_logs_one_line_that_says_what_it_wrote() {
    let (server, mut c) = LoggedServer::start(None, "info").await;
    c.append_message(append("one-line", vec![user("hello"), assistant("hi")]))
        .await
        .unwrap();
    c.append_message(append("one-line", vec![user("again")]))
        .await
        .unwrap();
    drop(c);
    let logs = server.stop().await;
    let calls: Vec<&str> = logs
        .lines()
        .skip_while(|l| !l.contains("ctxd listening"))
        .skip(1)
        .take_while(|l| !l.contains("SIGTERM received"))
        .collect();
    assert_eq!(calls.len(), 2, "one line per append:\n{}", calls.join("\n"));
    for (line, (first, last)) in calls.iter().zip([(1, 2), (3, 3)]) {
        for field in [
            "method=\"AppendMessage\"".to_owned(),
            "code=\"OK\"".to_owned(),
            "conversation_id=\"one-line\"".to_owned(),
            format!("first_sequence={first}"),
            format!("last_sequence={last}"),
            "replayed=false".to_owned(),
        ] {
            assert!(line.contains(&field), "{field} in {line}");
        }
    }
}

/// The release binary, its output read while it runs, and a client.
struct LoggedServer {
    process: tokio::process::Child,
    output: Vec<tokio::task::JoinHandle<String>>,
}

impl LoggedServer {
    /// Starts the binary on `database` (in memory without one) logging at `filter`.
    async fn start(
        database: Option<&str>,
        filter: &str,
    ) -> (
        Self,
        proto::context_service_client::ContextServiceClient<tonic::transport::Channel>,
    ) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"));
        command.env_remove("DATABASE_URL");
        if let Some(url) = database {
            command.env("DATABASE_URL", url);
        }
        let mut process = command
            .env("CTXD_LISTEN", format!("127.0.0.1:{port}"))
            .env("CTXD_LOG", filter)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Trace logging is voluminous: drain both pipes while the server runs, or it blocks on
        // them.
        let drain = |mut pipe: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
            tokio::spawn(async move {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text).await;
                text
            })
        };
        let output = vec![
            drain(Box::new(process.stdout.take().unwrap())),
            drain(Box::new(process.stderr.take().unwrap())),
        ];
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let address = format!("http://127.0.0.1:{port}");
            if let Ok(client) = proto::context_service_client::ContextServiceClient::connect(address).await {
                return (Self { process, output }, client);
            }
        }
        panic!("the server did not start");
    }

    /// Stops the server with SIGTERM (it must exit 0) and returns everything it printed.
    async fn stop(mut self) -> String {
        let pid = self.process.id().unwrap();
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(30), self.process.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "SIGTERM exits 0");
        let mut logs = String::new();
        for pipe in self.output {
            logs += &pipe.await.unwrap();
        }
        logs
    }
}
