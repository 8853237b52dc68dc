//! Small trained heads over sentence embeddings (multilingual-e5: Chinese and English share
//! one space, so an example in one language teaches the other): the memory controller's need,
//! mode and types, each clause's memory type or "not a memory", a sentence's salience.
//!
//! - [`network`]: a linear or one-hidden-layer network with softmax or sigmoid outputs;
//! - [`ngrams`]: a linear head over a text's hashed character and word n-grams;
//! - [`train`]: deterministic training (fixed seed, one thread, sums in index order);
//! - [`folds`]: cross-validation folds that keep near-identical samples together;
//! - [`file`]: the weight file (format version, embedder and prefix, training command and data
//!   hash, thresholds, the cross-validation figures behind the choices);
//! - [`cache`]: embeddings cached on disk by text hash, for training.

pub mod builtin;
pub mod cache;
pub mod file;
pub(crate) mod floats;
pub mod folds;
pub mod network;
pub mod ngrams;
pub mod rng;
pub mod train;

pub use file::{DataFile, HeadError, HeadFile};
pub use network::{Network, Output};
pub use ngrams::NgramHead;
pub use train::{Settings, Targets};
