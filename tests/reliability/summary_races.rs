//! A caller's summary racing a redaction (Hardening V): PREPARE, then SUMMARIZE_MODE_PROVIDED
//! with the honest `expected_log_changes` on one replica while another redacts a message the
//! summary covers, round after round on PostgreSQL. A leak is a round where both succeed and a
//! stored summary still holds the redacted text (the attack on round 4: 1-4 of 300).

use ctxd::proto;

use crate::{
    Report,
    appenders::{as_tenant, user},
    replica::Replica,
};

type Client = proto::context_service_client::ContextServiceClient<tonic::transport::Channel>;

fn assistant(content: &str) -> proto::Message {
    proto::Message {
        role: proto::Role::Assistant as i32,
        content: content.into(),
        ..Default::default()
    }
}

async fn append(
    client: &mut Client,
    conversation: &str,
    messages: Vec<proto::Message>,
) -> anyhow::Result<()> {
    let request = proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        messages,
        ..Default::default()
    };
    client.append_message(as_tenant("racer", request)).await?;
    Ok(())
}

async fn prepare(client: &mut Client, conversation: &str) -> anyhow::Result<proto::PreparedRequest> {
    let request = proto::SummarizeRequest {
        conversation_id: conversation.into(),
        mode: proto::SummarizeMode::Prepare as i32,
        keep_recent_tokens: 1,
        ..Default::default()
    };
    let response = client.summarize(as_tenant("racer", request)).await?.into_inner();
    response
        .prepared
        .ok_or_else(|| anyhow::anyhow!("no prepared request"))
}

fn provided(
    conversation: &str,
    text: String,
    prepared: &proto::PreparedRequest,
    base: u64,
) -> tonic::Request<proto::SummarizeRequest> {
    as_tenant(
        "racer",
        proto::SummarizeRequest {
            conversation_id: conversation.into(),
            mode: proto::SummarizeMode::Provided as i32,
            summary_text: text,
            through_sequence: prepared.through_sequence,
            expected_through_sequence: Some(base),
            expected_log_changes: Some(prepared.log_changes),
            ..Default::default()
        },
    )
}

/// One round: returns whether the redacted text leaked into a stored summary.
async fn round(
    summarizer: &mut Client,
    redactor: &mut Client,
    n: usize,
) -> anyhow::Result<(bool, bool, bool)> {
    let conversation = format!("race-{n}");
    let secret = format!("SECRET-{n}-4111");
    append(
        summarizer,
        &conversation,
        vec![user("Plan a trip.".into()), assistant("Where to?")],
    )
    .await?;
    let first = prepare(summarizer, &conversation).await?;
    let stored = summarizer
        .summarize(provided(&conversation, "A trip is planned.".into(), &first, 0))
        .await?
        .into_inner();
    let base = stored.summary.map_or(0, |s| s.through_sequence);
    // The first message of the next append: after the two above.
    let secret_at = 3;
    let mut messages = vec![user(format!("Charge my card {secret}."))];
    for i in 0..3 {
        messages.push(assistant(&format!("Step {i} done.")));
        messages.push(user(format!("Next step {i}.")));
    }
    append(summarizer, &conversation, messages).await?;
    let prepared = prepare(summarizer, &conversation).await?;
    let text = format!("The user's card is {secret}.");
    let redact = proto::RedactMessageRequest {
        conversation_id: conversation.clone(),
        sequence: secret_at,
    };
    let (summarized, redacted) = tokio::join!(
        summarizer.summarize(provided(&conversation, text, &prepared, base)),
        redactor.redact_message(as_tenant("racer", redact)),
    );
    let build = proto::BuildContextRequest {
        conversation_id: conversation.clone(),
        budget: Some(proto::Budget {
            max_tokens: 20_000,
            ..Default::default()
        }),
        ..Default::default()
    };
    let pack = summarizer
        .build_context(as_tenant("racer", build))
        .await?
        .into_inner();
    let leaked = redacted.is_ok() && pack.rendered.contains(&secret);
    Ok((leaked, summarized.is_ok(), redacted.is_ok()))
}

pub(crate) async fn provided_summaries_racing_redactions(
    replicas: &[Replica],
    rounds: usize,
) -> anyhow::Result<Report> {
    let mut report = Report::new("caller summaries racing redactions on PostgreSQL (Hardening V)");
    let mut summarizer = replicas[0].client().await?;
    let mut redactor = replicas[1].client().await?;
    let (mut leaks, mut both, mut summaries) = (0, 0, 0);
    for n in 0..rounds {
        let (leaked, summarized, redacted) = round(&mut summarizer, &mut redactor, n).await?;
        leaks += usize::from(leaked);
        both += usize::from(summarized && redacted);
        summaries += usize::from(summarized);
    }
    report.figure(
        "rounds (PROVIDED with the honest value against a redaction)",
        rounds,
    );
    report.figure(
        "summaries stored / both succeeded",
        format!("{summaries} / {both}"),
    );
    report.figure(
        "packs holding the redacted text",
        format!("then 1-4 of 300 (17-48 of 600 targeted); now {leaks} of {rounds}"),
    );
    report.expect(leaks == 0, format!("{leaks} rounds leaked the redacted text"));
    Ok(report)
}
