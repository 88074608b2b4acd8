//! The server around the service: health, reflection-visible contract, unimplemented RPCs,
//! migrations on PostgreSQL.

use tonic::Code;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::helpers::{StoreKind, fresh_database, spawn_app, spawn_on, user};

#[tokio::test]
async fn health_reports_serving_for_the_server_and_the_service() {
    let app = spawn_app(StoreKind::InMemory).await;
    let mut health = HealthClient::new(
        tonic::transport::Channel::from_shared(format!("http://{}", app.addr))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    for service in ["", "ctxd.v1.ContextService"] {
        let response = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(response.status(), ServingStatus::Serving, "service {service:?}");
    }
}

#[tokio::test]
async fn an_oversize_request_is_resource_exhausted() {
    let app = crate::helpers::spawn_app_with(
        StoreKind::InMemory,
        &[
            "--max-request-bytes",
            "4096",
            "--max-content-bytes",
            "4096",
            "--max-attachment-bytes",
            "4096",
        ],
    )
    .await;
    let status = app
        .client
        .clone()
        .append_message(crate::helpers::append("big", vec![user(&"x".repeat(8192))]))
        .await;
    assert_eq!(status.unwrap_err().code(), Code::ResourceExhausted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_migrate_one_empty_database_concurrently() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(spawn_on(Some(url.clone()), &[]), spawn_on(Some(url.clone()), &[]));
    // Both serve the same data.
    let written = a.append_ok("shared", vec![user("from a")]).await;
    let read = b.all_messages("shared").await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].sequence, written.first_sequence);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let versions: Vec<i64> = client
        .query("SELECT version FROM ctxd_schema_migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let expected: Vec<i64> = (1..=versions.len() as i64).collect();
    assert!(
        versions.len() >= 2 && versions == expected,
        "each migration applied once: {versions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migrate_subcommand_prepares_an_empty_database() {
    let url = fresh_database().await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let app = spawn_on(Some(url), &["--migrate-on-start", "false"]).await;
    assert_eq!(
        app.append_ok("after-migrate", vec![user("hi")])
            .await
            .first_sequence,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_newer_than_the_binary_is_served_with_a_warning() {
    let url = fresh_database().await;
    let migrate = || {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
            .arg("migrate")
            .env("DATABASE_URL", &url)
            .output()
    };
    let first = migrate().await.unwrap();
    assert!(first.status.success());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .execute(
            "INSERT INTO ctxd_schema_migrations (version, name) VALUES (9999, 'from_a_newer_ctxd')",
            &[],
        )
        .await
        .unwrap();
    let again = migrate().await.unwrap();
    let logs = String::from_utf8_lossy(&again.stdout) + String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{logs}");
    assert!(logs.contains("newer than this binary"), "{logs}");
    assert!(logs.contains("9999"), "{logs}");
    let app = spawn_on(Some(url), &[]).await;
    assert_eq!(
        app.append_ok("newer-schema", vec![user("hi")])
            .await
            .first_sequence,
        1
    );
}

#[tokio::test]
async fn invalid_configuration_lists_every_problem_and_exits_2() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .env("CTXD_DEFAULT_TENANT", "no/slashes")
        .env("CTXD_MAX_CONTENT_BYTES", "0")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("CTXD_DEFAULT_TENANT") && stderr.contains("CTXD_MAX_CONTENT_BYTES"),
        "{stderr}"
    );
}
