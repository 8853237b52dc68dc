//! The randomized differential test of the one visibility rule ([`crate::filter`]): random
//! memories over several tenants, users (the same user ids in two tenants), roles, projects, sessions, types, visibilities, statuses,
//! times and tags; random reads (owner, reader, narrowing); every backend's answer compared
//! with [`reference`], a predicate written from the rule's text and independently of the plan
//! every backend translates.
//!
//! The same corpus and reads run against the relational store (`list_memories` and
//! `count_memories`) and the vector index (dense and sparse search), so SQLite, PostgreSQL,
//! qdrant-edge and a Qdrant server answer the very same questions.

use std::collections::BTreeSet;

use chrono::{TimeZone, Utc};
use thinkus_common::model::{Memory, MemorySource, MemoryStatus, MemoryType, Owner, Scope, Visibility};

use super::fixtures::{DIM, SplitMix, T0, axis, new_id, unique_user};
use crate::filter::{Layers, MemoryFilter, Reader};
use crate::sql::{MemoryQuery, MemoryStore, WriteBatch};
use crate::vector::{Bm25Encoder, IndexedPoint, VectorIndex};

/// Whether a read may return a memory, as the rule reads in words (see [`Reader`]); the
/// reference every backend is checked against. Keep it independent of [`crate::filter::Plan`].
pub fn reference(filter: &MemoryFilter, point: &IndexedPoint) -> bool {
    // The owner is a user of a tenant: both must be the reader's.
    if point.tenant_id != filter.tenant_id || point.user_id != filter.user_id {
        return false;
    }
    if !filter.statuses.contains(&point.status) {
        return false;
    }
    if !filter.types.is_empty() && !filter.types.contains(&point.memory_type) {
        return false;
    }
    if !filter.visibilities.is_empty() && !filter.visibilities.contains(&point.visibility) {
        return false;
    }
    if let Some(session) = &filter.session_id
        && point.session_id.as_ref() != Some(session)
    {
        return false;
    }
    if filter.occurred_from_ms.is_some_and(|from| point.occurred_at_ms < from) {
        return false;
    }
    if filter.occurred_to_ms.is_some_and(|to| point.occurred_at_ms >= to) {
        return false;
    }
    if !filter.tags.iter().all(|tag| point.tags.contains(tag)) {
        return false;
    }
    let Some(reader) = &filter.reader else {
        return true;
    };
    let shared = matches!(point.visibility, Visibility::Project | Visibility::Global);
    let owned_or_shared = point.role_id == reader.role_id || shared;
    match (&point.project_id, &reader.project_id) {
        // The cross-project layer: own or shared.
        (None, _) => reader.layers != Layers::Project && owned_or_shared,
        // The reader's project: own or shared.
        (Some(p), Some(r)) if p == r => reader.layers != Layers::CrossProject && owned_or_shared,
        // Another project: only what it made global.
        (Some(_), _) => reader.layers == Layers::Both && point.visibility == Visibility::Global,
    }
}

/// What a differential run found on one backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Reads run (each search or listing is one).
    pub queries: u64,
    /// Memories returned that the reference refuses: data shown to a reader who may not see it.
    pub leaks: u64,
    /// Memories the reference accepts that were not returned.
    pub misses: u64,
    /// The first disagreements, described.
    pub failures: Vec<String>,
}

impl Tally {
    fn record(&mut self, what: &str, filter: &MemoryFilter, got: &BTreeSet<String>, expected: &BTreeSet<String>) {
        self.queries += 1;
        let leaked = got.difference(expected).count() as u64;
        let missed = expected.difference(got).count() as u64;
        self.leaks += leaked;
        self.misses += missed;
        if (leaked > 0 || missed > 0) && self.failures.len() < 5 {
            self.failures
                .push(format!("{what}: {leaked} leaked, {missed} missed for {filter:?}"));
        }
    }

    /// Adds another backend's tally.
    pub fn add(&mut self, other: &Tally) {
        self.queries += other.queries;
        self.leaks += other.leaks;
        self.misses += other.misses;
        self.failures.extend(other.failures.iter().cloned());
    }

    /// Panics naming the first disagreements unless there were none.
    pub fn assert_clean(&self, backend: &str) {
        assert!(
            self.leaks == 0 && self.misses == 0,
            "{backend}: {} leaks and {} misses over {} reads; first: {:#?}",
            self.leaks,
            self.misses,
            self.queries,
            self.failures
        );
    }
}

/// A corpus of random memories and random reads over it.
#[derive(Debug, Clone)]
pub struct Differential {
    pub seed: u64,
    pub points: Vec<IndexedPoint>,
    pub filters: Vec<MemoryFilter>,
}

const ROLES: [&str; 3] = ["cto", "cfo", "designer"];
const PROJECTS: [Option<&str>; 3] = [Some("p1"), Some("p2"), None];
const SESSIONS: [Option<&str>; 3] = [None, Some("s1"), Some("s2")];
const TAGS: [&str; 4] = ["infra", "cost", "design", "le_gal%"];
const TYPES: [MemoryType; 4] = [
    MemoryType::ProjectDecision,
    MemoryType::UserPreference,
    MemoryType::Risk,
    MemoryType::ConversationTurn,
];
const WORDS: [&str; 6] = ["deploy", "budget", "design", "hiring", "vendor", "launch"];

impl Differential {
    /// `point_count` memories over 4 owners (unique to this run): two users in each of two
    /// tenants, the same two user ids in both; `filter_count` reads.
    pub fn generate(seed: u64, point_count: usize, filter_count: usize) -> Self {
        let mut rng = SplitMix::new(seed);
        let encoder = Bm25Encoder::default();
        let alice = unique_user("diff-alice");
        let bob = unique_user("diff-bob");
        let other_tenant = format!("{}-twin", alice.tenant_id);
        let users: Vec<Owner> = vec![
            alice.clone(),
            bob.clone(),
            Owner::new(other_tenant.clone(), alice.user_id.clone()),
            Owner::new(other_tenant, bob.user_id.clone()),
        ];
        let points: Vec<IndexedPoint> = (0..point_count)
            .map(|i| {
                // Every text holds "memory", the term of the sparse search.
                let text = format!("memory {} {} zqp{i}x", rng.pick(&WORDS), rng.pick(&WORDS));
                let owner = rng.pick(&users).clone();
                IndexedPoint {
                    id: new_id(),
                    tenant_id: owner.tenant_id,
                    user_id: owner.user_id,
                    role_id: rng.pick(&ROLES).to_string(),
                    project_id: rng.pick(&PROJECTS).map(str::to_string),
                    session_id: rng.pick(&SESSIONS).map(str::to_string),
                    memory_type: *rng.pick(&TYPES),
                    visibility: *rng.pick(Visibility::ALL),
                    status: *rng.pick(MemoryStatus::ALL),
                    occurred_at_ms: T0 + rng.below(10_000) as i64,
                    tags: rng.subset(&TAGS).into_iter().map(str::to_string).collect(),
                    dense: rng.unit_vector(DIM),
                    sparse: encoder.document(&text),
                }
            })
            .collect();
        let mut readers: Vec<Owner> = users.clone();
        readers.push(unique_user("nobody"));
        // A tenant with no memories, for a user id that has some elsewhere.
        readers.push(Owner::new("nowhere", alice.user_id.clone()));
        let filters = (0..filter_count).map(|_| random_filter(&mut rng, &readers)).collect();
        Self { seed, points, filters }
    }

    /// The corpus as stored memories.
    pub fn memories(&self) -> Vec<Memory> {
        self.points.iter().map(memory_of).collect()
    }

    /// Writes the corpus to a relational store.
    pub async fn load_store(&self, store: &dyn MemoryStore) {
        for chunk in self.memories().chunks(200) {
            store
                .commit(WriteBatch {
                    inserts: chunk.to_vec(),
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|err| panic!("loading the corpus of seed {:#x}: {err}", self.seed));
        }
    }

    /// Writes the corpus to a vector index (made ready for [`DIM`] dimensions).
    pub async fn load_index(&self, index: &dyn VectorIndex) {
        index.ensure_ready(DIM).await.expect("ensure_ready");
        index
            .upsert(self.points.clone())
            .await
            .unwrap_or_else(|err| panic!("loading the corpus of seed {:#x}: {err}", self.seed));
    }

    fn expected(&self, filter: &MemoryFilter) -> BTreeSet<String> {
        self.points
            .iter()
            .filter(|point| reference(filter, point))
            .map(|point| point.id.clone())
            .collect()
    }

    /// Every read as a listing and a count of the relational store.
    pub async fn check_store(&self, store: &dyn MemoryStore) -> Tally {
        let mut tally = Tally::default();
        for filter in &self.filters {
            let expected = self.expected(filter);
            let query = MemoryQuery::of(filter.clone());
            let got: BTreeSet<String> = store
                .list_memories(&query)
                .await
                .unwrap_or_else(|err| panic!("list_memories for {filter:?}: {err}"))
                .into_iter()
                .map(|memory| memory.id)
                .collect();
            tally.record("list_memories", filter, &got, &expected);
            let count = store
                .count_memories(&query)
                .await
                .unwrap_or_else(|err| panic!("count_memories for {filter:?}: {err}"));
            tally.queries += 1;
            if count != expected.len() as u64 {
                let extra = count.saturating_sub(expected.len() as u64);
                tally.leaks += extra;
                tally.misses += (expected.len() as u64).saturating_sub(count);
                if tally.failures.len() < 5 {
                    tally.failures.push(format!(
                        "count_memories: {count} instead of {} for {filter:?}",
                        expected.len()
                    ));
                }
            }
        }
        tally
    }

    /// Every read as a dense and a sparse search of the vector index.
    pub async fn check_index(&self, index: &dyn VectorIndex) -> Tally {
        let mut tally = Tally::default();
        let sparse_query = Bm25Encoder::default().query("memory");
        for filter in &self.filters {
            let expected = self.expected(filter);
            let dense: BTreeSet<String> = index
                .search_dense(&axis(0), filter, 10_000)
                .await
                .unwrap_or_else(|err| panic!("dense search for {filter:?}: {err}"))
                .into_iter()
                .map(|hit| hit.id)
                .collect();
            tally.record("search_dense", filter, &dense, &expected);
            let sparse: BTreeSet<String> = index
                .search_sparse(&sparse_query, filter, 10_000)
                .await
                .unwrap_or_else(|err| panic!("sparse search for {filter:?}: {err}"))
                .into_iter()
                .map(|hit| hit.id)
                .collect();
            tally.record("search_sparse", filter, &sparse, &expected);
        }
        tally
    }
}

/// A random read: an owner (sometimes one with no memories), a reader half the time, and
/// each narrowing now and then.
pub fn random_filter(rng: &mut SplitMix, users: &[Owner]) -> MemoryFilter {
    let mut filter = MemoryFilter::user(rng.pick(users));
    filter.statuses = if rng.chance(30) {
        rng.subset(MemoryStatus::ALL)
    } else {
        vec![MemoryStatus::Active]
    };
    if rng.chance(60) {
        filter.reader = Some(Reader {
            role_id: rng.pick(&["cto", "cfo", "designer", "intern"]).to_string(),
            project_id: rng
                .pick(&[Some("p1"), Some("p2"), Some("p3"), None])
                .map(str::to_string),
            layers: *rng.pick(&[Layers::Both, Layers::Project, Layers::CrossProject]),
        });
    }
    if rng.chance(30) {
        filter.types = rng.subset(&TYPES);
    }
    if rng.chance(30) {
        filter.visibilities = rng.subset(Visibility::ALL);
    }
    if rng.chance(25) {
        filter.session_id = rng.pick(&SESSIONS).map(str::to_string);
    }
    if rng.chance(30) {
        filter.occurred_from_ms = Some(T0 + rng.below(10_000) as i64);
    }
    if rng.chance(30) {
        filter.occurred_to_ms = Some(T0 + rng.below(10_000) as i64);
    }
    if rng.chance(30) {
        filter.tags = rng.subset(&TAGS).into_iter().map(str::to_string).collect();
    }
    filter
}

/// The stored memory of a corpus point (same id, owner and filtered fields).
pub fn memory_of(point: &IndexedPoint) -> Memory {
    let at = Utc
        .timestamp_millis_opt(point.occurred_at_ms)
        .single()
        .expect("a valid time");
    let scope = Scope {
        tenant_id: point.tenant_id.clone(),
        user_id: point.user_id.clone(),
        role_id: point.role_id.clone(),
        project_id: point.project_id.clone(),
        session_id: point.session_id.clone(),
    };
    let mut memory = Memory::new(
        scope,
        point.memory_type,
        format!("memory {}", point.id),
        MemorySource::UserInput,
        at,
    );
    memory.id = point.id.clone();
    memory.visibility = point.visibility;
    memory.status = point.status;
    memory.tags = point.tags.clone();
    memory
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan evaluated in process ([`MemoryFilter::matches`]) agrees with the reference.
    #[test]
    fn the_plan_agrees_with_the_reference_in_process() {
        let run = Differential::generate(0x0ddba11, 400, 3_000);
        let mut tally = Tally::default();
        let memories = run.memories();
        for filter in &run.filters {
            let expected = run.expected(filter);
            let got = run
                .points
                .iter()
                .filter(|point| filter.matches(point))
                .map(|point| point.id.clone())
                .collect();
            tally.record("plan eval", filter, &got, &expected);
            let by_memory: BTreeSet<String> = memories
                .iter()
                .filter(|m| filter.matches_memory(m))
                .map(|m| m.id.clone())
                .collect();
            tally.record("plan eval on memories", filter, &by_memory, &expected);
        }
        tally.assert_clean("in process");
        assert_eq!(tally.queries, 6_000);
    }
}
