//! Semantic search (docs/design.md, "Recall"): messages and queries as embedding vectors, the
//! search over a conversation's vectors, and its fusion with the lexical ranking. One procedure
//! for both stores, so they find the same messages in the same order:
//!
//! 1. a message's searchable text is cut into [`chunks`], each embedded as a passage and stored
//!    as a [`PassageVector`]: unit length, quantized to one signed byte per dimension, with the
//!    sign bits as a [`Code`];
//! 2. a query's vector is compared with every code of the conversation by Hamming distance
//!    (a bit per dimension: 48 bytes for 384 dimensions, so a scan of 100,000 chunks is fast and
//!    a replica can keep them in memory); the [`SHORTLIST`] nearest chunks are kept
//!    ([`shortlist`]). The bits are the signs of the vector *less the model's mean vector*
//!    ([`mean_of`] a fixed set of texts): a model's vectors share a large common part (e5:
//!    cosine 0.79 between unrelated texts), which makes raw signs nearly alike for every text
//!    (measured on the development set: 79% of the exact top 20 in the shortlist raw, 97%
//!    centred);
//! 3. those are rescored by the dot product of the query with their quantized vectors, each
//!    message by its best chunk ([`semantic_ranking`]), the [`SEMANTIC_HITS`] best kept;
//! 4. [`fuse`] merges that list with the lexical one by reciprocal rank.

use std::cmp::Reverse;

use crate::domain::ids::Sequence;

/// Bytes of searchable text one chunk holds at most (about 300 tokens of prose, within what
/// small embedding models read, e.g. 512 tokens for e5).
pub const CHUNK_BYTES: usize = 1_200;
/// Chunks of one message at most: its first 9.6 KB are what its vectors are about.
pub const MAX_CHUNKS: usize = 8;
/// Dimensions a vector may have at most.
pub const MAX_DIMENSIONS: usize = 4_096;
/// Chunks kept by the Hamming scan for rescoring.
pub const SHORTLIST: usize = 200;
/// Messages the semantic ranking contributes to the fusion.
pub const SEMANTIC_HITS: usize = 40;
/// Reciprocal rank fusion's constant: 10, so that the first places of either list count
/// (on the development set 10 found the evidence in the top 5 for 7 points more questions
/// than the usual 60, which flattens both lists; docs/benchmarks.md, "Recall II").
const FUSION_K: f64 = 10.0;

/// The pieces of `text` embedded for it: at most [`MAX_CHUNKS`] of at most [`CHUNK_BYTES`]
/// each, cut at white space where there is some, empty ones left out.
pub fn chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() && out.len() < MAX_CHUNKS {
        let cut = super::cut_at_char(rest, CHUNK_BYTES);
        let end = match cut.len() < rest.len() {
            true => cut
                .rfind(char::is_whitespace)
                .filter(|&i| i > 0)
                .unwrap_or(cut.len()),
            false => cut.len(),
        };
        let (chunk, tail) = rest.split_at(end);
        if !chunk.trim().is_empty() {
            out.push(chunk.trim());
        }
        rest = tail.trim_start();
    }
    out
}

/// The sign bits of a vector, 64 dimensions a word.
pub type Code = Vec<u64>;

fn code_of(values: impl ExactSizeIterator<Item = bool>) -> Code {
    let mut code = vec![0u64; values.len().div_ceil(64)];
    for (i, positive) in values.enumerate() {
        if positive {
            code[i / 64] |= 1 << (i % 64);
        }
    }
    code
}

/// Scales `vector` to unit length; `None` for an empty, zero or non-finite one.
fn unit(vector: &[f32]) -> Option<Vec<f32>> {
    if vector.is_empty() || vector.len() > MAX_DIMENSIONS || vector.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let norm = vector
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    (norm > 0.0).then(|| vector.iter().map(|&x| (f64::from(x) / norm) as f32).collect())
}

/// A chunk's vector as stored: unit length, quantized to a signed byte per dimension with one
/// scale.
#[derive(Debug, Clone, PartialEq)]
pub struct PassageVector {
    scale: f32,
    values: Vec<i8>,
}

impl PassageVector {
    /// `vector` (as the model returned it) quantized; `None` for an empty, zero or non-finite
    /// vector.
    pub fn quantize(vector: &[f32]) -> Option<Self> {
        let unit = unit(vector)?;
        let largest = unit.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = largest / 127.0;
        let values = unit
            .iter()
            .map(|&x| (x / scale).round().clamp(-127.0, 127.0) as i8)
            .collect();
        Some(Self { scale, values })
    }

    /// Its dimensions.
    pub fn dimensions(&self) -> usize {
        self.values.len()
    }

    /// Its scale and quantized values, as [`Self::from_parts`] takes them.
    pub fn parts(&self) -> (f32, &[i8]) {
        (self.scale, &self.values)
    }

    /// The vector of `scale` and `values` (from [`Self::parts`]).
    pub fn from_parts(scale: f32, values: &[i8]) -> Self {
        Self {
            scale,
            values: values.to_vec(),
        }
    }

    /// As stored: the scale (4 bytes, little-endian), then a byte per dimension.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(4 + self.values.len());
        bytes.extend_from_slice(&self.scale.to_le_bytes());
        bytes.extend(self.values.iter().map(|&v| v as u8));
        bytes
    }

    /// What [`Self::to_bytes`] wrote; `None` for anything else.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (scale, values) = bytes.split_first_chunk::<4>()?;
        let scale = f32::from_le_bytes(*scale);
        (scale.is_finite() && !values.is_empty()).then(|| Self {
            scale,
            values: values.iter().map(|&v| v as i8).collect(),
        })
    }
}

/// [`Code`] as stored: its words little-endian.
pub fn code_to_bytes(code: &[u64]) -> Vec<u8> {
    code.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// What [`code_to_bytes`] wrote (a partial last word is read as zeros).
pub fn code_from_bytes(bytes: &[u8]) -> Code {
    bytes
        .chunks(8)
        .map(|c| {
            let mut word = [0u8; 8];
            word[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(word)
        })
        .collect()
}

/// The mean of `vectors` each scaled to unit length (those that cannot be are left out), in
/// order; `None` without any, or when their dimensions differ.
pub fn mean_of(vectors: &[Vec<f32>]) -> Option<Vec<f32>> {
    let units: Vec<Vec<f32>> = vectors.iter().filter_map(|v| unit(v)).collect();
    let dimensions = units.first()?.len();
    if units.iter().any(|u| u.len() != dimensions) {
        return None;
    }
    let mut sum = vec![0f64; dimensions];
    for u in &units {
        for (s, &x) in sum.iter_mut().zip(u) {
            *s += f64::from(x);
        }
    }
    Some(sum.iter().map(|s| (s / units.len() as f64) as f32).collect())
}

/// The sign bits of `vector` (as the model returned it, scaled to unit length) less `mean`
/// (when it has the vector's dimensions); `None` for an empty, zero or non-finite vector.
pub fn centred_code(vector: &[f32], mean: Option<&[f32]>) -> Option<Code> {
    let values = unit(vector)?;
    let mean = mean.filter(|m| m.len() == values.len());
    Some(code_of(values.iter().enumerate().map(|(i, &v)| {
        let centre = mean.map_or(0.0, |m| m[i]);
        v - centre > 0.0
    })))
}

/// A query's vector: unit length, with its sign bits (less the model's mean).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryVector {
    values: Vec<f32>,
    code: Code,
}

impl QueryVector {
    /// `vector` (as the model returned it), its bits taken around `mean`; `None` for an
    /// empty, zero or non-finite vector.
    pub fn new(vector: &[f32], mean: Option<&[f32]>) -> Option<Self> {
        let values = unit(vector)?;
        let code = centred_code(vector, mean)?;
        Some(Self { values, code })
    }

    /// Its dimensions.
    pub fn dimensions(&self) -> usize {
        self.values.len()
    }

    /// Bits in which `code` differs from the query's sign bits (all of them past a shorter
    /// code).
    pub fn distance(&self, code: &[u64]) -> u32 {
        if code.len() == self.code.len() {
            return self
                .code
                .iter()
                .zip(code)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
        }
        let mut differing = 0;
        for (i, word) in self.code.iter().enumerate() {
            differing += match code.get(i) {
                Some(other) => (word ^ other).count_ones(),
                None => 64,
            };
        }
        differing
    }

    /// The cosine of the query and `passage` (as quantized); 0 when their dimensions differ.
    pub fn similarity(&self, passage: &PassageVector) -> f32 {
        if passage.values.len() != self.values.len() {
            return 0.0;
        }
        let dot: f64 = self
            .values
            .iter()
            .zip(&passage.values)
            .map(|(&q, &p)| f64::from(q) * f64::from(p))
            .sum();
        (dot * f64::from(passage.scale)) as f32
    }
}

/// One chunk's code, as a store scans them.
#[derive(Debug, Clone, Copy)]
pub struct ChunkCode<'a> {
    pub sequence: Sequence,
    pub chunk: u16,
    pub code: &'a [u64],
}

/// The [`SHORTLIST`] chunks nearest to `query` by Hamming distance (ties: newer message
/// first, then lower chunk), as `(sequence, chunk)`.
pub fn shortlist<'a>(
    query: &QueryVector,
    codes: impl Iterator<Item = ChunkCode<'a>>,
) -> Vec<(Sequence, u16)> {
    let mut heap = std::collections::BinaryHeap::with_capacity(SHORTLIST + 1);
    // The distance of the worst kept once the heap is full: most codes are farther.
    let mut worst = u32::MAX;
    for c in codes {
        let distance = query.distance(c.code);
        if distance > worst {
            continue;
        }
        let key = (distance, Reverse(c.sequence), c.chunk);
        if heap.len() < SHORTLIST {
            heap.push(key);
        } else if heap.peek().is_some_and(|top| key < *top) {
            heap.pop();
            heap.push(key);
        }
        if heap.len() == SHORTLIST {
            worst = heap.peek().map_or(u32::MAX, |top| top.0);
        }
    }
    let mut nearest = heap.into_vec();
    nearest.sort_unstable();
    nearest.into_iter().map(|(_, Reverse(s), c)| (s, c)).collect()
}

/// The messages of the rescored chunks (sequence, chunk, vector), best first by their best
/// chunk's cosine (ties: newer first), at most [`SEMANTIC_HITS`], each with that chunk: where
/// an excerpt of the message should be when no query word is in it.
pub fn semantic_ranking(
    query: &QueryVector,
    chunks: impl Iterator<Item = (Sequence, u16, PassageVector)>,
) -> Vec<(Sequence, u16)> {
    let mut best: std::collections::HashMap<Sequence, (f32, u16)> = Default::default();
    for (sequence, chunk, vector) in chunks {
        let similarity = query.similarity(&vector);
        let entry = best.entry(sequence).or_insert((f32::MIN, chunk));
        if similarity > entry.0 {
            *entry = (similarity, chunk);
        }
    }
    let mut ranked: Vec<(f32, Sequence, u16)> = best.into_iter().map(|(s, (v, c))| (v, s, c)).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    ranked.truncate(SEMANTIC_HITS);
    ranked.into_iter().map(|(_, s, c)| (s, c)).collect()
}

/// How much the fusion trusts the lexical list, from its best hit's relevance
/// ([`super::Weights::relevance`]): fully once the best hit matches half of the query's weight
/// or more, down to a quarter when it matches only words the conversation says all the time. A
/// lexical list whose best hit shares only a name with the question is filler, and must not
/// pull the semantic list's finds down (docs/design.md, "Recall").
pub fn lexical_trust(best_relevance: f32) -> f64 {
    (f64::from(best_relevance) / 0.5).clamp(0.25, 1.0)
}

/// The lexical ranking (best first, with BM25 scores) and the semantic one fused by reciprocal
/// rank: each message scores `1 / (10 + rank)` in each list that holds it (ranks from 1), the
/// lexical list's places weighed by `trust` ([`lexical_trust`]), summed. Best first; ties newer
/// first.
pub fn fuse(lexical: &[(Sequence, f32)], semantic: &[(Sequence, u16)], trust: f64) -> Vec<(Sequence, f32)> {
    let mut scores: std::collections::HashMap<Sequence, f64> = Default::default();
    for (rank, (sequence, _)) in lexical.iter().enumerate() {
        *scores.entry(*sequence).or_default() += trust / (FUSION_K + rank as f64 + 1.0);
    }
    for (rank, (sequence, _)) in semantic.iter().enumerate() {
        *scores.entry(*sequence).or_default() += 1.0 / (FUSION_K + rank as f64 + 1.0);
    }
    let mut fused: Vec<(Sequence, f32)> = scores.into_iter().map(|(s, v)| (s, v as f32)).collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(n: u64) -> Sequence {
        Sequence::from_stored(n as i64)
    }

    #[test]
    fn chunks_cut_at_white_space_and_stop_at_the_cap() {
        assert!(chunks("   ").is_empty());
        assert_eq!(chunks("a short message"), vec!["a short message"]);
        let long = "word ".repeat(1000);
        let pieces = chunks(&long);
        assert_eq!(pieces.len(), 5);
        assert!(
            pieces
                .iter()
                .all(|p| p.len() <= CHUNK_BYTES && p.ends_with("word"))
        );
        let huge = "x".repeat(CHUNK_BYTES * 20);
        assert_eq!(chunks(&huge).len(), MAX_CHUNKS);
        let multibyte = "é".repeat(CHUNK_BYTES);
        assert!(chunks(&multibyte).iter().all(|p| p.len() <= CHUNK_BYTES));
    }

    #[test]
    fn quantized_vectors_keep_their_cosine_and_round_trip() {
        let a = [0.3f32, -0.2, 0.9, 0.1, -0.5];
        let b = [0.25f32, -0.1, 0.8, 0.3, -0.4];
        let passage = PassageVector::quantize(&b).unwrap();
        let query = QueryVector::new(&a, None).unwrap();
        let exact = {
            let (ua, ub) = (unit(&a).unwrap(), unit(&b).unwrap());
            ua.iter().zip(&ub).map(|(x, y)| x * y).sum::<f32>()
        };
        assert!((query.similarity(&passage) - exact).abs() < 0.01);
        assert_eq!(
            PassageVector::from_bytes(&passage.to_bytes()),
            Some(passage.clone())
        );
        let code = centred_code(&b, None).unwrap();
        assert_eq!(code_from_bytes(&code_to_bytes(&code)), code);
        assert_eq!(query.distance(&code), 0, "same signs");
        assert!(PassageVector::quantize(&[0.0, 0.0]).is_none());
        assert!(QueryVector::new(&[f32::NAN], None).is_none());
        assert!(PassageVector::from_bytes(&[1, 2]).is_none());
        // Other dimensions never match.
        assert_eq!(
            query.similarity(&PassageVector::quantize(&[1.0, 2.0]).unwrap()),
            0.0
        );
    }

    #[test]
    fn codes_are_taken_around_the_mean() {
        // Two texts that share a large common part: raw signs alike, centred signs apart.
        let common = [1.0f32, 1.0, 1.0, 1.0];
        let a = [1.2f32, 0.8, 1.1, 0.9];
        let b = [0.8f32, 1.2, 0.9, 1.1];
        assert_eq!(centred_code(&a, None), centred_code(&b, None));
        let mean = mean_of(&[a.to_vec(), b.to_vec(), common.to_vec()]).unwrap();
        let (ca, cb) = (
            centred_code(&a, Some(&mean)).unwrap(),
            centred_code(&b, Some(&mean)).unwrap(),
        );
        assert_ne!(ca, cb);
        let query = QueryVector::new(&[1.3, 0.7, 1.2, 0.8], Some(&mean)).unwrap();
        assert!(query.distance(&ca) < query.distance(&cb));
        // A mean of other dimensions is not used.
        assert_eq!(centred_code(&a, Some(&[0.5, 0.5])), centred_code(&a, None));
        assert!(mean_of(&[vec![1.0], vec![1.0, 2.0]]).is_none());
    }

    #[test]
    fn the_shortlist_and_ranking_prefer_the_nearest_and_fusion_adds_ranks() {
        let query = QueryVector::new(&[1.0, 1.0, 1.0, 1.0], None).unwrap();
        let near = PassageVector::quantize(&[1.0, 1.0, 1.0, 0.9]).unwrap();
        let far = PassageVector::quantize(&[-1.0, -1.0, 1.0, -1.0]).unwrap();
        let near_code = centred_code(&[1.0, 1.0, 1.0, 0.9], None).unwrap();
        let far_code = centred_code(&[-1.0, -1.0, 1.0, -1.0], None).unwrap();
        let codes = [
            ChunkCode {
                sequence: seq(1),
                chunk: 0,
                code: &far_code,
            },
            ChunkCode {
                sequence: seq(2),
                chunk: 0,
                code: &near_code,
            },
        ];
        assert_eq!(
            shortlist(&query, codes.into_iter()),
            vec![(seq(2), 0), (seq(1), 0)]
        );
        let ranked = semantic_ranking(
            &query,
            [
                (seq(1), 0, far.clone()),
                (seq(2), 0, near.clone()),
                (seq(1), 3, near),
            ]
            .into_iter(),
        );
        assert_eq!(
            ranked,
            vec![(seq(2), 0), (seq(1), 3)],
            "a message ranks by its best chunk, ties newer first"
        );
        let fused = fuse(&[(seq(5), 3.0), (seq(1), 2.0)], &[(seq(1), 0), (seq(9), 0)], 1.0);
        assert_eq!(fused[0].0, seq(1), "in both lists");
        assert_eq!(fused[1].0, seq(5), "a first place before a second");
        assert_eq!(fused[2].0, seq(9));
    }
}
