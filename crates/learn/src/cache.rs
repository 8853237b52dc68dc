//! Embeddings kept on disk by the hash of what was embedded (model, prefix, text), so training
//! runs after the first one embed only new lines. The file lives outside the repository (under
//! `data/`): it is a cache, rebuilt by embedding again.
//!
//! Format: `THKEMB01`, the width as a little-endian u32, then records of a 32-byte key and
//! `width` little-endian f32. Records are appended; a partial last record (an interrupted
//! write) is ignored.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"THKEMB01";

/// The cache key of one embedding.
pub type Key = [u8; 32];

/// An on-disk embedding cache.
#[derive(Debug)]
pub struct EmbeddingCache {
    path: PathBuf,
    width: usize,
    vectors: HashMap<Key, Vec<f32>>,
    fresh: Vec<Key>,
}

/// The key of `text` embedded by `model` with `prefix` ("query", "passage").
pub fn key(model: &str, prefix: &str, text: &str) -> Key {
    let mut hasher = Sha256::new();
    hasher.update(model.as_bytes());
    hasher.update([0]);
    hasher.update(prefix.as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    hasher.finalize().into()
}

impl EmbeddingCache {
    /// Opens (or starts) the cache at `path` for vectors of `width` floats.
    pub fn open(path: &Path, width: usize) -> std::io::Result<Self> {
        let mut cache = Self {
            path: path.to_path_buf(),
            width,
            vectors: HashMap::new(),
            fresh: Vec::new(),
        };
        let mut bytes = Vec::new();
        match std::fs::File::open(path) {
            Ok(mut file) => {
                file.read_to_end(&mut bytes)?;
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(cache),
            Err(err) => return Err(err),
        }
        if bytes.len() < 12 || &bytes[..8] != MAGIC {
            return Err(std::io::Error::other(format!(
                "{} is not an embedding cache",
                path.display()
            )));
        }
        let stored = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        if stored != width {
            return Err(std::io::Error::other(format!(
                "{} holds vectors of {stored} floats, not {width}",
                path.display()
            )));
        }
        let record = 32 + 4 * width;
        for chunk in bytes[12..].chunks_exact(record) {
            let mut k = [0u8; 32];
            k.copy_from_slice(&chunk[..32]);
            let v = chunk[32..]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            cache.vectors.insert(k, v);
        }
        Ok(cache)
    }

    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    pub fn get(&self, key: &Key) -> Option<&Vec<f32>> {
        self.vectors.get(key)
    }

    /// Adds a vector (kept in memory until [`Self::save`]).
    pub fn insert(&mut self, key: Key, vector: Vec<f32>) {
        assert_eq!(vector.len(), self.width, "a vector of the cache's width");
        if self.vectors.insert(key, vector).is_none() {
            self.fresh.push(key);
        }
    }

    /// Appends the vectors added since the last save.
    pub fn save(&mut self) -> std::io::Result<()> {
        if self.fresh.is_empty() {
            return Ok(());
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let new = !self.path.exists();
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        let mut out = Vec::new();
        if new {
            out.extend_from_slice(MAGIC);
            out.extend_from_slice(&(self.width as u32).to_le_bytes());
        }
        for k in self.fresh.drain(..) {
            out.extend_from_slice(&k);
            for v in &self.vectors[&k] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        file.write_all(&out)?;
        file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_survive_a_reopen_and_a_torn_record() {
        let dir = std::env::temp_dir().join(format!("thinkus-learn-cache-{}", std::process::id()));
        let path = dir.join("e.bin");
        let _ = std::fs::remove_file(&path);
        let mut cache = EmbeddingCache::open(&path, 2).unwrap();
        let a = key("m", "query", "hello");
        assert_ne!(a, key("m", "passage", "hello"));
        cache.insert(a, vec![0.5, -1.0]);
        cache.save().unwrap();
        cache.insert(key("m", "query", "two"), vec![1.0, 2.0]);
        cache.save().unwrap();
        // A torn record at the end.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[1, 2, 3])
            .unwrap();
        let reopened = EmbeddingCache::open(&path, 2).unwrap();
        assert_eq!(reopened.len(), 2);
        assert_eq!(reopened.get(&a), Some(&vec![0.5, -1.0]));
        assert!(EmbeddingCache::open(&path, 3).is_err(), "another width");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
