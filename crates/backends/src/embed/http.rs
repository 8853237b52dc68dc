//! An OpenAI-compatible embeddings endpoint (`POST {base}/embeddings`).
//!
//! Requests go out concurrently, at most `embedder.max_concurrent_requests` at once per
//! process; passages (writes, background learning) may hold only three quarters of them
//! (all but one when there are fewer than four), so a live query always finds a free slot
//! unless queries alone fill them. The batches of one `embed_passages` call go out together.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use thinkus_common::config::EmbedderConfig;
use tokio::sync::Semaphore;

use super::{EmbedError, Embedder, normalize};

/// Embeddings over HTTP.
#[derive(Debug, Clone)]
pub struct HttpEmbedder {
    client: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    dim: usize,
    batch_size: usize,
    query_input_type: String,
    passage_input_type: String,
    /// Requests in flight, queries and passages.
    requests: Arc<Semaphore>,
    /// Passage requests in flight: fewer than `requests`, the rest kept for queries.
    passage_requests: Arc<Semaphore>,
}

/// How many of `total` concurrent requests passages may hold.
pub fn passage_share(total: usize) -> usize {
    match total {
        0 | 1 => 1,
        2..=3 => total - 1,
        _ => total - total / 4,
    }
}

impl HttpEmbedder {
    /// `config.uri` is the API base (`http://host:8000/v1`); `config.dim` is required.
    pub fn from_config(config: &EmbedderConfig) -> Result<Self, EmbedError> {
        let dim = config
            .dim
            .filter(|d| *d > 0)
            .ok_or_else(|| EmbedError::Config("embedder.dim is required for an HTTP embedder".into()))?;
        let api_key = match &config.api_key_env {
            Some(name) if !name.is_empty() => Some(
                std::env::var(name)
                    .map_err(|_| EmbedError::Config(format!("embedder.api_key_env: the variable {name} is not set")))?,
            ),
            _ => None,
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms.max(1)))
            .build()
            .map_err(|err| EmbedError::Config(err.to_string()))?;
        Ok(Self {
            client,
            endpoint: format!("{}/embeddings", config.uri.trim_end_matches('/')),
            model: config.model.clone(),
            api_key,
            dim,
            batch_size: config.batch_size.max(1),
            query_input_type: config.query_input_type.clone(),
            passage_input_type: config.passage_input_type.clone(),
            requests: Arc::new(Semaphore::new(config.max_concurrent_requests.max(1))),
            passage_requests: Arc::new(Semaphore::new(passage_share(config.max_concurrent_requests))),
        })
    }

    async fn request(&self, texts: &[String], input_type: &str) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = json!({
            "model": self.model,
            "input": texts,
            "encoding_format": "float",
        });
        if !input_type.is_empty() {
            body["input_type"] = json!(input_type);
        }
        let mut builder = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(|err| {
            if err.is_timeout() {
                EmbedError::Timeout
            } else {
                EmbedError::Unavailable(err.to_string())
            }
        })?;
        let status = response.status();
        if !status.is_success() {
            let text: String = response.text().await.unwrap_or_default().chars().take(300).collect();
            return Err(if status.is_server_error() {
                EmbedError::Unavailable(format!("{status}: {text}"))
            } else {
                EmbedError::BadResponse(format!("{status}: {text}"))
            });
        }
        let value: Value = response
            .json()
            .await
            .map_err(|err| EmbedError::BadResponse(format!("not JSON: {err}")))?;
        let data = value["data"]
            .as_array()
            .ok_or_else(|| EmbedError::BadResponse("no data array".into()))?;
        if data.len() != texts.len() {
            return Err(EmbedError::BadResponse(format!(
                "{} embeddings for {} inputs",
                data.len(),
                texts.len()
            )));
        }
        let mut out = vec![Vec::new(); texts.len()];
        for (position, item) in data.iter().enumerate() {
            let index = item["index"].as_u64().map(|i| i as usize).unwrap_or(position);
            let vector: Vec<f32> = item["embedding"]
                .as_array()
                .ok_or_else(|| EmbedError::BadResponse("embedding is not an array of numbers".into()))?
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| EmbedError::BadResponse("embedding is not an array of numbers".into()))?;
            if vector.len() != self.dim {
                return Err(EmbedError::BadResponse(format!(
                    "the endpoint returned {} dimensions, embedder.dim is {}",
                    vector.len(),
                    self.dim
                )));
            }
            let slot = out
                .get_mut(index)
                .ok_or_else(|| EmbedError::BadResponse(format!("index {index} out of range")))?;
            *slot = vector;
        }
        for vector in &mut out {
            normalize(vector);
        }
        Ok(out)
    }
}

#[async_trait]
impl Embedder for HttpEmbedder {
    fn name(&self) -> String {
        format!("http:{}", self.model)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let _slot = self.requests.acquire().await.map_err(|_| closed())?;
        let mut vectors = self.request(&[text.to_string()], &self.query_input_type).await?;
        vectors
            .pop()
            .ok_or_else(|| EmbedError::BadResponse("no embedding".into()))
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let batches = texts.chunks(self.batch_size).map(|batch| async move {
            let _passage_slot = self.passage_requests.acquire().await.map_err(|_| closed())?;
            let _slot = self.requests.acquire().await.map_err(|_| closed())?;
            self.request(batch, &self.passage_input_type).await
        });
        // In order, whatever order they finish in.
        let answers = futures::future::try_join_all(batches).await?;
        Ok(answers.into_iter().flatten().collect())
    }
}

fn closed() -> EmbedError {
    EmbedError::Unavailable("the HTTP embedder is shutting down".into())
}

#[cfg(test)]
mod tests {
    use super::passage_share;

    #[test]
    fn passages_leave_room_for_queries() {
        assert_eq!(passage_share(1), 1, "one slot is shared");
        assert_eq!(passage_share(2), 1);
        assert_eq!(passage_share(3), 2);
        assert_eq!(passage_share(8), 6);
        assert_eq!(passage_share(16), 12);
    }
}
