//! Health and deadlines while the database is down and back.

use std::time::Duration;

use tonic::{Code, Request};

use crate::helpers::{append, spawn_on, user};

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
    // The test channel enforces no deadline of its own: the status is the server's, which kept
    // the call's deadline (a server that ignored it would leave the call waiting on the pool; the
    // guard turns that hang into a failure).
    let mut client = app.client.clone();
    let status = tokio::time::timeout(Duration::from_secs(60), client.append_message(request))
        .await
        .expect("the server answered the call instead of holding it")
        .unwrap_err();
    assert!(
        matches!(
            status.code(),
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled
        ),
        "{status:?}"
    );

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
        "outage: NOT_SERVING after {down:?}, the failed request answered {:?}, SERVING again {up:?} after restart",
        status.code()
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
