//! Conversations as resources on both stores: Get/UpdateConversation, ListConversations paging
//! (also under concurrent appends), ForkConversation, RedactMessage, tenant isolation and
//! retention.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Duration, SystemTime},
};

use ctxd::proto::{self, ConversationStatus, Format, SummarizeMode};
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{
        StoreKind, TestApp, append, as_tenant, assert_field_violation, assistant, assistant_calling,
        spawn_app, spawn_app_with, tool_result, user,
    },
};

contract_tests!(
    a_conversation_is_read_and_updated_by_field_mask,
    bad_updates_are_refused_by_field_and_change_nothing,
    listing_is_newest_activity_first_in_filtered_pages,
    paging_under_concurrent_appends_never_skips_or_repeats_an_untouched_conversation,
    every_new_rpc_is_scoped_to_the_tenant,
    a_fork_copies_a_prefix_with_its_summary_and_memory_and_is_independent,
    a_fork_is_refused_inside_a_tool_group_past_the_end_and_onto_a_taken_id,
    a_fork_copies_at_most_the_configured_messages,
    a_rewind_answers_with_what_it_removed_and_refuses_by_field,
    a_redacted_message_cannot_come_back_through_any_read,
    expired_conversations_are_deleted_whole_within_the_sweep_interval,
    inactive_conversations_are_deleted_when_configured,
);

async fn get(app: &TestApp, tenant: &str, id: &str) -> Result<proto::Conversation, tonic::Status> {
    let request = proto::GetConversationRequest {
        conversation_id: id.into(),
    };
    let response = app
        .client
        .clone()
        .get_conversation(as_tenant(tenant, request))
        .await?;
    Ok(response.into_inner().conversation.expect("conversation"))
}

fn update_request(
    conversation: proto::Conversation,
    paths: &[&str],
    allow_missing: bool,
) -> proto::UpdateConversationRequest {
    proto::UpdateConversationRequest {
        conversation: Some(conversation),
        update_mask: Some(prost_types::FieldMask {
            paths: paths.iter().map(|p| p.to_string()).collect(),
        }),
        allow_missing,
    }
}

async fn update(
    app: &TestApp,
    tenant: &str,
    request: proto::UpdateConversationRequest,
) -> Result<proto::Conversation, tonic::Status> {
    let response = app
        .client
        .clone()
        .update_conversation(as_tenant(tenant, request))
        .await?;
    Ok(response.into_inner().conversation.expect("conversation"))
}

async fn list(
    app: &TestApp,
    tenant: &str,
    request: proto::ListConversationsRequest,
) -> Result<proto::ListConversationsResponse, tonic::Status> {
    let response = app
        .client
        .clone()
        .list_conversations(as_tenant(tenant, request))
        .await?;
    Ok(response.into_inner())
}

/// Every conversation id a listing returns, following pages.
async fn list_all(app: &TestApp, tenant: &str, mut request: proto::ListConversationsRequest) -> Vec<String> {
    let mut ids = Vec::new();
    loop {
        let page = list(app, tenant, request.clone()).await.expect("list");
        ids.extend(page.conversations.into_iter().map(|c| c.conversation_id));
        if page.next_page_token.is_empty() {
            return ids;
        }
        request.page_token = page.next_page_token;
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn a_conversation_is_read_and_updated_by_field_mask(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("c", vec![user("hello"), assistant("hi")]).await;
    let created = get(&app, "default", "c").await.unwrap();
    assert_eq!(created.status(), ConversationStatus::Active);
    assert_eq!((created.last_sequence, created.title.as_str()), (2, ""));
    assert!(created.expire_time.is_none() && created.forked_from.is_none());

    let expire: prost_types::Timestamp = (SystemTime::now() + Duration::from_secs(86_400)).into();
    let changed = update(
        &app,
        "default",
        update_request(
            proto::Conversation {
                conversation_id: "c".into(),
                title: "Migration plan".into(),
                status: ConversationStatus::AwaitingAnswer as i32,
                labels: labels(&[("project", "p42"), ("mode", "pm")]),
                expire_time: Some(expire),
                // Not in the mask: ignored.
                last_sequence: 99,
                ..Default::default()
            },
            &["title", "status", "labels", "expire_time"],
            false,
        ),
    )
    .await
    .unwrap();
    assert_eq!(changed.title, "Migration plan");
    assert_eq!(changed.status(), ConversationStatus::AwaitingAnswer);
    assert_eq!(changed.labels, labels(&[("project", "p42"), ("mode", "pm")]));
    assert_eq!(
        changed.expire_time.as_ref().map(|t| t.seconds),
        Some(expire.seconds)
    );
    assert_eq!(changed.last_sequence, 2);
    let at = |t: &Option<prost_types::Timestamp>| t.as_ref().map(|t| (t.seconds, t.nanos));
    assert!(
        at(&changed.updated_at) > at(&created.updated_at),
        "an update is activity"
    );
    assert_eq!(get(&app, "default", "c").await.unwrap(), changed);

    // Only the masked field changes; an unset expire_time in the mask clears it.
    let retitled = update(
        &app,
        "default",
        update_request(
            proto::Conversation {
                conversation_id: "c".into(),
                title: "Cutover".into(),
                ..Default::default()
            },
            &["title", "expire_time"],
            false,
        ),
    )
    .await
    .unwrap();
    assert_eq!(retitled.title, "Cutover");
    assert_eq!(retitled.status(), ConversationStatus::AwaitingAnswer);
    assert_eq!(retitled.labels.len(), 2);
    assert!(retitled.expire_time.is_none());

    // Missing: NOT_FOUND, unless allow_missing creates it (empty, appendable).
    let missing = proto::Conversation {
        conversation_id: "new".into(),
        title: "Draft".into(),
        ..Default::default()
    };
    let status = update(
        &app,
        "default",
        update_request(missing.clone(), &["title"], false),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        get(&app, "default", "new").await.unwrap_err().code(),
        Code::NotFound
    );
    let created = update(&app, "default", update_request(missing, &["title"], true))
        .await
        .unwrap();
    assert_eq!((created.title.as_str(), created.last_sequence), ("Draft", 0));
    let appended = app.append_ok("new", vec![user("first")]).await;
    assert_eq!(appended.first_sequence, 1);
    assert_eq!(get(&app, "default", "new").await.unwrap().title, "Draft");
}

async fn bad_updates_are_refused_by_field_and_change_nothing(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("c", vec![user("hello")]).await;
    let before = get(&app, "default", "c").await.unwrap();
    let conversation = |title: &str, labels: BTreeMap<String, String>| proto::Conversation {
        conversation_id: "c".into(),
        title: title.into(),
        labels,
        ..Default::default()
    };
    let cases: Vec<(proto::UpdateConversationRequest, &str)> = vec![
        (
            update_request(
                conversation(&"t".repeat(1025), BTreeMap::new()),
                &["title"],
                false,
            ),
            "conversation.title",
        ),
        (
            update_request(conversation("a\u{7}b", BTreeMap::new()), &["title"], false),
            "conversation.title",
        ),
        (
            update_request(conversation("", labels(&[("Bad Key", "v")])), &["labels"], false),
            "conversation.labels[BadKey]",
        ),
        (
            update_request(
                conversation("", labels(&[("k", &"v".repeat(257))])),
                &["labels"],
                false,
            ),
            "conversation.labels[k]",
        ),
        (
            update_request(
                conversation("", (0..65).map(|i| (format!("k{i}"), "v".to_string())).collect()),
                &["labels"],
                false,
            ),
            "conversation.labels",
        ),
        (
            update_request(conversation("x", BTreeMap::new()), &["last_sequence"], false),
            "update_mask",
        ),
        (
            update_request(conversation("x", BTreeMap::new()), &[], false),
            "update_mask",
        ),
        (
            update_request(conversation("x", BTreeMap::new()), &["status"], false),
            "conversation.status",
        ),
        (
            update_request(
                proto::Conversation {
                    conversation_id: String::new(),
                    ..Default::default()
                },
                &["title"],
                false,
            ),
            "conversation.conversation_id",
        ),
    ];
    for (request, field) in cases {
        let status = update(&app, "default", request).await.unwrap_err();
        assert_field_violation(&status, field);
    }
    let after = get(&app, "default", "c").await.unwrap();
    assert_eq!(after, before, "a refused update changes nothing");

    for (request, field) in [
        (
            proto::ListConversationsRequest {
                page_token: "not a token".into(),
                ..Default::default()
            },
            "page_token",
        ),
        (
            proto::ListConversationsRequest {
                status: 42,
                ..Default::default()
            },
            "status",
        ),
        (
            proto::ListConversationsRequest {
                labels: labels(&[("UPPER", "x")]),
                ..Default::default()
            },
            "labels[UPPER]",
        ),
    ] {
        let status = list(&app, "default", request).await.unwrap_err();
        assert_field_violation(&status, field);
    }
}

async fn listing_is_newest_activity_first_in_filtered_pages(kind: StoreKind) {
    let app = spawn_app(kind).await;
    for i in 0..7 {
        app.append_ok(&format!("c{i}"), vec![user("hello")]).await;
    }
    // c3 becomes the most recently active.
    app.append_ok("c3", vec![assistant("again")]).await;
    for (id, project, status) in [
        ("c1", "a", ConversationStatus::Closed),
        ("c2", "a", ConversationStatus::Active),
        ("c5", "b", ConversationStatus::Closed),
    ] {
        update(
            &app,
            "default",
            update_request(
                proto::Conversation {
                    conversation_id: id.into(),
                    labels: labels(&[("project", project)]),
                    status: status as i32,
                    ..Default::default()
                },
                &["labels", "status"],
                false,
            ),
        )
        .await
        .unwrap();
    }
    // Activity order now: c5, c2, c1 (updates), c3, c6, c4, c0.
    let first = list(
        &app,
        "default",
        proto::ListConversationsRequest {
            page_size: 3,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ids: Vec<_> = first
        .conversations
        .iter()
        .map(|c| c.conversation_id.as_str())
        .collect();
    assert_eq!(ids, ["c5", "c2", "c1"]);
    assert!(!first.next_page_token.is_empty());
    let all = list_all(
        &app,
        "default",
        proto::ListConversationsRequest {
            page_size: 3,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(all, ["c5", "c2", "c1", "c3", "c6", "c4", "c0"]);

    let project_a = list_all(
        &app,
        "default",
        proto::ListConversationsRequest {
            page_size: 1,
            labels: labels(&[("project", "a")]),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(project_a, ["c2", "c1"]);
    let closed = list_all(
        &app,
        "default",
        proto::ListConversationsRequest {
            status: ConversationStatus::Closed as i32,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(closed, ["c5", "c1"]);
    let both = list_all(
        &app,
        "default",
        proto::ListConversationsRequest {
            status: ConversationStatus::Closed as i32,
            labels: labels(&[("project", "a")]),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(both, ["c1"]);

    // A token is bound to the filters it was made with.
    let status = list(
        &app,
        "default",
        proto::ListConversationsRequest {
            page_size: 3,
            page_token: first.next_page_token.clone(),
            status: ConversationStatus::Closed as i32,
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert_field_violation(&status, "page_token");
    // The listed resource carries the counters.
    let c3 = list_all(&app, "default", Default::default()).await;
    assert_eq!(c3.len(), 7);
    let page = list(&app, "default", Default::default()).await.unwrap();
    let c3 = page
        .conversations
        .iter()
        .find(|c| c.conversation_id == "c3")
        .unwrap();
    assert_eq!(c3.last_sequence, 2);
    assert_eq!(*c3, get(&app, "default", "c3").await.unwrap());
}

async fn paging_under_concurrent_appends_never_skips_or_repeats_an_untouched_conversation(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let ids: Vec<String> = (0..60).map(|i| format!("conv-{i:02}")).collect();
    for id in &ids {
        app.append_ok(id, vec![user("hello")]).await;
    }
    // Every third conversation is appended to while the listing pages.
    let touched: HashSet<String> = ids.iter().step_by(3).cloned().collect();
    let writer = {
        let client = app.client.clone();
        let touched: Vec<String> = touched.iter().cloned().collect();
        tokio::spawn(async move {
            for round in 0..4 {
                for id in &touched {
                    let mut client = client.clone();
                    client
                        .append_message(append(id, vec![user(&format!("round {round}"))]))
                        .await
                        .expect("append");
                }
            }
        })
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut request = proto::ListConversationsRequest {
        page_size: 4,
        ..Default::default()
    };
    loop {
        let page = list(&app, "default", request.clone()).await.unwrap();
        for c in page.conversations {
            *seen.entry(c.conversation_id).or_default() += 1;
        }
        if page.next_page_token.is_empty() {
            break;
        }
        request.page_token = page.next_page_token;
        tokio::task::yield_now().await;
    }
    writer.await.unwrap();
    for id in ids.iter().filter(|id| !touched.contains(*id)) {
        assert_eq!(seen.get(id), Some(&1), "{id} must be listed exactly once");
    }
    assert!(seen.keys().all(|id| ids.contains(id)));
}

async fn every_new_rpc_is_scoped_to_the_tenant(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    client
        .append_message(as_tenant(
            "acme",
            append("secret", vec![user("acme plans"), assistant("ok")]),
        ))
        .await
        .unwrap();
    let not_found = |status: tonic::Status| assert_eq!(status.code(), Code::NotFound, "{status:?}");
    not_found(get(&app, "globex", "secret").await.unwrap_err());
    let title = proto::Conversation {
        conversation_id: "secret".into(),
        title: "globex was here".into(),
        ..Default::default()
    };
    not_found(
        update(&app, "globex", update_request(title.clone(), &["title"], false))
            .await
            .unwrap_err(),
    );
    not_found(
        client
            .fork_conversation(as_tenant(
                "globex",
                proto::ForkConversationRequest {
                    conversation_id: "secret".into(),
                    through_sequence: 1,
                    new_conversation_id: "stolen".into(),
                },
            ))
            .await
            .unwrap_err(),
    );
    not_found(
        client
            .redact_message(as_tenant(
                "globex",
                proto::RedactMessageRequest {
                    conversation_id: "secret".into(),
                    sequence: 1,
                },
            ))
            .await
            .unwrap_err(),
    );
    assert!(list_all(&app, "globex", Default::default()).await.is_empty());
    // allow_missing creates globex's own conversation of that id, not a view of acme's.
    let own = update(&app, "globex", update_request(title, &["title"], true))
        .await
        .unwrap();
    assert_eq!(own.last_sequence, 0);
    assert_eq!(list_all(&app, "globex", Default::default()).await, ["secret"]);
    let acme = get(&app, "acme", "secret").await.unwrap();
    assert_eq!((acme.title.as_str(), acme.last_sequence), ("", 2));
    assert_eq!(list_all(&app, "acme", Default::default()).await, ["secret"]);
    assert_eq!(
        app.all_messages_as("acme", "secret").await.unwrap()[0].content,
        "acme plans"
    );
    // The fork's target is per tenant too.
    assert!(app.all_messages_as("acme", "stolen").await.is_err());
}

/// user, assistant calling a and b, results a and b, assistant, user, assistant: one tool
/// group at 2..=4.
async fn tool_loop(app: &TestApp, id: &str) {
    app.append_ok(
        id,
        vec![
            user("Plan the migration to PostgreSQL 16."),
            assistant_calling(&["a", "b"]),
            tool_result("a", "result a"),
            tool_result("b", "result b"),
            assistant("Use AWS DMS for the copy."),
            user("And the cutover?"),
            assistant("Cutover on March 22."),
        ],
    )
    .await;
}

async fn provide_summary(app: &TestApp, id: &str, text: &str, through: u64) {
    app.client
        .clone()
        .summarize(proto::SummarizeRequest {
            conversation_id: id.into(),
            mode: SummarizeMode::Provided as i32,
            summary_text: text.into(),
            through_sequence: through,
            ..Default::default()
        })
        .await
        .expect("summary stored");
}

async fn remember(app: &TestApp, id: &str, items: &[(&str, u64)]) -> proto::WorkingMemory {
    let decisions = items
        .iter()
        .map(|(text, source)| proto::MemoryItem {
            text: (*text).into(),
            source_sequences: vec![*source],
            ..Default::default()
        })
        .collect();
    app.client
        .clone()
        .update_working_memory(proto::UpdateWorkingMemoryRequest {
            conversation_id: id.into(),
            memory: Some(proto::WorkingMemory {
                decisions,
                ..Default::default()
            }),
            expected_version: None,
            expected_log_changes: None,
        })
        .await
        .expect("memory stored")
        .into_inner()
        .memory
        .expect("memory")
}

async fn memory_of(app: &TestApp, id: &str) -> proto::WorkingMemory {
    app.client
        .clone()
        .get_working_memory(proto::GetWorkingMemoryRequest {
            conversation_id: id.into(),
            ..Default::default()
        })
        .await
        .expect("memory")
        .into_inner()
        .memory
        .expect("memory")
}

async fn fork(
    app: &TestApp,
    source: &str,
    through: u64,
    target: &str,
) -> Result<proto::Conversation, tonic::Status> {
    let response = app
        .client
        .clone()
        .fork_conversation(proto::ForkConversationRequest {
            conversation_id: source.into(),
            through_sequence: through,
            new_conversation_id: target.into(),
        })
        .await?;
    Ok(response.into_inner().conversation.expect("conversation"))
}

async fn build(app: &TestApp, id: &str, format: Format) -> proto::BuildContextResponse {
    app.client
        .clone()
        .build_context(proto::BuildContextRequest {
            conversation_id: id.into(),
            budget: Some(proto::Budget {
                max_tokens: 100_000,
                ..Default::default()
            }),
            system_prompt: "You plan migrations.".into(),
            format: format as i32,
            ..Default::default()
        })
        .await
        .expect("build")
        .into_inner()
}

async fn a_fork_copies_a_prefix_with_its_summary_and_memory_and_is_independent(kind: StoreKind) {
    let app = spawn_app(kind).await;
    tool_loop(&app, "src").await;
    update(
        &app,
        "default",
        update_request(
            proto::Conversation {
                conversation_id: "src".into(),
                title: "Migration".into(),
                labels: labels(&[("project", "p42")]),
                ..Default::default()
            },
            &["title", "labels"],
            false,
        ),
    )
    .await
    .unwrap();
    provide_summary(&app, "src", "Summary through the tool group.", 4).await;
    provide_summary(&app, "src", "Summary through the cutover.", 7).await;
    remember(&app, "src", &[("Use AWS DMS.", 5), ("Cutover on March 22.", 7)]).await;

    let forked = fork(&app, "src", 6, "alt").await.unwrap();
    assert_eq!(forked.conversation_id, "alt");
    assert_eq!(forked.last_sequence, 6);
    assert_eq!(
        forked.summary_through_sequence, 4,
        "the newest summary within the prefix"
    );
    let origin = forked.forked_from.as_ref().unwrap();
    assert_eq!((origin.conversation_id.as_str(), origin.sequence), ("src", 6));
    assert_eq!((forked.title.as_str(), forked.labels.len()), ("Migration", 1));

    let source_messages = app.all_messages("src").await.unwrap();
    let fork_messages = app.all_messages("alt").await.unwrap();
    let strip = |m: &proto::Message| proto::Message {
        created_at: None,
        ..m.clone()
    };
    assert_eq!(
        fork_messages.iter().map(strip).collect::<Vec<_>>(),
        source_messages[..6].iter().map(strip).collect::<Vec<_>>()
    );
    let memory = memory_of(&app, "alt").await;
    let texts: Vec<_> = memory.decisions.iter().map(|d| d.text.as_str()).collect();
    assert_eq!(texts, ["Use AWS DMS."], "only items sourced within the prefix");
    assert_eq!(memory.version, 1);

    // The same pack as the source gives for the same prefix: BuildContext on the fork works.
    let pack = build(&app, "alt", Format::AnthropicMessages).await;
    assert!(pack.rendered.contains("Summary through the tool group."));
    assert!(!pack.rendered.contains("Cutover on March 22"));

    // Independent afterwards, both ways.
    let next = app
        .append_ok("alt", vec![assistant("Cutover on April 5 instead.")])
        .await;
    assert_eq!(next.first_sequence, 7);
    app.append_ok("src", vec![user("Thanks.")]).await;
    assert_eq!(app.all_messages("src").await.unwrap().len(), 8);
    let fork_messages = app.all_messages("alt").await.unwrap();
    assert_eq!(fork_messages.len(), 7);
    assert_eq!(fork_messages[6].content, "Cutover on April 5 instead.");
    // Calls answered within the prefix are known to the fork: answering them again is refused.
    let status = app
        .client
        .clone()
        .append_message(append("alt", vec![tool_result("a", "again")]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    // A fork of a fork.
    let again = fork(&app, "alt", 7, "alt-2").await.unwrap();
    assert_eq!(again.last_sequence, 7);
    assert_eq!(
        list_all(&app, "default", Default::default()).await.len(),
        3,
        "src, alt, alt-2"
    );
}

async fn a_fork_is_refused_inside_a_tool_group_past_the_end_and_onto_a_taken_id(kind: StoreKind) {
    let app = spawn_app(kind).await;
    tool_loop(&app, "src").await;
    app.append_ok("taken", vec![user("mine")]).await;
    for through in [2, 3] {
        let status = fork(&app, "src", through, "alt").await.unwrap_err();
        assert_field_violation(&status, "through_sequence");
    }
    let status = fork(&app, "src", 8, "alt").await.unwrap_err();
    assert_field_violation(&status, "through_sequence");
    let status = fork(&app, "src", 0, "alt").await.unwrap_err();
    assert_field_violation(&status, "through_sequence");
    let status = fork(&app, "src", 1, "src").await.unwrap_err();
    assert_field_violation(&status, "new_conversation_id");
    let status = fork(&app, "src", 4, "taken").await.unwrap_err();
    assert_eq!(status.code(), Code::AlreadyExists);
    assert_eq!(app.all_messages("taken").await.unwrap().len(), 1);
    let status = fork(&app, "missing", 1, "alt").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    // Nothing was created by the refusals; the group's edges are fine.
    assert_eq!(
        get(&app, "default", "alt").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(fork(&app, "src", 1, "before").await.unwrap().last_sequence, 1);
    assert_eq!(fork(&app, "src", 4, "after").await.unwrap().last_sequence, 4);
    // An open call (no result yet) at the end may be forked: it stays pending.
    app.append_ok("open", vec![user("go"), assistant_calling(&["z"])])
        .await;
    assert_eq!(fork(&app, "open", 2, "open-fork").await.unwrap().last_sequence, 2);
    app.append_ok("open-fork", vec![tool_result("z", "done")]).await;
}

async fn a_fork_copies_at_most_the_configured_messages(kind: StoreKind) {
    let app = spawn_app_with(kind, &["--max-fork-messages", "3"]).await;
    let messages = (0..5).map(|i| user(&format!("m{i}"))).collect();
    app.append_ok("src", messages).await;
    let status = fork(&app, "src", 4, "big").await.unwrap_err();
    assert_field_violation(&status, "through_sequence");
    assert!(
        status.message().contains("CTXD_MAX_FORK_MESSAGES"),
        "{}",
        status.message()
    );
    assert_eq!(
        get(&app, "default", "big").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(fork(&app, "src", 3, "small").await.unwrap().last_sequence, 3);
}

/// One tenant runs at most two forks at once on a replica; a third is refused at once with
/// RESOURCE_EXHAUSTED, while another tenant's fork goes through. (PostgreSQL, where a fork
/// can be held: the source's row is locked elsewhere.)
#[tokio::test]
async fn a_tenant_runs_at_most_two_forks_at_once() {
    let url = crate::helpers::fresh_database().await;
    let app = crate::helpers::spawn_on(Some(url.clone()), &[]).await;
    app.append_ok("src", vec![user("hello"), assistant("hi")]).await;
    let mut other = app.client.clone();
    other
        .append_message(as_tenant("other", append("theirs", vec![user("hello")])))
        .await
        .unwrap();
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    db.batch_execute(
        "BEGIN; SELECT 1 FROM conversations WHERE tenant_id = 'default' AND conversation_id = 'src' FOR UPDATE",
    )
    .await
    .unwrap();
    let held: Vec<_> = ["f1", "f2"]
        .into_iter()
        .map(|target| {
            let client = app.client.clone();
            tokio::spawn(async move {
                let mut client = client;
                client
                    .fork_conversation(proto::ForkConversationRequest {
                        conversation_id: "src".into(),
                        through_sequence: 2,
                        new_conversation_id: target.into(),
                    })
                    .await
            })
        })
        .collect();
    // Once both wait for the lock in the database, they hold their slots. Looked for in
    // pg_stat_activity (its snapshot cleared each time: this connection is in a transaction)
    // for up to 10 s; by then both calls have long entered the service and taken their slots
    // even on a loaded machine, so the third fork is asked either way.
    for _ in 0..500 {
        db.batch_execute("SELECT pg_stat_clear_snapshot()").await.unwrap();
        let waiting: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND datname = current_database()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let third = tokio::time::timeout(std::time::Duration::from_secs(10), fork(&app, "src", 2, "f3"))
        .await
        .expect("the third fork was answered at once")
        .unwrap_err();
    assert_eq!(third.code(), Code::ResourceExhausted, "{third:?}");
    assert!(third.message().contains("2 forks"), "{}", third.message());
    let theirs = other
        .fork_conversation(as_tenant(
            "other",
            proto::ForkConversationRequest {
                conversation_id: "theirs".into(),
                through_sequence: 1,
                new_conversation_id: "their-fork".into(),
            },
        ))
        .await;
    assert!(theirs.is_ok(), "another tenant's fork: {theirs:?}");
    db.batch_execute("COMMIT").await.unwrap();
    for fork in held {
        assert_eq!(
            fork.await
                .unwrap()
                .unwrap()
                .into_inner()
                .conversation
                .unwrap()
                .last_sequence,
            2
        );
    }
    drop(db);
    let _ = connection.await;
}

async fn a_rewind_answers_with_what_it_removed_and_refuses_by_field(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let messages = (0..5).map(|i| user(&format!("m{i}"))).collect();
    app.append_ok("r", messages).await;
    let rewind = |after: u64, expected: Option<u64>, id: &str| {
        let mut client = app.client.clone();
        let request = proto::RewindConversationRequest {
            conversation_id: id.into(),
            after_sequence: after,
            expected_last_sequence: expected,
        };
        async move { client.rewind_conversation(request).await.map(|r| r.into_inner()) }
    };
    assert_eq!(
        rewind(1, None, "missing").await.unwrap_err().code(),
        Code::NotFound
    );
    let status = rewind(6, None, "r").await.unwrap_err();
    assert_field_violation(&status, "after_sequence");
    assert_eq!(rewind(2, Some(4), "r").await.unwrap_err().code(), Code::Aborted);
    let status = rewind(2, None, "").await.unwrap_err();
    assert_field_violation(&status, "conversation_id");
    let done = rewind(3, Some(5), "r").await.unwrap();
    assert_eq!((done.messages_removed, done.last_sequence), (2, 3));
    assert_eq!(app.all_messages("r").await.unwrap().len(), 3);
    let next = app.append_ok("r", vec![user("again")]).await;
    assert_eq!(next.first_sequence, 4);
}

async fn a_redacted_message_cannot_come_back_through_any_read(kind: StoreKind) {
    const SECRET: &str = "hunter2-SECRET";
    let app = spawn_app(kind).await;
    app.append_ok("r", vec![user("Plan the migration.")]).await;
    let keyed = proto::AppendMessageRequest {
        conversation_id: "r".into(),
        messages: vec![
            user(&format!("My password is {SECRET}, use it.")),
            proto::Message {
                role: proto::Role::Assistant as i32,
                tool_calls: vec![proto::ToolCall {
                    id: "login".into(),
                    name: "login".into(),
                    arguments: format!(r#"{{"password":"{SECRET}"}}"#),
                    ..Default::default()
                }],
                ..Default::default()
            },
        ],
        idempotency_key: "k1".into(),
        expected_last_sequence: None,
        native: None,
    };
    app.client.clone().append_message(keyed.clone()).await.unwrap();
    app.append_ok(
        "r",
        vec![
            tool_result("login", "logged in"),
            assistant("Done."),
            user("Next step?"),
        ],
    )
    .await;
    provide_summary(&app, "r", "Early summary.", 1).await;
    provide_summary(&app, "r", &format!("The user's password is {SECRET}."), 4).await;
    remember(
        &app,
        "r",
        &[("Use AWS DMS.", 1), ("The password is hunter2-SECRET.", 2)],
    )
    .await;
    let memory_before = memory_of(&app, "r").await;

    let mut client = app.client.clone();
    for sequence in [2, 3] {
        let redaction = client
            .redact_message(proto::RedactMessageRequest {
                conversation_id: "r".into(),
                sequence,
            })
            .await
            .unwrap()
            .into_inner();
        let message = redaction.message.unwrap();
        assert_eq!(
            (message.sequence, message.content.as_str()),
            (sequence, "[redacted]")
        );
        if sequence == 2 {
            assert_eq!(redaction.summaries_removed, 1);
            assert_eq!(redaction.summary_through_sequence, 1);
            assert_eq!(redaction.memory_version, memory_before.version + 1);
        } else {
            // The tool call keeps its id and name; its arguments go.
            assert_eq!(message.tool_calls[0].id, "login");
            assert_eq!(message.tool_calls[0].arguments, "{}");
        }
    }
    let messages = app.all_messages("r").await.unwrap();
    assert_eq!(messages.len(), 6, "role, sequence and the protocol stay");
    assert_eq!(messages[1].role(), proto::Role::User);
    assert_eq!(messages[3].tool_call_id, "login");
    let everything = format!("{messages:?}");
    assert!(!everything.contains(SECRET));
    let tokens = messages[1].tokens.as_ref().unwrap();
    assert!(
        tokens.o200k_base.is_some_and(|n| n < 20),
        "tokens are recounted for the tombstone"
    );
    assert!(tokens.cl100k_base.is_some(), "under every tokenizer");

    for format in [Format::OpenaiChat, Format::AnthropicMessages] {
        let pack = build(&app, "r", format).await;
        assert!(!format!("{pack:?}").contains(SECRET), "{format:?}");
        assert!(pack.rendered.contains("[redacted]"));
    }
    let memory = memory_of(&app, "r").await;
    assert!(!format!("{memory:?}").contains(SECRET));
    assert_eq!(
        memory.decisions.len(),
        1,
        "the item citing the message went, the other stayed"
    );
    let summary = app
        .client
        .clone()
        .summarize(proto::SummarizeRequest {
            conversation_id: "r".into(),
            mode: SummarizeMode::Prepare as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let summary_text = format!("{summary:?}");
    assert!(!summary_text.contains(SECRET));
    assert!(
        summary_text.contains("Early summary."),
        "the earlier version is current again"
    );
    let conversation = get(&app, "default", "r").await.unwrap();
    assert_eq!(conversation.summary_through_sequence, 1);

    // The idempotency record no longer holds the payload's hash: a retry is still a replay
    // (nothing appended twice), and it cannot confirm a guessed payload.
    let replay = client.append_message(keyed).await.unwrap().into_inner();
    assert!(replay.replayed);
    assert_eq!((replay.first_sequence, replay.last_sequence), (2, 3));
    assert_eq!(app.all_messages("r").await.unwrap().len(), 6);

    // Idempotent; a missing sequence is NOT_FOUND, 0 is invalid.
    client
        .redact_message(proto::RedactMessageRequest {
            conversation_id: "r".into(),
            sequence: 2,
        })
        .await
        .unwrap();
    let status = client
        .redact_message(proto::RedactMessageRequest {
            conversation_id: "r".into(),
            sequence: 99,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    let status = client
        .redact_message(proto::RedactMessageRequest {
            conversation_id: "r".into(),
            sequence: 0,
        })
        .await
        .unwrap_err();
    assert_field_violation(&status, "sequence");
}

/// Polls until `id` is gone (NOT_FOUND) or `within` passes.
async fn gone_within(app: &TestApp, id: &str, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if get(app, "default", id)
            .await
            .is_err_and(|s| s.code() == Code::NotFound)
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn set_expiry(app: &TestApp, id: &str, at: SystemTime) {
    update(
        app,
        "default",
        update_request(
            proto::Conversation {
                conversation_id: id.into(),
                expire_time: Some(at.into()),
                ..Default::default()
            },
            &["expire_time"],
            false,
        ),
    )
    .await
    .unwrap();
}

async fn expired_conversations_are_deleted_whole_within_the_sweep_interval(kind: StoreKind) {
    let app = spawn_app_with(
        kind,
        &["--retention-sweep-interval-ms", "200", "--retention-batch", "2"],
    )
    .await;
    for id in ["e1", "e2", "e3", "kept", "later"] {
        tool_loop(&app, id).await;
        provide_summary(&app, id, "A summary.", 4).await;
        remember(&app, id, &[("Use AWS DMS.", 5)]).await;
    }
    let past = SystemTime::now() - Duration::from_secs(1);
    for id in ["e1", "e2", "e3"] {
        set_expiry(&app, id, past).await;
    }
    set_expiry(&app, "later", SystemTime::now() + Duration::from_secs(3_600)).await;
    // Three expired, batches of two: two batches of one sweep.
    for id in ["e1", "e2", "e3"] {
        assert!(gone_within(&app, id, Duration::from_secs(5)).await, "{id}");
        assert_eq!(app.all_messages(id).await.unwrap_err().code(), Code::NotFound);
        // Nothing left behind: the id starts afresh.
        let again = app.append_ok(id, vec![user("new life")]).await;
        assert_eq!(again.first_sequence, 1);
        let fresh = get(&app, "default", id).await.unwrap();
        assert_eq!(
            (
                fresh.summary_through_sequence,
                fresh.memory_version,
                fresh.title.as_str()
            ),
            (0, 0, "")
        );
        assert!(memory_of(&app, id).await.decisions.is_empty());
    }
    for id in ["kept", "later"] {
        assert_eq!(app.all_messages(id).await.unwrap().len(), 7, "{id}");
    }
}

async fn inactive_conversations_are_deleted_when_configured(kind: StoreKind) {
    let app = spawn_app_with(
        kind,
        &[
            "--retention-sweep-interval-ms",
            "200",
            "--retention-inactive-secs",
            "1",
        ],
    )
    .await;
    app.append_ok("idle", vec![user("hello")]).await;
    app.append_ok("pinned", vec![user("hello")]).await;
    // An explicit expiry overrides the inactivity rule.
    set_expiry(&app, "pinned", SystemTime::now() + Duration::from_secs(3_600)).await;
    assert!(gone_within(&app, "idle", Duration::from_secs(6)).await);
    assert_eq!(get(&app, "default", "pinned").await.unwrap().last_sequence, 1);
}
