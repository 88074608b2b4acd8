//! PostgreSQL stopped (`pg_ctl stop -m immediate`) under load across replicas: no acknowledged
//! message lost, readiness follows the database while liveness stays SERVING (an outage must not
//! restart the replicas), recovery without restarts, no CPU spin.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::{
    Report,
    appenders::{all_messages, user},
    replica::{Cluster, Replica},
};

const APPENDERS: usize = 6;

/// One appender's acknowledged messages (with when), and failed attempts by code.
type Outcome = (Vec<(Instant, u64)>, BTreeMap<String, usize>);

pub(crate) async fn database_stopped(
    replicas: &mut [Replica],
    cluster: &Cluster,
    outage_secs: u64,
) -> anyhow::Result<Report> {
    let mut report = Report::new("PostgreSQL stopped under load, 3 replicas");
    let stop = Arc::new(AtomicBool::new(false));
    let mut appenders = Vec::new();
    for a in 0..APPENDERS {
        let client = replicas[a % replicas.len()].client().await?;
        appenders.push(tokio::spawn(append_until(client, a, stop.clone())));
    }
    let mut health = Vec::new();
    for replica in replicas.iter() {
        health.push(HealthClient::new(replica.channel().await?));
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu_before: f64 = replicas.iter().filter_map(Replica::cpu_seconds).sum();
    // Liveness ("") sampled every 100 ms on every replica from just before the outage to
    // after recovery, as the kubelet's livenessProbe would ask it.
    let liveness_stop = Arc::new(AtomicBool::new(false));
    let liveness = tokio::spawn(sample_liveness(health.clone(), liveness_stop.clone()));
    let stopped = Instant::now();
    cluster.pause()?;
    let not_serving_after = wait_health(&mut health, false, Duration::from_secs(outage_secs)).await;
    tokio::time::sleep(Duration::from_secs(outage_secs).saturating_sub(stopped.elapsed())).await;
    let outage = stopped.elapsed().as_secs_f64();
    let cpu_during: f64 = replicas.iter().filter_map(Replica::cpu_seconds).sum::<f64>() - cpu_before;
    let resumed = Instant::now();
    cluster.resume()?;
    let serving_after = wait_health(&mut health, true, Duration::from_secs(30)).await;
    // Let every appender get through again, then stop them.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    liveness_stop.store(true, Ordering::Relaxed);
    let (live_samples, live_failures) = liveness.await?;

    let (mut acked, mut failures, mut recovery) = (0, BTreeMap::new(), Duration::ZERO);
    let mut lost = 0;
    let mut client = replicas[0].client().await?;
    for (a, task) in appenders.into_iter().enumerate() {
        let (successes, failed): Outcome = task.await?;
        for (code, n) in failed {
            *failures.entry(code).or_insert(0) += n;
        }
        acked += successes.len();
        match successes.iter().find(|(at, _)| *at > resumed) {
            Some((at, _)) => recovery = recovery.max(*at - resumed),
            None => report.expect(
                false,
                format!("appender {a} never succeeded after the database returned"),
            ),
        }
        let stored: HashSet<String> = all_messages(&mut client, &format!("outage-{a}"))
            .await?
            .into_iter()
            .map(|m| m.content)
            .collect();
        lost += successes
            .iter()
            .filter(|(_, n)| !stored.contains(&content(a, *n)))
            .count();
    }

    let cores = cpu_during / outage;
    report.figure(
        "outage",
        format!("{outage:.1} s (pg_ctl stop -m immediate, then start)"),
    );
    report.figure("messages acknowledged", acked);
    report.figure("acknowledged messages lost", lost);
    report.figure("failed attempts by code", format!("{failures:?}"));
    report.figure(
        "readiness: all replicas NOT_SERVING after",
        secs(not_serving_after),
    );
    report.figure(
        "liveness answers not SERVING (through outage)",
        format!("{live_failures} of {live_samples}"),
    );
    report.figure("readiness: all SERVING after restart", secs(serving_after));
    report.figure(
        "every appender succeeding again after",
        format!("{:.2} s", recovery.as_secs_f64()),
    );
    report.figure(
        "replica CPU during outage (3 replicas)",
        format!("{cores:.3} cores"),
    );
    report.expect(lost == 0, "acknowledged messages lost");
    report.expect(
        not_serving_after.is_some(),
        "health never reported NOT_SERVING during the outage",
    );
    report.expect(serving_after.is_some(), "health did not return to SERVING");
    report.expect(
        live_samples > 0 && live_failures == 0,
        "liveness left SERVING during the database outage (the kubelet would restart the replica)",
    );
    report.expect(
        recovery < Duration::from_secs(10),
        "recovery took longer than 10 s",
    );
    report.expect(cores < 0.5, "replicas spun the CPU while the database was down");
    Ok(report)
}

fn content(appender: usize, n: u64) -> String {
    format!("outage appender {appender} message {n}")
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("never".into(), |d| format!("{:.2} s", d.as_secs_f64()))
}

/// Appends to its own conversation until stopped, retrying each message (with its idempotency
/// key, as a careful client does) until it is acknowledged.
async fn append_until(
    mut client: ctxd::proto::context_service_client::ContextServiceClient<tonic::transport::Channel>,
    appender: usize,
    stop: Arc<AtomicBool>,
) -> Outcome {
    let (mut acked, mut failed) = (Vec::new(), BTreeMap::new());
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut request = tonic::Request::new(proto::AppendMessageRequest {
            conversation_id: format!("outage-{appender}"),
            messages: vec![user(content(appender, n))],
            idempotency_key: format!("outage-{appender}-{n}"),
            ..Default::default()
        });
        request.set_timeout(Duration::from_secs(2));
        match client.append_message(request).await {
            Ok(_) => {
                acked.push((Instant::now(), n));
                n += 1;
            }
            Err(status) => {
                *failed.entry(format!("{:?}", status.code())).or_insert(0) += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    (acked, failed)
}

/// Asks every replica's liveness (`""`) every 100 ms until stopped: (answers, answers that were
/// not SERVING in time).
async fn sample_liveness(
    mut clients: Vec<HealthClient<tonic::transport::Channel>>,
    stop: Arc<AtomicBool>,
) -> (usize, usize) {
    let (mut samples, mut failures) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        for client in clients.iter_mut() {
            let mut request = tonic::Request::new(HealthCheckRequest {
                service: String::new(),
            });
            request.set_timeout(Duration::from_secs(1));
            let serving = client
                .check(request)
                .await
                .is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32);
            samples += 1;
            failures += usize::from(!serving);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (samples, failures)
}

/// Polls every replica's readiness until all are SERVING (`serving`) or none is; returns how
/// long that took, or None after `limit`.
async fn wait_health(
    clients: &mut [HealthClient<tonic::transport::Channel>],
    serving: bool,
    limit: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        let mut matching = 0;
        for client in clients.iter_mut() {
            let mut request = tonic::Request::new(HealthCheckRequest {
                service: "ctxd.v1.ContextService".into(),
            });
            request.set_timeout(Duration::from_millis(500));
            let is_serving = client
                .check(request)
                .await
                .is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32);
            matching += usize::from(is_serving == serving);
        }
        if matching == clients.len() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}
