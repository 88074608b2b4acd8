//! Token counts a read made after the append, for a tokenizer `CTXD_TOKENIZERS` left out
//! (see [`crate::store::Store::store_late_counts`]): one statement per tokenizer, setting each
//! count only where it is still NULL on the message the count was made from.

use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::rows::stored_count;
use crate::{
    domain::{ConversationId, TenantId, context::cost::CountedLate, tokenize::Tokenizer},
    store::StoreError,
};

/// The statement keeping a tokenizer's counts in `column`. `$3` to `$5` are the messages'
/// sequences (ascending, distinct), creation times and counts. The creation time tells a
/// message from one appended at the same sequence after a rewind; a redaction counts every
/// tokenizer, so the NULL test leaves its tombstone alone. A row another transaction holds (a
/// rewind, a redaction, another replica's same write) is skipped, not waited for: a read never
/// waits on a write for this, nor deadlocks with one, and the next read counts that one again.
macro_rules! update_sql {
    ($column:literal) => {
        concat!(
            "UPDATE messages m SET ", $column, " = u.tokens
             FROM unnest($3::bigint[], $4::timestamptz[], $5::integer[]) AS u(sequence, created_at, tokens)
             WHERE m.tenant_id = $1 AND m.conversation_id = $2 AND m.sequence = u.sequence
                 AND m.created_at = u.created_at AND m.", $column, " IS NULL
                 AND m.sequence IN (
                     SELECT l.sequence FROM messages l
                     WHERE l.tenant_id = $1 AND l.conversation_id = $2 AND l.sequence = ANY($3)
                         AND l.", $column, " IS NULL
                     ORDER BY l.sequence
                     FOR UPDATE SKIP LOCKED)"
        )
    };
}

/// [`update_sql!`] for `tokenizer` (none for the approximation, always counted at append).
fn update_sql(tokenizer: Tokenizer) -> Option<&'static str> {
    match tokenizer {
        Tokenizer::O200kBase => Some(update_sql!("tokens_o200k")),
        Tokenizer::Cl100kBase => Some(update_sql!("tokens_cl100k")),
        Tokenizer::Approx => None,
    }
}

/// Stores `counts` (see the module).
pub(super) async fn store(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    counts: &[CountedLate],
) -> Result<(), StoreError> {
    let client = pool.get().await?;
    for tokenizer in Tokenizer::ALL {
        let mut of_tokenizer: Vec<&CountedLate> =
            counts.iter().filter(|c| c.tokenizer == tokenizer).collect();
        of_tokenizer.sort_by_key(|c| c.sequence);
        of_tokenizer.dedup_by_key(|c| c.sequence);
        let Some(sql) = update_sql(tokenizer).filter(|_| !of_tokenizer.is_empty()) else {
            continue;
        };
        let sequences: Vec<i64> = of_tokenizer.iter().map(|c| c.sequence.as_i64()).collect();
        let created: Vec<std::time::SystemTime> = of_tokenizer.iter().map(|c| c.created_at).collect();
        let tokens: Vec<i32> = of_tokenizer.iter().map(|c| stored_count(c.tokens)).collect();
        let params: [&(dyn ToSql + Sync); 5] = [
            &tenant.as_str(),
            &conversation.as_str(),
            &sequences,
            &created,
            &tokens,
        ];
        let statement = client.prepare_cached(sql).await?;
        client.execute(&statement, &params).await?;
    }
    Ok(())
}
