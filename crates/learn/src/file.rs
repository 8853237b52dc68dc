//! A weight file: the heads of one engine, the thresholds chosen for them, which embedder and
//! prefix their inputs come from, the command and the data (paths and sha256) that trained
//! them, and the cross-validation figures behind each choice. JSON, with the weights as base64.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::network::Network;
use crate::ngrams::NgramHead;

pub const FORMAT: &str = "thinkus-heads";
pub const VERSION: u32 = 1;

/// Why a weight file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("weight file: {0}")]
    Unreadable(String),
    #[error("weight file: format {0:?} version {1}, expected {FORMAT:?} version {VERSION}")]
    Version(String, u32),
    #[error("weight file: head {0:?} has inconsistent shapes")]
    Shapes(String),
    #[error("weight file: head {0:?} takes {1} inputs, the file says {2}")]
    Width(String, usize, usize),
}

/// One training file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFile {
    /// Relative to the repository's root.
    pub path: String,
    pub sha256: String,
    pub lines: usize,
}

impl DataFile {
    pub fn of(path: &str, bytes: &[u8]) -> Self {
        Self {
            path: path.to_string(),
            sha256: sha256_hex(bytes),
            lines: bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count(),
        }
    }
}

/// The heads of one engine and what made them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadFile {
    pub format: String,
    pub version: u32,
    /// "controller", "extract", "summary".
    pub engine: String,
    /// The embedder whose vectors the heads read (`Embedder::name`).
    pub embedder: String,
    /// The prefix the texts were embedded with: "query" or "passage".
    pub prefix: String,
    /// The embedding's width; a head's inputs are the embedding then its extra features.
    pub dim: usize,
    /// The command that wrote the file.
    pub command: String,
    pub data: Vec<DataFile>,
    /// [`data_hash`] of `data`.
    pub data_sha256: String,
    /// Decision thresholds, by name.
    pub thresholds: BTreeMap<String, f32>,
    /// Choices of how heads and rules combine, by name.
    #[serde(default)]
    pub flags: BTreeMap<String, bool>,
    /// The rule outcomes (signals, families) whose answer stands as the rules give it: the
    /// ones precise enough on the training data.
    #[serde(default)]
    pub kept_rules: Vec<String>,
    /// Settings and cross-validation figures behind each choice (for people; not read).
    pub choices: serde_json::Value,
    pub heads: BTreeMap<String, Network>,
    /// Heads over the text's hashed n-grams rather than its embedding, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ngram_heads: BTreeMap<String, NgramHead>,
}

impl HeadFile {
    pub fn new(engine: &str, embedder: &str, prefix: &str, dim: usize) -> Self {
        Self {
            format: FORMAT.into(),
            version: VERSION,
            engine: engine.into(),
            embedder: embedder.into(),
            prefix: prefix.into(),
            dim,
            command: String::new(),
            data: Vec::new(),
            data_sha256: String::new(),
            thresholds: BTreeMap::new(),
            flags: BTreeMap::new(),
            kept_rules: Vec::new(),
            choices: serde_json::Value::Null,
            heads: BTreeMap::new(),
            ngram_heads: BTreeMap::new(),
        }
    }

    /// Reads and checks a file.
    pub fn parse(text: &str) -> Result<Self, HeadError> {
        let file: HeadFile = serde_json::from_str(text).map_err(|err| HeadError::Unreadable(err.to_string()))?;
        if file.format != FORMAT || file.version != VERSION {
            return Err(HeadError::Version(file.format, file.version));
        }
        for (name, head) in &file.heads {
            if !head.is_consistent() {
                return Err(HeadError::Shapes(name.clone()));
            }
            if head.inputs() < file.dim {
                return Err(HeadError::Width(name.clone(), head.inputs(), file.dim));
            }
        }
        for (name, head) in &file.ngram_heads {
            if !head.is_consistent() {
                return Err(HeadError::Shapes(name.clone()));
            }
        }
        Ok(file)
    }

    /// The file's text (pretty JSON, ending with a newline).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a head file serialises");
        text.push('\n');
        text
    }

    pub fn head(&self, name: &str) -> Option<&Network> {
        self.heads.get(name)
    }

    pub fn ngram_head(&self, name: &str) -> Option<&NgramHead> {
        self.ngram_heads.get(name)
    }

    pub fn threshold(&self, name: &str) -> Option<f32> {
        self.thresholds.get(name).copied()
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.get(name).copied().unwrap_or(false)
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The hash of a set of training files: of one `path<TAB>sha256` line per file, in order.
pub fn data_hash(files: &[DataFile]) -> String {
    let text: String = files.iter().map(|f| format!("{}\t{}\n", f.path, f.sha256)).collect();
    sha256_hex(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{Layer, Output};

    #[test]
    fn a_file_reads_back_and_refuses_other_versions() {
        let mut file = HeadFile::new("controller", "e5", "query", 2);
        file.heads.insert(
            "need".into(),
            Network {
                labels: vec!["yes".into(), "no".into()],
                output: Output::Softmax,
                mean: vec![0.0; 3],
                scale: vec![1.0; 3],
                layers: vec![Layer::zeros(3, 2)],
            },
        );
        file.data = vec![DataFile::of("a.jsonl", b"{}\n{}\n")];
        file.data_sha256 = data_hash(&file.data);
        assert_eq!(file.data[0].lines, 2);
        let text = file.to_json();
        assert_eq!(HeadFile::parse(&text).unwrap(), file);
        assert!(matches!(
            HeadFile::parse(&text.replace("\"version\": 1", "\"version\": 2")),
            Err(HeadError::Version(..))
        ));
        assert!(
            !text.contains("ngram_heads"),
            "a file without n-gram heads is written as before the map existed"
        );
        let mut head = crate::ngrams::train(
            &["a b", "c d"],
            &[0, 1],
            &[1.0, 1.0],
            vec!["yes".into(), "no".into()],
            &crate::ngrams::NgramSettings {
                buckets: 64,
                steps: 5,
                ..Default::default()
            },
        );
        file.ngram_heads.insert("need.ngrams".into(), head.clone());
        assert_eq!(HeadFile::parse(&file.to_json()).unwrap(), file);
        head.idf.pop();
        file.ngram_heads.insert("need.ngrams".into(), head);
        assert!(matches!(HeadFile::parse(&file.to_json()), Err(HeadError::Shapes(..))));
        file.ngram_heads.clear();
        file.dim = 4;
        assert!(matches!(HeadFile::parse(&file.to_json()), Err(HeadError::Width(..))));
    }
}
