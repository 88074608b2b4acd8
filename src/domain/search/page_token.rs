//! SearchMessages' page tokens: where the previous page ended in the ranking, the log the
//! first page saw (its end and its rewinds), and a fingerprint of what was searched, so a
//! token is only taken back by the tenant, conversation, query and filters that made it, on
//! the log it was made on.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

use crate::domain::{ids::Sequence, message::Role};

use super::SearchQuery;

/// Where a page of hits ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageToken {
    /// The log end the first page saw: later pages find nothing appended since.
    pub through: Sequence,
    /// The conversation's rewinds when the first page was read: after a rewind, sequences up
    /// to `through` may hold messages appended since, and the token is refused.
    pub rewinds: u64,
    /// The last hit's score.
    pub score: f32,
    /// The last hit's sequence.
    pub sequence: Sequence,
    /// [`fingerprint`] of the search.
    pub fingerprint: u64,
}

/// Why a page token is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PageTokenError {
    #[error("not a page token SearchMessages returned")]
    Malformed,
    #[error("the page token belongs to another conversation, query or filter")]
    OtherSearch,
    #[error("the conversation was rewound since the first page: search again from the start")]
    Rewound,
}

/// A fingerprint of a search: tenant, conversation, query terms, roles and tool names.
pub fn fingerprint(
    (tenant, conversation): (&str, &str),
    query: &SearchQuery,
    roles: &[Role],
    tools: &[String],
) -> u64 {
    let mut hash = Sha256::new();
    // A tenant id holds no NUL: the two ids cannot run into each other.
    hash.update(tenant.as_bytes());
    hash.update([0]);
    hash.update(conversation.as_bytes());
    for term in query.terms() {
        hash.update([0]);
        hash.update(term.as_bytes());
    }
    for tool in tools {
        hash.update([2]);
        hash.update(tool.as_bytes());
    }
    for role in roles {
        hash.update([1]);
        hash.update(role.as_str().as_bytes());
    }
    let digest = hash.finalize();
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_default())
}

impl PageToken {
    /// The token as text: base64url of its fields.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(37);
        bytes.push(2u8);
        bytes.extend(self.through.get().to_be_bytes());
        bytes.extend(self.rewinds.to_be_bytes());
        bytes.extend(self.score.to_bits().to_be_bytes());
        bytes.extend(self.sequence.get().to_be_bytes());
        bytes.extend(self.fingerprint.to_be_bytes());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A token [`Self::encode`] made, for the search of `fingerprint`.
    pub fn decode(text: &str, fingerprint: u64) -> Result<Self, PageTokenError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| PageTokenError::Malformed)?;
        let field = |at: usize, len: usize| bytes.get(at..at + len).ok_or(PageTokenError::Malformed);
        let u64_at = |at| -> Result<u64, PageTokenError> {
            Ok(u64::from_be_bytes(
                field(at, 8)?.try_into().map_err(|_| PageTokenError::Malformed)?,
            ))
        };
        if bytes.len() != 37 || bytes[0] != 2 {
            return Err(PageTokenError::Malformed);
        }
        let score_bits = u32::from_be_bytes(field(17, 4)?.try_into().map_err(|_| PageTokenError::Malformed)?);
        let token = PageToken {
            through: Sequence::from_stored(u64_at(1)? as i64),
            rewinds: u64_at(9)?,
            score: f32::from_bits(score_bits),
            sequence: Sequence::from_stored(u64_at(21)? as i64),
            fingerprint: u64_at(29)?,
        };
        if !token.score.is_finite() {
            return Err(PageTokenError::Malformed);
        }
        if token.fingerprint != fingerprint {
            return Err(PageTokenError::OtherSearch);
        }
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_refuse_other_searches_and_garbage() {
        let token = PageToken {
            through: Sequence::from_stored(1234),
            rewinds: 3,
            score: 0.0425,
            sequence: Sequence::from_stored(77),
            fingerprint: 99,
        };
        let text = token.encode();
        assert_eq!(PageToken::decode(&text, 99), Ok(token));
        assert_eq!(PageToken::decode(&text, 98), Err(PageTokenError::OtherSearch));
        assert_eq!(PageToken::decode("nope!", 99), Err(PageTokenError::Malformed));
        assert_eq!(PageToken::decode(&text[..10], 99), Err(PageTokenError::Malformed));
    }

    #[test]
    fn fingerprints_tell_query_terms_from_tool_names() {
        let q = |text| SearchQuery::parse(text, crate::domain::search::Language::Simple);
        let tools = ["beta".to_string()];
        assert_ne!(
            fingerprint(("t", "c"), &q("alpha"), &[], &tools),
            fingerprint(("t", "c"), &q("alpha beta"), &[], &[])
        );
    }

    #[test]
    fn fingerprints_tell_tenants_apart() {
        let q = SearchQuery::parse("alpha", crate::domain::search::Language::Simple);
        assert_ne!(
            fingerprint(("acme", "c"), &q, &[], &[]),
            fingerprint(("globex", "c"), &q, &[], &[])
        );
    }
}
