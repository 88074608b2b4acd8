//! Recall's neighbour turns (docs/design.md, "Recall"): a question and its reply often hold an
//! answer together, so the short turns right before and after a strong hit are offered to the
//! recalled turn, ranked with their hit.

use std::collections::HashSet;

use super::{Service, ServiceError};
use crate::{
    domain::tokenize::Tokenizer,
    domain::{ConversationId, Role, Sequence, TenantId, message::Message},
    runtime::response_budget::Reservation,
    store::{FoundMessage, SearchPage, SearchSpec},
};

/// A hit is strong at this fraction of the best hit's score or more.
const STRONG: f32 = 0.5;
/// Neighbours are looked up around at most this many strong hits, one read of three messages
/// each. Around the best hit alone, the second set's preference questions stayed under the
/// naive pack (0.680 against 0.687); around the best two they reach it.
const MAX_STRONG: usize = 2;
/// A neighbour is offered when it costs at most this many tokens: a short question or reply.
const MAX_NEIGHBOUR_TOKENS: u32 = 80;

/// Who said a message: its role and name.
type Speaker = (Role, String);

fn speaker(message: &Message) -> Speaker {
    (message.role, message.name.clone())
}

/// When the search was lexical, inserts after each strong hit of `page` its short neighbours: the message before and the
/// one after, when another speaker said them (a reply, or what was replied to) as a user or
/// assistant turn of text, seen by the search (`through`),
/// neither held verbatim by the pack (`spec.skip`) nor found already. They take their hit's score.
/// With embeddings, nothing: the semantic half finds such a reply by itself, and neighbours took
/// room from dated hits (docs/benchmarks.md, "Recall III").
pub(super) async fn add_neighbours(
    service: &Service,
    (tenant, conversation, tokenizer): (&TenantId, &ConversationId, Tokenizer),
    (page, spec): (&mut SearchPage, &SearchSpec),
    reservation: &mut Reservation,
) -> Result<(), ServiceError> {
    let lexical = spec.semantic.is_none();
    let Some(best) = page.found.first().map(|f| f.score).filter(|_| lexical) else {
        return Ok(());
    };
    let strong: Vec<(Sequence, f32, Speaker)> = page
        .found
        .iter()
        .take(MAX_STRONG)
        .filter(|f| f.score >= best * STRONG)
        .map(|f| (f.message.sequence, f.score, speaker(&f.message.message)))
        .collect();
    let mut taken: HashSet<Sequence> = spec.skip.iter().copied().collect();
    taken.extend(page.found.iter().map(|f| f.message.sequence));
    for (hit, score, said_by) in strong {
        let read = reservation.begin_read()?;
        let after = Sequence::from_stored(hit.get().saturating_sub(2) as i64);
        let around = service
            .store
            .list_messages(tenant, conversation, after, 3, read.limit)
            .await?;
        let loaded = around.messages.iter().map(|m| m.message.loaded_bytes()).sum();
        reservation.end_read(read, loaded)?;
        let at = page
            .found
            .iter()
            .position(|f| f.message.sequence == hit)
            .map_or(page.found.len(), |i| i + 1);
        let neighbours: Vec<FoundMessage> = around
            .messages
            .into_iter()
            .filter(|m| m.sequence != hit && m.sequence <= page.through && !taken.contains(&m.sequence))
            .filter(|m| {
                let text = &m.message;
                matches!(text.role, Role::User | Role::Assistant)
                    && speaker(text) != said_by
                    && text.tool_calls.is_empty()
                    && !text.exclude_from_context
                    && !text.content.trim().is_empty()
                    && m.tokens.get(tokenizer) <= MAX_NEIGHBOUR_TOKENS
            })
            .map(|message| FoundMessage {
                message,
                score,
                relevance: 0.0,
                tool_name: None,
                chunk: None,
            })
            .collect();
        taken.extend(neighbours.iter().map(|n| n.message.sequence));
        page.found.splice(at..at, neighbours);
    }
    Ok(())
}
