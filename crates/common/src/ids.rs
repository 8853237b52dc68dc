//! Identifiers: a kind prefix and a UUIDv7 (time-ordered, so ids sort by creation).

use crate::error::ApiError;

/// The kinds of ids and their prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Memory,
    Artifact,
    Summary,
    Candidate,
    Change,
    Job,
    /// The record that a user's data was erased.
    Erasure,
}

impl IdKind {
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Memory => "mem_",
            IdKind::Artifact => "art_",
            IdKind::Summary => "sum_",
            IdKind::Candidate => "cand_",
            IdKind::Change => "chg_",
            IdKind::Job => "job_",
            IdKind::Erasure => "era_",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            IdKind::Memory => "memory",
            IdKind::Artifact => "artifact",
            IdKind::Summary => "summary",
            IdKind::Candidate => "candidate",
            IdKind::Change => "change",
            IdKind::Job => "job",
            IdKind::Erasure => "erasure",
        }
    }
}

/// A new id of the given kind.
pub fn new_id(kind: IdKind) -> String {
    format!("{}{}", kind.prefix(), uuid::Uuid::now_v7().simple())
}

/// Checks that `id` is a well-formed id of `kind`; INVALID_ARGUMENT naming `field` otherwise.
pub fn check_id(kind: IdKind, field: &str, id: &str) -> Result<(), ApiError> {
    if id.is_empty() {
        return Err(ApiError::invalid(field, "is required"));
    }
    let well_formed = id
        .strip_prefix(kind.prefix())
        .is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    if well_formed {
        Ok(())
    } else {
        let shown: String = id.chars().take(80).collect();
        Err(ApiError::invalid(
            field,
            format!(
                "malformed {} id {shown:?} (expected {} followed by 32 hex digits)",
                kind.noun(),
                kind.prefix()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_well_formed_and_ordered() {
        let a = new_id(IdKind::Memory);
        let b = new_id(IdKind::Memory);
        assert!(check_id(IdKind::Memory, "id", &a).is_ok());
        assert!(a < b, "UUIDv7 ids sort by creation");
        assert!(a.starts_with("mem_"));
    }

    #[test]
    fn malformed_ids_name_the_field() {
        let err = check_id(IdKind::Memory, "memory_id", "mem_123").unwrap_err();
        assert!(
            err.message.starts_with("memory_id: malformed memory id"),
            "{}",
            err.message
        );
        let err = check_id(IdKind::Artifact, "artifact_id", &new_id(IdKind::Memory)).unwrap_err();
        assert!(err.message.contains("art_"));
        assert_eq!(
            check_id(IdKind::Job, "job_id", "").unwrap_err().message,
            "job_id: is required"
        );
    }
}
