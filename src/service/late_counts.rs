//! Token counts a read needs that its messages' append left out (`CTXD_TOKENIZERS`): counted
//! when a pack or summary first reads the message, on the CPU pool when there is much text,
//! and stored so that later reads find them (docs/design.md, "Token counts").

use super::offload;
use crate::{
    domain::{ConversationId, StoredMessage, TenantId, context::cost::CountedLate, tokenize::Tokenizer},
    store::Store,
};

/// What one read counted late under its tokenizer.
pub(super) struct LateCounts {
    tokenizer: Tokenizer,
    counted: Vec<CountedLate>,
}

impl LateCounts {
    /// Nothing counted yet under `tokenizer`.
    pub(super) fn under(tokenizer: Tokenizer) -> Self {
        LateCounts {
            tokenizer,
            counted: Vec::new(),
        }
    }

    /// Counts `messages` under the tokenizer where their append did not (excluded messages
    /// aside: no pack or summary counts them).
    pub(super) async fn count(&mut self, owner: &str, messages: &mut Vec<StoredMessage>) {
        let tokenizer = self.tokenizer;
        if !messages.iter().any(|m| needs(m, tokenizer)) {
            return;
        }
        let bytes: usize = messages
            .iter()
            .filter(|m| needs(m, tokenizer))
            .map(|m| m.message.loaded_bytes())
            .sum();
        let taken = std::mem::take(messages);
        let (taken, counted) = offload(owner, bytes, move |_| {
            let mut taken = taken;
            let counted: Vec<CountedLate> = taken
                .iter_mut()
                .filter(|m| needs(m, tokenizer))
                .filter_map(|m| m.count_under(tokenizer))
                .collect();
            (taken, counted)
        })
        .await;
        *messages = taken;
        self.counted.extend(counted);
    }

    /// Stores what was counted. A failure is logged, not returned: the read has its counts,
    /// and the next one counts again.
    pub(super) async fn store(self, store: &dyn Store, tenant: &TenantId, conversation: &ConversationId) {
        if self.counted.is_empty() {
            return;
        }
        if let Err(error) = store.store_late_counts(tenant, conversation, &self.counted).await {
            tracing::warn!(
                error = %error,
                tokenizer = self.tokenizer.name(),
                messages = self.counted.len(),
                "token counts made after the append were not stored"
            );
        }
    }
}

/// Whether `message` is counted late under `tokenizer`: not yet, and not excluded (no pack or
/// summary counts an excluded message).
fn needs(message: &StoredMessage, tokenizer: Tokenizer) -> bool {
    !message.message.exclude_from_context && message.tokens.uncounted.contains(tokenizer)
}
