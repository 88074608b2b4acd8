//! Tenant isolation: one tenant can never read, list or delete another's conversation.

use ctxd::proto;
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{StoreKind, append, as_tenant, spawn_app, user},
};

contract_tests!(
    a_tenant_cannot_list_or_delete_another_tenants_conversation,
    the_same_conversation_id_is_separate_per_tenant,
    a_malformed_tenant_header_is_rejected,
);

async fn a_tenant_cannot_list_or_delete_another_tenants_conversation(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    client
        .append_message(as_tenant("acme", append("secret", vec![user("acme plans")])))
        .await
        .unwrap();

    let status = app.all_messages_as("globex", "secret").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    let status = client
        .delete_conversation(as_tenant(
            "globex",
            proto::DeleteConversationRequest {
                conversation_id: "secret".into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    // The default tenant (no header) is another tenant too.
    assert_eq!(
        app.all_messages("secret").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(app.all_messages_as("acme", "secret").await.unwrap().len(), 1);
}

async fn the_same_conversation_id_is_separate_per_tenant(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    client
        .append_message(as_tenant(
            "acme",
            append("shared-id", vec![user("a1"), user("a2")]),
        ))
        .await
        .unwrap();
    let globex = client
        .append_message(as_tenant("globex", append("shared-id", vec![user("g1")])))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        globex.first_sequence, 1,
        "sequences are per tenant and conversation"
    );
    let contents: Vec<String> = app
        .all_messages_as("globex", "shared-id")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(contents, ["g1"]);
}

async fn a_malformed_tenant_header_is_rejected(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let status = app
        .client
        .clone()
        .append_message(as_tenant("../etc", append("c", vec![user("x")])))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
}
