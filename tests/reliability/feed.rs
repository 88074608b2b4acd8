//! The change feed under fire (issue 63): 32 appenders on three replicas, with redactions and
//! rewinds mixed in, while 4 consumers follow the tenant, are cut off at random and resume
//! from their last cursor on another replica; one replica is SIGKILLed and PostgreSQL stops for
//! the outage. Each consumer applies what it receives to a mirror and checks every change as it
//! comes: each conversation's changes gapless and in commit order (an append starts where the log
//! ended, a rewind ends where it ended), no removed text in any change. At the end every mirror
//! equals the log, deleted conversations included.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto::{self, ChangeKind, context_service_client::ContextServiceClient};
use tonic::transport::Channel;

use crate::{
    Report,
    appenders::{all_messages, user},
    replica::{Cluster, Replica},
};

const APPENDERS: usize = 32;
const CONSUMERS: usize = 4;
/// Conversations deleted at the end, for the consumers to apply.
const DELETED: usize = 4;

type Client = ContextServiceClient<Channel>;

fn lazy(addr: SocketAddr) -> Client {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("valid uri")
        .connect_timeout(Duration::from_secs(1))
        .connect_lazy();
    ContextServiceClient::new(channel)
}

fn conversation(a: usize) -> String {
    format!("feed-{a}")
}

pub(crate) async fn watched_under_fire(
    replicas: &mut [Replica],
    cluster: &Cluster,
    load_secs: u64,
    outage_secs: u64,
) -> anyhow::Result<Report> {
    let mut report =
        Report::new("change feed: 32 appenders, 4 consumers cut off and resumed, SIGKILL, outage");
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|c| consume(c, addrs.clone(), finished.clone()))
        .collect();
    // The consumers' first streams start "from now": give them a moment before the first write.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut appenders = Vec::new();
    for a in 0..APPENDERS {
        appenders.push(tokio::spawn(append_until(
            a,
            addrs.clone(),
            stop.clone(),
            ops.clone(),
        )));
    }
    tokio::time::sleep(Duration::from_secs(load_secs / 3)).await;
    replicas[2].kill().await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    replicas[2].restart().await?;
    tokio::time::sleep(Duration::from_secs(load_secs / 3)).await;
    cluster.pause()?;
    tokio::time::sleep(Duration::from_secs(outage_secs)).await;
    cluster.resume()?;
    tokio::time::sleep(Duration::from_secs(load_secs / 3 + 2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut failures = BTreeMap::new();
    for task in appenders {
        for (code, n) in task.await? {
            *failures.entry(code).or_insert(0usize) += n;
        }
    }
    // Some conversations deleted, for the consumers to apply; the log as it ends.
    let mut client = lazy(addrs[0]);
    for a in 0..DELETED {
        let request = proto::DeleteConversationRequest {
            conversation_id: conversation(a),
        };
        client.delete_conversation(request).await?;
    }
    let mut log = HashMap::new();
    for a in DELETED..APPENDERS {
        let messages = all_messages(&mut client, &conversation(a)).await?;
        log.insert(
            conversation(a),
            messages.into_iter().map(|m| m.content).collect::<Vec<_>>(),
        );
    }
    let expected = Arc::new(log);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut caught_up = 0;
    let (mut changes, mut resumes, mut violations) = (0, 0, Vec::new());
    for (c, consumer) in consumers.into_iter().enumerate() {
        let outcome = wait_caught_up(consumer, expected.clone(), deadline).await;
        match outcome {
            Some(state) => {
                caught_up += 1;
                changes += state.changes;
                resumes += state.resumes;
                violations.extend(state.violations.iter().map(|v| format!("consumer {c}: {v}")));
            }
            None => violations.push(format!("consumer {c} did not catch up with the log within 60 s")),
        }
    }
    finished.store(true, Ordering::Relaxed);
    report.figure("appender operations acknowledged", ops.load(Ordering::Relaxed));
    report.figure("failed attempts by code", format!("{failures:?}"));
    report.figure("changes applied (4 consumers)", changes);
    report.figure("consumer resumes (cut off, killed, outage)", resumes);
    report.figure(
        "consumers whose mirror equals the log",
        format!("{caught_up} of {CONSUMERS}"),
    );
    report.figure("order violations, gaps and removed text", violations.len());
    for violation in violations.iter().take(10) {
        report.expect(false, violation.clone());
    }
    report.expect(violations.is_empty(), "the feed broke its promise");
    report.expect(
        caught_up == CONSUMERS,
        "a consumer's mirror did not reach the log",
    );
    Ok(report)
}

/// What an appender does at its `n`th step, on its own conversation.
async fn append_until(
    a: usize,
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
) -> BTreeMap<String, usize> {
    let clients: Vec<Client> = addrs.iter().map(|addr| lazy(*addr)).collect();
    let mut failures = BTreeMap::new();
    let (mut n, mut last, mut replica) = (0u64, 0u64, a);
    let id = conversation(a);
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let mut client = clients[replica % clients.len()].clone();
        let result = match n {
            n if n % 10 == 0 && last >= 2 => client
                .redact_message(proto::RedactMessageRequest {
                    conversation_id: id.clone(),
                    sequence: last - 1,
                })
                .await
                .map(|_| last),
            n if n % 25 == 0 && last >= 3 => client
                .rewind_conversation(proto::RewindConversationRequest {
                    conversation_id: id.clone(),
                    after_sequence: last - 2,
                    expected_last_sequence: Some(last),
                })
                .await
                .map(|r| r.into_inner().last_sequence),
            n => client
                .append_message(proto::AppendMessageRequest {
                    conversation_id: id.clone(),
                    messages: vec![user(format!("appender {a} step {n}: secret {n}"))],
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner().conversation_last_sequence),
        };
        match result {
            Ok(now) => {
                last = now;
                ops.fetch_add(1, Ordering::Relaxed);
            }
            Err(status) => {
                *failures.entry(format!("{:?}", status.code())).or_insert(0) += 1;
                replica += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                // The outcome may be unknown: read where the log ends.
                let request = proto::GetConversationRequest {
                    conversation_id: id.clone(),
                };
                if let Ok(got) = clients[replica % clients.len()]
                    .clone()
                    .get_conversation(request)
                    .await
                {
                    last = got.into_inner().conversation.map_or(last, |c| c.last_sequence);
                }
            }
        }
    }
    failures
}

/// A consumer's mirror and what it found.
#[derive(Debug, Default)]
struct Consumer {
    /// Each conversation's messages as the changes say, by sequence.
    mirror: HashMap<String, Vec<String>>,
    /// Where each conversation's next append must start.
    next: HashMap<String, u64>,
    /// The sequences redacted and not rewound since, per conversation.
    redacted: HashMap<String, HashSet<u64>>,
    deleted: HashSet<String>,
    changes: usize,
    resumes: usize,
    violations: Vec<String>,
}

impl Consumer {
    fn apply(&mut self, change: &proto::Change) {
        self.changes += 1;
        let id = change.conversation_id.clone();
        let next = *self.next.get(&id).unwrap_or(&1);
        let (first, last) = (change.first_sequence, change.last_sequence);
        match change.kind() {
            ChangeKind::Appended => {
                if first != next {
                    self.violations.push(format!(
                        "{id}: an append of {first}..{last} where the log ended at {}",
                        next - 1
                    ));
                }
                self.deleted.remove(&id);
                let mirror = self.mirror.entry(id.clone()).or_default();
                let redacted = self.redacted.entry(id.clone()).or_default();
                for message in &change.messages {
                    let at = message.sequence as usize;
                    if redacted.contains(&message.sequence)
                        && message.content != ctxd::domain::conversation::REDACTED_CONTENT
                    {
                        self.violations.push(format!(
                            "{id}: message {at} came back with its text after its redaction"
                        ));
                    }
                    mirror.resize(mirror.len().max(at), String::new());
                    mirror[at - 1] = message.content.clone();
                }
                mirror.truncate(last as usize);
                self.next.insert(id, last + 1);
            }
            ChangeKind::Redacted => {
                if let Some(message) = self
                    .mirror
                    .get_mut(&id)
                    .and_then(|m| m.get_mut(first as usize - 1))
                {
                    *message = ctxd::domain::conversation::REDACTED_CONTENT.to_owned();
                }
                self.redacted.entry(id).or_default().insert(first);
            }
            ChangeKind::Rewound => {
                if last + 1 != next {
                    self.violations.push(format!(
                        "{id}: a rewind of the log ending at {last} where it ended at {}",
                        next - 1
                    ));
                }
                if let Some(mirror) = self.mirror.get_mut(&id) {
                    mirror.truncate(first as usize - 1);
                }
                self.redacted
                    .entry(id.clone())
                    .or_default()
                    .retain(|s| *s < first);
                self.next.insert(id, first);
            }
            ChangeKind::Deleted | ChangeKind::Expired => {
                self.mirror.remove(&id);
                self.redacted.remove(&id);
                self.next.remove(&id);
                self.deleted.insert(id);
            }
            _ => {}
        }
    }

    fn equals(&self, log: &HashMap<String, Vec<String>>) -> bool {
        (0..DELETED).all(|a| self.deleted.contains(&conversation(a)))
            && log
                .iter()
                .all(|(id, messages)| self.mirror.get(id) == Some(messages))
    }
}

/// Follows the tenant with messages: each stream read for a random while, then dropped, and the
/// watch resumed from the last cursor on the next replica (at once, or after a failure).
fn consume(c: usize, addrs: Vec<SocketAddr>, finished: Arc<AtomicBool>) -> Arc<tokio::sync::Mutex<Consumer>> {
    let state = Arc::new(tokio::sync::Mutex::new(Consumer::default()));
    let shared = state.clone();
    tokio::spawn(async move {
        let mut cursor = String::new();
        let mut replica = c;
        let mut rounds = 0u64;
        while !finished.load(Ordering::Relaxed) {
            rounds += 1;
            let mut client = lazy(addrs[replica % addrs.len()]);
            replica += 1;
            let request = proto::WatchChangesRequest {
                after_cursor: cursor.clone(),
                include_messages: true,
                ..Default::default()
            };
            let Ok(response) = client.watch_changes(request).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mut stream = response.into_inner();
            // Cut off after a while that varies: 0.3 to 2.3 s.
            let cut = Duration::from_millis(300 + (rounds * 7_919 + c as u64 * 104_729) % 2_000);
            let until = tokio::time::Instant::now() + cut;
            while let Ok(Ok(Some(message))) = tokio::time::timeout_at(until, stream.message()).await {
                let mut consumer = shared.lock().await;
                for change in &message.changes {
                    consumer.apply(change);
                    cursor = change.cursor.clone();
                }
                if let Some(heartbeat) = &message.heartbeat {
                    cursor = heartbeat.cursor.clone();
                }
            }
            shared.lock().await.resumes += 1;
        }
    });
    state
}

/// Waits until the consumer's mirror equals `log`; its state, or `None` past `deadline`.
async fn wait_caught_up(
    state: Arc<tokio::sync::Mutex<Consumer>>,
    log: Arc<HashMap<String, Vec<String>>>,
    deadline: Instant,
) -> Option<Consumer> {
    loop {
        {
            let consumer = state.lock().await;
            if consumer.equals(&log) {
                return Some(Consumer {
                    mirror: HashMap::new(),
                    next: HashMap::new(),
                    redacted: HashMap::new(),
                    deleted: HashSet::new(),
                    changes: consumer.changes,
                    resumes: consumer.resumes,
                    violations: consumer.violations.clone(),
                });
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
