//! The conformance suite of [`VectorIndex`], one function per behaviour that every backend must
//! pass (the test binary stamps each into its own test per backend), with
//! [`super::visibility::reference`] as the reference for what a filter selects.
//!
//! Every check writes under its own user id, made unique per run, so the suite can run
//! against a shared server and more than once against the same index. It needs the
//! collection to have (or accept) [`DIM`] dense dimensions.

use std::collections::BTreeSet;

use thinkus_common::model::{MemoryStatus, MemoryType, Owner, Visibility};

pub use super::fixtures::{DIM, SplitMix, T0, axis, new_id, unique_user};
use crate::filter::{Layers, MemoryFilter, Reader};
use crate::vector::{Bm25Encoder, IndexedPoint, SparseVector, VectorError, VectorHit, VectorIndex};

/// Makes the index ready for the suite's [`DIM`] dense dimensions.
async fn ready(index: &dyn VectorIndex) {
    index
        .ensure_ready(DIM)
        .await
        .unwrap_or_else(|err| panic!("{}: ensure_ready({DIM}) failed: {err}", index.name()));
}

/// A private, active decision of role `cto` in project `p1` at [`T0`], with a dense vector
/// along the first axis and the sparse vector of "memory".
pub fn base_point(owner: &Owner) -> IndexedPoint {
    IndexedPoint {
        id: new_id(),
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        role_id: "cto".into(),
        project_id: Some("p1".into()),
        session_id: None,
        memory_type: MemoryType::ProjectDecision,
        visibility: Visibility::Private,
        status: MemoryStatus::Active,
        occurred_at_ms: T0,
        tags: Vec::new(),
        dense: axis(0),
        sparse: Bm25Encoder::default().document("memory"),
    }
}

/// `count` points of one user with distinct pseudo-random dense vectors and distinct texts
/// ("memory number i about topic-i"), so each finds itself first by either vector.
pub fn sample_points(user: &Owner, count: usize) -> Vec<IndexedPoint> {
    let encoder = Bm25Encoder::default();
    let mut rng = SplitMix::new(count as u64 ^ 0xa5a5);
    (0..count)
        .map(|i| IndexedPoint {
            dense: rng.unit_vector(DIM),
            sparse: encoder.document(&format!("memory number {i} about zq{i}x")),
            occurred_at_ms: T0 + i as i64,
            ..base_point(user)
        })
        .collect()
}

fn id_set(hits: &[VectorHit]) -> BTreeSet<String> {
    hits.iter().map(|hit| hit.id.clone()).collect()
}

fn ids_of<'a>(points: impl IntoIterator<Item = &'a IndexedPoint>) -> BTreeSet<String> {
    points.into_iter().map(|point| point.id.clone()).collect()
}

fn assert_sorted(hits: &[VectorHit], context: &str) {
    assert!(
        hits.windows(2).all(|pair| pair[0].score >= pair[1].score),
        "{context}: hits must come best first, got {hits:?}"
    );
}

async fn upsert(index: &dyn VectorIndex, points: &[IndexedPoint]) {
    index
        .upsert(points.to_vec())
        .await
        .unwrap_or_else(|err| panic!("upsert of {} points failed: {err}", points.len()));
}

/// Every id a dense search returns for `filter`, with a limit above the user's point count.
async fn dense_ids(index: &dyn VectorIndex, filter: &MemoryFilter) -> BTreeSet<String> {
    let hits = index
        .search_dense(&axis(0), filter, 10_000)
        .await
        .unwrap_or_else(|err| panic!("dense search failed for {filter:?}: {err}"));
    assert_sorted(&hits, "dense search");
    id_set(&hits)
}

/// Every id a sparse search for "memory" (a term of every suite point) returns for `filter`.
async fn sparse_ids(index: &dyn VectorIndex, filter: &MemoryFilter) -> BTreeSet<String> {
    let query = Bm25Encoder::default().query("memory");
    let hits = index
        .search_sparse(&query, filter, 10_000)
        .await
        .unwrap_or_else(|err| panic!("sparse search failed for {filter:?}: {err}"));
    assert_sorted(&hits, "sparse search");
    id_set(&hits)
}

/// Asserts that both searches return exactly `expected` for `filter`.
async fn assert_selects(index: &dyn VectorIndex, filter: &MemoryFilter, expected: &BTreeSet<String>, context: &str) {
    let dense = dense_ids(index, filter).await;
    assert_eq!(
        &dense, expected,
        "{context}: dense search selected the wrong points for {filter:?}"
    );
    let sparse = sparse_ids(index, filter).await;
    assert_eq!(
        &sparse, expected,
        "{context}: sparse search selected the wrong points for {filter:?}"
    );
}

/// Asserts that both searches return exactly the points of `points` that the reference
/// semantics accept.
async fn assert_matches_reference(
    index: &dyn VectorIndex,
    filter: &MemoryFilter,
    points: &[IndexedPoint],
    context: &str,
) {
    let expected = ids_of(
        points
            .iter()
            .filter(|point| super::visibility::reference(filter, point)),
    );
    assert_selects(index, filter, &expected, context).await;
}

/// Making the index ready twice is fine; another dimension is refused, naming both.
pub async fn ensure_ready_is_idempotent_and_keeps_its_dimension(index: &dyn VectorIndex) {
    ready(index).await;
    index
        .ensure_ready(DIM)
        .await
        .unwrap_or_else(|err| panic!("ensure_ready must be idempotent: {err}"));
    match index.ensure_ready(DIM + 1).await {
        Err(VectorError::Dimension { expected, actual }) => {
            assert_eq!(
                (expected, actual),
                (DIM, DIM + 1),
                "the dimension error names the existing and the requested dimension"
            );
        }
        other => panic!("ensure_ready with another dimension must fail, got {other:?}"),
    }
}

/// A point is searchable as soon as its upsert returns, and an upsert of its id replaces it whole.
pub async fn a_point_is_searchable_once_upserted_and_replaced_by_its_id(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("raw");
    let filter = MemoryFilter::user(&user);
    index.upsert(Vec::new()).await.expect("an empty upsert is a no-op");

    let mut point = base_point(&user);
    point.dense = axis(3);
    upsert(index, std::slice::from_ref(&point)).await;

    let hits = index.search_dense(&axis(3), &filter, 5).await.expect("dense search");
    assert_eq!(
        hits.first().map(|hit| hit.id.as_str()),
        Some(point.id.as_str()),
        "a point is searchable as soon as upsert returns"
    );
    let hits = index
        .search_sparse(&Bm25Encoder::default().query("memory"), &filter, 5)
        .await
        .expect("sparse search");
    assert_eq!(id_set(&hits), ids_of([&point]), "sparse read after write");
    assert_eq!(index.count(Some(&user)).await.expect("count"), 1);
    assert_eq!(index.list_ids(&user).await.expect("list_ids"), vec![point.id.clone()]);

    // Upserting the same id replaces the point: vectors and payload alike.
    let mut replaced = point.clone();
    replaced.dense = axis(4);
    replaced.sparse = Bm25Encoder::default().document("memory replaced by a newer zqreplacedx");
    replaced.memory_type = MemoryType::Risk;
    upsert(index, std::slice::from_ref(&replaced)).await;
    assert_eq!(
        index.count(Some(&user)).await.expect("count"),
        1,
        "an upsert of an existing id replaces it"
    );
    let hits = index.search_dense(&axis(4), &filter, 1).await.expect("dense search");
    assert!(
        hits.first()
            .is_some_and(|hit| hit.id == point.id && (hit.score - 1.0).abs() < 1e-3),
        "the replaced vector is the one searched, got {hits:?}"
    );
    let hits = index
        .search_sparse(&Bm25Encoder::default().query("zqreplacedx"), &filter, 5)
        .await
        .expect("sparse search");
    assert_eq!(id_set(&hits), ids_of([&point]), "the replaced terms are searched");
    let mut risks = filter.clone();
    risks.types = vec![MemoryType::Risk];
    assert_selects(index, &risks, &ids_of([&point]), "replaced payload").await;
}

/// Dense hits come by decreasing cosine, whatever the vectors' lengths, up to the limit.
pub async fn dense_hits_rank_by_cosine(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("dense");
    let filter = MemoryFilter::user(&user);
    let e0e1 = |x: f32, y: f32| {
        let mut v = vec![0.0; DIM];
        v[0] = x;
        v[1] = y;
        v
    };
    // Stored unnormalised on purpose: cosine must not depend on length.
    let cases = [
        (e0e1(3.0, 0.0), 1.0_f32),
        (e0e1(1.0, 0.5), 1.0 / 1.25_f32.sqrt()),
        (e0e1(1.0, 2.0), 1.0 / 5.0_f32.sqrt()),
        (e0e1(0.0, 1.0), 0.0),
        (e0e1(-1.0, 0.0), -1.0),
    ];
    let points: Vec<IndexedPoint> = cases
        .iter()
        .map(|(dense, _)| IndexedPoint {
            dense: dense.clone(),
            ..base_point(&user)
        })
        .collect();
    upsert(index, &points).await;

    let hits = index.search_dense(&axis(0), &filter, 10).await.expect("dense search");
    let order: Vec<&str> = hits.iter().map(|hit| hit.id.as_str()).collect();
    let expected: Vec<&str> = points.iter().map(|point| point.id.as_str()).collect();
    assert_eq!(order, expected, "dense hits come by decreasing cosine: {hits:?}");
    for (hit, (_, cosine)) in hits.iter().zip(&cases) {
        assert!(
            (hit.score - cosine).abs() < 1e-3,
            "dense scores are cosine similarities: expected {cosine}, got {}",
            hit.score
        );
    }

    let mut long_query = axis(0);
    long_query[0] = 2.0;
    let top2 = index.search_dense(&long_query, &filter, 2).await.expect("dense search");
    assert_eq!(
        top2.iter().map(|hit| hit.id.as_str()).collect::<Vec<_>>(),
        expected[..2],
        "the limit keeps the best hits and the query length does not matter"
    );
    assert!(
        index
            .search_dense(&axis(0), &filter, 0)
            .await
            .expect("limit 0")
            .is_empty(),
        "limit 0 returns nothing"
    );
}

/// Sparse hits are the documents sharing a term with the query, best first, up to the limit.
pub async fn sparse_hits_rank_by_shared_terms(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("sparse");
    let filter = MemoryFilter::user(&user);
    let encoder = Bm25Encoder::default();
    let texts = [
        "我喜欢简约的设计风格",
        "We decided to deploy on Vercel",
        "The budget for the quarter is fixed at forty thousand",
        "Lunch was pasta again today",
    ];
    let points: Vec<IndexedPoint> = texts
        .iter()
        .map(|text| IndexedPoint {
            sparse: encoder.document(text),
            ..base_point(&user)
        })
        .collect();
    upsert(index, &points).await;

    for (query, expected) in [("设计风格", 0), ("deployment", 1), ("what is the budget?", 2)] {
        let hits = index
            .search_sparse(&encoder.query(query), &filter, 10)
            .await
            .expect("sparse search");
        assert_sorted(&hits, query);
        assert_eq!(
            hits.first().map(|hit| hit.id.as_str()),
            Some(points[expected].id.as_str()),
            "{query:?} must find {:?} first, got {hits:?}",
            texts[expected]
        );
        assert!(
            hits.iter().all(|hit| hit.score > 0.0),
            "BM25 scores are positive: {hits:?}"
        );
    }
    let hits = index
        .search_sparse(&encoder.query("设计风格"), &filter, 10)
        .await
        .expect("sparse search");
    assert_eq!(
        id_set(&hits),
        ids_of([&points[0]]),
        "only documents sharing a term match"
    );
    let hits = index
        .search_sparse(&encoder.query("kubernetes"), &filter, 10)
        .await
        .expect("sparse search");
    assert!(hits.is_empty(), "no shared term, no hit: {hits:?}");
    let hits = index
        .search_sparse(&SparseVector::default(), &filter, 10)
        .await
        .expect("an empty query is valid");
    assert!(hits.is_empty(), "an empty query matches nothing");

    let mut two = filter.clone();
    two.types = vec![MemoryType::ProjectDecision];
    let hits = index
        .search_sparse(&encoder.query("deploy the budget"), &two, 1)
        .await
        .expect("sparse search");
    assert_eq!(hits.len(), 1, "the limit applies to sparse search");
}

/// The index weighs terms by their rarity (IDF): a rare term outranks a common one.
pub async fn rare_terms_outrank_common_ones(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("idf");
    let filter = MemoryFilter::user(&user);
    let encoder = Bm25Encoder::default();
    let common_doc = encoder.document("project plan");
    let rare_doc = encoder.document("kubernetes plan review");
    let query = encoder.query("project kubernetes");
    // Without IDF the common-term document would win: the test is only meaningful if so.
    assert!(
        common_doc.dot(&query) > rare_doc.dot(&query),
        "precondition: the raw BM25 weight of the common document is higher"
    );
    let mut points: Vec<IndexedPoint> = (0..30)
        .map(|i| IndexedPoint {
            sparse: encoder.document(&format!("project update zqfill{i}x")),
            ..base_point(&user)
        })
        .collect();
    let common = IndexedPoint {
        sparse: common_doc,
        ..base_point(&user)
    };
    let rare = IndexedPoint {
        sparse: rare_doc,
        ..base_point(&user)
    };
    points.push(common.clone());
    points.push(rare.clone());
    upsert(index, &points).await;

    let hits = index.search_sparse(&query, &filter, 50).await.expect("sparse search");
    assert_eq!(
        hits.first().map(|hit| hit.id.as_str()),
        Some(rare.id.as_str()),
        "the rare term outranks the common one (IDF applied by the index): {hits:?}"
    );
    let score = |id: &str| hits.iter().find(|hit| hit.id == id).map(|hit| hit.score);
    assert!(
        score(&rare.id) > score(&common.id),
        "IDF weighs the rare term above the common one"
    );
    assert_eq!(hits.len(), 32, "every document with a query term matches");
}

/// An owner's searches, counts and listings never hold another user's or tenant's points.
pub async fn owners_never_see_each_others_points(index: &dyn VectorIndex) {
    ready(index).await;
    let alice = unique_user("alice");
    let bob = unique_user("bob");
    let a = base_point(&alice);
    let b = base_point(&bob);
    let mut b_global = b.clone();
    b_global.id = new_id();
    b_global.visibility = Visibility::Global;
    upsert(index, &[a.clone(), b.clone(), b_global]).await;

    let mut filter = MemoryFilter::user(&alice);
    assert_selects(index, &filter, &ids_of([&a]), "tenant isolation").await;
    filter.reader = Some(Reader {
        role_id: "cto".into(),
        project_id: Some("p2".into()),
        layers: Layers::Both,
    });
    // Bob's global memory of another project is still Bob's: never visible to Alice.
    assert_selects(index, &filter, &BTreeSet::new(), "global does not cross users").await;
    assert_eq!(index.count(Some(&alice)).await.expect("count"), 1);
    assert_eq!(index.count(Some(&bob)).await.expect("count"), 2);
    assert_eq!(index.list_ids(&alice).await.expect("list_ids"), vec![a.id.clone()]);
    let nobody = unique_user("nobody");
    assert_selects(index, &MemoryFilter::user(&nobody), &BTreeSet::new(), "unknown user").await;

    // The same user id in another tenant is another person: its points and Alice's never mix.
    let twin = Owner::new("conformance-twin", alice.user_id.clone());
    let mut t = base_point(&twin);
    t.visibility = Visibility::Global;
    upsert(index, std::slice::from_ref(&t)).await;
    assert_selects(index, &MemoryFilter::user(&alice), &ids_of([&a]), "the twin's point").await;
    assert_selects(index, &MemoryFilter::user(&twin), &ids_of([&t]), "alice's point").await;
    assert_eq!(index.count(Some(&alice)).await.expect("count"), 1);
    assert_eq!(index.list_ids(&twin).await.expect("list_ids"), vec![t.id.clone()]);
    index.delete_user(&twin).await.expect("delete_user");
    assert_eq!(index.count(Some(&twin)).await.expect("count"), 0);
    assert_eq!(
        index.count(Some(&alice)).await.expect("count"),
        1,
        "deleting the twin's points leaves alice's"
    );
}

/// The points of the visibility table: (role, project, visibility).
fn reader_points(user: &Owner) -> Vec<IndexedPoint> {
    let table: [(&str, Option<&str>, Visibility); 12] = [
        ("cto", Some("p1"), Visibility::Private),
        ("cfo", Some("p1"), Visibility::Private),
        ("cfo", Some("p1"), Visibility::Project),
        ("cfo", Some("p1"), Visibility::Global),
        ("cto", None, Visibility::Private),
        ("cfo", None, Visibility::Private),
        ("cfo", None, Visibility::Project),
        ("cfo", None, Visibility::Global),
        ("cto", Some("p2"), Visibility::Private),
        ("cto", Some("p2"), Visibility::Project),
        ("cfo", Some("p2"), Visibility::Global),
        ("cfo", Some("p2"), Visibility::Private),
    ];
    table
        .iter()
        .map(|(role, project, visibility)| IndexedPoint {
            role_id: role.to_string(),
            project_id: project.map(str::to_string),
            visibility: *visibility,
            ..base_point(user)
        })
        .collect()
}

/// A reader sees what the visibility table allows for its role, project and layers.
pub async fn readers_see_what_the_visibility_rule_allows(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("reader");
    let points = reader_points(&user);
    upsert(index, &points).await;
    let pick = |rows: &[usize]| ids_of(rows.iter().map(|&row| &points[row]));
    let reader = |role: &str, project: Option<&str>, layers: Layers| {
        let mut filter = MemoryFilter::user(&user);
        filter.reader = Some(Reader {
            role_id: role.into(),
            project_id: project.map(str::to_string),
            layers,
        });
        filter
    };

    // Rows by the table above: 0-3 project p1, 4-7 cross-project, 8-11 project p2.
    let cases = [
        (
            reader("cto", Some("p1"), Layers::Both),
            pick(&[0, 2, 3, 4, 6, 7, 10]),
            "owner role, project-shared, cross-project layer and global of another project",
        ),
        (
            reader("cto", Some("p1"), Layers::Project),
            pick(&[0, 2, 3]),
            "Layers::Project: the reader's project only",
        ),
        (
            reader("cto", Some("p1"), Layers::CrossProject),
            pick(&[4, 6, 7]),
            "Layers::CrossProject: cross-project memories only",
        ),
        (
            reader("cfo", Some("p2"), Layers::Both),
            pick(&[3, 5, 6, 7, 9, 10, 11]),
            "another role in another project",
        ),
        (
            reader("ceo", None, Layers::Both),
            pick(&[3, 6, 7, 10]),
            "a reader without project sees global project memories and shared cross-project ones",
        ),
        (
            reader("cto", None, Layers::Project),
            BTreeSet::new(),
            "Layers::Project without a project selects nothing",
        ),
    ];
    for (filter, expected, context) in &cases {
        assert_eq!(
            expected,
            &ids_of(
                points
                    .iter()
                    .filter(|point| super::visibility::reference(filter, point))
            ),
            "the expected set of {context:?} agrees with the reference"
        );
        assert_selects(index, filter, expected, context).await;
    }
    // Without a reader every memory of the user is returned (administrative reads).
    assert_selects(index, &MemoryFilter::user(&user), &ids_of(&points), "no reader").await;
}

/// Type, visibility, session, time and tag filters narrow the hits, and combine.
pub async fn field_filters_narrow_and_combine(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("fields");
    let base = || base_point(&user);
    let decision = base();
    let risk = IndexedPoint {
        memory_type: MemoryType::Risk,
        visibility: Visibility::Project,
        session_id: Some("s1".into()),
        occurred_at_ms: T0 + 1_000,
        tags: vec!["infra".into(), "cost".into()],
        ..base()
    };
    let preference = IndexedPoint {
        memory_type: MemoryType::UserPreference,
        visibility: Visibility::Global,
        session_id: Some("s2".into()),
        occurred_at_ms: T0 + 2_000,
        tags: vec!["infra".into()],
        ..base()
    };
    let turn = IndexedPoint {
        memory_type: MemoryType::ConversationTurn,
        session_id: Some("s1".into()),
        occurred_at_ms: T0 + 3_000,
        tags: vec!["cost".into(), "design".into()],
        ..base()
    };
    let points = [decision, risk, preference, turn];
    upsert(index, &points).await;
    let [decision, risk, preference, turn] = &points;
    let all = MemoryFilter::user(&user);

    let mut f = all.clone();
    f.types = vec![MemoryType::Risk, MemoryType::UserPreference];
    assert_selects(index, &f, &ids_of([risk, preference]), "types").await;

    let mut f = all.clone();
    f.visibilities = vec![Visibility::Private];
    assert_selects(index, &f, &ids_of([decision, turn]), "visibilities").await;
    f.visibilities = vec![Visibility::Project, Visibility::Global];
    assert_selects(index, &f, &ids_of([risk, preference]), "visibilities").await;

    let mut f = all.clone();
    f.session_id = Some("s1".into());
    assert_selects(index, &f, &ids_of([risk, turn]), "session").await;
    f.session_id = Some("s9".into());
    assert_selects(index, &f, &BTreeSet::new(), "unknown session").await;

    let mut f = all.clone();
    f.occurred_from_ms = Some(T0 + 1_000);
    f.occurred_to_ms = Some(T0 + 3_000);
    assert_selects(
        index,
        &f,
        &ids_of([risk, preference]),
        "time: inclusive start, exclusive end",
    )
    .await;
    f.occurred_from_ms = Some(T0 + 1);
    f.occurred_to_ms = None;
    assert_selects(index, &f, &ids_of([risk, preference, turn]), "time: start only").await;
    f.occurred_from_ms = None;
    f.occurred_to_ms = Some(T0 + 2_000);
    assert_selects(index, &f, &ids_of([decision, risk]), "time: end only").await;
    f.occurred_from_ms = Some(T0 + 2_000);
    f.occurred_to_ms = Some(T0 + 2_000);
    assert_selects(index, &f, &BTreeSet::new(), "time: empty range").await;

    let mut f = all.clone();
    f.tags = vec!["infra".into()];
    assert_selects(index, &f, &ids_of([risk, preference]), "one tag").await;
    f.tags = vec!["infra".into(), "cost".into()];
    assert_selects(index, &f, &ids_of([risk]), "every tag must match").await;
    f.tags = vec!["cost".into(), "design".into()];
    assert_selects(index, &f, &ids_of([turn]), "every tag must match").await;
    f.tags = vec!["missing".into()];
    assert_selects(index, &f, &BTreeSet::new(), "unknown tag").await;

    let mut f = all.clone();
    f.types = vec![MemoryType::Risk, MemoryType::ConversationTurn];
    f.session_id = Some("s1".into());
    f.tags = vec!["cost".into()];
    f.occurred_from_ms = Some(T0 + 2_000);
    assert_selects(index, &f, &ids_of([turn]), "conditions combine").await;

    let mut f = all.clone();
    f.statuses = Vec::new();
    assert_selects(index, &f, &BTreeSet::new(), "no status selects nothing").await;
}

/// A status update moves points between status filters and keeps them.
pub async fn status_updates_move_points_between_filters(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("status");
    let points: Vec<IndexedPoint> = (0..4).map(|_| base_point(&user)).collect();
    upsert(index, &points).await;
    let active = MemoryFilter::user(&user);
    assert_selects(index, &active, &ids_of(&points), "all active").await;

    index
        .set_status(&[points[0].id.clone(), points[1].id.clone()], MemoryStatus::Suppressed)
        .await
        .expect("set_status");
    index
        .set_status(&[points[2].id.clone()], MemoryStatus::Forgotten)
        .await
        .expect("set_status");
    assert_selects(index, &active, &ids_of([&points[3]]), "status after set_status").await;

    let mut f = active.clone();
    f.statuses = vec![MemoryStatus::Suppressed];
    assert_selects(index, &f, &ids_of(&points[..2]), "suppressed").await;
    f.statuses = vec![MemoryStatus::Suppressed, MemoryStatus::Forgotten];
    assert_selects(index, &f, &ids_of(&points[..3]), "several statuses").await;
    f.statuses = MemoryStatus::ALL.to_vec();
    assert_selects(index, &f, &ids_of(&points), "every status").await;

    // Unknown ids are skipped; the known ones still change.
    index
        .set_status(&[new_id(), points[0].id.clone()], MemoryStatus::Active)
        .await
        .expect("set_status with an unknown id");
    assert_selects(
        index,
        &active,
        &ids_of([&points[0], &points[3]]),
        "set_status back to active",
    )
    .await;
    index
        .set_status(&[], MemoryStatus::Frozen)
        .await
        .expect("set_status of nothing");
    assert_eq!(
        index.count(Some(&user)).await.expect("count"),
        4,
        "set_status keeps the points"
    );
}

/// Deletes remove the points (or the user) they name and nothing else.
pub async fn deletes_remove_only_what_they_name(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("delete");
    let other = unique_user("delete-other");
    let points: Vec<IndexedPoint> = (0..5).map(|_| base_point(&user)).collect();
    let kept = base_point(&other);
    upsert(index, &points).await;
    upsert(index, std::slice::from_ref(&kept)).await;

    index
        .delete(&[points[0].id.clone(), new_id()])
        .await
        .expect("delete with an unknown id");
    index.delete(&[]).await.expect("delete of nothing");
    assert_eq!(index.count(Some(&user)).await.expect("count"), 4);
    assert_selects(index, &MemoryFilter::user(&user), &ids_of(&points[1..]), "after delete").await;

    index.delete_user(&user).await.expect("delete_user");
    assert_eq!(index.count(Some(&user)).await.expect("count"), 0);
    assert!(index.list_ids(&user).await.expect("list_ids").is_empty());
    assert_selects(index, &MemoryFilter::user(&user), &BTreeSet::new(), "after delete_user").await;
    assert_selects(
        index,
        &MemoryFilter::user(&other),
        &ids_of([&kept]),
        "delete_user spares other users",
    )
    .await;
    index
        .delete_user(&unique_user("never-written"))
        .await
        .expect("delete_user of an unknown user");
}

/// Counts and id listings cover every point, past one scroll page.
pub async fn counts_and_listings_cover_every_point(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("list");
    let before = index.count(None).await.expect("count all");
    // Past one scroll page of either backend.
    let points = sample_points(&user, 1_100);
    upsert(index, &points).await;
    assert_eq!(index.count(Some(&user)).await.expect("count"), 1_100);
    let after = index.count(None).await.expect("count all");
    assert!(
        after >= before + 1_100,
        "count(None) counts every user's points: {before} then {after}"
    );
    let listed = index.list_ids(&user).await.expect("list_ids");
    assert_eq!(listed.len(), 1_100, "list_ids returns each id once");
    assert_eq!(
        listed.into_iter().collect::<BTreeSet<_>>(),
        ids_of(&points),
        "list_ids returns every id of the user"
    );
    // Each sample point finds itself first by either vector.
    let filter = MemoryFilter::user(&user);
    for point in [&points[7], &points[1_099]] {
        let hits = index
            .search_dense(&point.dense, &filter, 3)
            .await
            .expect("dense search");
        assert_eq!(hits.first().map(|hit| &hit.id), Some(&point.id));
        let hits = index
            .search_sparse(&point.sparse, &filter, 3)
            .await
            .expect("sparse search");
        assert_eq!(hits.first().map(|hit| &hit.id), Some(&point.id));
    }
    index.flush().await.expect("flush");
}

/// Wrong dimensions, ids that are not memory ids, NaN and malformed sparse vectors are refused;
/// a point without terms is found by its dense vector only.
pub async fn bad_input_is_refused_and_writes_nothing(index: &dyn VectorIndex) {
    ready(index).await;
    let user = unique_user("bad");
    let filter = MemoryFilter::user(&user);

    let mut point = base_point(&user);
    point.dense = vec![1.0; DIM + 1];
    assert!(
        matches!(
            index.upsert(vec![point]).await,
            Err(VectorError::Dimension { expected: DIM, actual }) if actual == DIM + 1
        ),
        "an upsert with the wrong dimension fails with Dimension"
    );
    assert!(
        matches!(
            index.search_dense(&[1.0; 3], &filter, 5).await,
            Err(VectorError::Dimension {
                expected: DIM,
                actual: 3
            })
        ),
        "a query with the wrong dimension fails with Dimension"
    );

    let mut point = base_point(&user);
    point.id = "art_123".into();
    assert!(
        matches!(index.upsert(vec![point]).await, Err(VectorError::Invalid(_))),
        "an id that is not a memory id is invalid"
    );
    assert!(matches!(
        index.delete(&["mem_nothex".into()]).await,
        Err(VectorError::Invalid(_))
    ));
    assert!(matches!(
        index.set_status(&["".into()], MemoryStatus::Active).await,
        Err(VectorError::Invalid(_))
    ));

    let mut point = base_point(&user);
    point.dense[1] = f32::NAN;
    assert!(
        matches!(index.upsert(vec![point]).await, Err(VectorError::Invalid(_))),
        "a NaN in a dense vector is invalid"
    );
    let mut point = base_point(&user);
    point.sparse = SparseVector {
        indices: vec![5, 3],
        values: vec![1.0, 1.0],
    };
    assert!(
        matches!(index.upsert(vec![point]).await, Err(VectorError::Invalid(_))),
        "unsorted sparse indices are invalid"
    );
    let unequal = SparseVector {
        indices: vec![1, 2],
        values: vec![1.0],
    };
    assert!(
        matches!(
            index.search_sparse(&unequal, &filter, 5).await,
            Err(VectorError::Invalid(_))
        ),
        "a sparse query with more indices than values is invalid"
    );
    assert_eq!(
        index.count(Some(&user)).await.expect("count"),
        0,
        "a rejected upsert writes nothing"
    );

    // A point without terms is stored and found by its dense vector only.
    let mut silent = base_point(&user);
    silent.sparse = SparseVector::default();
    upsert(index, std::slice::from_ref(&silent)).await;
    assert_eq!(dense_ids(index, &filter).await, ids_of([&silent]));
    assert!(sparse_ids(index, &filter).await.is_empty());
}

/// Both searches select exactly what the reference rule accepts, over random points and reads
/// (seed 0x5eed_0001: 200 points, 60 filters).
pub async fn searches_agree_with_the_reference_rule(index: &dyn VectorIndex) {
    ready(index).await;
    check_against_reference(index, 0x5eed_0001, 200, 60).await;
}

/// The randomized differential run ([`super::visibility`]) on this index: random points over
/// several tenants, users, roles and projects, random reads; both searches must return exactly
/// what the reference accepts. Then statuses change under the filters.
pub async fn check_against_reference(index: &dyn VectorIndex, seed: u64, point_count: usize, filter_count: usize) {
    let run = super::visibility::Differential::generate(seed, point_count, filter_count);
    run.load_index(index).await;
    let owners: BTreeSet<Owner> = run
        .points
        .iter()
        .map(|p| Owner::new(p.tenant_id.clone(), p.user_id.clone()))
        .collect();
    for owner in &owners {
        let own = ids_of(
            run.points
                .iter()
                .filter(|p| p.tenant_id == owner.tenant_id && p.user_id == owner.user_id),
        );
        assert_eq!(
            index.count(Some(owner)).await.expect("count") as usize,
            own.len(),
            "count of {owner}"
        );
        assert_eq!(
            index
                .list_ids(owner)
                .await
                .expect("list_ids")
                .into_iter()
                .collect::<BTreeSet<_>>(),
            own,
            "list_ids of {owner}"
        );
    }
    run.check_index(index).await.assert_clean(index.name());

    // Statuses change under the filters too.
    let changed: Vec<String> = run.points.iter().step_by(3).map(|p| p.id.clone()).collect();
    index
        .set_status(&changed, MemoryStatus::Replaced)
        .await
        .expect("set_status");
    let updated: Vec<IndexedPoint> = run
        .points
        .iter()
        .map(|point| {
            let mut point = point.clone();
            if changed.contains(&point.id) {
                point.status = MemoryStatus::Replaced;
            }
            point
        })
        .collect();
    for owner in &owners {
        let mut filter = MemoryFilter::user(owner);
        filter.statuses = vec![MemoryStatus::Active, MemoryStatus::Replaced];
        filter.reader = Some(Reader {
            role_id: "cto".into(),
            project_id: Some("p1".into()),
            layers: Layers::Both,
        });
        assert_matches_reference(index, &filter, &updated, "after set_status").await;
        filter.statuses = vec![MemoryStatus::Replaced];
        filter.reader = None;
        assert_matches_reference(index, &filter, &updated, "replaced only").await;
    }
}
