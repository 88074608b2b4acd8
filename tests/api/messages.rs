//! ListMessages paging and DeleteConversation.

use ctxd::proto;
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{StoreKind, append, assistant_calling, spawn_app, tool_result, user},
};

contract_tests!(
    list_messages_pages_by_sequence,
    list_messages_of_an_unknown_conversation_is_not_found,
    delete_erases_messages_calls_and_idempotency_records,
    delete_of_an_unknown_conversation_is_not_found,
    a_page_renders_whole_in_the_format_asked_for,
);

/// ListMessages with `format`: the page as that format's history, every message in context,
/// UI-only ones left out; without it, no rendering; an unknown format is a field violation.
async fn a_page_renders_whole_in_the_format_asked_for(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let ui_only = proto::Message {
        exclude_from_context: true,
        ..user("ui only note")
    };
    let done = proto::Message {
        role: proto::Role::Assistant as i32,
        content: "done".into(),
        ..Default::default()
    };
    app.append_ok(
        "r",
        vec![
            user("hello"),
            assistant_calling(&["c1"]),
            tool_result("c1", "result text"),
            ui_only,
            done,
        ],
    )
    .await;
    let list = |format: Option<i32>| {
        let mut client = app.client.clone();
        async move {
            client
                .list_messages(proto::ListMessagesRequest {
                    conversation_id: "r".into(),
                    format,
                    ..Default::default()
                })
                .await
        }
    };
    let plain = list(None).await.unwrap().into_inner();
    assert_eq!((plain.messages.len(), plain.rendered.as_str()), (5, ""));
    for format in [
        proto::Format::OpenaiChat,
        proto::Format::AnthropicMessages,
        proto::Format::OpenaiResponses,
        proto::Format::Gemini,
    ] {
        let page = list(Some(format as i32)).await.unwrap().into_inner();
        assert_eq!(page.messages.len(), 5, "{format:?}: the messages still come");
        let rendered: serde_json::Value = serde_json::from_str(&page.rendered).expect("JSON");
        let text = rendered.to_string();
        for said in ["hello", "c1", "result text", "done"] {
            assert!(text.contains(said), "{format:?} lacks {said}: {text}");
        }
        assert!(!text.contains("ui only note"), "{format:?}: {text}");
    }
    let status = list(Some(42)).await.unwrap_err();
    crate::helpers::assert_field_violation(&status, "format");
}

async fn list_messages_pages_by_sequence(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    app.append_ok("paged", (1..=25).map(|i| user(&format!("m{i}"))).collect())
        .await;
    let page = |after, size| proto::ListMessagesRequest {
        conversation_id: "paged".into(),
        after_sequence: after,
        page_size: size,
        format: None,
    };
    let first = client.list_messages(page(0, 10)).await.unwrap().into_inner();
    assert_eq!(
        first.messages.iter().map(|m| m.sequence).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    assert_eq!(first.next_after_sequence, 10);
    let last = client.list_messages(page(20, 10)).await.unwrap().into_inner();
    assert_eq!(last.messages.len(), 5);
    assert_eq!(last.next_after_sequence, 0, "the end was reached");
    let exact = client.list_messages(page(15, 10)).await.unwrap().into_inner();
    assert_eq!((exact.messages.len(), exact.next_after_sequence), (10, 0));
    let beyond = client.list_messages(page(25, 10)).await.unwrap().into_inner();
    assert!(beyond.messages.is_empty());
    assert_eq!(beyond.next_after_sequence, 0);
    let default_size = client.list_messages(page(0, 0)).await.unwrap().into_inner();
    assert_eq!(default_size.messages.len(), 25);
}

async fn list_messages_of_an_unknown_conversation_is_not_found(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let status = app.all_messages("never-written").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
}

async fn delete_erases_messages_calls_and_idempotency_records(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let keyed = proto::AppendMessageRequest {
        idempotency_key: "k1".into(),
        ..append(
            "doomed",
            vec![
                user("hi"),
                assistant_calling(&["call-1"]),
                tool_result("call-1", "ok"),
            ],
        )
    };
    client.append_message(keyed.clone()).await.unwrap();
    let deleted = client
        .delete_conversation(proto::DeleteConversationRequest {
            conversation_id: "doomed".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.messages_deleted, 3);
    assert_eq!(
        app.all_messages("doomed").await.unwrap_err().code(),
        Code::NotFound
    );

    // Nothing survives: the key is fresh, call ids are reusable, sequences restart at 1.
    let again = client.append_message(keyed).await.unwrap().into_inner();
    assert!(!again.replayed);
    assert_eq!((again.first_sequence, again.last_sequence), (1, 3));
}

async fn delete_of_an_unknown_conversation_is_not_found(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let status = app
        .client
        .clone()
        .delete_conversation(proto::DeleteConversationRequest {
            conversation_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
}
