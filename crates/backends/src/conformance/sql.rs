//! The conformance suites of the relational store traits (the memory store's, one function per
//! behaviour, is `conformance::memory_store`). Each function takes a fresh store (an empty
//! database) and panics with a message naming the broken behaviour.

use chrono::{DateTime, Duration, SubsecRound, Utc};
use thinkus_common::ids::{IdKind, new_id};
use thinkus_common::model::{
    ArtifactRef, Decision, DecisionConfidence, Memory, MemorySource, MemoryType, Message, Owner, Scope,
};

use crate::filter::MemoryFilter;
use crate::sql::{
    ArtifactRecord, ArtifactStore, IdempotencyRecord, JobRecord, JobStatus, JobStore, MemoryQuery, MemoryStore,
    RetentionReport, RetentionStore, SessionKey, SessionStore, StoreError, SummaryRecord, WriteBatch, sweep_retention,
};

/// Now, at the millisecond precision the store keeps.
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// A memory with sensible defaults for tests.
pub fn memory(owner: &Owner, role: &str, project: Option<&str>, memory_type: MemoryType, content: &str) -> Memory {
    let scope = Scope {
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        role_id: role.into(),
        project_id: project.map(str::to_string),
        session_id: None,
    };
    Memory::new(scope, memory_type, content.into(), MemorySource::UserInput, Utc::now())
}

pub(crate) fn insert(memories: &[Memory]) -> WriteBatch {
    WriteBatch {
        inserts: memories.to_vec(),
        ..Default::default()
    }
}

pub(crate) fn ids(memories: &[Memory]) -> Vec<String> {
    let mut ids: Vec<String> = memories.iter().map(|m| m.id.clone()).collect();
    ids.sort();
    ids
}

fn artifact(owner: &Owner, session: &str, sha: &str, key: &str) -> ArtifactRecord {
    ArtifactRecord {
        id: new_id(IdKind::Artifact),
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        role_id: Some("cto".into()),
        project_id: Some("p1".into()),
        session_id: session.into(),
        tool_call_id: Some("call_1".into()),
        tool_name: Some("read_file".into()),
        mime_type: "text/x-rust".into(),
        size_bytes: 4200,
        sha256: sha.into(),
        blob_key: key.into(),
        path: Some("/src/main.rs".into()),
        line_count: 200,
        kind: "code".into(),
        language: "en".into(),
        compact: "{\"summary\":\"x\"}".into(),
        metadata: "{}".into(),
        created_at: now(),
        expires_at: None,
    }
}

/// Three artifacts of alice (two sessions and projects, one expired, two sharing a blob) and
/// the people who must not see them: bob of her tenant and her twin, the same user id in another
/// tenant.
struct Artifacts {
    alice: Owner,
    bob: Owner,
    twin: Owner,
    key: String,
    first: ArtifactRecord,
    expired: ArtifactRecord,
}

async fn artifacts(store: &dyn ArtifactStore) -> Artifacts {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let tenant = format!("acme-{run}");
    let alice = Owner::new(&tenant, format!("alice-{run}"));
    let bob = Owner::new(&tenant, format!("bob-{run}"));
    let twin = Owner::new(format!("globex-{run}"), alice.user_id.clone());
    let key = format!("users/{}/sha-a", alice.user_id);
    let first = artifact(&alice, "s1", "sha-a", &key);
    let mut second = artifact(&alice, "s2", "sha-a", &key);
    second.created_at = first.created_at + Duration::milliseconds(5);
    second.project_id = Some("p2".into());
    let mut expired = artifact(&alice, "s1", "sha-b", &format!("users/{}/sha-b", alice.user_id));
    expired.expires_at = Some(Utc::now() - Duration::minutes(1));
    expired.created_at = first.created_at + Duration::milliseconds(10);
    for a in [&first, &second, &expired] {
        store.insert_artifact(a).await.expect("insert artifact");
    }
    Artifacts {
        alice,
        bob,
        twin,
        key,
        first,
        expired,
    }
}

/// An artifact reads back whole, by id or by session and content, for its owner only.
pub async fn artifacts_read_back_for_their_owner_only(store: &dyn ArtifactStore) {
    let Artifacts {
        alice,
        bob,
        twin,
        first,
        ..
    } = artifacts(store).await;
    assert_eq!(
        store.get_artifact(&alice, &first.id).await.unwrap(),
        Some(first.clone())
    );
    assert!(
        store.get_artifact(&bob, &first.id).await.unwrap().is_none(),
        "tenant isolation"
    );
    assert_eq!(
        store.find_artifact(&alice, "s1", "sha-a").await.unwrap().map(|a| a.id),
        Some(first.id.clone())
    );
    assert!(store.find_artifact(&alice, "s3", "sha-a").await.unwrap().is_none());
    assert!(store.find_artifact(&bob, "s1", "sha-a").await.unwrap().is_none());
    assert!(store.get_artifact(&twin, &first.id).await.unwrap().is_none());
    assert!(store.find_artifact(&twin, "s1", "sha-a").await.unwrap().is_none());
    assert!(store.list_artifacts(&twin, None, None, 10, 0).await.unwrap().is_empty());
}

/// Listings narrow by session or project, come newest first and page.
pub async fn artifact_listings_filter_order_and_page(store: &dyn ArtifactStore) {
    let Artifacts {
        alice,
        bob,
        first,
        expired,
        ..
    } = artifacts(store).await;
    let session = store.list_artifacts(&alice, Some("s1"), None, 10, 0).await.unwrap();
    assert_eq!(
        session.iter().map(|a| a.id.clone()).collect::<Vec<_>>(),
        vec![expired.id.clone(), first.id.clone()],
        "a session's artifacts, newest first"
    );
    let project = store.list_artifacts(&alice, None, Some("p2"), 10, 0).await.unwrap();
    assert_eq!(project.len(), 1);
    assert_eq!(store.list_artifacts(&alice, None, None, 2, 1).await.unwrap().len(), 2);
    assert!(store.list_artifacts(&bob, None, None, 10, 0).await.unwrap().is_empty());
}

/// The artifacts near a session, in one read: the session's newest and the project's newest,
/// `limit` of each, each once, newest first; the same as the two listings; another project's
/// and another owner's are not among them.
pub async fn artifacts_near_a_session_are_its_own_and_the_projects_newest(store: &dyn ArtifactStore) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let alice = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let bob = Owner::new(&alice.tenant_id, format!("bob-{run}"));
    let start = now();
    let at = |owner: &Owner, session: &str, project: &str, ms: i64| {
        let mut a = artifact(owner, session, &format!("sha-{ms}"), &format!("k-{ms}"));
        a.project_id = Some(project.into());
        a.created_at = start + Duration::milliseconds(ms);
        a
    };
    let own_old = at(&alice, "s", "p", 0);
    let other_old = at(&alice, "s2", "p", 10);
    let other_new = at(&alice, "s3", "p", 20);
    let own_new = at(&alice, "s", "p", 30);
    let elsewhere = at(&alice, "s", "q", 40);
    let bobs = at(&bob, "s", "p", 50);
    for a in [&own_old, &other_old, &other_new, &own_new, &elsewhere, &bobs] {
        store.insert_artifact(a).await.expect("insert artifact");
    }
    let ids = |listed: Vec<ArtifactRecord>| listed.into_iter().map(|a| a.id).collect::<Vec<_>>();
    let near = store.list_artifacts_near(&alice, "s", "p", 2).await.unwrap();
    assert_eq!(
        near.iter().map(|a| a.id.clone()).collect::<Vec<_>>(),
        vec![own_new.id.clone(), other_new.id.clone(), own_old.id.clone()],
        "the session's two newest and the project's two newest, once each, newest first"
    );
    assert_eq!(near[0], own_new, "whole records");
    let mut listed = ids(store.list_artifacts(&alice, Some("s"), Some("p"), 2, 0).await.unwrap());
    for id in ids(store.list_artifacts(&alice, None, Some("p"), 2, 0).await.unwrap()) {
        if !listed.contains(&id) {
            listed.push(id);
        }
    }
    let mut near_ids = ids(near);
    near_ids.sort();
    listed.sort();
    assert_eq!(near_ids, listed, "the two listings");
    assert_eq!(
        ids(store.list_artifacts_near(&bob, "s", "p", 10).await.unwrap()),
        vec![bobs.id.clone()]
    );
    let twin = Owner::new(format!("globex-{run}"), alice.user_id.clone());
    assert!(store.list_artifacts_near(&twin, "s", "p", 10).await.unwrap().is_empty());
}

/// The references to a blob are counted, and expired artifacts are found, per owner when asked.
pub async fn blob_references_and_expired_artifacts_are_found(store: &dyn ArtifactStore) {
    let Artifacts {
        bob,
        twin,
        key,
        first,
        expired,
        ..
    } = artifacts(store).await;
    assert_eq!(store.count_blob_refs(&key).await.unwrap(), 2);
    let expired_now = store.expired_artifacts(Utc::now(), None, 100).await.unwrap();
    assert!(expired_now.iter().any(|a| a.id == expired.id));
    assert!(!expired_now.iter().any(|a| a.id == first.id));
    assert!(
        store
            .expired_artifacts(Utc::now(), Some(&bob), 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .expired_artifacts(Utc::now(), Some(&twin), 100)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Only the owner deletes an artifact, once, and its blob loses one reference.
pub async fn only_the_owner_deletes_an_artifact(store: &dyn ArtifactStore) {
    let Artifacts {
        alice,
        bob,
        twin,
        key,
        first,
        ..
    } = artifacts(store).await;
    assert!(
        store.delete_artifact(&bob, &first.id).await.unwrap().is_none(),
        "bob cannot delete it"
    );
    assert!(
        store.delete_artifact(&twin, &first.id).await.unwrap().is_none(),
        "nor can the same user id in another tenant"
    );
    assert_eq!(
        store.delete_artifact(&alice, &first.id).await.unwrap().map(|a| a.id),
        Some(first.id.clone())
    );
    assert!(
        store.delete_artifact(&alice, &first.id).await.unwrap().is_none(),
        "already gone"
    );
    assert_eq!(store.count_blob_refs(&key).await.unwrap(), 1);
}

fn message(role: &str, content: &str) -> Message {
    Message {
        role: role.into(),
        content: content.into(),
        speaker: None,
        created_at: Utc::now(),
        index: 0,
    }
}

fn summary(key: &SessionKey, end: i32) -> SummaryRecord {
    SummaryRecord {
        id: new_id(IdKind::Summary),
        tenant_id: key.tenant_id.clone(),
        user_id: key.user_id.clone(),
        role_id: key.role_id.clone(),
        project_id: key.project_id.clone(),
        session_id: key.session_id.clone(),
        goal: "讨论课程平台的技术方案".into(),
        constraints: vec!["预算$500".into()],
        decisions: vec![Decision {
            what: "选择Next.js + MongoDB".into(),
            why: "用户熟悉React".into(),
            who: "David (CTO)".into(),
            confidence: DecisionConfidence::High,
        }],
        progress: vec!["完成需求分析".into()],
        artifacts: vec![ArtifactRef {
            reference: "art_1".into(),
            locator: "/docs/tech-spec.md".into(),
            desc: "技术方案文档".into(),
        }],
        next_actions: vec!["David开始搭建项目骨架".into()],
        risks: vec!["视频版权".into()],
        open_questions: vec!["是否需要多语言？".into()],
        trajectory_start: 0,
        trajectory_end: end,
        language: "zh".into(),
        engine: "rules".into(),
        created_at: Utc::now(),
        updated_at: Utc::now(),
    }
}

/// Asserts that `read` failed with an error naming the table's row and the column.
fn assert_names_the_row<T: std::fmt::Debug>(read: Result<T, StoreError>, row: &str, column: &str) {
    let err = read.expect_err("a corrupt column is an error");
    let message = err.to_string();
    assert!(
        matches!(err, StoreError::Backend(_)) && message.contains(row) && message.contains(column),
        "the error names the row {row} and the column {column}: {message}"
    );
}

/// A JSON column of a memory that no longer parses (a row written by hand, a disk fault) is an
/// error naming the row and the column when the row is read, never an empty list.
pub async fn a_corrupt_memory_json_column_is_an_error_naming_the_row(store: &crate::sql::SqlStore) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let alice = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let mut tagged = memory(&alice, "cto", None, MemoryType::ProjectDecision, "We go with Postgres");
    tagged.tags = vec!["db".into()];
    let refs = memory(&alice, "cto", None, MemoryType::ProjectDecision, "The spec is in art_1");
    store.commit(insert(&[tagged.clone(), refs.clone()])).await.unwrap();
    for (id, column) in [(&tagged.id, "tags"), (&refs.id, "artifact_refs")] {
        store
            .execute_raw(&format!("UPDATE memories SET {column} = '[\"db\"' WHERE id = '{id}'"))
            .await
            .unwrap();
        let err = store
            .get_memory(&alice, id)
            .await
            .expect_err("a corrupt JSON column is an error");
        let message = err.to_string();
        assert!(
            matches!(err, StoreError::Backend(_)) && message.contains(id.as_str()) && message.contains(column),
            "the error names the row and the column: {message}"
        );
        let listed = store
            .list_memories(&MemoryQuery::of(MemoryFilter::any_status(&alice)))
            .await;
        assert!(listed.is_err(), "a listing over the corrupt row fails too: {listed:?}");
        store
            .execute_raw(&format!("UPDATE memories SET {column} = '[]' WHERE id = '{id}'"))
            .await
            .unwrap();
    }
}

/// A JSON column of a session summary that no longer parses is an error naming the row and
/// the column.
pub async fn a_corrupt_summary_json_column_is_an_error_naming_the_row(store: &crate::sql::SqlStore) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let alice = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let key = SessionKey {
        tenant_id: alice.tenant_id.clone(),
        user_id: alice.user_id.clone(),
        session_id: "s1".into(),
        role_id: "cto".into(),
        project_id: None,
    };
    store
        .append_messages(&key, &[message("user", "我们用Postgres")])
        .await
        .unwrap();
    let record = summary(&key, 0);
    store.put_summary(&record, Some(-1)).await.unwrap();
    store
        .execute_raw(&format!(
            "UPDATE session_summaries SET decisions = 'not json' WHERE id = '{}'",
            record.id
        ))
        .await
        .unwrap();
    let err = store
        .get_summary(&alice, "s1")
        .await
        .expect_err("a corrupt JSON column is an error");
    let message = err.to_string();
    assert!(
        message.contains(&record.id) && message.contains("decisions"),
        "the error names the row and the column: {message}"
    );
}

/// A memory, a job and an artifact of an owner of this run, each in its table.
struct Stored {
    alice: Owner,
    memory: Memory,
    job: JobRecord,
    artifact: ArtifactRecord,
}

async fn stored_rows(store: &crate::sql::SqlStore) -> Stored {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let alice = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let memory = memory(&alice, "cto", None, MemoryType::ProjectDecision, "We go with Postgres");
    store.commit(insert(std::slice::from_ref(&memory))).await.unwrap();
    let job = job(&alice, &format!("learn-{run}"), None);
    store.enqueue(&job).await.unwrap();
    let artifact = artifact(&alice, "s1", "sha-a", &format!("users/{}/sha-a", alice.user_id));
    store.insert_artifact(&artifact).await.unwrap();
    Stored {
        alice,
        memory,
        job,
        artifact,
    }
}

/// Writes `assignment` (`column = value`) into the row `id` of `table`, as a hand edit or a disk
/// fault would.
async fn overwrite(store: &crate::sql::SqlStore, table: &str, assignment: &str, id: &str) {
    store
        .execute_raw(&format!("UPDATE {table} SET {assignment} WHERE id = '{id}'"))
        .await
        .unwrap();
}

/// A time column out of the range of a time (milliseconds past year 262143) is an error naming
/// the row and the column, never the epoch.
pub async fn a_time_out_of_range_is_an_error_naming_the_row(store: &crate::sql::SqlStore) {
    let Stored { alice, memory, job, .. } = stored_rows(store).await;
    overwrite(store, "memories", &format!("occurred_at = {}", i64::MAX), &memory.id).await;
    assert_names_the_row(store.get_memory(&alice, &memory.id).await, &memory.id, "occurred_at");
    overwrite(store, "jobs", &format!("run_after = {}", -i64::MAX), &job.id).await;
    assert_names_the_row(store.get_job(&job.id).await, &job.id, "run_after");

    let (key, _) = session_key();
    store
        .append_messages(&key, &[message("user", "我们用Postgres")])
        .await
        .unwrap();
    store
        .execute_raw(&format!(
            "UPDATE session_messages SET created_at = {} WHERE user_id = '{}'",
            i64::MAX,
            key.user_id
        ))
        .await
        .unwrap();
    assert_names_the_row(
        store.get_messages(&key.owner(), "s1", 0, 10).await,
        "s1/0",
        "created_at",
    );
}

/// A count or a size stored negative is an error naming the row and the column, never 0.
pub async fn a_negative_count_is_an_error_naming_the_row(store: &crate::sql::SqlStore) {
    let Stored {
        alice,
        memory,
        job,
        artifact,
        ..
    } = stored_rows(store).await;
    overwrite(store, "memories", "access_count = -1", &memory.id).await;
    assert_names_the_row(store.get_memory(&alice, &memory.id).await, &memory.id, "access_count");
    overwrite(store, "jobs", "attempts = -2", &job.id).await;
    assert_names_the_row(store.get_job(&job.id).await, &job.id, "attempts");
    overwrite(store, "artifacts", "size_bytes = -4200", &artifact.id).await;
    assert_names_the_row(
        store.get_artifact(&alice, &artifact.id).await,
        &artifact.id,
        "size_bytes",
    );
}

/// An enum column holding a name the code does not know is an error naming the row and the
/// column.
pub async fn an_unknown_enum_value_is_an_error_naming_the_row(store: &crate::sql::SqlStore) {
    let Stored { alice, memory, job, .. } = stored_rows(store).await;
    overwrite(store, "memories", "memory_type = 'prophecy'", &memory.id).await;
    assert_names_the_row(store.get_memory(&alice, &memory.id).await, &memory.id, "memory_type");
    overwrite(store, "jobs", "status = 'paused'", &job.id).await;
    assert_names_the_row(store.get_job(&job.id).await, &job.id, "status");
}

/// The counts of an erasure record that no longer parse are an error naming the row and the
/// column when the owner's records are read.
pub async fn a_corrupt_erasure_record_is_an_error_naming_the_row(store: &crate::sql::SqlStore) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let alice = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let id = format!("era_{run}");
    store
        .execute_raw(&format!(
            "INSERT INTO erasures (id, tenant_id, user_id, actor, at, counts) \
             VALUES ('{id}', '{}', '{}', 'dev', {}, '{{\"memories\": 1')",
            alice.tenant_id,
            alice.user_id,
            now().timestamp_millis()
        ))
        .await
        .unwrap();
    assert_names_the_row(store.owner_records(&alice).await, &id, "counts");
}

/// The session s1 of a user of this run in project p1, with its twin (the same user id in
/// another tenant).
fn session_key() -> (SessionKey, SessionKey) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let key = SessionKey {
        tenant_id: format!("acme-{run}"),
        user_id: format!("alice-{run}"),
        session_id: "s1".into(),
        role_id: "cto".into(),
        project_id: Some("p1".into()),
    };
    let twin = SessionKey {
        tenant_id: format!("globex-{run}"),
        ..key.clone()
    };
    (key, twin)
}

/// The session of [`session_key`] with three messages.
async fn session_of_three(store: &dyn SessionStore) -> (SessionKey, SessionKey) {
    let (key, twin) = session_key();
    for content in ["我们用什么技术栈？", "建议Next.js", "预算是$500"] {
        store
            .append_messages(&key, &[message("user", content)])
            .await
            .expect("append a message");
    }
    (key, twin)
}

/// A later session "s2" of the designer in `key`'s project, of one message.
async fn designer_session(store: &dyn SessionStore, key: &SessionKey) -> SessionKey {
    let designer = SessionKey {
        session_id: "s2".into(),
        role_id: "designer".into(),
        ..key.clone()
    };
    store
        .append_messages(&designer, &[message("user", "首页设计")])
        .await
        .unwrap();
    designer
}

/// Appended messages take the next indexes of their session, per owner.
pub async fn messages_take_the_next_indexes_of_their_session(store: &dyn SessionStore) {
    let (key, twin) = session_key();
    let (first, total) = store
        .append_messages(
            &key,
            &[
                message("user", "我们用什么技术栈？"),
                message("assistant", "建议Next.js"),
            ],
        )
        .await
        .unwrap();
    assert_eq!((first, total), (0, 2));
    let (first, total) = store
        .append_messages(&key, &[message("user", "预算是$500")])
        .await
        .unwrap();
    assert_eq!((first, total), (2, 3), "indexes continue");
    let messages = store.get_messages(&key.owner(), "s1", 1, 2).await.unwrap();
    assert_eq!(messages.iter().map(|m| m.index).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(messages[1].content, "预算是$500");
    assert!(
        store
            .get_messages(&Owner::new(key.tenant_id.clone(), "someone-else"), "s1", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The same user id in another tenant has its own session of the same id.
    assert!(store.get_messages(&twin.owner(), "s1", 0, 10).await.unwrap().is_empty());
    assert_eq!(
        store
            .append_messages(&twin, &[message("user", "another person")])
            .await
            .unwrap(),
        (0, 1)
    );
    assert!(matches!(
        store.append_messages(&key, &[]).await,
        Err(StoreError::Invalid(_))
    ));
}

/// A session counts its messages and keeps its project.
pub async fn a_session_counts_its_messages(store: &dyn SessionStore) {
    let (key, _) = session_of_three(store).await;
    let session = store
        .get_session(&key.owner(), "s1")
        .await
        .unwrap()
        .expect("session exists");
    assert_eq!(session.message_count, 3);
    assert_eq!(session.summarized_until, -1);
    assert_eq!(session.project_id.as_deref(), Some("p1"));
}

/// Concurrent appends keep indexes unique and dense.
pub async fn concurrent_appends_keep_indexes_dense(store: &dyn SessionStore) {
    let (key, _) = session_of_three(store).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let content = format!("message {i}");
        let key = &key;
        tasks.push(async move { store.append_messages(key, &[message("user", &content)]).await });
    }
    for result in futures::future::join_all(tasks).await {
        result.expect("concurrent append");
    }
    let all = store.get_messages(&key.owner(), "s1", 0, 100).await.unwrap();
    assert_eq!(all.len(), 11);
    assert!(
        all.iter().enumerate().all(|(i, m)| m.index as usize == i),
        "indexes dense"
    );
}

/// Idle and requested sessions are due for a summary.
pub async fn idle_and_requested_sessions_are_due_for_a_summary(store: &dyn SessionStore) {
    let (key, _) = session_of_three(store).await;
    let due = store
        .sessions_to_summarize(Utc::now() + Duration::seconds(5), 100)
        .await
        .unwrap();
    assert!(due.iter().any(|s| s.user_id == key.user_id), "idle session is due");
    let due = store
        .sessions_to_summarize(Utc::now() - Duration::hours(1), 100)
        .await
        .unwrap();
    assert!(
        !due.iter().any(|s| s.user_id == key.user_id),
        "active session is not due"
    );
    store.flag_session(&key.owner(), "s1", None, Some(true)).await.unwrap();
    let due = store
        .sessions_to_summarize(Utc::now() - Duration::hours(1), 100)
        .await
        .unwrap();
    assert!(
        due.iter().any(|s| s.user_id == key.user_id),
        "a requested summary is due at once"
    );
    assert!(matches!(
        store.flag_session(&key.owner(), "nope", Some(true), None).await,
        Err(StoreError::NotFound(_))
    ));
}

/// Summaries: one per session, with optimistic updates.
pub async fn a_summary_is_one_per_session_with_optimistic_updates(store: &dyn SessionStore) {
    let (key, _) = session_of_three(store).await;
    store.flag_session(&key.owner(), "s1", None, Some(true)).await.unwrap();
    let first_summary = summary(&key, 5);
    store.put_summary(&first_summary, Some(-1)).await.unwrap();
    let read = store.get_summary(&key.owner(), "s1").await.unwrap().unwrap();
    assert_eq!(read.decisions, first_summary.decisions);
    assert_eq!(read.artifacts, first_summary.artifacts);
    let session = store.get_session(&key.owner(), "s1").await.unwrap().unwrap();
    assert_eq!(session.summarized_until, 5);
    assert!(!session.summary_requested, "writing a summary clears the request");
    let mut second = summary(&key, 10);
    second.id = first_summary.id.clone();
    second.progress.push("确定技术方案".into());
    assert!(
        matches!(store.put_summary(&second, Some(-1)).await, Err(StoreError::Conflict(_))),
        "a stale expected end is refused"
    );
    store.put_summary(&second, Some(5)).await.unwrap();
    let read = store.get_summary(&key.owner(), "s1").await.unwrap().unwrap();
    assert_eq!(read.trajectory_end, 10);
    assert_eq!(read.progress.len(), 2);
    assert_eq!(
        store
            .get_session(&key.owner(), "s1")
            .await
            .unwrap()
            .unwrap()
            .summarized_until,
        10
    );
}

/// Summaries list across roles, newest first, per project and per owner.
/// The last session comes with its summary, in one read, as the two reads give them: of one
/// role or any, leaving one session out, up to a time, per owner; without a summary when it has
/// none.
pub async fn the_last_session_comes_with_its_summary(store: &dyn SessionStore) {
    let (key, twin) = session_of_three(store).await;
    store.put_summary(&summary(&key, 2), Some(-1)).await.unwrap();
    designer_session(store, &key).await;
    let owner = key.owner();
    let later = Utc::now() + Duration::seconds(5);
    let (session, summary) = store
        .last_session_with_summary(&owner, Some("p1"), Some("cto"), None, later)
        .await
        .unwrap()
        .expect("the cto's session");
    assert_eq!(Some(session), store.get_session(&owner, "s1").await.unwrap());
    assert_eq!(summary, store.get_summary(&owner, "s1").await.unwrap());
    assert!(summary.is_some());
    let (session, summary) = store
        .last_session_with_summary(&owner, Some("p1"), None, None, later)
        .await
        .unwrap()
        .expect("the latest session of any role");
    assert_eq!(session.session_id, "s2");
    assert!(summary.is_none(), "s2 has no summary yet");
    let (session, summary) = store
        .last_session_with_summary(&owner, Some("p1"), None, Some("s2"), later)
        .await
        .unwrap()
        .expect("s2 left out");
    assert_eq!((session.session_id.as_str(), summary.is_some()), ("s1", true));
    let before = Utc::now() - Duration::days(1);
    for (owner, project, until) in [
        (&owner, Some("p1"), before),
        (&owner, None, later),
        (&owner, Some("p2"), later),
        (&twin.owner(), Some("p1"), later),
    ] {
        assert!(
            store
                .last_session_with_summary(owner, project, None, None, until)
                .await
                .unwrap()
                .is_none()
        );
    }
}

pub async fn summaries_list_across_roles_per_owner(store: &dyn SessionStore) {
    let (key, twin) = session_of_three(store).await;
    store
        .append_messages(&twin, &[message("user", "another person")])
        .await
        .unwrap();
    store.put_summary(&summary(&key, 2), Some(-1)).await.unwrap();
    // Cross-role listing.
    let designer = designer_session(store, &key).await;
    let mut elena = summary(&designer, 0);
    elena.updated_at = Utc::now() + Duration::seconds(1);
    store.put_summary(&elena, None).await.unwrap();
    let other_project = SessionKey {
        session_id: "s3".into(),
        project_id: Some("p2".into()),
        ..key.clone()
    };
    store.put_summary(&summary(&other_project, 0), None).await.unwrap();
    let listed = store.list_summaries(&key.owner(), Some("p1"), None, 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.session_id.as_str()).collect::<Vec<_>>(),
        vec!["s2", "s1"],
        "newest first, one project"
    );
    let others = store
        .list_summaries(&key.owner(), Some("p1"), Some("cto"), 10)
        .await
        .unwrap();
    assert_eq!(others.len(), 1);
    assert_eq!(others[0].role_id, "designer");
    assert_eq!(
        store.list_summaries(&key.owner(), None, None, 2).await.unwrap().len(),
        2
    );
    assert!(
        store
            .list_summaries(&Owner::new(key.tenant_id.clone(), "nobody"), None, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.get_summary(&twin.owner(), "s1").await.unwrap().is_none());
    assert!(
        store
            .list_summaries(&twin.owner(), None, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

fn job(owner: &Owner, kind: &str, dedupe: Option<&str>) -> JobRecord {
    let now = Utc::now();
    JobRecord {
        id: new_id(IdKind::Job),
        kind: kind.into(),
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        session_id: Some("s1".into()),
        payload: "{}".into(),
        status: JobStatus::Pending,
        attempts: 0,
        max_attempts: 3,
        last_error: None,
        run_after: now - Duration::seconds(1),
        lease_until: None,
        dedupe_key: dedupe.map(str::to_string),
        result: None,
        created_at: now,
        updated_at: now,
    }
}

/// A user of this run and two job kinds of its own, so runs never claim each other's jobs.
fn job_kinds() -> (String, Owner, String, String) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let user = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let kind_learn = format!("learn-{run}");
    let kind_sum = format!("summarize-{run}");
    (run, user, kind_learn, kind_sum)
}

/// A job keyed for deduplication is queued once while pending.
pub async fn a_pending_job_is_deduplicated_by_its_key(store: &dyn JobStore) {
    let (run, user, kind_learn, kind_sum) = job_kinds();
    let a = job(&user, &kind_learn, None);
    let b = job(&user, &kind_sum, Some(&format!("sum:{run}")));
    assert_eq!(store.enqueue(&a).await.unwrap(), a.id);
    assert_eq!(store.enqueue(&b).await.unwrap(), b.id);
    let duplicate = job(&user, &kind_sum, Some(&format!("sum:{run}")));
    assert_eq!(
        store.enqueue(&duplicate).await.unwrap(),
        b.id,
        "deduplicated while pending"
    );
}

/// A due job is claimed once, whichever worker asks; a job due later and a running one are not
/// claimable.
pub async fn a_due_job_is_claimed_once(store: &dyn JobStore) {
    let (_, user, kind_learn, _) = job_kinds();
    let a = job(&user, &kind_learn, None);
    store.enqueue(&a).await.unwrap();
    let mut later = job(&user, &kind_learn, None);
    later.run_after = Utc::now() + Duration::hours(1);
    store.enqueue(&later).await.unwrap();

    let now = Utc::now();
    let lease = now + Duration::seconds(30);
    let claimed = store
        .claim(&[&kind_learn], now, lease)
        .await
        .unwrap()
        .expect("a due job");
    assert_eq!(claimed.id, a.id);
    assert_eq!(claimed.status, JobStatus::Running);
    assert_eq!(claimed.attempts, 1);
    assert!(
        store.claim(&[&kind_learn], now, lease).await.unwrap().is_none(),
        "the running job and the future one are not claimable"
    );

    // Concurrent claims never hand out a job twice (five users' jobs: one user's run in turn).
    for n in 0..5 {
        let other = Owner::new(user.tenant_id.clone(), format!("{}-{n}", user.user_id));
        store.enqueue(&job(&other, &kind_learn, None)).await.unwrap();
    }
    let kinds = [kind_learn.as_str()];
    let claims = futures::future::join_all((0..8).map(|_| store.claim(&kinds, now, lease))).await;
    let mut claimed_ids: Vec<String> = claims.into_iter().filter_map(|c| c.unwrap().map(|j| j.id)).collect();
    let count = claimed_ids.len();
    claimed_ids.sort();
    claimed_ids.dedup();
    assert_eq!(claimed_ids.len(), count, "no job claimed twice");
    assert_eq!(count, 5);
}

/// Tenants take turns: a tenant whose jobs run waits for another tenant's job due later, so a
/// backlog over many users of one tenant does not hold the other tenants' fresh jobs.
pub async fn tenants_take_turns_at_the_queue(store: &dyn JobStore) {
    let (run, _, kind_learn, _) = job_kinds();
    let now = Utc::now();
    let backlog: Vec<JobRecord> = (0..4)
        .map(|n| {
            let mut queued = job(&Owner::new(format!("bulk-{run}"), format!("u{n}")), &kind_learn, None);
            queued.run_after = now - Duration::seconds(60 - n);
            queued
        })
        .collect();
    for queued in &backlog {
        store.enqueue(queued).await.unwrap();
    }
    let mut fresh = job(&Owner::new(format!("small-{run}"), "alice"), &kind_learn, None);
    fresh.run_after = now - Duration::seconds(1);
    store.enqueue(&fresh).await.unwrap();
    let lease = now + Duration::seconds(30);
    let claim = async || {
        store
            .claim(&[&kind_learn], now, lease)
            .await
            .unwrap()
            .expect("a due job")
            .id
    };
    assert_eq!(claim().await, backlog[0].id, "the oldest first");
    assert_eq!(
        claim().await,
        fresh.id,
        "the tenant with nothing running goes before the backlog of one that has a job running"
    );
    assert_eq!(claim().await, backlog[1].id, "then the backlog, oldest first");
}

/// A finished job keeps what it did.
pub async fn a_finished_job_keeps_its_result(store: &dyn JobStore) {
    let (_, user, kind_learn, _) = job_kinds();
    let a = job(&user, &kind_learn, None);
    store.enqueue(&a).await.unwrap();
    let lease = Utc::now() + Duration::seconds(30);
    store
        .claim(&[&kind_learn], Utc::now(), lease)
        .await
        .unwrap()
        .expect("a due job");
    store
        .complete_job(&a.id, Utc::now(), Some("{\"written\":1}"))
        .await
        .unwrap();
    let done = store.get_job(&a.id).await.unwrap().unwrap();
    assert_eq!(done.status, JobStatus::Succeeded);
    assert_eq!(
        done.result.as_deref(),
        Some("{\"written\":1}"),
        "what the job did is kept"
    );
}

/// Failures retry later, then fail for good, which frees the job's dedupe key.
pub async fn a_failed_job_retries_then_fails_for_good(store: &dyn JobStore) {
    let (run, user, _, kind_sum) = job_kinds();
    store
        .enqueue(&job(&user, &kind_sum, Some(&format!("sum:{run}"))))
        .await
        .unwrap();
    let now = Utc::now();
    let lease = now + Duration::seconds(30);
    let claimed = store.claim(&[&kind_sum], now, lease).await.unwrap().unwrap();
    store
        .fail_job(
            &claimed.id,
            "llm timed out",
            Utc::now(),
            Some(Utc::now() - Duration::milliseconds(1)),
        )
        .await
        .unwrap();
    let retried = store.get_job(&claimed.id).await.unwrap().unwrap();
    assert_eq!(retried.status, JobStatus::Pending);
    assert_eq!(retried.last_error.as_deref(), Some("llm timed out"));
    let again = store.claim(&[&kind_sum], Utc::now(), lease).await.unwrap().unwrap();
    assert_eq!(again.attempts, 2);
    store
        .fail_job(&again.id, "still failing", Utc::now(), None)
        .await
        .unwrap();
    assert_eq!(
        store.get_job(&again.id).await.unwrap().unwrap().status,
        JobStatus::Failed
    );
    let fresh = job(&user, &kind_sum, Some(&format!("sum:{run}")));
    assert_eq!(
        store.enqueue(&fresh).await.unwrap(),
        fresh.id,
        "a finished job frees its dedupe key"
    );
}

/// Expired leases return to the queue.
pub async fn an_expired_lease_returns_the_job_to_the_queue(store: &dyn JobStore) {
    let (_, user, _, kind_sum) = job_kinds();
    store.enqueue(&job(&user, &kind_sum, None)).await.unwrap();
    let claimed = store
        .claim(&[&kind_sum], Utc::now(), Utc::now() - Duration::seconds(1))
        .await
        .unwrap()
        .unwrap();
    assert!(store.requeue_expired(Utc::now()).await.unwrap() >= 1);
    assert_eq!(
        store.get_job(&claimed.id).await.unwrap().unwrap().status,
        JobStatus::Pending
    );
}

/// A long job reports progress and extends its lease; once its lease ran out and it went back
/// to the queue, its old worker is told to stop.
pub async fn a_long_job_extends_its_lease_until_it_is_requeued(store: &dyn JobStore) {
    let (_, user, _, kind_sum) = job_kinds();
    store.enqueue(&job(&user, &kind_sum, None)).await.unwrap();
    let running = store
        .claim(&[&kind_sum], Utc::now(), Utc::now() + Duration::seconds(1))
        .await
        .unwrap()
        .unwrap();
    let extended = Utc::now() + Duration::hours(1);
    assert!(
        store
            .job_progress(&running.id, "{\"done\":3}", Utc::now(), extended)
            .await
            .unwrap()
    );
    let reported = store.get_job(&running.id).await.unwrap().unwrap();
    assert_eq!(reported.status, JobStatus::Running);
    assert_eq!(reported.result.as_deref(), Some("{\"done\":3}"));
    assert_eq!(
        reported.lease_until.map(|t| t.timestamp_millis()),
        Some(extended.timestamp_millis())
    );
    store.requeue_expired(Utc::now() + Duration::seconds(2)).await.unwrap();
    assert_eq!(
        store.get_job(&running.id).await.unwrap().unwrap().status,
        JobStatus::Running,
        "the extended lease holds past the first one"
    );
    assert!(store.requeue_expired(extended + Duration::seconds(1)).await.unwrap() >= 1);
    assert!(
        !store
            .job_progress(&running.id, "{\"done\":4}", Utc::now(), extended)
            .await
            .unwrap(),
        "a requeued job's old worker must stop"
    );
    assert_eq!(
        store.get_job(&running.id).await.unwrap().unwrap().result.as_deref(),
        Some("{\"done\":3}")
    );
    assert!(
        !store
            .job_progress("job_missing", "{}", Utc::now(), extended)
            .await
            .unwrap()
    );
}

/// Jobs list by session and status, per owner and tenant; counts go by kind and status.
pub async fn jobs_list_and_count_per_owner(store: &dyn JobStore) {
    let (run, user, kind_learn, kind_sum) = job_kinds();
    let lease = Utc::now() + Duration::seconds(30);
    let a = job(&user, &kind_learn, None);
    store.enqueue(&a).await.unwrap();
    store
        .claim(&[&kind_learn], Utc::now(), lease)
        .await
        .unwrap()
        .expect("a due job");
    store.complete_job(&a.id, Utc::now(), None).await.unwrap();
    let b = job(&user, &kind_sum, None);
    store.enqueue(&b).await.unwrap();
    store
        .claim(&[&kind_sum], Utc::now(), lease)
        .await
        .unwrap()
        .expect("a due job");
    store.fail_job(&b.id, "still failing", Utc::now(), None).await.unwrap();
    let mut later = job(&user, &kind_learn, None);
    later.run_after = Utc::now() + Duration::hours(1);
    store.enqueue(&later).await.unwrap();
    store.enqueue(&job(&user, &kind_sum, None)).await.unwrap();

    let listed = store.list_jobs(&user, Some("s1"), None, 100, 0).await.unwrap();
    assert_eq!(listed.len(), 4, "succeeded, failed, due later, pending");
    let failed = store
        .list_jobs(&user, None, Some(JobStatus::Failed), 100, 0)
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert!(
        store
            .list_jobs(&Owner::new(user.tenant_id.clone(), "nobody"), None, None, 10, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_jobs(
                &Owner::new(format!("globex-{run}"), user.user_id.clone()),
                None,
                None,
                10,
                0
            )
            .await
            .unwrap()
            .is_empty(),
        "jobs are per tenant"
    );
    let counts = store.job_counts().await.unwrap();
    assert!(
        counts
            .iter()
            .any(|(k, s, n)| k == &kind_learn && *s == JobStatus::Succeeded && *n == 1)
    );
    assert!(matches!(
        store.complete_job("job_missing", Utc::now(), None).await,
        Err(StoreError::NotFound(_))
    ));
}

/// What the retention suite stores, every record at a known age.
struct Aged {
    now: DateTime<Utc>,
    alice: Owner,
    twin: Owner,
    key: SessionKey,
    succeeded: JobRecord,
    failed: JobRecord,
    pending: JobRecord,
    recent: JobRecord,
}

/// Idempotency records, session messages and jobs of two tenants, some old, some recent.
async fn aged_records<S: MemoryStore + SessionStore + JobStore>(store: &S) -> Aged {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let now = now();
    let days = |n: i64| now - Duration::days(n);
    let alice = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let twin = Owner::new(format!("globex-{run}"), alice.user_id.clone());

    // Idempotency records: two older than 7 days (two tenants), one recent.
    let record = |owner: &Owner, key: &str, at: DateTime<Utc>| IdempotencyRecord {
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        key: key.into(),
        response: "{}".into(),
        created_at: at,
    };
    for (owner, key, at) in [
        (&alice, "remember:old", days(10)),
        (&twin, "remember:old", days(8)),
        (&alice, "remember:new", now - Duration::hours(1)),
    ] {
        store
            .commit(WriteBatch {
                idempotency: Some(record(owner, key, at)),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    // Session messages: four in one session, the first three 40 days old, the summary covering
    // the first two; another tenant's session of old messages, never summarised.
    let key = SessionKey {
        tenant_id: alice.tenant_id.clone(),
        user_id: alice.user_id.clone(),
        session_id: "s1".into(),
        role_id: "cto".into(),
        project_id: None,
    };
    let at = |m: Message, when: DateTime<Utc>| Message { created_at: when, ..m };
    store
        .append_messages(
            &key,
            &[
                at(message("user", "预算是$500"), days(40)),
                at(message("assistant", "好的"), days(40)),
                at(message("user", "还没总结的一句"), days(40)),
                at(message("user", "today"), now),
            ],
        )
        .await
        .unwrap();
    store.put_summary(&summary(&key, 1), Some(-1)).await.unwrap();
    let twin_key = SessionKey {
        tenant_id: twin.tenant_id.clone(),
        user_id: twin.user_id.clone(),
        ..key.clone()
    };
    store
        .append_messages(&twin_key, &[at(message("user", "never summarised"), days(40))])
        .await
        .unwrap();

    // Jobs: finished 10 days ago (succeeded, failed for good), queued 10 days ago, finished today.
    let queued = |payload: &str| JobRecord {
        payload: payload.into(),
        created_at: days(10),
        updated_at: days(10),
        ..job(&alice, &format!("learn-{run}"), None)
    };
    let succeeded = queued("{\"messages\":[\"secret a\"]}");
    let failed = queued("{\"messages\":[\"secret b\"]}");
    let pending = JobRecord {
        run_after: now + Duration::days(1),
        ..queued("{\"messages\":[\"waiting\"]}")
    };
    let recent = queued("{\"messages\":[\"recent\"]}");
    for job in [&succeeded, &failed, &pending, &recent] {
        store.enqueue(job).await.unwrap();
    }
    store
        .complete_job(&succeeded.id, days(10), Some("{\"written\":1}"))
        .await
        .unwrap();
    store.fail_job(&failed.id, "model down", days(10), None).await.unwrap();
    store.complete_job(&recent.id, now, None).await.unwrap();

    Aged {
        now,
        alice,
        twin,
        key,
        succeeded,
        failed,
        pending,
        recent,
    }
}

/// Retention of 7 days for request keys and job payloads, 30 for session messages.
fn retention_config() -> thinkus_common::config::RetentionConfig {
    thinkus_common::config::RetentionConfig {
        session_messages_days: 30,
        job_payload_days: 7,
        idempotency_days: 7,
        sweep_interval_secs: 60,
    }
}

/// A retention of 0 days keeps everything.
pub async fn retention_of_zero_keeps_everything<S: MemoryStore + SessionStore + JobStore + RetentionStore>(store: &S) {
    let Aged { now, .. } = aged_records(store).await;
    let keep = thinkus_common::config::RetentionConfig {
        session_messages_days: 0,
        job_payload_days: 0,
        idempotency_days: 0,
        sweep_interval_secs: 60,
    };
    assert_eq!(
        sweep_retention(store, &keep, now).await.unwrap(),
        RetentionReport::default(),
        "0 keeps the records"
    );
    assert_eq!(
        sweep_retention(store, &retention_config(), now).await.unwrap(),
        RetentionReport {
            idempotency: 2,
            session_messages: 2,
            job_payloads: 2,
        },
        "what 0 kept is still there for a shorter retention"
    );
}

/// A sweep reports what it purged in every tenant, and a second sweep finds nothing.
pub async fn a_sweep_reports_what_it_purged_once<S: MemoryStore + SessionStore + JobStore + RetentionStore>(store: &S) {
    let Aged { now, .. } = aged_records(store).await;
    let config = retention_config();
    let report = sweep_retention(store, &config, now).await.unwrap();
    assert_eq!(
        report,
        RetentionReport {
            idempotency: 2,
            session_messages: 2,
            job_payloads: 2,
        }
    );
    assert_eq!(
        sweep_retention(store, &config, now).await.unwrap(),
        RetentionReport::default(),
        "a second sweep finds nothing"
    );
}

/// Request keys older than their retention go, in every tenant; recent ones stay.
pub async fn old_request_keys_are_purged_in_every_tenant<S: MemoryStore + SessionStore + JobStore + RetentionStore>(
    store: &S,
) {
    let Aged { now, alice, twin, .. } = aged_records(store).await;
    sweep_retention(store, &retention_config(), now).await.unwrap();
    assert!(store.get_idempotent(&alice, "remember:old").await.unwrap().is_none());
    assert!(store.get_idempotent(&twin, "remember:old").await.unwrap().is_none());
    assert!(store.get_idempotent(&alice, "remember:new").await.unwrap().is_some());
}

/// Only old messages already summarised go, never one still to be summarised; indexes continue.
pub async fn only_old_summarised_messages_are_purged<S: MemoryStore + SessionStore + JobStore + RetentionStore>(
    store: &S,
) {
    let Aged {
        now, alice, twin, key, ..
    } = aged_records(store).await;
    sweep_retention(store, &retention_config(), now).await.unwrap();
    let kept: Vec<String> = store
        .get_messages(&alice, "s1", 0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(kept, vec!["还没总结的一句", "today"], "only summarised old messages go");
    assert_eq!(store.get_messages(&twin, "s1", 0, 10).await.unwrap().len(), 1);
    let (first, _) = store.append_messages(&key, &[message("user", "next")]).await.unwrap();
    assert_eq!(first, 4, "indexes continue after a purge");
}

/// A finished job's payload goes after its retention, never a queued one's; status, result and
/// error stay.
pub async fn only_finished_jobs_lose_their_old_payloads<S: MemoryStore + SessionStore + JobStore + RetentionStore>(
    store: &S,
) {
    let Aged {
        now,
        succeeded,
        failed,
        pending,
        recent,
        ..
    } = aged_records(store).await;
    sweep_retention(store, &retention_config(), now).await.unwrap();
    for (job, payload_kept) in [(&succeeded, false), (&failed, false), (&pending, true), (&recent, true)] {
        let stored = store.get_job(&job.id).await.unwrap().unwrap();
        let expected = if payload_kept { job.payload.as_str() } else { "" };
        assert_eq!(stored.payload, expected, "{:?}", stored.status);
    }
    let done = store.get_job(&succeeded.id).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.result.as_deref()),
        (JobStatus::Succeeded, Some("{\"written\":1}")),
        "the job's status and result stay"
    );
    let failed_job = store.get_job(&failed.id).await.unwrap().unwrap();
    assert_eq!(failed_job.last_error.as_deref(), Some("model down"));
}

/// Five queued jobs: three of one user and kind (queued first, second, third, the third with the
/// smallest id), one of the same user and another kind, one of another user.
struct Queued {
    kinds: [String; 2],
    first: JobRecord,
    second: JobRecord,
    third: JobRecord,
    summary: JobRecord,
    elsewhere: JobRecord,
}

async fn queued_jobs(store: &dyn JobStore) -> Queued {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let user = Owner::new(format!("acme-{run}"), format!("alice-{run}"));
    let other_user = Owner::new(user.tenant_id.clone(), format!("bob-{run}"));
    let learn = format!("learn-{run}");
    let summarize = format!("summarize-{run}");
    let start = Utc::now() - Duration::seconds(10);
    let queued = |owner: &Owner, kind: &str, n: i64| {
        let mut queued = job(owner, kind, None);
        queued.created_at = start + Duration::milliseconds(n);
        queued.run_after = queued.created_at;
        queued
    };
    // Queued in this order; the third carries the smallest id, so neither the id nor the due time
    // decides the order, only when a job was queued.
    let mut first = queued(&user, &learn, 1);
    let second = queued(&user, &learn, 2);
    let mut third = queued(&user, &learn, 3);
    std::mem::swap(&mut first.id, &mut third.id);
    first.run_after = start + Duration::milliseconds(5);
    let summary = queued(&user, &summarize, 4);
    let elsewhere = queued(&other_user, &learn, 5);
    for job in [&third, &second, &first, &summary, &elsewhere] {
        store.enqueue(job).await.unwrap();
    }
    Queued {
        kinds: [learn, summarize],
        first,
        second,
        third,
        summary,
        elsewhere,
    }
}

/// A user's jobs of one kind run one at a time, in the order they were queued, whichever worker
/// asks; other users and other kinds do not wait.
pub async fn a_users_jobs_of_one_kind_run_one_at_a_time_in_order(store: &dyn JobStore) {
    let Queued {
        kinds,
        first,
        summary,
        elsewhere,
        ..
    } = queued_jobs(store).await;
    let kinds = [kinds[0].as_str(), kinds[1].as_str()];
    let now = Utc::now();
    let lease = now + Duration::seconds(30);
    let claims = futures::future::join_all((0..4).map(|_| store.claim(&kinds, now, lease))).await;
    let mut claimed: Vec<String> = claims.into_iter().filter_map(|c| c.unwrap().map(|j| j.id)).collect();
    claimed.sort();
    let mut expected = vec![first.id.clone(), summary.id.clone(), elsewhere.id.clone()];
    expected.sort();
    assert_eq!(
        claimed, expected,
        "the user's first job, its other kind and another user's job run at once; the later ones wait"
    );
    assert!(
        store.claim(&kinds, Utc::now(), lease).await.unwrap().is_none(),
        "the second waits while the first runs"
    );
}

/// A retried job keeps its place: the next one waits for it.
pub async fn a_retried_job_keeps_its_place_in_the_queue(store: &dyn JobStore) {
    let Queued {
        kinds, first, second, ..
    } = queued_jobs(store).await;
    let kinds = [kinds[0].as_str(), kinds[1].as_str()];
    let lease = Utc::now() + Duration::seconds(30);
    for claim in futures::future::join_all((0..4).map(|_| store.claim(&kinds, Utc::now(), lease))).await {
        claim.expect("claim the first jobs");
    }
    store
        .fail_job(
            &first.id,
            "llm timed out",
            Utc::now(),
            Some(Utc::now() - Duration::milliseconds(1)),
        )
        .await
        .unwrap();
    let again = store
        .claim(&kinds, Utc::now(), lease)
        .await
        .unwrap()
        .expect("the retry is due");
    assert_eq!(
        again.id, first.id,
        "the retried job runs before the ones queued after it"
    );
    store.complete_job(&first.id, Utc::now(), None).await.unwrap();
    let next = store
        .claim(&kinds, Utc::now(), lease)
        .await
        .unwrap()
        .expect("the second is due");
    assert_eq!(next.id, second.id);
}

/// A job that failed for good does not hold the queue.
pub async fn a_job_failed_for_good_does_not_hold_the_queue(store: &dyn JobStore) {
    let Queued {
        kinds,
        first,
        second,
        third,
        ..
    } = queued_jobs(store).await;
    let kinds = [kinds[0].as_str(), kinds[1].as_str()];
    let lease = Utc::now() + Duration::seconds(30);
    for claim in futures::future::join_all((0..4).map(|_| store.claim(&kinds, Utc::now(), lease))).await {
        claim.expect("claim the first jobs");
    }
    store.complete_job(&first.id, Utc::now(), None).await.unwrap();
    store
        .claim(&kinds, Utc::now(), lease)
        .await
        .unwrap()
        .expect("the second is due");
    store
        .fail_job(&second.id, "bad payload", Utc::now(), None)
        .await
        .unwrap();
    let last = store
        .claim(&kinds, Utc::now(), lease)
        .await
        .unwrap()
        .expect("the third is due");
    assert_eq!(last.id, third.id);
}
