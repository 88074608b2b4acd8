//! API-key auth across every RPC, and tenant isolation when keys name the tenant.

use ctxd::{grpc::ApiKey, proto};
use tonic::{Code, Request};

use crate::helpers::{TestApp, append, spawn_on, user};

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
