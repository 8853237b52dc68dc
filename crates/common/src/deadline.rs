//! Request deadlines carried across services: a front service reads the caller's `grpc-timeout`,
//! runs its work under that deadline, and every gRPC client call made from that task sends the
//! time that remains, so a downstream service stops working for a caller who has given up.

use std::future::Future;
use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;

tokio::task_local! {
    static DEADLINE: Option<Instant>;
}

/// Runs `future` under `deadline`: gRPC calls made from it carry the remaining time.
pub async fn with_deadline<F: Future>(deadline: Option<Instant>, future: F) -> F::Output {
    DEADLINE.scope(deadline, future).await
}

/// The time left before the current task's deadline, if it has one (zero once it passed).
pub fn remaining() -> Option<Duration> {
    DEADLINE
        .try_with(|deadline| deadline.map(|at| at.saturating_duration_since(Instant::now())))
        .ok()
        .flatten()
}

/// The deadline a request's `grpc-timeout` header asks for, counted from now.
pub fn from_metadata(metadata: &MetadataMap) -> Option<Instant> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    parse_grpc_timeout(value).map(|timeout| Instant::now() + timeout)
}

/// Parses a `grpc-timeout` value: at most 8 digits and a unit (H, M, S, m, u, n).
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse() {
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        for bad in ["", "m", "12", "123456789m", "5x", "-1S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn the_deadline_is_seen_within_its_task_only() {
        assert_eq!(remaining(), None);
        let left = with_deadline(Some(Instant::now() + Duration::from_secs(5)), async { remaining() }).await;
        assert!(left.is_some_and(|d| d <= Duration::from_secs(5) && d > Duration::from_secs(4)));
        assert_eq!(remaining(), None);
    }
}
