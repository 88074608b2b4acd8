//! Attachments counted and rendered as each provider does (docs/design.md, "Attachments"):
//! data URIs go inline, image dimensions are read at append, and a pack with images is counted
//! by each provider's formula, so it stays within budget as the provider counts it.

use base64::{Engine, engine::general_purpose::STANDARD};
use ctxd::proto;
use serde_json::Value;

use crate::{
    contract_tests,
    helpers::{StoreKind, assert_field_violation, spawn_app, user},
};

contract_tests!(
    images_are_measured_counted_per_provider_and_sent_inline,
    a_malformed_data_uri_is_refused_at_its_field,
    a_pending_image_is_measured_and_costs_what_the_same_image_appended_costs,
    a_pdf_given_as_a_data_uri_goes_to_openai_as_a_file,
    a_narrow_image_costs_what_anthropic_publishes,
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
        let with = app.pack("img", format, 100_000).await;
        let without = app.pack("txt", format, 100_000).await;
        let cost =
            |p: &proto::BuildContextResponse| p.messages.iter().find(|m| m.sequence == 1).unwrap().tokens;
        assert_eq!(cost(&with), cost(&without) + image, "{format:?}");
        // A budget that holds the text but not the image as the provider counts it.
        let tight = with.stats.as_ref().unwrap().total_tokens - 1;
        let refused = app.pack("img", format, tight).await;
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

/// A user message with a 1x1 PNG as inline data.
fn with_inline_png(text: &str) -> proto::Message {
    proto::Message {
        attachments: vec![proto::Attachment {
            mime_type: "image/png".into(),
            source: Some(proto::attachment::Source::Data(png(1, 1))),
            ..Default::default()
        }],
        ..user(text)
    }
}

async fn a_pending_image_is_measured_and_costs_what_the_same_image_appended_costs(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let opening = vec![user("hi"), crate::helpers::assistant("hello")];
    app.append_ok("pending", opening.clone()).await;
    app.append_ok("appended", opening).await;
    app.append_ok("appended", vec![with_inline_png("look")]).await;
    for format in [
        proto::Format::OpenaiChat,
        proto::Format::OpenaiResponses,
        proto::Format::AnthropicMessages,
        proto::Format::Gemini,
    ] {
        let request = |conversation: &str, pending: Vec<proto::Message>| proto::BuildContextRequest {
            conversation_id: conversation.into(),
            budget: Some(proto::Budget {
                max_tokens: 10_000,
                ..Default::default()
            }),
            format: format as i32,
            pending_messages: pending,
            ..Default::default()
        };
        let pending = app
            .client
            .clone()
            .build_context(request("pending", vec![with_inline_png("look")]))
            .await
            .unwrap()
            .into_inner();
        let appended = app
            .client
            .clone()
            .build_context(request("appended", vec![]))
            .await
            .unwrap()
            .into_inner();
        let last = |p: &proto::BuildContextResponse| p.messages.last().cloned().unwrap();
        let (pending_image, appended_image) = (last(&pending), last(&appended));
        let dimensions = |m: &proto::ContextMessage| {
            let a = &m.attachments[0];
            (a.width, a.height)
        };
        assert_eq!(
            dimensions(&pending_image),
            (1, 1),
            "{format:?}: read from the header"
        );
        assert_eq!(dimensions(&appended_image), (1, 1), "{format:?}");
        assert_eq!(
            pending_image.tokens, appended_image.tokens,
            "{format:?}: a pending image costs what the same image appended costs"
        );
        assert_eq!(
            pending.stats.unwrap().total_tokens,
            appended.stats.unwrap().total_tokens,
            "{format:?}"
        );
    }
}

async fn a_pdf_given_as_a_data_uri_goes_to_openai_as_a_file(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let pdf = STANDARD.encode(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n");
    let uri = format!("data:application/pdf;base64,{pdf}");
    let message = proto::Message {
        attachments: vec![proto::Attachment {
            mime_type: "application/pdf".into(),
            filename: "paper.pdf".into(),
            source: Some(proto::attachment::Source::Uri(uri.clone())),
            ..Default::default()
        }],
        ..user("Summarize the paper.")
    };
    app.append_ok("pdf", vec![message]).await;
    let chat: Value =
        serde_json::from_str(&app.pack("pdf", proto::Format::OpenaiChat, 100_000).await.rendered).unwrap();
    let parts = chat[0]["content"].as_array().unwrap();
    let file = parts
        .iter()
        .find(|p| p["type"] == "file")
        .unwrap_or_else(|| panic!("no file part: {chat}"));
    assert_eq!(file["file"]["file_data"], uri.as_str());
    assert_eq!(file["file"]["filename"], "paper.pdf");
    assert!(
        parts
            .iter()
            .all(|p| !p["text"].as_str().is_some_and(|t| t.contains(&pdf))),
        "{chat}"
    );
    let responses: Value = serde_json::from_str(
        &app.pack("pdf", proto::Format::OpenaiResponses, 100_000)
            .await
            .rendered,
    )
    .unwrap();
    let parts = responses[0]["content"].as_array().unwrap();
    let file = parts
        .iter()
        .find(|p| p["type"] == "input_file")
        .unwrap_or_else(|| panic!("no input_file: {responses}"));
    assert_eq!(file["file_data"], uri.as_str());
    assert_eq!(file["filename"], "paper.pdf");
}

async fn a_narrow_image_costs_what_anthropic_publishes(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let data_uri = format!("data:image/png;base64,{}", STANDARD.encode(png(100, 2500)));
    app.append_ok("narrow", vec![with_image("A tall chart.", data_uri)])
        .await;
    app.append_ok("txt", vec![user("A tall chart.")]).await;
    let cost = |p: &proto::BuildContextResponse| p.messages.iter().find(|m| m.sequence == 1).unwrap().tokens;
    let with = app
        .pack("narrow", proto::Format::AnthropicMessages, 100_000)
        .await;
    let without = app.pack("txt", proto::Format::AnthropicMessages, 100_000).await;
    // Scaled to 63x1568: (63 x 1568) / 750 = 131.7, where whole 28-pixel patches make 168.
    assert_eq!(cost(&with) - cost(&without), 132);
}
