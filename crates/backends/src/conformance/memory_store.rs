//! The conformance suite of [`MemoryStore`], one function per behaviour: the test binary stamps
//! each into its own test per backend (`tests/it/conformance.rs`), so one broken behaviour
//! fails alone and never hides the others. Each function takes a fresh store (an empty
//! database) and panics with a message naming what broke.

use chrono::{Duration, Utc};
use thinkus_common::ids::{IdKind, new_id};
use thinkus_common::model::{ArtifactRef, Language, MemoryStatus, MemoryType, Owner, Scope, Visibility};

use super::sql::{ids, insert, memory, now};
use crate::filter::{Layers, MemoryFilter, Reader};
use crate::sql::{
    Candidate, CandidateStatus, Change, ChangeKind, IdempotencyRecord, MemoryOrder, MemoryQuery, MemoryStore,
    StoreError, WriteBatch,
};

/// The owners of one run: alice and bob in one tenant, and alice's twin, the same user id in
/// another tenant (another person).
struct People {
    run: String,
    tenant: String,
    alice: Owner,
    bob: Owner,
    twin: Owner,
}

fn people() -> People {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let tenant = format!("acme-{run}");
    let alice = Owner::new(&tenant, format!("alice-{run}"));
    let bob = Owner::new(&tenant, format!("bob-{run}"));
    let twin = Owner::new(format!("globex-{run}"), alice.user_id.clone());
    People {
        run,
        tenant,
        alice,
        bob,
        twin,
    }
}

/// A Chinese memory with every optional field set.
fn full_memory(owner: &Owner) -> thinkus_common::model::Memory {
    let mut zh = memory(
        owner,
        "cto",
        Some("p1"),
        MemoryType::UserPreference,
        "我喜欢简约的设计风格",
    );
    zh.tags = vec!["设计".into(), "ui".into()];
    zh.context = "在讨论首页时".into();
    zh.related_decision_ids = vec!["mem_x".into()];
    zh.artifact_refs = vec![ArtifactRef {
        reference: "art_1".into(),
        locator: "lines=1-5".into(),
        desc: "设计稿".into(),
    }];
    zh.speaker = Some("Alice".into());
    zh.subject = Some("design_style".into());
    zh.iteration_id = Some("iter-1".into());
    zh.external_id = Some("D1:1".into());
    zh.scope.session_id = Some("s1".into());
    zh.occurred_at = Utc::now() - Duration::days(3);
    zh.last_accessed_at = Some(Utc::now() - Duration::days(1));
    zh
}

/// Every field of a memory comes back as written, in Chinese and English.
pub async fn round_trip_keeps_every_field(store: &dyn MemoryStore) {
    let p = people();
    let zh = full_memory(&p.alice);
    let en = memory(
        &p.alice,
        "cto",
        None,
        MemoryType::ProjectDecision,
        "We go with Next.js and MongoDB",
    );
    store
        .commit(insert(&[zh.clone(), en.clone()]))
        .await
        .expect("insert two memories");
    let read = store
        .get_memory(&p.alice, &zh.id)
        .await
        .unwrap()
        .expect("the memory exists");
    assert_eq!(read.content, zh.content);
    assert_eq!(read.tags, zh.tags);
    assert_eq!(read.context, zh.context);
    assert_eq!(read.related_decision_ids, zh.related_decision_ids);
    assert_eq!(read.artifact_refs, zh.artifact_refs);
    assert_eq!(read.speaker, zh.speaker);
    assert_eq!(read.subject, zh.subject);
    assert_eq!(read.iteration_id, zh.iteration_id);
    assert_eq!(read.scope, zh.scope);
    assert_eq!(read.language, Language::Zh);
    assert_eq!(read.occurred_at.timestamp_millis(), zh.occurred_at.timestamp_millis());
    assert_eq!(
        read.last_accessed_at.map(|t| t.timestamp_millis()),
        zh.last_accessed_at.map(|t| t.timestamp_millis())
    );
    assert_eq!(read.external_id.as_deref(), Some("D1:1"));
    let read = store
        .get_memory(&p.alice, &en.id)
        .await
        .unwrap()
        .expect("the memory exists");
    assert_eq!(
        (read.content.as_str(), read.language),
        (en.content.as_str(), Language::En)
    );
}

/// Another user of the tenant, and the same user id in another tenant, never read a memory.
pub async fn owners_never_read_each_other(store: &dyn MemoryStore) {
    let p = people();
    let zh = full_memory(&p.alice);
    store.commit(insert(std::slice::from_ref(&zh))).await.unwrap();
    assert!(store.get_memory(&p.alice, &zh.id).await.unwrap().is_some());
    assert!(
        store.get_memory(&p.bob, &zh.id).await.unwrap().is_none(),
        "bob must not read alice's memory"
    );
    assert!(
        store
            .get_memories(&p.bob, std::slice::from_ref(&zh.id))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store.get_memory(&p.twin, &zh.id).await.unwrap().is_none(),
        "the same user id in another tenant must not read it"
    );
    assert!(
        store
            .get_memories(&p.twin, std::slice::from_ref(&zh.id))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_memories(&MemoryQuery::of(MemoryFilter::any_status(&p.twin)))
            .await
            .unwrap()
            .is_empty()
    );
}

/// get_memories answers in the order asked and skips unknown ids.
pub async fn get_memories_keeps_the_order_asked(store: &dyn MemoryStore) {
    let p = people();
    let zh = full_memory(&p.alice);
    let en = memory(
        &p.alice,
        "cto",
        None,
        MemoryType::ProjectDecision,
        "We go with Next.js and MongoDB",
    );
    store.commit(insert(&[zh.clone(), en.clone()])).await.unwrap();
    let got = store
        .get_memories(&p.alice, &[en.id.clone(), "mem_missing".into(), zh.id.clone()])
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        vec![en.id.as_str(), zh.id.as_str()]
    );
}

/// An external id is unique per user: another user, or the same user id in another tenant,
/// may use it.
pub async fn external_ids_are_unique_per_user(store: &dyn MemoryStore) {
    let p = people();
    let zh = full_memory(&p.alice);
    store.commit(insert(std::slice::from_ref(&zh))).await.unwrap();
    let mut dup = memory(&p.alice, "cto", None, MemoryType::ConversationTurn, "again");
    dup.external_id = Some("D1:1".into());
    let err = store.commit(insert(&[dup])).await.expect_err("duplicate external id");
    assert!(matches!(err, StoreError::AlreadyExists(_)), "{err:?}");
    let mut other_user = memory(&p.bob, "cto", None, MemoryType::ConversationTurn, "bob's turn");
    other_user.external_id = Some("D1:1".into());
    store
        .commit(insert(&[other_user]))
        .await
        .expect("external ids are per user");
    let mut twin_turn = memory(&p.twin, "cto", None, MemoryType::ConversationTurn, "the twin's turn");
    twin_turn.external_id = Some("D1:1".into());
    store
        .commit(insert(&[twin_turn]))
        .await
        .expect("external ids are per tenant");
    assert_eq!(
        store
            .find_external(&p.alice, &["D1:1".into(), "D9:9".into()])
            .await
            .unwrap(),
        vec![("D1:1".to_string(), zh.id.clone())]
    );
}

/// Optimistic concurrency: an update at the current version bumps it; a stale version is
/// refused and nothing of its batch applies.
pub async fn a_stale_version_is_refused_with_its_batch(store: &dyn MemoryStore) {
    let p = people();
    let zh = full_memory(&p.alice);
    store.commit(insert(std::slice::from_ref(&zh))).await.unwrap();
    let read = store.get_memory(&p.alice, &zh.id).await.unwrap().unwrap();
    let mut update = read.clone();
    update.evidence_count = 2;
    update.confidence = 1.0;
    store
        .commit(WriteBatch {
            updates: vec![update.clone()],
            ..Default::default()
        })
        .await
        .expect("update at the current version");
    let after = store.get_memory(&p.alice, &zh.id).await.unwrap().unwrap();
    assert_eq!(after.evidence_count, 2);
    assert_eq!(after.version, read.version + 1, "the version is bumped");
    let newcomer = memory(&p.alice, "cto", None, MemoryType::Risk, "must roll back with the batch");
    let err = store
        .commit(WriteBatch {
            inserts: vec![newcomer.clone()],
            updates: vec![update],
            ..Default::default()
        })
        .await
        .expect_err("stale version");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(
        store.get_memory(&p.alice, &newcomer.id).await.unwrap().is_none(),
        "a failed batch must not leave its inserts behind"
    );
}

/// A request key is applied once per user and tenant; its answer is kept.
pub async fn a_request_key_applies_once(store: &dyn MemoryStore) {
    let p = people();
    let key = IdempotencyRecord {
        tenant_id: p.alice.tenant_id.clone(),
        user_id: p.alice.user_id.clone(),
        key: format!("remember:{}", p.run),
        response: "{\"id\":\"first\"}".into(),
        created_at: Utc::now(),
    };
    store
        .commit(WriteBatch {
            idempotency: Some(key.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let newcomer = memory(&p.alice, "cto", None, MemoryType::Risk, "must roll back with the batch");
    let err = store
        .commit(WriteBatch {
            inserts: vec![newcomer.clone()],
            idempotency: Some(key.clone()),
            ..Default::default()
        })
        .await
        .expect_err("a reused request key");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(store.get_memory(&p.alice, &newcomer.id).await.unwrap().is_none());
    assert_eq!(
        store.get_idempotent(&p.alice, &key.key).await.unwrap().as_deref(),
        Some("{\"id\":\"first\"}")
    );
    assert!(
        store.get_idempotent(&p.bob, &key.key).await.unwrap().is_none(),
        "keys are per user"
    );
    assert!(
        store.get_idempotent(&p.twin, &key.key).await.unwrap().is_none(),
        "keys are per tenant"
    );
    store
        .commit(WriteBatch {
            idempotency: Some(IdempotencyRecord {
                tenant_id: p.twin.tenant_id.clone(),
                ..key
            }),
            ..Default::default()
        })
        .await
        .expect("the same key in another tenant is another request");
}

/// A memory's history is read by its owner only.
pub async fn history_is_per_owner(store: &dyn MemoryStore) {
    let p = people();
    let zh = full_memory(&p.alice);
    store.commit(insert(std::slice::from_ref(&zh))).await.unwrap();
    let change = Change {
        id: new_id(IdKind::Change),
        tenant_id: p.alice.tenant_id.clone(),
        user_id: p.alice.user_id.clone(),
        memory_id: zh.id.clone(),
        kind: ChangeKind::Evidence,
        actor: "system:dedup".into(),
        reason: "similar (0.93)".into(),
        before: Some("{}".into()),
        after: Some("{\"evidence_count\":2}".into()),
        at: Utc::now(),
    };
    store
        .commit(WriteBatch {
            changes: vec![change.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    let history = store.changes(&p.alice, &zh.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].kind, ChangeKind::Evidence);
    assert_eq!(history[0].after, change.after);
    assert!(store.changes(&p.bob, &zh.id).await.unwrap().is_empty());
    assert!(store.changes(&p.twin, &zh.id).await.unwrap().is_empty());
}

/// One user's memories across roles, projects, visibilities and statuses, for the listings.
struct Listing {
    user: Owner,
    own: thinkus_common::model::Memory,
    shared: thinkus_common::model::Memory,
    cross_own: thinkus_common::model::Memory,
    global_other: thinkus_common::model::Memory,
    replaced: thinkus_common::model::Memory,
}

async fn listing(store: &dyn MemoryStore) -> Listing {
    let p = people();
    let user = Owner::new(&p.tenant, format!("carol-{}", p.run));
    let mut own = memory(
        &user,
        "cto",
        Some("p1"),
        MemoryType::ProjectDecision,
        "own private decision",
    );
    own.occurred_at = Utc::now() - Duration::days(2);
    let mut shared = memory(&user, "cfo", Some("p1"), MemoryType::Constraint, "budget is $800");
    shared.visibility = Visibility::Project;
    shared.subject = Some("budget".into());
    let other_private = memory(&user, "cfo", Some("p1"), MemoryType::Risk, "cfo private risk");
    let cross_own = memory(&user, "cto", None, MemoryType::UserPreference, "prefers Rust");
    let mut global_other = memory(&user, "designer", Some("p2"), MemoryType::UserPreference, "likes blue");
    global_other.visibility = Visibility::Global;
    global_other.tags = vec!["color".into(), "ui".into()];
    let other_project = memory(&user, "cto", Some("p2"), MemoryType::ProjectDecision, "p2 decision");
    let mut replaced = memory(&user, "cto", Some("p1"), MemoryType::Constraint, "budget is $500");
    replaced.status = MemoryStatus::Replaced;
    replaced.subject = Some("budget".into());
    replaced.occurred_at = Utc::now() - Duration::days(40);
    store
        .commit(insert(&[
            own.clone(),
            shared.clone(),
            other_private,
            cross_own.clone(),
            global_other.clone(),
            other_project,
            replaced.clone(),
        ]))
        .await
        .unwrap();
    Listing {
        user,
        own,
        shared,
        cross_own,
        global_other,
        replaced,
    }
}

/// The cto of project p1 reading `layers`.
fn cto_in_p1(layers: Layers) -> Reader {
    Reader {
        role_id: "cto".into(),
        project_id: Some("p1".into()),
        layers,
    }
}

/// The active memories `reader` sees of `user`.
fn active_for(user: &Owner, reader: Reader) -> MemoryQuery {
    MemoryQuery::of(MemoryFilter {
        reader: Some(reader),
        statuses: vec![MemoryStatus::Active],
        ..MemoryFilter::user(user)
    })
}

/// Listings follow the visibility rule: own memories, project-shared ones, own cross-project
/// ones and global ones; each layer alone; a reader in no project; counts agree.
pub async fn listings_follow_the_visibility_rule(store: &dyn MemoryStore) {
    let l = listing(store).await;
    let listed = store
        .list_memories(&active_for(&l.user, cto_in_p1(Layers::Both)))
        .await
        .unwrap();
    assert_eq!(
        ids(&listed),
        ids(&[
            l.own.clone(),
            l.shared.clone(),
            l.cross_own.clone(),
            l.global_other.clone()
        ]),
        "the cto in p1 sees own, project-shared, own cross-project and global memories"
    );
    let listed = store
        .list_memories(&active_for(&l.user, cto_in_p1(Layers::Project)))
        .await
        .unwrap();
    assert_eq!(ids(&listed), ids(&[l.own.clone(), l.shared.clone()]));
    let listed = store
        .list_memories(&active_for(&l.user, cto_in_p1(Layers::CrossProject)))
        .await
        .unwrap();
    assert_eq!(ids(&listed), ids(std::slice::from_ref(&l.cross_own)));
    let no_project = Reader {
        role_id: "cto".into(),
        project_id: None,
        layers: Layers::Both,
    };
    let listed = store.list_memories(&active_for(&l.user, no_project)).await.unwrap();
    assert_eq!(ids(&listed), ids(&[l.cross_own.clone(), l.global_other.clone()]));
    let count = store
        .count_memories(&active_for(&l.user, cto_in_p1(Layers::Both)))
        .await
        .unwrap();
    assert_eq!(count, 4);
}

/// Listings narrow by subject and status (no status selects nothing), type, excluded types,
/// whole tags and time.
pub async fn listings_filter_by_subject_status_type_tag_and_time(store: &dyn MemoryStore) {
    let l = listing(store).await;
    let both = || active_for(&l.user, cto_in_p1(Layers::Both));
    let mut by_subject = both();
    by_subject.subject = Some("budget".into());
    by_subject.filter.statuses = MemoryStatus::ALL.to_vec();
    assert_eq!(
        ids(&store.list_memories(&by_subject).await.unwrap()),
        ids(&[l.shared.clone(), l.replaced.clone()]),
        "every status"
    );
    by_subject.filter.statuses = vec![];
    assert!(
        store.list_memories(&by_subject).await.unwrap().is_empty(),
        "no status selects nothing"
    );
    let mut by_type = both();
    by_type.filter.types = vec![MemoryType::UserPreference];
    assert_eq!(
        ids(&store.list_memories(&by_type).await.unwrap()),
        ids(&[l.cross_own.clone(), l.global_other.clone()])
    );
    let mut excluded = both();
    excluded.exclude_types = vec![MemoryType::UserPreference, MemoryType::Constraint];
    assert_eq!(
        ids(&store.list_memories(&excluded).await.unwrap()),
        ids(std::slice::from_ref(&l.own))
    );
    let mut by_tag = both();
    by_tag.filter.tags = vec!["ui".into(), "color".into()];
    assert_eq!(
        ids(&store.list_memories(&by_tag).await.unwrap()),
        ids(std::slice::from_ref(&l.global_other))
    );
    by_tag.filter.tags = vec!["u".into()];
    assert!(
        store.list_memories(&by_tag).await.unwrap().is_empty(),
        "tags match whole"
    );
    let mut by_time = both();
    by_time.filter.occurred_from_ms = Some((Utc::now() - Duration::days(1)).timestamp_millis());
    assert_eq!(
        ids(&store.list_memories(&by_time).await.unwrap()),
        ids(&[l.shared.clone(), l.cross_own.clone(), l.global_other.clone()])
    );
}

/// Listings by owner role, oldest or newest first, with a limit and an offset.
pub async fn listings_order_and_page(store: &dyn MemoryStore) {
    let l = listing(store).await;
    let mut owner = MemoryQuery {
        owner_role: Some("cto".into()),
        order: MemoryOrder::Oldest,
        ..MemoryQuery::of(MemoryFilter::any_status(&l.user))
    };
    let listed = store.list_memories(&owner).await.unwrap();
    assert_eq!(
        listed.first().map(|m| m.id.clone()),
        Some(l.replaced.id.clone()),
        "oldest first"
    );
    assert_eq!(listed.len(), 4);
    owner.limit = 2;
    owner.offset = 1;
    assert_eq!(store.list_memories(&owner).await.unwrap().len(), 2, "limit and offset");
    let newest = MemoryQuery {
        order: MemoryOrder::Newest,
        limit: 1,
        ..MemoryQuery::of(MemoryFilter::any_status(&l.user))
    };
    let first = &store.list_memories(&newest).await.unwrap()[0];
    assert_ne!(first.id, l.replaced.id);
}

/// A listing with the memories that replaced those listed: the listing is the same as
/// `list_memories`', each successor comes once, only for the memories listed, and only the
/// owner's.
pub async fn listings_come_with_the_successors_of_what_they_list(store: &dyn MemoryStore) {
    let p = people();
    let new = memory(&p.alice, "cto", Some("p1"), MemoryType::Constraint, "budget is $800");
    let replaced = |content: &str, by: &str, days: i64| {
        let mut m = memory(&p.alice, "cto", Some("p1"), MemoryType::Constraint, content);
        m.status = MemoryStatus::Replaced;
        m.superseded_by = Some(by.to_string());
        m.occurred_at = Utc::now() - Duration::days(days);
        m
    };
    let bobs = memory(&p.bob, "cto", Some("p1"), MemoryType::Constraint, "bob's budget");
    let oldest = replaced("budget is $500", &new.id, 3);
    let older = replaced("budget is $600", &new.id, 2);
    // Its successor id is another owner's memory: not this owner's to read.
    let newest = replaced("budget is $700", &bobs.id, 1);
    store
        .commit(insert(&[new.clone(), oldest.clone(), older.clone(), newest.clone()]))
        .await
        .unwrap();
    store.commit(insert(std::slice::from_ref(&bobs))).await.unwrap();
    let mut query = MemoryQuery {
        order: MemoryOrder::Newest,
        limit: 3,
        ..MemoryQuery::of(MemoryFilter {
            statuses: vec![MemoryStatus::Replaced],
            ..MemoryFilter::user(&p.alice)
        })
    };
    let (listed, successors) = store.list_memories_and_successors(&query).await.unwrap();
    assert_eq!(listed, store.list_memories(&query).await.unwrap());
    let in_order =
        |memories: &[thinkus_common::model::Memory]| memories.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
    assert_eq!(
        in_order(&listed),
        vec![newest.id.clone(), older.id.clone(), oldest.id.clone()]
    );
    assert_eq!(in_order(&successors), vec![new.id.clone()], "once, and not bob's");
    assert_eq!(successors[0].content, new.content);
    query.limit = 1;
    let (listed, successors) = store.list_memories_and_successors(&query).await.unwrap();
    assert_eq!(in_order(&listed), vec![newest.id.clone()]);
    assert!(
        successors.is_empty(),
        "only the successors of what is listed: {successors:?}"
    );
    let (listed, successors) = store
        .list_memories_and_successors(&MemoryQuery::of(MemoryFilter::user(&p.twin)))
        .await
        .unwrap();
    assert!(listed.is_empty() && successors.is_empty());
}

/// An access raises the freshness up to its cap and counts, and leaves the version (an update
/// read before it still applies, and keeps the reads counted since); another user's access
/// changes nothing.
pub async fn access_is_counted_and_freshness_capped(store: &dyn MemoryStore) {
    let p = people();
    let own = memory(
        &p.alice,
        "cto",
        Some("p1"),
        MemoryType::ProjectDecision,
        "own private decision",
    );
    store.commit(insert(std::slice::from_ref(&own))).await.unwrap();
    let read = |owner: Owner| {
        let id = own.id.clone();
        async move { store.get_memory(&owner, &id).await.unwrap().unwrap() }
    };
    let marked = store
        .record_access(&p.alice, std::slice::from_ref(&own.id), Utc::now(), 0.5, 5.0)
        .await
        .unwrap();
    assert_eq!(marked, 1);
    assert_eq!(read(p.alice.clone()).await.freshness, own.freshness + 0.5);
    store
        .record_access(&p.alice, std::slice::from_ref(&own.id), Utc::now(), 4.0, 5.0)
        .await
        .unwrap();
    let read = read(p.alice.clone()).await;
    assert_eq!(read.freshness, 5.0, "freshness is capped");
    assert_eq!(read.access_count, 2);
    assert!(read.last_accessed_at.is_some());
    assert_eq!(
        store
            .record_access(&p.bob, std::slice::from_ref(&own.id), Utc::now(), 0.5, 5.0)
            .await
            .unwrap(),
        0,
        "another user's read marks nothing"
    );
    assert_eq!(
        store.get_memory(&p.alice, &own.id).await.unwrap().unwrap().access_count,
        2
    );
    // A read is not an edit: an update made from what was read before it still applies.
    assert_eq!(read.version, own.version, "an access leaves the version");
    let mut corrected = own.clone();
    corrected.content = "own private decision, corrected".into();
    store
        .commit(WriteBatch {
            updates: vec![corrected],
            ..Default::default()
        })
        .await
        .expect("an update made before the reads applies");
    // The reads counted since stay: the access statistics are not the update's to write back.
    let after = store.get_memory(&p.alice, &own.id).await.unwrap().unwrap();
    assert_eq!(after.content, "own private decision, corrected");
    assert_eq!(after.access_count, 2, "the reads counted after the update's read");
    assert_eq!(after.last_accessed_at, read.last_accessed_at, "the last read's time");
}

/// A delete keeps the memory's history records without their content (the deletion's own
/// image too); other memories' histories, and the same memory id's history under another owner,
/// keep theirs.
pub async fn a_delete_keeps_the_history_without_content(store: &dyn MemoryStore) {
    let p = people();
    let user = Owner::new(&p.tenant, format!("carol-{}", p.run));
    let user_twin = Owner::new(p.twin.tenant_id.clone(), user.user_id.clone());
    let kept = memory(
        &user,
        "cto",
        Some("p1"),
        MemoryType::ProjectDecision,
        "own private decision",
    );
    let gone = memory(&user, "cto", Some("p2"), MemoryType::ProjectDecision, "p2 decision");
    store.commit(insert(&[kept.clone(), gone.clone()])).await.unwrap();
    let start = Utc::now();
    let image = |owner: &Owner, memory_id: &str, kind: ChangeKind, before: Option<&str>, after: Option<&str>| Change {
        id: new_id(IdKind::Change),
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        memory_id: memory_id.to_string(),
        kind,
        actor: "user:carol".into(),
        reason: "edited".into(),
        before: before.map(str::to_string),
        after: after.map(str::to_string),
        // One millisecond apart per kind, so the history's order is the order written.
        at: start + Duration::milliseconds(kind as i64),
    };
    store
        .commit(WriteBatch {
            changes: vec![
                image(
                    &user,
                    &gone.id,
                    ChangeKind::Create,
                    None,
                    Some("{\"content\":\"secret A\"}"),
                ),
                image(
                    &user,
                    &gone.id,
                    ChangeKind::Correction,
                    Some("{\"content\":\"secret A\"}"),
                    Some("{\"content\":\"secret B\"}"),
                ),
                image(
                    &user,
                    &kept.id,
                    ChangeKind::Create,
                    None,
                    Some("{\"content\":\"kept\"}"),
                ),
                image(
                    &user_twin,
                    &gone.id,
                    ChangeKind::Create,
                    None,
                    Some("{\"content\":\"twin\"}"),
                ),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    store
        .commit(WriteBatch {
            deletes: vec![(user.clone(), gone.id.clone())],
            changes: vec![image(
                &user,
                &gone.id,
                ChangeKind::Delete,
                Some("{\"content\":\"secret B\"}"),
                None,
            )],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(store.get_memory(&user, &gone.id).await.unwrap().is_none());
    let scrubbed = store.changes(&user, &gone.id).await.unwrap();
    assert_eq!(
        scrubbed.iter().map(|c| c.kind).collect::<Vec<_>>(),
        vec![ChangeKind::Create, ChangeKind::Correction, ChangeKind::Delete],
        "a deleted memory's history keeps its records"
    );
    for change in &scrubbed {
        assert_eq!(
            (&change.before, &change.after),
            (&None, &None),
            "content left: {change:?}"
        );
        assert_eq!(
            (change.actor.as_str(), change.reason.as_str()),
            ("user:carol", "edited")
        );
    }
    assert_eq!(
        store.changes(&user, &kept.id).await.unwrap()[0].after.as_deref(),
        Some("{\"content\":\"kept\"}")
    );
    assert_eq!(
        store.changes(&user_twin, &gone.id).await.unwrap()[0].after.as_deref(),
        Some("{\"content\":\"twin\"}"),
        "another tenant's history is not touched"
    );
}

/// A candidate is its owner's, found pending by its content key, listed by role and project,
/// and no longer pending once decided.
pub async fn candidates_are_per_owner_and_decided_once(store: &dyn MemoryStore) {
    let p = people();
    let candidate = Candidate {
        id: new_id(IdKind::Candidate),
        scope: Scope::new(p.alice.user_id.clone(), "cto")
            .with_tenant(p.alice.tenant_id.clone())
            .with_project("p1"),
        draft: "{\"content\":\"用户常驻上海\"}".into(),
        reason: "profile fact below the evidence threshold".into(),
        score: 0.7,
        evidence_count: 1,
        status: CandidateStatus::Pending,
        content_key: "常驻上海".into(),
        created_at: now(),
        decided_at: None,
        memory_id: None,
    };
    store
        .commit(WriteBatch {
            candidates: vec![candidate.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        store.get_candidate(&p.alice, &candidate.id).await.unwrap(),
        Some(candidate.clone())
    );
    assert!(store.get_candidate(&p.bob, &candidate.id).await.unwrap().is_none());
    assert!(store.get_candidate(&p.twin, &candidate.id).await.unwrap().is_none());
    assert!(
        store
            .list_candidates(&p.twin, None, None, CandidateStatus::Pending, 10, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .find_pending_candidate(&p.twin, "常驻上海")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store
            .find_pending_candidate(&p.alice, "常驻上海")
            .await
            .unwrap()
            .map(|c| c.id),
        Some(candidate.id.clone())
    );
    let pending = store
        .list_candidates(&p.alice, Some("cto"), Some("p1"), CandidateStatus::Pending, 10, 0)
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert!(
        store
            .list_candidates(&p.alice, Some("cfo"), None, CandidateStatus::Pending, 10, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let written = full_memory(&p.alice);
    store.commit(insert(std::slice::from_ref(&written))).await.unwrap();
    let mut approved = candidate.clone();
    approved.status = CandidateStatus::Approved;
    approved.decided_at = Some(Utc::now());
    approved.memory_id = Some(written.id.clone());
    store
        .commit(WriteBatch {
            candidates: vec![approved],
            ..Default::default()
        })
        .await
        .unwrap();
    let read = store.get_candidate(&p.alice, &candidate.id).await.unwrap().unwrap();
    assert_eq!(read.status, CandidateStatus::Approved);
    assert_eq!(read.memory_id.as_deref(), Some(written.id.as_str()));
    assert!(
        store
            .find_pending_candidate(&p.alice, "常驻上海")
            .await
            .unwrap()
            .is_none()
    );
}

/// A plan is set per user and tenant; the last one set holds.
pub async fn plans_are_per_tenant(store: &dyn MemoryStore) {
    let p = people();
    assert_eq!(store.get_plan(&p.alice).await.unwrap(), None);
    store.set_plan(&p.alice, "growth").await.unwrap();
    store.set_plan(&p.alice, "scale").await.unwrap();
    assert_eq!(store.get_plan(&p.alice).await.unwrap().as_deref(), Some("scale"));
    assert_eq!(store.get_plan(&p.twin).await.unwrap(), None, "plans are per tenant");
    store.set_plan(&p.twin, "seed").await.unwrap();
    assert_eq!(store.get_plan(&p.alice).await.unwrap().as_deref(), Some("scale"));
}

/// Counts by status, the users, and a user's roles (of memories and candidates, once each,
/// sorted, never another user's or another tenant's).
pub async fn aggregates_count_and_list_each_once(store: &dyn MemoryStore) {
    let p = people();
    let l = listing(store).await;
    let cto = memory(
        &p.alice,
        "cto",
        None,
        MemoryType::ProjectDecision,
        "we go with Postgres",
    );
    let cfo = memory(&p.alice, "cfo", None, MemoryType::Constraint, "budget is $800");
    let again = memory(&p.alice, "cto", None, MemoryType::Risk, "the launch may slip");
    let twin = memory(&p.twin, "cto", None, MemoryType::Risk, "the twin's risk");
    store.commit(insert(&[cto, cfo, again, twin])).await.unwrap();
    let by_status = store.count_by_status().await.unwrap();
    assert!(
        by_status.iter().any(|(s, n)| *s == MemoryStatus::Replaced && *n >= 1),
        "{by_status:?}"
    );
    assert!(
        by_status.iter().any(|(s, n)| *s == MemoryStatus::Active && *n >= 9),
        "{by_status:?}"
    );
    let users = store.list_users().await.unwrap();
    assert!(
        users.contains(&p.alice) && users.contains(&l.user) && users.contains(&p.twin),
        "{users:?}"
    );
    assert!(
        !users.contains(&p.bob),
        "a user without memories is not listed: {users:?}"
    );
    let roles = store.list_roles(&p.alice).await.unwrap();
    assert_eq!(roles, vec!["cfo".to_string(), "cto".to_string()], "once each, sorted");
    assert!(
        store
            .list_roles(&Owner::new(
                p.alice.tenant_id.clone(),
                format!("{}-nobody", p.alice.user_id)
            ))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.list_roles(&p.twin).await.unwrap(),
        vec!["cto".to_string()],
        "another tenant's roles are not the twin's"
    );
}
