//! Responses stay within the response limit on both stores.

use ctxd::proto;

use crate::helpers::{fresh_database, spawn_on, user};

/// Responses stay within `--max-response-bytes` on both stores: a pack larger than it is
/// refused with RESOURCE_EXHAUSTED saying what to do, a ListMessages page is cut short and
/// continues where it stopped, a prepared summary covers the history in steps.
#[tokio::test]
async fn responses_stay_within_the_response_limit_on_both_stores() {
    for url in [None, Some(fresh_database().await)] {
        let store = if url.is_some() { "postgres" } else { "memory" };
        let app = spawn_on(url, &["--max-response-bytes", "200000"]).await;
        // 40 messages of 10 KB: 400 KB of history.
        for _ in 0..4 {
            let batch = (0..10)
                .map(|i| user(&format!("{i} {}", "word ".repeat(2_000))))
                .collect();
            app.append_ok("big", batch).await;
        }
        let refused = app
            .client
            .clone()
            .build_context(proto::BuildContextRequest {
                conversation_id: "big".into(),
                budget: Some(proto::Budget {
                    max_tokens: 1_000_000,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::ResourceExhausted,
            "{store}: {refused:?}"
        );
        assert!(
            refused.message().contains("CTXD_MAX_RESPONSE_BYTES"),
            "{store}: {}",
            refused.message()
        );
        // A budget whose pack fits is served.
        let fits = app
            .client
            .clone()
            .build_context(proto::BuildContextRequest {
                conversation_id: "big".into(),
                budget: Some(proto::Budget {
                    max_tokens: 10_000,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!fits.messages.is_empty(), "{store}");

        // The whole log, in pages cut by size: every message exactly once, in order.
        let (mut after, mut seen, mut pages) = (0, Vec::new(), 0);
        loop {
            let page = app
                .client
                .clone()
                .list_messages(proto::ListMessagesRequest {
                    conversation_id: "big".into(),
                    after_sequence: after,
                    page_size: 1_000,
                    format: None,
                })
                .await
                .unwrap()
                .into_inner();
            pages += 1;
            seen.extend(page.messages.iter().map(|m| m.sequence));
            if page.next_after_sequence == 0 {
                break;
            }
            after = page.next_after_sequence;
        }
        assert_eq!(seen, (1..=40).collect::<Vec<u64>>(), "{store}");
        assert!(pages > 1, "{store}: one page of 400 KB");

        // A prepared summary reaches only part of the way; storing it lets the next one go on.
        let prepared = app
            .client
            .clone()
            .summarize(proto::SummarizeRequest {
                conversation_id: "big".into(),
                mode: proto::SummarizeMode::Prepare as i32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .prepared
            .unwrap();
        assert!(
            prepared.through_sequence < 40,
            "{store}: {}",
            prepared.through_sequence
        );
        assert!(prepared.rendered.len() < 400_000, "{store}");
    }
}

/// A ListMessages page fits what a gRPC client accepts by default (4 MiB; this test's client
/// refuses more): the message that would take a page past it waits for the next page, and a
/// rendering that escaping makes large shortens its page. Every message comes exactly once.
#[tokio::test]
async fn list_pages_fit_a_default_client_on_both_stores() {
    for url in [None, Some(fresh_database().await)] {
        let store = if url.is_some() { "postgres" } else { "memory" };
        let app = spawn_on(url, &[]).await;
        // 5 messages of 900 kB: 4.5 MB, above 4 MiB.
        let large: Vec<String> = (0..5u8)
            .map(|i| char::from(b'a' + i).to_string().repeat(900_000))
            .collect();
        app.append_ok("large", large.iter().map(|t| user(t)).collect())
            .await;
        // 5 messages of 300 kB of quotes: 1.5 MB whose JSON rendering is twice that.
        let quotes: Vec<String> = (0..5).map(|_| "\"".repeat(300_000)).collect();
        app.append_ok("quotes", quotes.iter().map(|t| user(t)).collect())
            .await;
        for (conversation, texts, format) in [
            ("large", &large, None),
            ("large", &large, Some(proto::Format::OpenaiChat)),
            ("quotes", &quotes, Some(proto::Format::OpenaiChat)),
        ] {
            let (mut after, mut seen, mut rendered, mut pages) = (0, Vec::new(), 0, 0);
            loop {
                let page = app
                    .client
                    .clone()
                    .list_messages(proto::ListMessagesRequest {
                        conversation_id: conversation.into(),
                        after_sequence: after,
                        page_size: 1_000,
                        format: format.map(|f| f as i32),
                    })
                    .await
                    .unwrap_or_else(|e| panic!("{store} {conversation} {format:?}: {e:?}"))
                    .into_inner();
                assert!(
                    prost::Message::encoded_len(&page) <= 3 << 20,
                    "{store} {conversation} {format:?}: {} bytes",
                    prost::Message::encoded_len(&page)
                );
                pages += 1;
                if format.is_some() {
                    rendered += page.rendered.matches("\"role\"").count();
                }
                seen.extend(page.messages.into_iter().map(|m| m.content));
                if page.next_after_sequence == 0 {
                    break;
                }
                after = page.next_after_sequence;
            }
            assert_eq!(&seen, texts, "{store} {conversation} {format:?}");
            assert!(pages > 1, "{store} {conversation} {format:?}");
            if format.is_some() {
                assert_eq!(rendered, 5, "{store} {conversation}: every message rendered once");
            }
        }
    }
}
