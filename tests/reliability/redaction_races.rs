//! Redactions racing working-memory refreshes and summaries across replicas: conversations
//! whose messages each state a secret decision, refreshed and summarized on one replica while
//! another redacts every secret message. Afterwards no secret may be anywhere: not in the
//! working memory, not in a summary, not in any pack.

use ctxd::proto::{self, Format, SummarizeMode};
use tokio::task::JoinSet;

use crate::{Report, appenders::user, replica::Replica};

const MESSAGES: usize = 40;

pub(crate) async fn redactions_racing_refreshes(
    replicas: &[Replica],
    rounds: usize,
) -> anyhow::Result<Report> {
    let mut report = Report::new("redactions racing refreshes and summaries, 3 replicas");
    let mut leaks = 0;
    let mut refused = 0;
    for round in 0..rounds {
        let conversation = format!("redaction-race-{round}");
        let messages = (0..MESSAGES)
            .map(|i| {
                user(format!(
                    "Decision: we will use vault-SECRET-{round}-{i} for the signing keys."
                ))
            })
            .collect();
        let mut writer = replicas[0].client().await?;
        writer
            .append_message(proto::AppendMessageRequest {
                conversation_id: conversation.clone(),
                messages,
                ..Default::default()
            })
            .await?;
        let mut work = JoinSet::new();
        let mut refresher = replicas[1].client().await?;
        let id = conversation.clone();
        work.spawn(async move {
            let memory = refresher
                .get_working_memory(proto::GetWorkingMemoryRequest {
                    conversation_id: id.clone(),
                    refresh: true,
                    prepare: false,
                })
                .await;
            let summary = refresher
                .summarize(proto::SummarizeRequest {
                    conversation_id: id,
                    mode: SummarizeMode::Server as i32,
                    ..Default::default()
                })
                .await;
            usize::from(memory.is_err()) + usize::from(summary.is_err())
        });
        let mut redactor = replicas[2].client().await?;
        let id = conversation.clone();
        work.spawn(async move {
            for sequence in 1..=MESSAGES as u64 {
                let request = proto::RedactMessageRequest {
                    conversation_id: id.clone(),
                    sequence,
                };
                redactor.redact_message(request).await.expect("redaction");
            }
            0
        });
        refused += work.join_all().await.into_iter().sum::<usize>();
        // Whatever won, nothing secret is left.
        let mut reader = replicas[0].client().await?;
        let memory = reader
            .get_working_memory(proto::GetWorkingMemoryRequest {
                conversation_id: conversation.clone(),
                ..Default::default()
            })
            .await?
            .into_inner();
        let pack = reader
            .build_context(proto::BuildContextRequest {
                conversation_id: conversation.clone(),
                budget: Some(proto::Budget {
                    max_tokens: 100_000,
                    ..Default::default()
                }),
                format: Format::OpenaiChat as i32,
                ..Default::default()
            })
            .await?
            .into_inner();
        let in_memory = format!("{memory:?}").matches("SECRET").count();
        let in_pack = pack.rendered.matches("SECRET").count();
        if in_memory + in_pack > 0 {
            println!("round {round}: {in_memory} secrets in the memory, {in_pack} in the pack");
            if std::env::var_os("CTXD_RACE_DUMP").is_some() {
                println!("{memory:#?}\n{}", pack.rendered);
            }
        }
        leaks += in_memory + in_pack;
    }
    report.figure(
        "rounds (40 secret messages each, refresh + summary vs 40 redactions)",
        rounds,
    );
    report.figure("refreshes or summaries refused (ABORTED, lost the race)", refused);
    report.figure("secrets found afterwards in memory, summaries or packs", leaks);
    report.expect(leaks == 0, format!("{leaks} redacted secrets came back"));
    Ok(report)
}
