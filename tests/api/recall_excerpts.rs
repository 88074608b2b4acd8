//! Recall III (docs/design.md, "Recall"): what the recalled turn carries. The excerpt holds the
//! query's rarest words, wherever in the message they are; hits far below the best take no
//! room; the message the best hit names comes with it (the second hop); SearchMessages says how
//! relevant each hit is. Both stores.

use ctxd::proto;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, append, assert_field_violation, assistant, spawn_app, user},
};

contract_tests!(
    an_excerpt_holds_the_rarest_words_not_the_first_common_match,
    a_long_message_whose_answer_is_at_its_end_is_quoted_there,
    weak_hits_take_no_room,
    relevance_tells_a_strong_hit_from_filler,
    occurred_at_is_validated_listed_recalled_and_forked,
    a_two_hop_answer_is_quoted_through_what_the_best_hit_names,
);

/// Small talk: `n` turns, each naming `people` (common in this conversation).
fn chatter(n: usize) -> Vec<proto::Message> {
    (0..n)
        .map(|i| match i % 2 {
            0 => user(&format!(
                "So many people at the market today, stall {i} was packed."
            )),
            _ => assistant("Ha, people love a Saturday market."),
        })
        .collect()
}

async fn recalled(
    app: &TestApp,
    conversation: &str,
    question: &str,
    max_tokens: u32,
) -> proto::ContextMessage {
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: 400 + max_tokens,
            ..Default::default()
        }),
        pending_messages: vec![user(question)],
        recall: Some(proto::Recall {
            max_tokens,
            ..Default::default()
        }),
        ..Default::default()
    };
    let pack = app
        .client
        .clone()
        .build_context(request)
        .await
        .unwrap()
        .into_inner();
    let last = pack.messages.last().cloned().unwrap();
    assert_eq!(last.source, proto::ContextSource::Recall as i32, "{pack:?}");
    last
}

async fn an_excerpt_holds_the_rarest_words_not_the_first_common_match(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut log = vec![user(
        "I keep thinking about people lately. People at work, people at the gym, people \
         everywhere who seem lonely and tired, people on the bus who never look up from their \
         phones. My mentor always said we owe something to the folks around us, and I believe \
         her more every year. So here is my dream for the next decade: I want to create a \
         community garden, a safe place for kids who have nowhere to go after school.",
    )];
    log.extend(chatter(60));
    app.append_ok("garden", log).await;
    // Room for about 60 tokens of excerpt: the message (about 110 tokens) cannot go whole.
    let turn = recalled(
        &app,
        "garden",
        "What kind of place does she want to create for people?",
        100,
    )
    .await;
    assert!(
        turn.content.contains("create a community garden, a safe place"),
        "{}",
        turn.content
    );
    assert!(
        !turn.content.contains("I keep thinking about people"),
        "the window is at the rare words: {}",
        turn.content
    );
}

async fn a_long_message_whose_answer_is_at_its_end_is_quoted_there(kind: StoreKind) {
    let app = spawn_app(kind).await;
    // Mara's name opens every sentence; the answer is only in the last one.
    let filler = "Mara and I talked about the weather, the bus strike and the neighbours' dog. ";
    let mut log = vec![user(&format!(
        "{}Oh, and Mara finally started learning the cello last month!",
        filler.repeat(8)
    ))];
    log.extend(chatter(30));
    app.append_ok("cello", log).await;
    let turn = recalled(&app, "cello", "Which instrument is Mara learning?", 90).await;
    assert!(
        turn.content
            .contains("Mara finally started learning the cello last month!"),
        "{}",
        turn.content
    );
}

/// A strong hit holding the question's four rare words, and 20 weak ones holding only a word
/// a quarter of the conversation says.
async fn strong_and_weak(app: &TestApp, conversation: &str) {
    let mut log = vec![user(
        "The harbour ferry timetable changes on Tuesday, said the skipper.",
    )];
    for i in 0..80 {
        log.push(match i % 4 {
            0 => user(&format!("Thanks, see you on Tuesday at {i}.")),
            1 => assistant("Sounds good."),
            2 => user("What a day it has been."),
            _ => assistant("Sleep well."),
        });
    }
    app.append_ok(conversation, log).await;
}

async fn weak_hits_take_no_room(kind: StoreKind) {
    let app = spawn_app(kind).await;
    strong_and_weak(&app, "weak").await;
    let question = "When does the harbour ferry timetable change, skipper? Tuesday?";
    let turn = recalled(&app, "weak", question, 600).await;
    assert!(
        turn.content.contains("harbour ferry timetable"),
        "{}",
        turn.content
    );
    assert!(
        !turn.content.contains("see you on Tuesday"),
        "a hit sharing one common word takes no room: {}",
        turn.content
    );
}

async fn relevance_tells_a_strong_hit_from_filler(kind: StoreKind) {
    let app = spawn_app(kind).await;
    strong_and_weak(&app, "relevance").await;
    let request = proto::SearchMessagesRequest {
        conversation_id: "relevance".into(),
        query: "When does the harbour ferry timetable change, skipper? Tuesday?".into(),
        page_size: 5,
        ..Default::default()
    };
    let hits = app
        .client
        .clone()
        .search_messages(request)
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert_eq!(hits[0].sequence, 1);
    assert!(hits[0].relevance >= 0.5, "{hits:?}");
    assert!(hits[1..].iter().all(|h| h.relevance < 0.15), "{hits:?}");
    assert!(
        hits.iter().all(|h| (0.0..=1.0).contains(&h.relevance)),
        "{hits:?}"
    );
}

fn at(seconds: i64) -> Option<prost_types::Timestamp> {
    Some(prost_types::Timestamp { seconds, nanos: 0 })
}

fn dated(message: proto::Message, seconds: i64) -> proto::Message {
    proto::Message {
        occurred_at: at(seconds),
        ..message
    }
}

/// 2023-05-03 14:05 UTC.
const MAY_3_2023: i64 = 1_683_122_700;

async fn list(app: &TestApp, conversation: &str) -> Vec<proto::Message> {
    let request = proto::ListMessagesRequest {
        conversation_id: conversation.into(),
        page_size: 100,
        ..Default::default()
    };
    app.client
        .clone()
        .list_messages(request)
        .await
        .unwrap()
        .into_inner()
        .messages
}

async fn occurred_at_is_validated_listed_recalled_and_forked(kind: StoreKind) {
    let app = spawn_app(kind).await;
    // History imported with its times, then a live message without one.
    let mut log = vec![dated(
        user("We adopted a greyhound called Comet from the rescue centre."),
        MAY_3_2023,
    )];
    log.extend(
        chatter(40)
            .into_iter()
            .enumerate()
            .map(|(i, m)| dated(m, MAY_3_2023 + 86_400 * (i as i64 + 1))),
    );
    app.append_ok("dated", log).await;
    app.append_ok("dated", vec![user("And now, today.")]).await;
    let listed = list(&app, "dated").await;
    assert_eq!(listed[0].occurred_at, at(MAY_3_2023));
    let last = listed.last().unwrap();
    assert_eq!(last.occurred_at, last.created_at, "the append time without one");

    // Refused, naming the field, and nothing stored: the future, earlier than the log's last
    // message, going back within the request.
    let mut client = app.client.clone();
    let future = dated(user("from tomorrow"), 4_102_444_800);
    let status = client
        .append_message(append("dated", vec![future]))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[0].occurred_at");
    let status = client
        .append_message(append("dated", vec![dated(user("too early"), MAY_3_2023)]))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[0].occurred_at");
    let back = vec![dated(user("b"), MAY_3_2023 + 1), dated(user("a"), MAY_3_2023)];
    let status = client.append_message(append("other", back)).await.unwrap_err();
    assert_field_violation(&status, "messages[1].occurred_at");
    assert_eq!(list(&app, "dated").await.len(), listed.len());

    // Recall says when it was said.
    let turn = recalled(
        &app,
        "dated",
        "What is the name of our greyhound from the rescue?",
        200,
    )
    .await;
    assert!(turn.content.contains("3 May 2023"), "{}", turn.content);
    assert!(turn.content.contains("Comet"), "{}", turn.content);

    // A fork keeps the times.
    let fork = proto::ForkConversationRequest {
        conversation_id: "dated".into(),
        through_sequence: 3,
        new_conversation_id: "dated-fork".into(),
    };
    client.fork_conversation(fork).await.unwrap();
    let forked = list(&app, "dated-fork").await;
    assert_eq!(forked.len(), 3);
    assert_eq!(forked[0].occurred_at, at(MAY_3_2023));
    assert_eq!(forked[2].occurred_at, listed[2].occurred_at);
}

/// The answer takes two messages, and the one that holds it shares no word with the question:
/// the best hit names the sister, and recall's second hop finds where she lives.
async fn a_two_hop_answer_is_quoted_through_what_the_best_hit_names(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut log = vec![user("My sister Cosima just moved to Osaka for a new job.")];
    log.extend(chatter(40));
    log.push(user(
        "Booked my flights to go see Cosima for her birthday, can't wait!",
    ));
    log.extend(chatter(40));
    app.append_ok("hops", log).await;
    let turn = recalled(&app, "hops", "Which city is she going to for the birthday?", 300).await;
    assert!(
        turn.content.contains("see Cosima for her birthday"),
        "{}",
        turn.content
    );
    assert!(
        turn.content.contains("Cosima just moved to Osaka"),
        "the second hop: {}",
        turn.content
    );
}
