//! PostgreSQL's `ts_rank(tsvector, tsquery, normalization)` for an OR query, ported from
//! `src/backend/utils/adt/tsrank.c` (PostgreSQL 15, `calc_rank_or` and `calc_rank`) operation
//! for operation, in the same float and double precision, so that the in-memory store ranks
//! exactly as PostgreSQL does (checked against a real server in `tests/api/search.rs`).

use super::{SearchDocument, SearchQuery};

/// The `normalization` both stores rank with: 1, the rank divided by 1 + the base-2 logarithm
/// of the document's length, so that a long tool output that mentions a term in passing does
/// not outrank the short message that is about it.
pub const RANK_NORMALIZATION: i32 = 1;

/// `ts_rank`'s default weights of the labels D, C, B, A; documents are unlabelled (D).
const WEIGHT_D: f32 = 0.1;

/// `ts_rank(document, query, RANK_NORMALIZATION)`; 0 when nothing matches.
pub fn rank(document: &SearchDocument, query: &SearchQuery) -> f32 {
    rank_normalized(document, query, RANK_NORMALIZATION)
}

/// `ts_rank` with the normalizations this port knows: 0 (none) and 1 (log length).
pub(super) fn rank_normalized(document: &SearchDocument, query: &SearchQuery, normalization: i32) -> f32 {
    if document.is_empty() || query.is_empty() {
        return 0.0;
    }
    let mut res = calc_rank_or(document, query);
    if res < 0.0 {
        res = 1e-20;
    }
    if normalization & 0x01 != 0 {
        let length = document.word_count() as f64;
        res = (f64::from(res) / ((length + 1.0).ln() / 2f64.ln())) as f32;
    }
    res
}

/// `calc_rank_or`: per query term found, the sum of its occurrences' weights over `(j + 1)^2`,
/// scaled by pi^2 / 6, then the mean over the query's terms.
fn calc_rank_or(document: &SearchDocument, query: &SearchQuery) -> f32 {
    let mut res: f32 = 0.0;
    for term in query.terms() {
        let Some(positions) = document.positions(term) else {
            continue;
        };
        // An entry without positions counts as one occurrence (ours always have some).
        let occurrences = positions.len().max(1);
        let mut resj: f32 = 0.0;
        let mut wjm: f32 = -1.0;
        let mut jm: i32 = 0;
        for j in 0..occurrences as i32 {
            resj += WEIGHT_D / ((j + 1) * (j + 1)) as f32;
            if WEIGHT_D > wjm {
                wjm = WEIGHT_D;
                jm = j;
            }
        }
        let part = wjm + resj - wjm / ((jm + 1) * (jm + 1)) as f32;
        res = (f64::from(res) + f64::from(part) / 1.64493406685) as f32;
    }
    res / query.terms().len() as f32
}
