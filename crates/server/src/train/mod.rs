//! `thinkus train controller|extract|summary`: trains the learned heads of an engine on
//! labelled files, chooses every setting by cross-validation on those files (k folds, near-
//! identical lines kept in one fold), prints the figures behind each choice, and writes the
//! weight file with the command and the data hash that made it.
//!
//! Texts are embedded with the local multilingual-e5-small engine; embeddings are cached on
//! disk by text hash (`--cache`, outside the repository), so a second run embeds only new
//! lines. Training is deterministic: fixed seeds, one thread per head, sums in a fixed order.

pub mod controller;
pub mod extract;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use thinkus_e5::{E5Model, Role};
use thinkus_learn::cache::{self, EmbeddingCache};
use thinkus_learn::{DataFile, HeadFile, Settings};

use crate::bench::say;
use crate::config::Config;

/// The name the local embedder reports (`LocalEmbedder::name`): the heads read its vectors only.
pub const LOCAL_EMBEDDER: &str = "multilingual-e5-small-q4";

/// What to train.
#[derive(Debug, Subcommand)]
pub enum Train {
    /// The memory controller's need, mode and type heads, on controller lines
    /// (datasets/README.md format).
    Controller(TrainArgs),
    /// The knowledge manager's clause head (memory type or not a memory), on extraction
    /// lines (datasets/README.md format).
    Extract(TrainArgs),
}

/// Where the data comes from and where the weights go.
#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    /// A training file (repeatable), given relative to the repository's root as the weight file
    /// records it.
    #[arg(long = "data", required = true)]
    pub data: Vec<PathBuf>,
    /// The weight file to write (by default the engine's file under crates/learn/heads/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The embedding cache.
    #[arg(long, default_value = "data/embeddings.bin")]
    pub cache: PathBuf,
    /// Cross-validation folds.
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Measure and print, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also measure a head over the text's hashed n-grams (the controller's need; extraction's
    /// clause type), which joins the embedding heads when its landing rule takes it. Off by
    /// default: trained with it, the controller lowered LoCoMo's evidence in context (`bench
    /// tokens`), and extraction's rule did not take it (docs/benchmarks.md).
    #[arg(long)]
    pub ngrams: bool,
}

impl TrainArgs {
    /// The command line that reproduces this run, as the weight file records it.
    pub fn command(&self, engine: &str) -> String {
        let mut parts = vec!["thinkus".to_string(), "train".into(), engine.into()];
        for data in &self.data {
            parts.push("--data".into());
            parts.push(data.display().to_string());
        }
        if self.folds != 5 {
            parts.push(format!("--folds {}", self.folds));
        }
        if self.ngrams {
            parts.push("--ngrams".into());
        }
        parts.join(" ")
    }

    /// The training files' contents and records.
    pub fn read(&self) -> anyhow::Result<Vec<(DataFile, String)>> {
        self.data
            .iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
                let shown = path.display().to_string();
                Ok((DataFile::of(shown.trim_start_matches("./"), text.as_bytes()), text))
            })
            .collect()
    }

    pub fn out_or(&self, engine: &str) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("crates/learn/heads/{engine}.json")))
    }
}

/// Runs a training command.
pub async fn run(train: Train, config: Config) -> anyhow::Result<()> {
    match train {
        Train::Controller(args) => tokio::task::block_in_place(|| controller::run(&args, &config)),
        Train::Extract(args) => tokio::task::block_in_place(|| extract::run(&args, &config)),
    }
}

/// The local engine and the cache in front of it.
pub struct Embeddings {
    model: E5Model,
    cache: EmbeddingCache,
}

impl Embeddings {
    pub fn open(config: &Config, cache_path: &Path) -> anyhow::Result<Self> {
        anyhow::ensure!(
            config.embedder.uri.starts_with("local://"),
            "embedder.uri: the heads are trained on the local engine (local://), not {}",
            config.embedder.uri
        );
        let path = thinkus_backends::embed::local::LocalEmbedder::resolve_path(
            &config.embedder.uri,
            &config.server.models_dir,
        );
        let model = E5Model::load(&path).with_context(|| "run `make models` to fetch multilingual-e5-small")?;
        let cache = EmbeddingCache::open(cache_path, model.dim())
            .with_context(|| format!("embedding cache {}", cache_path.display()))?;
        Ok(Self { model, cache })
    }

    pub fn dim(&self) -> usize {
        self.model.dim()
    }

    /// One vector per text, from the cache or the engine (in batches, saved as they come).
    pub fn embed(&mut self, texts: &[String], role: Role) -> anyhow::Result<Vec<Vec<f32>>> {
        let prefix = prefix_name(role);
        let keys: Vec<cache::Key> = texts.iter().map(|t| cache::key(LOCAL_EMBEDDER, prefix, t)).collect();
        let mut seen = std::collections::HashSet::new();
        let missing: Vec<usize> = (0..texts.len())
            .filter(|i| self.cache.get(&keys[*i]).is_none() && seen.insert(keys[*i]))
            .collect();
        if !missing.is_empty() {
            say(format!(
                "embedding {} texts as {prefix} (cache has {})",
                missing.len(),
                self.cache.len()
            ));
        }
        let started = std::time::Instant::now();
        for (n, part) in missing.chunks(64).enumerate() {
            let refs: Vec<&str> = part.iter().map(|i| texts[*i].as_str()).collect();
            let vectors = self.model.embed_batch(&refs, role)?;
            for (i, v) in part.iter().zip(vectors) {
                self.cache.insert(keys[*i], v);
            }
            if n % 10 == 9 {
                self.cache.save()?;
                say(format!(
                    "  {} of {} in {:.0}s",
                    ((n + 1) * 64).min(missing.len()),
                    missing.len(),
                    started.elapsed().as_secs_f64()
                ));
            }
        }
        self.cache.save()?;
        Ok(keys
            .iter()
            .map(|k| self.cache.get(k).cloned().unwrap_or_default())
            .collect())
    }
}

pub fn prefix_name(role: Role) -> &'static str {
    match role {
        Role::Query => "query",
        Role::Passage => "passage",
    }
}

/// Predictions for every sample from the model trained without its fold: `fit` gets the
/// training and the test indices of one fold and answers one row per test index. Folds run on
/// two threads; each fit is single-threaded, so the result does not depend on the scheduling.
pub fn out_of_fold<F>(folds: &[usize], k: usize, fit: F) -> Vec<Vec<f32>>
where
    F: Fn(&[usize], &[usize]) -> Vec<Vec<f32>> + Sync,
{
    let parts: Vec<(Vec<usize>, Vec<usize>)> = (0..k)
        .map(|f| {
            let train = (0..folds.len()).filter(|i| folds[*i] != f).collect();
            let test = (0..folds.len()).filter(|i| folds[*i] == f).collect();
            (train, test)
        })
        .collect();
    let results: Vec<Vec<Vec<f32>>> = std::thread::scope(|scope| {
        let fit = &fit;
        let halves: Vec<_> = [0usize, 1]
            .into_iter()
            .map(|half| {
                let parts = &parts;
                scope.spawn(move || {
                    parts
                        .iter()
                        .enumerate()
                        .filter(|(f, _)| f % 2 == half)
                        .map(|(f, (train, test))| (f, fit(train, test)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(usize, Vec<Vec<f32>>)> = halves
            .into_iter()
            .flat_map(|h| h.join().expect("a fold's training does not panic"))
            .collect();
        all.sort_by_key(|(f, _)| *f);
        all.into_iter().map(|(_, r)| r).collect()
    });
    let mut out = vec![Vec::new(); folds.len()];
    for ((_, test), predictions) in parts.iter().zip(results) {
        for (i, p) in test.iter().zip(predictions) {
            out[*i] = p;
        }
    }
    out
}

/// A head's model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    pub hidden: usize,
    pub l2: f32,
}

pub const MODELS: [Model; 3] = [
    Model { hidden: 0, l2: 0.03 },
    Model { hidden: 32, l2: 0.01 },
    Model { hidden: 64, l2: 0.01 },
];

impl Model {
    pub fn settings(self) -> Settings {
        Settings {
            hidden: self.hidden,
            l2: self.l2,
            epochs: if self.hidden == 0 { 40 } else { 30 },
            ..Settings::default()
        }
    }

    pub fn name(self) -> String {
        if self.hidden == 0 {
            format!("linear l2={}", self.l2)
        } else {
            format!("mlp{} l2={}", self.hidden, self.l2)
        }
    }
}

/// Writes a weight file (or says it would not, on a dry run).
pub fn write(file: &HeadFile, path: &Path, dry_run: bool) -> anyhow::Result<()> {
    if dry_run {
        say(format!("dry run: {} not written", path.display()));
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = file.to_json();
    std::fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    say(format!("wrote {} ({} bytes)", path.display(), text.len()));
    Ok(())
}

/// The mean of the paired differences `a - b` over the folds and its standard error.
pub fn paired_difference(a: &[f64], b: &[f64]) -> (f64, f64) {
    let differences: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let n = differences.len().max(1) as f64;
    let mean = differences.iter().sum::<f64>() / n;
    let variance = differences.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, (variance / n).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(ngrams: bool, folds: usize) -> TrainArgs {
        TrainArgs {
            data: vec![PathBuf::from("datasets/a.jsonl"), PathBuf::from("datasets/b.jsonl")],
            out: Some(PathBuf::from("/tmp/x.json")),
            cache: PathBuf::from("data/embeddings.bin"),
            folds,
            dry_run: true,
            ngrams,
        }
    }

    /// The recorded command reproduces the run: every option that changes the weights is in
    /// it, the ones that do not (where to write, the cache, a dry run) are not.
    #[test]
    fn the_recorded_command_names_what_changes_the_weights() {
        assert_eq!(
            args(false, 5).command("controller"),
            "thinkus train controller --data datasets/a.jsonl --data datasets/b.jsonl"
        );
        assert_eq!(
            args(true, 4).command("controller"),
            "thinkus train controller --data datasets/a.jsonl --data datasets/b.jsonl --folds 4 --ngrams"
        );
    }
}
