//! Identifiers that carry their invariants: once parsed, code never re-checks them.

use std::fmt;

/// Maximum length of a conversation id, in bytes.
pub const MAX_CONVERSATION_ID_BYTES: usize = 256;
/// Maximum length of a tenant id, in bytes.
pub const MAX_TENANT_ID_BYTES: usize = 64;
/// Maximum length of an idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;

/// A caller-chosen conversation id: 1 to 256 bytes of printable ASCII (space included).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConversationId(String);

impl ConversationId {
    /// Parses a conversation id, explaining what is wrong when it is not one.
    pub fn parse(raw: impl Into<String>) -> Result<Self, String> {
        let raw = raw.into();
        if raw.is_empty() {
            return Err("conversation_id is required".into());
        }
        if raw.len() > MAX_CONVERSATION_ID_BYTES {
            return Err(format!(
                "conversation_id is {} bytes; the limit is {MAX_CONVERSATION_ID_BYTES}",
                raw.len()
            ));
        }
        if !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err("conversation_id must be printable ASCII".into());
        }
        Ok(Self(raw))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The tenant owning a set of conversations: 1 to 64 bytes of `[A-Za-z0-9._-]`.
/// It leads every storage key, so one tenant can never address another's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

impl TenantId {
    /// Parses a tenant id, explaining what is wrong when it is not one.
    pub fn parse(raw: impl Into<String>) -> Result<Self, String> {
        let raw = raw.into();
        let valid_chars = raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if raw.is_empty() || raw.len() > MAX_TENANT_ID_BYTES || !valid_chars {
            return Err(format!(
                "tenant id must be 1 to {MAX_TENANT_ID_BYTES} characters of A-Z a-z 0-9 . _ -"
            ));
        }
        Ok(Self(raw))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Position of a message in its conversation. Sequences start at 1 and are gapless; 0 means
/// "none" (an empty conversation, or "from the start").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Sequence(u64);

impl Sequence {
    /// "No message": the last sequence of an empty conversation.
    pub const ZERO: Sequence = Sequence(0);
    /// The largest sequence the stores can hold (Postgres `bigint`).
    pub const MAX: Sequence = Sequence(i64::MAX as u64);

    /// Parses a sequence received from a client.
    pub fn parse(raw: u64) -> Result<Self, String> {
        if raw > Self::MAX.0 {
            return Err(format!("sequence {raw} is out of range"));
        }
        Ok(Self(raw))
    }

    /// Builds a sequence read back from storage, where it was written from a valid one.
    pub fn from_stored(raw: i64) -> Self {
        Self(raw.max(0) as u64)
    }

    /// The sequence as a number.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The sequence as Postgres stores it.
    pub fn as_i64(self) -> i64 {
        self.0 as i64
    }

    /// The sequence `n` positions later.
    pub fn plus(self, n: u64) -> Self {
        Self(self.0 + n)
    }

    /// The sequence `n` positions earlier, or zero.
    pub fn minus(self, n: u64) -> Self {
        Self(self.0.saturating_sub(n))
    }
}

impl fmt::Display for Sequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A caller's idempotency key for one append: 1 to 256 bytes, scoped to the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Parses a key; an empty string means "no key".
    pub fn parse_optional(raw: String) -> Result<Option<Self>, String> {
        if raw.is_empty() {
            return Ok(None);
        }
        if raw.len() > MAX_IDEMPOTENCY_KEY_BYTES {
            return Err(format!(
                "idempotency_key is {} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}",
                raw.len()
            ));
        }
        if raw.contains('\0') {
            return Err(format!(
                "idempotency_key {}",
                crate::domain::violation::NUL_DESCRIPTION
            ));
        }
        Ok(Some(Self(raw)))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_ids_are_printable_ascii_up_to_256_bytes() {
        assert!(ConversationId::parse("project-42/project-manager").is_ok());
        assert!(ConversationId::parse("with space").is_ok());
        assert!(ConversationId::parse("").is_err());
        assert!(ConversationId::parse("x".repeat(257)).is_err());
        assert!(ConversationId::parse("x".repeat(256)).is_ok());
        assert!(ConversationId::parse("tab\there").is_err());
        assert!(ConversationId::parse("ünïcode").is_err());
    }

    #[test]
    fn tenant_ids_are_restricted_to_a_safe_alphabet() {
        assert!(TenantId::parse("acme-prod.eu_1").is_ok());
        assert!(TenantId::parse("").is_err());
        assert!(TenantId::parse("a/b").is_err());
        assert!(TenantId::parse("t".repeat(65)).is_err());
    }

    #[test]
    fn sequences_fit_in_a_postgres_bigint() {
        assert!(Sequence::parse(i64::MAX as u64).is_ok());
        assert!(Sequence::parse(u64::MAX).is_err());
    }
}
