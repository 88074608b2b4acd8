//! Field violations: why a request was rejected, naming the offending field.

use std::fmt;

/// One rejected field of a request, e.g. `messages[2].tool_call_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// Path of the field in the request, in protobuf field names.
    pub field: String,
    /// What is wrong with it, for people.
    pub description: String,
}

/// Every violation found in a request; never empty when returned as an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations(Vec<FieldViolation>);

impl Violations {
    /// Records a violation of `field`.
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation {
            field: field.into(),
            description: description.into(),
        });
    }

    /// A single violation.
    pub fn single(field: impl Into<String>, description: impl Into<String>) -> Self {
        let mut violations = Self::default();
        violations.add(field, description);
        violations
    }

    /// Moves the violations of `other` into `self`.
    pub fn extend(&mut self, other: Violations) {
        self.0.extend(other.0);
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The recorded violations, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = &FieldViolation> {
        self.0.iter()
    }

    /// `Ok(value)` when nothing was recorded, else the violations.
    pub fn into_result<T>(self, value: T) -> Result<T, Violations> {
        if self.0.is_empty() { Ok(value) } else { Err(self) }
    }
}

/// What a field holding U+0000 is told. PostgreSQL's `text` and `jsonb` cannot hold it, so no
/// stored string may, on either store.
pub const NUL_DESCRIPTION: &str = "contains U+0000 (NUL), which cannot be stored";

/// Records a violation of `field` (built only then) when `value` contains U+0000.
pub fn check_no_nul(v: &mut Violations, value: &str, field: impl FnOnce() -> String) {
    if value.contains('\0') {
        v.add(field(), NUL_DESCRIPTION);
    }
}

/// `text` cut to at most `max_bytes` (at a character boundary), with `…` when cut: for caller
/// values a status or log line may echo, which must stay small.
pub fn clip(text: &str, max_bytes: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max_bytes {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max_bytes.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &text[..end]))
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", v.field, v.description)?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_keeps_short_text_and_cuts_long_text_at_a_character_boundary() {
        assert_eq!(clip("short", 10), "short");
        let long = "é".repeat(100);
        let cut = clip(&long, 11);
        assert!(cut.len() <= 11 && cut.ends_with('…'), "{cut}");
        assert_eq!(clip(&"x".repeat(1 << 20), 64).len(), 64);
    }
}
