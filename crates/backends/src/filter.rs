//! The one visibility rule: which memories a read may return.
//!
//! A read names its owner, its reader (role, project, layers) and what it narrows to (types,
//! statuses, visibilities, session, time, tags): a [`MemoryFilter`]. [`MemoryFilter::plan`]
//! turns it, once, into a [`Plan`]: a backend-neutral condition over the fields every backend
//! stores ([`Field`]). Each backend translates the plan and nothing else: SQL (`sql::query`),
//! qdrant-edge and Qdrant (`vector::edge`, `vector::qdrant`), and [`Plan::eval`] for checks in
//! process. The rule itself lives only in [`MemoryFilter::plan`] and [`Reader::plan`].
//!
//! The randomized differential test (`conformance::visibility`) checks every translation
//! against a reference predicate written independently of the plan.

use thinkus_common::model::{Memory, MemoryStatus, MemoryType, Owner, Visibility};

use crate::vector::IndexedPoint;

/// Which of the two memory layers a read covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layers {
    /// The project's memories and the user's cross-project ones (plus global memories of other
    /// projects).
    #[default]
    Both,
    /// Only memories of the reader's project.
    Project,
    /// Only cross-project memories.
    CrossProject,
}

/// Who reads, which decides what is visible:
/// - a memory of the reader's project is visible when the reader's role owns it or its
///   visibility is `project` or `global`;
/// - a cross-project memory (no project) likewise: own role, or `project`/`global`;
/// - a memory of another project only when its visibility is `global` (and layers are `Both`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    pub role_id: String,
    pub project_id: Option<String>,
    pub layers: Layers,
}

/// What a read may return. Every condition must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryFilter {
    /// Required: the tenant of the owner. The same user id in two tenants is two people.
    pub tenant_id: String,
    /// Required: the owner of the memories.
    pub user_id: String,
    /// Visibility rules; `None` means every memory of the owner (administrative reads).
    pub reader: Option<Reader>,
    /// Only these types; empty means any.
    pub types: Vec<MemoryType>,
    /// Only these statuses; empty selects nothing.
    pub statuses: Vec<MemoryStatus>,
    /// Only these visibilities; empty means any.
    pub visibilities: Vec<Visibility>,
    /// Only memories of this session.
    pub session_id: Option<String>,
    /// Inclusive lower bound of the time it happened, in milliseconds since the epoch.
    pub occurred_from_ms: Option<i64>,
    /// Exclusive upper bound of the time it happened, in milliseconds since the epoch.
    pub occurred_to_ms: Option<i64>,
    /// Memories carrying all of these tags.
    pub tags: Vec<String>,
}

impl MemoryFilter {
    /// Active memories of an owner, whatever the role or project.
    pub fn user(owner: &Owner) -> Self {
        Self {
            tenant_id: owner.tenant_id.clone(),
            user_id: owner.user_id.clone(),
            statuses: vec![MemoryStatus::Active],
            ..Default::default()
        }
    }

    /// Memories of an owner in any status, whatever the role or project.
    pub fn any_status(owner: &Owner) -> Self {
        Self {
            statuses: MemoryStatus::ALL.to_vec(),
            ..Self::user(owner)
        }
    }

    /// The owner the filter reads.
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }

    /// The filter as a backend-neutral plan. Built once per read; every backend translates it.
    pub fn plan(&self) -> Plan {
        let mut all = vec![
            Plan::Is(Field::Tenant, self.tenant_id.clone()),
            Plan::Is(Field::User, self.user_id.clone()),
            Plan::one_of(Field::Status, self.statuses.iter().map(|s| s.as_str())),
        ];
        if !self.types.is_empty() {
            all.push(Plan::one_of(Field::Type, self.types.iter().map(|t| t.as_str())));
        }
        if !self.visibilities.is_empty() {
            all.push(Plan::one_of(
                Field::Visibility,
                self.visibilities.iter().map(|v| v.as_str()),
            ));
        }
        if let Some(session) = &self.session_id {
            all.push(Plan::Is(Field::Session, session.clone()));
        }
        if self.occurred_from_ms.is_some() || self.occurred_to_ms.is_some() {
            all.push(Plan::OccurredWithin {
                from_ms: self.occurred_from_ms,
                to_ms: self.occurred_to_ms,
            });
        }
        for tag in &self.tags {
            all.push(Plan::HasTag(tag.clone()));
        }
        if let Some(reader) = &self.reader {
            all.push(reader.plan());
        }
        Plan::all(all)
    }

    /// Whether a point passes the filter ([`Plan::eval`] of [`Self::plan`]).
    pub fn matches(&self, point: &IndexedPoint) -> bool {
        self.plan().eval(point)
    }

    /// Whether a stored memory passes the filter.
    pub fn matches_memory(&self, memory: &Memory) -> bool {
        self.plan().eval_memory(memory)
    }
}

impl Reader {
    /// What the reader may see, as alternatives (see [`Reader`]).
    pub fn plan(&self) -> Plan {
        let owned_or_shared = || {
            Plan::any(vec![
                Plan::Is(Field::Role, self.role_id.clone()),
                Plan::one_of(
                    Field::Visibility,
                    [Visibility::Project.as_str(), Visibility::Global.as_str()],
                ),
            ])
        };
        let mut branches = Vec::new();
        if self.layers != Layers::Project {
            branches.push(Plan::all(vec![Plan::CrossProject(true), owned_or_shared()]));
        }
        if self.layers != Layers::CrossProject
            && let Some(project) = &self.project_id
        {
            branches.push(Plan::all(vec![
                Plan::Is(Field::Project, project.clone()),
                owned_or_shared(),
            ]));
        }
        if self.layers == Layers::Both {
            // Any project's global memories; those of the reader's own project pass the branch
            // above as well, so they need no exclusion here.
            branches.push(Plan::all(vec![
                Plan::CrossProject(false),
                Plan::Is(Field::Visibility, Visibility::Global.as_str().into()),
            ]));
        }
        Plan::any(branches)
    }
}

/// A field a plan tests. Every backend stores each: a column in SQL, a payload key in the
/// vector indexes (the same keys in both), a field of [`IndexedPoint`] and [`Memory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Tenant,
    User,
    Role,
    /// Absent for cross-project memories (see [`Plan::CrossProject`]).
    Project,
    /// Absent when the memory has no session.
    Session,
    Type,
    Visibility,
    Status,
}

/// A backend-neutral condition. Built by [`MemoryFilter::plan`]; [`Plan::all`] and
/// [`Plan::any`] fold constants away, so [`Plan::Never`] is only ever a whole plan, never a
/// part of one (no backend needs a condition that is always false).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing matches.
    Never,
    /// Every condition holds (never empty).
    All(Vec<Plan>),
    /// At least one condition holds (never empty).
    Any(Vec<Plan>),
    /// The field equals the value (exact, case-sensitive).
    Is(Field, String),
    /// The field equals one of the values (never empty).
    OneOf(Field, Vec<String>),
    /// `true`: the memory has no project; `false`: it has one.
    CrossProject(bool),
    /// It happened within `[from_ms, to_ms)`; either bound may be open.
    OccurredWithin { from_ms: Option<i64>, to_ms: Option<i64> },
    /// The memory carries the tag.
    HasTag(String),
}

impl Plan {
    /// A field equal to one of `values`; [`Plan::Never`] when there are none.
    pub fn one_of<'a>(field: Field, values: impl IntoIterator<Item = &'a str>) -> Plan {
        let mut values: Vec<String> = values.into_iter().map(str::to_string).collect();
        values.dedup();
        match values.len() {
            0 => Plan::Never,
            1 => Plan::Is(field, values.remove(0)),
            _ => Plan::OneOf(field, values),
        }
    }

    /// Every one of `plans`: [`Plan::Never`] if any is; nested conjunctions are flattened.
    pub fn all(plans: Vec<Plan>) -> Plan {
        let mut out = Vec::with_capacity(plans.len());
        for plan in plans {
            match plan {
                Plan::Never => return Plan::Never,
                Plan::All(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        match out.len() {
            // An empty conjunction would match everything: no read asks for that.
            0 => Plan::Never,
            1 => out.remove(0),
            _ => Plan::All(out),
        }
    }

    /// At least one of `plans`: [`Plan::Never`] ones are dropped, [`Plan::Never`] when none is
    /// left.
    pub fn any(plans: Vec<Plan>) -> Plan {
        let mut out: Vec<Plan> = Vec::with_capacity(plans.len());
        for plan in plans {
            match plan {
                Plan::Never => {}
                Plan::Any(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Plan::Never,
            1 => out.remove(0),
            _ => Plan::Any(out),
        }
    }

    /// The plan evaluated in process against the fields of a point.
    pub fn eval(&self, point: &IndexedPoint) -> bool {
        self.eval_with(
            &|field| match field {
                Field::Tenant => Some(point.tenant_id.as_str()),
                Field::User => Some(point.user_id.as_str()),
                Field::Role => Some(point.role_id.as_str()),
                Field::Project => point.project_id.as_deref(),
                Field::Session => point.session_id.as_deref(),
                Field::Type => Some(point.memory_type.as_str()),
                Field::Visibility => Some(point.visibility.as_str()),
                Field::Status => Some(point.status.as_str()),
            },
            point.occurred_at_ms,
            &point.tags,
        )
    }

    /// The plan evaluated in process against a stored memory.
    pub fn eval_memory(&self, memory: &Memory) -> bool {
        self.eval_with(
            &|field| match field {
                Field::Tenant => Some(memory.scope.tenant_id.as_str()),
                Field::User => Some(memory.scope.user_id.as_str()),
                Field::Role => Some(memory.scope.role_id.as_str()),
                Field::Project => memory.scope.project_id.as_deref(),
                Field::Session => memory.scope.session_id.as_deref(),
                Field::Type => Some(memory.memory_type.as_str()),
                Field::Visibility => Some(memory.visibility.as_str()),
                Field::Status => Some(memory.status.as_str()),
            },
            memory.occurred_at.timestamp_millis(),
            &memory.tags,
        )
    }

    fn eval_with<'a>(&self, value: &dyn Fn(Field) -> Option<&'a str>, occurred_at_ms: i64, tags: &[String]) -> bool {
        match self {
            Plan::Never => false,
            Plan::All(plans) => plans.iter().all(|p| p.eval_with(value, occurred_at_ms, tags)),
            Plan::Any(plans) => plans.iter().any(|p| p.eval_with(value, occurred_at_ms, tags)),
            Plan::Is(field, expected) => value(*field) == Some(expected.as_str()),
            Plan::OneOf(field, expected) => value(*field).is_some_and(|v| expected.iter().any(|e| e == v)),
            Plan::CrossProject(cross) => value(Field::Project).is_none() == *cross,
            Plan::OccurredWithin { from_ms, to_ms } => {
                from_ms.is_none_or(|from| occurred_at_ms >= from) && to_ms.is_none_or(|to| occurred_at_ms < to)
            }
            Plan::HasTag(tag) => tags.contains(tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::{SparseVector, memory_id};

    fn point(role: &str, project: Option<&str>, visibility: Visibility) -> IndexedPoint {
        IndexedPoint {
            id: memory_id(&uuid::Uuid::now_v7()),
            tenant_id: "t1".into(),
            user_id: "u1".into(),
            role_id: role.into(),
            project_id: project.map(str::to_string),
            session_id: None,
            memory_type: MemoryType::ProjectDecision,
            visibility,
            status: MemoryStatus::Active,
            occurred_at_ms: 0,
            tags: vec![],
            dense: vec![],
            sparse: SparseVector::default(),
        }
    }

    #[test]
    fn visibility_rules() {
        let mut filter = MemoryFilter::user(&Owner::new("t1", "u1"));
        filter.reader = Some(Reader {
            role_id: "cto".into(),
            project_id: Some("p1".into()),
            layers: Layers::Both,
        });
        assert!(filter.matches(&point("cto", Some("p1"), Visibility::Private)));
        assert!(!filter.matches(&point("cfo", Some("p1"), Visibility::Private)));
        assert!(filter.matches(&point("cfo", Some("p1"), Visibility::Project)));
        assert!(
            filter.matches(&point("cto", None, Visibility::Private)),
            "own cross-project"
        );
        assert!(!filter.matches(&point("cfo", None, Visibility::Private)));
        assert!(filter.matches(&point("cfo", None, Visibility::Global)));
        assert!(
            !filter.matches(&point("cto", Some("p2"), Visibility::Project)),
            "other project"
        );
        assert!(filter.matches(&point("cfo", Some("p2"), Visibility::Global)));
        filter.reader.as_mut().unwrap().layers = Layers::Project;
        assert!(!filter.matches(&point("cto", None, Visibility::Private)));
        assert!(!filter.matches(&point("cfo", Some("p2"), Visibility::Global)));
    }

    #[test]
    fn constants_fold_away() {
        let mut filter = MemoryFilter::user(&Owner::new("t1", "u1"));
        filter.statuses.clear();
        assert_eq!(filter.plan(), Plan::Never, "no status selects nothing");
        let filter = MemoryFilter {
            reader: Some(Reader {
                role_id: "cto".into(),
                project_id: None,
                layers: Layers::Project,
            }),
            ..MemoryFilter::user(&Owner::new("t1", "u1"))
        };
        assert_eq!(filter.plan(), Plan::Never, "the project layer without a project");
        let plan = MemoryFilter::user(&Owner::new("t1", "u1")).plan();
        assert_eq!(
            plan,
            Plan::All(vec![
                Plan::Is(Field::Tenant, "t1".into()),
                Plan::Is(Field::User, "u1".into()),
                Plan::Is(Field::Status, "active".into())
            ])
        );
        assert_eq!(
            Plan::any(vec![Plan::Never, Plan::HasTag("a".into())]),
            Plan::HasTag("a".into())
        );
    }
}
