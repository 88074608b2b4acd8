use std::time::SystemTime;

use super::*;
use crate::domain::{
    Role,
    context::TokenCounts,
    message::{Message, StoredMessage},
};

fn message(sequence: u64, excluded: bool) -> StoredMessage {
    let mut message = Message::text(Role::User, format!("message {sequence}"));
    message.exclude_from_context = excluded;
    StoredMessage {
        sequence: Sequence::parse(sequence).unwrap(),
        created_at: SystemTime::UNIX_EPOCH,
        tokens: TokenCounts::of(&message, crate::domain::token_counts::Tokenizers::ALL),
        reasoning_tokens: TokenCounts::default(),
        native_tokens: TokenCounts::default(),
        call_sequence: None,
        turn_anchor: None,
        message,
    }
}

fn tenant() -> TenantId {
    TenantId::parse("default").unwrap()
}

fn ids() -> (TenantId, ConversationId) {
    (tenant(), ConversationId::parse("c").unwrap())
}

fn version(changes: u64) -> LogVersion {
    LogVersion {
        created_micros: 1,
        changes,
        incarnation: 7,
    }
}

fn seq(n: u64) -> Sequence {
    Sequence::from_stored(n as i64)
}

fn request(before: u64, floor: u64, limit: usize) -> PageRequest {
    PageRequest {
        before: seq(before),
        floor: seq(floor),
        limit,
        max_bytes: usize::MAX,
    }
}

/// `cache` learns `messages` (newest first), covering `lo..=hi`, read under version `changes`.
fn learn(
    cache: &MessageCache,
    (t, c): (&TenantId, &ConversationId),
    changes: u64,
    (lo, hi): (u64, u64),
    messages: &[StoredMessage],
) {
    let seen = Segment {
        lo: seq(lo),
        hi: seq(hi),
        messages,
    };
    cache.learn(t, c, version(changes), seen);
}

fn sequences(page: &CappedPage) -> Vec<u64> {
    page.messages.iter().map(|m| m.sequence.get()).collect()
}

/// Messages `lo..=hi` newest first, every third one excluded.
fn read(lo: u64, hi: u64) -> Vec<StoredMessage> {
    (lo..=hi)
        .rev()
        .map(|s| message(s, s % 3 == 0))
        .filter(|m| !m.message.exclude_from_context)
        .collect()
}

#[test]
fn a_run_serves_the_pages_it_covers_and_says_where_it_ends() {
    let cache = MessageCache::new(1 << 20);
    let (t, c) = ids();
    let messages = read(11, 30);
    learn(&cache, (&t, &c), 0, (11, 30), &messages);
    let run = cache.run(&t, &c).unwrap();
    // Within the run: exactly what the database would return.
    let page = run.page(&request(31, 0, 4)).unwrap();
    assert_eq!(sequences(&page), [29, 28, 26, 25]);
    assert!(!page.cut_by_size);
    // Reaching the floor inside the run: complete (shorter than the limit).
    let page = run.page(&request(20, 14, 10)).unwrap();
    assert_eq!(sequences(&page), [19, 17, 16]);
    assert!(!page.cut_by_size);
    // Running out above the floor: what it has, marked cut so the rest is asked for.
    let page = run.page(&request(15, 0, 10)).unwrap();
    assert_eq!(sequences(&page), [14, 13, 11]);
    assert!(page.cut_by_size);
    // Pages whose newest messages it does not hold.
    assert!(run.page(&request(32, 0, 10)).is_none());
    assert!(run.page(&request(11, 0, 10)).is_none());
    // The byte cap, as the SQL applies it: the message that reaches it is the last.
    let one = messages[0].message.loaded_bytes();
    let capped = run
        .page(&PageRequest {
            max_bytes: one + 1,
            ..request(31, 0, 10)
        })
        .unwrap();
    assert_eq!(sequences(&capped), [29, 28]);
    assert!(capped.cut_by_size);
}

#[test]
fn runs_grow_at_both_ends_and_older_versions_never_override_newer_ones() {
    let cache = MessageCache::new(1 << 20);
    let (t, c) = ids();
    let first = read(11, 30);
    learn(&cache, (&t, &c), 0, (11, 30), &first);
    let newer = read(31, 35);
    learn(&cache, (&t, &c), 0, (31, 35), &newer);
    let older = read(1, 10);
    learn(&cache, (&t, &c), 0, (1, 10), &older);
    let run = cache.run(&t, &c).unwrap();
    let page = run.page(&request(36, 0, 100)).unwrap();
    assert_eq!(
        sequences(&page),
        read(1, 35).iter().map(|m| m.sequence.get()).collect::<Vec<_>>()
    );
    assert!(!page.cut_by_size);

    // A redaction (version 1): the new version's read replaces the run...
    let mut redacted = read(20, 35);
    redacted[0].message.content = "redacted".into();
    learn(&cache, (&t, &c), 1, (20, 35), &redacted);
    let run = cache.run(&t, &c).unwrap();
    assert_eq!(run.version(), version(1));
    assert_eq!(
        run.page(&request(36, 0, 1)).unwrap().messages[0].message.content,
        "redacted"
    );
    // ...and a slow call that read version 0 cannot bring the old text back.
    learn(&cache, (&t, &c), 0, (1, 40), &read(1, 40));
    let run = cache.run(&t, &c).unwrap();
    assert_eq!(run.version(), version(1));
    assert_eq!(
        run.page(&request(36, 0, 1)).unwrap().messages[0].message.content,
        "redacted"
    );
    assert!(
        run.page(&request(20, 0, 1)).is_none(),
        "below the new run: not cached"
    );
}

#[test]
fn a_segment_apart_from_the_run_replaces_it_only_when_newer() {
    let cache = MessageCache::new(1 << 20);
    let (t, c) = ids();
    learn(&cache, (&t, &c), 0, (11, 20), &read(11, 20));
    learn(&cache, (&t, &c), 0, (1, 5), &read(1, 5));
    assert_eq!(cache.run(&t, &c).unwrap().hi(), seq(20));
    learn(&cache, (&t, &c), 0, (40, 50), &read(40, 50));
    let run = cache.run(&t, &c).unwrap();
    assert_eq!(run.hi(), seq(50));
    assert!(run.page(&request(21, 0, 5)).is_none());
}

#[test]
fn the_cache_stays_within_its_capacity() {
    let one = message(10, false).message.loaded_bytes();
    let capacity = one * 80;
    let cache = MessageCache::new(capacity);
    let t = tenant();
    for n in 0..20 {
        let c = ConversationId::parse(format!("c{n}")).unwrap();
        let messages: Vec<StoredMessage> = (1..=30).rev().map(|s| message(s, false)).collect();
        learn(&cache, (&t, &c), 0, (1, 30), &messages);
        let run = cache.run(&t, &c).unwrap();
        // One conversation holds at most an eighth: its newest ten messages.
        assert_eq!(run.page(&request(31, 0, 100)).unwrap().messages.len(), 10);
        assert!(cache.lock().bytes <= capacity);
    }
    assert_eq!(cache.lock().runs.len(), 8);
    let off = MessageCache::new(0);
    let c = ConversationId::parse("c").unwrap();
    learn(&off, (&t, &c), 0, (1, 2), &read(1, 2));
    assert!(off.run(&t, &c).is_none());
}

#[test]
fn counts_made_late_reach_the_run_of_the_message_they_were_made_from() {
    use crate::domain::{context::cost::CountedLate, tokenize::Tokenizer};
    let cache = MessageCache::new(1 << 20);
    let (t, c) = ids();
    let uncounted = |s: u64| {
        let mut m = message(s, false);
        m.tokens.uncounted = m.tokens.uncounted.with(Tokenizer::Cl100kBase);
        m
    };
    let messages: Vec<StoredMessage> = (1..=5).rev().map(uncounted).collect();
    learn(&cache, (&t, &c), 1, (1, 5), &messages);
    let late = |s: u64, created_at: SystemTime| CountedLate {
        sequence: seq(s),
        created_at,
        tokenizer: Tokenizer::Cl100kBase,
        tokens: 40 + s as u32,
    };
    let another_message = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
    cache.keep_late_counts(
        &t,
        &c,
        &[late(2, SystemTime::UNIX_EPOCH), late(4, another_message)],
    );
    let run = cache.run(&t, &c).expect("the run stays");
    assert_eq!(run.version(), version(1));
    let page = run.page(&request(6, 0, 10)).unwrap();
    let counted = |s: u64| {
        let m = page.messages.iter().find(|m| m.sequence == seq(s)).unwrap();
        m.tokens.counted(Tokenizer::Cl100kBase)
    };
    assert_eq!(counted(2), Some(42));
    assert_eq!(counted(4), None, "another message at that sequence takes none");
    assert_eq!(counted(3), None);
}
