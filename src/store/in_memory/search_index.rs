//! A conversation's inverted index in memory: each message's search document and, per term,
//! the messages that hold it. Kept in step with the log by appends, redactions, rewinds and
//! forks (`state`); read by `search`.

use std::collections::HashMap;

use crate::domain::search::{
    SearchDocument,
    vectors::{Code, PassageVector},
};

/// A conversation's search documents (message with sequence `n` at index `n - 1`) and, per
/// term, the indexes of the messages that have it, ascending; and the vectors of their chunks
/// (semantic search), up to the embedding watermark.
#[derive(Debug, Clone, Default)]
pub(super) struct SearchIndex {
    documents: Vec<SearchDocument>,
    postings: HashMap<Box<str>, Vec<u32>>,
    /// Per message, its chunks' vectors with their sign bits (empty until embedded, and for
    /// what search cannot find).
    vectors: Vec<Vec<(u16, Code, PassageVector)>>,
    /// Messages whose vectors are stored (the first ones).
    embedded: usize,
}

impl SearchIndex {
    /// Indexes the next message's document.
    pub(super) fn push(&mut self, document: SearchDocument) {
        let index = self.documents.len() as u32;
        for term in document.terms() {
            self.postings.entry(term.into()).or_default().push(index);
        }
        self.documents.push(document);
        self.vectors.push(Vec::new());
    }

    /// Messages whose vectors are stored: the embedding watermark.
    pub(super) fn embedded(&self) -> usize {
        self.embedded
    }

    /// Stores a chunk's vector of the message at `index`, with its sign bits.
    pub(super) fn add_vector(&mut self, index: usize, chunk: u16, vector: PassageVector, code: Code) {
        if let Some(chunks) = self.vectors.get_mut(index) {
            chunks.retain(|(c, _, _)| *c != chunk);
            chunks.push((chunk, code, vector));
            chunks.sort_by_key(|(c, _, _)| *c);
        }
    }

    /// Moves the embedding watermark to `embedded` messages.
    pub(super) fn set_embedded(&mut self, embedded: usize) {
        self.embedded = embedded.min(self.documents.len());
    }

    /// The chunks of the message at `index`: chunk number, sign bits, vector.
    pub(super) fn vectors(&self, index: usize) -> &[(u16, Code, PassageVector)] {
        self.vectors.get(index).map_or(&[][..], Vec::as_slice)
    }

    /// Forgets the document at `index` (a redaction), its postings with it.
    pub(super) fn forget(&mut self, index: usize) {
        let Some(document) = self.documents.get_mut(index) else {
            return;
        };
        let document = std::mem::take(document);
        if let Some(vectors) = self.vectors.get_mut(index) {
            vectors.clear();
        }
        for term in document.terms() {
            if let Some(list) = self.postings.get_mut(term)
                && let Ok(at) = list.binary_search(&(index as u32))
            {
                list.remove(at);
                if list.is_empty() {
                    self.postings.remove(term);
                }
            }
        }
    }

    /// Keeps the first `kept` messages' documents (a rewind).
    pub(super) fn truncate(&mut self, kept: usize) {
        for index in kept..self.documents.len() {
            for term in self.documents[index].terms() {
                if let Some(list) = self.postings.get_mut(term) {
                    while list.last().is_some_and(|&i| i as usize >= kept) {
                        list.pop();
                    }
                }
            }
        }
        self.postings.retain(|_, list| !list.is_empty());
        self.documents.truncate(kept);
        self.vectors.truncate(kept);
        self.embedded = self.embedded.min(kept);
    }

    /// The indexes of the messages that hold `term`, ascending.
    pub(super) fn postings(&self, term: &str) -> &[u32] {
        self.postings.get(term).map_or(&[][..], Vec::as_slice)
    }

    /// The document of the message at `index` (sequence `index + 1`).
    pub(super) fn document(&self, index: usize) -> &SearchDocument {
        &self.documents[index]
    }

    /// The index of the first `kept` messages (a fork).
    pub(super) fn prefix(&self, kept: usize) -> SearchIndex {
        let mut index = SearchIndex::default();
        for document in self.documents.iter().take(kept) {
            index.push(document.clone());
        }
        index.vectors = self.vectors.iter().take(kept).cloned().collect();
        index.embedded = self.embedded.min(kept);
        index
    }
}
