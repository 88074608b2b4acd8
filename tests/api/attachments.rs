//! Attachments counted and rendered as each provider does (docs/design.md, "Attachments"):
//! data URIs go inline, image dimensions are read at append, and a pack with images is counted
//! by each provider's formula, so it stays within budget as the provider counts it.

use base64::{Engine, engine::general_purpose::STANDARD};
use ctxd::proto;
use serde_json::Value;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, assert_field_violation, spawn_app, user},
};

contract_tests!(
    images_are_measured_counted_per_provider_and_sent_inline,
    a_malformed_data_uri_is_refused_at_its_field,
);

/// The header of a `width` x `height` PNG (what a header reader needs; the pixels are not).
fn png(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = vec![0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 13];
    bytes.extend_from_slice(b"IHDR");
    bytes.extend_from_slice(&width.to_be_bytes());
    bytes.extend_from_slice(&height.to_be_bytes());
    bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    bytes
}

fn with_image(text: &str, uri: String) -> proto::Message {
    proto::Message {
        attachments: vec![proto::Attachment {
            mime_type: "image/png".into(),
            source: Some(proto::attachment::Source::Uri(uri)),
            // A caller's guess is replaced by the header's figures.
            width: 10,
            height: 10,
            ..Default::default()
        }],
        ..user(text)
    }
}

async fn pack(
    app: &TestApp,
    conversation: &str,
    format: proto::Format,
    max_tokens: u32,
) -> proto::BuildContextResponse {
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens,
            ..Default::default()
        }),
        format: format as i32,
        ..Default::default()
    };
    app.client
        .clone()
        .build_context(request)
        .await
        .unwrap()
        .into_inner()
}

async fn images_are_measured_counted_per_provider_and_sent_inline(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let data_uri = format!("data:image/png;base64,{}", STANDARD.encode(png(1024, 1024)));
    app.append_ok("img", vec![with_image("What is in this picture?", data_uri)])
        .await;
    app.append_ok("txt", vec![user("What is in this picture?")]).await;
    let stored = app.all_messages("img").await.unwrap();
    let attachment = &stored[0].attachments[0];
    assert_eq!(
        (attachment.width, attachment.height),
        (1024, 1024),
        "read from the header"
    );
    // Each provider's formula for a 1024x1024 image (docs/design.md, "Attachments").
    for (format, image) in [
        (proto::Format::OpenaiChat, 765),
        (proto::Format::OpenaiResponses, 765),
        (proto::Format::AnthropicMessages, 1_369),
        (proto::Format::Gemini, 1_120),
    ] {
        let with = pack(&app, "img", format, 100_000).await;
        let without = pack(&app, "txt", format, 100_000).await;
        let cost =
            |p: &proto::BuildContextResponse| p.messages.iter().find(|m| m.sequence == 1).unwrap().tokens;
        assert_eq!(cost(&with), cost(&without) + image, "{format:?}");
        // A budget that holds the text but not the image as the provider counts it.
        let tight = with.stats.as_ref().unwrap().total_tokens - 1;
        let refused = pack(&app, "img", format, tight).await;
        let stats = refused.stats.unwrap();
        assert!(
            stats.over_budget || stats.total_tokens <= tight,
            "{format:?}: {stats:?}"
        );
        let rendered: Value = serde_json::from_str(&with.rendered).unwrap();
        let text = rendered.to_string();
        match format {
            proto::Format::AnthropicMessages => assert!(
                text.contains(r#""type":"base64""#) && !text.contains("data:image"),
                "{text}"
            ),
            proto::Format::Gemini => assert!(
                text.contains("inlineData") && !text.contains("fileData"),
                "{text}"
            ),
            _ => assert!(text.contains("data:image/png;base64,"), "{text}"),
        }
    }
}

async fn a_malformed_data_uri_is_refused_at_its_field(kind: StoreKind) {
    let app = spawn_app(kind).await;
    for bad in [
        "data:image/png,not-base64",
        "data:;base64,AAAA",
        "data:image/png;base64,@@@@",
    ] {
        let status = app
            .client
            .clone()
            .append_message(crate::helpers::append(
                "bad",
                vec![with_image("look", bad.into())],
            ))
            .await
            .unwrap_err();
        assert_field_violation(&status, "messages[0].attachments[0].uri");
    }
    assert_eq!(
        app.all_messages("bad").await.unwrap_err().code(),
        tonic::Code::NotFound
    );
}
