//! Per-tenant rate limits: a token bucket per tenant, refilled continuously.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use thinkus_common::{ApiError, ErrorCode};

struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Token buckets keyed by tenant.
pub struct RateLimiter {
    default_rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub fn new(default_rate: f64, burst: f64) -> Self {
        Self {
            default_rate,
            burst,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from the tenant's bucket; `rate` overrides the default (0: default).
    /// RESOURCE_EXHAUSTED with the time until a request is allowed when the bucket is empty.
    pub fn check(&self, tenant: &str, rate: f64) -> Result<(), ApiError> {
        self.check_at(tenant, rate, Instant::now())
    }

    fn check_at(&self, tenant: &str, rate: f64, now: Instant) -> Result<(), ApiError> {
        let rate = if rate > 0.0 { rate } else { self.default_rate };
        if rate <= 0.0 {
            return Ok(());
        }
        let burst = self.burst.max(1.0);
        let mut buckets = self.buckets.lock();
        let bucket = buckets.entry(tenant.to_string()).or_insert(Bucket {
            tokens: burst,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = Duration::from_secs_f64((1.0 - bucket.tokens) / rate);
        Err(ApiError::new(
            ErrorCode::ResourceExhausted,
            format!("tenant {tenant:?} is over its rate limit of {rate} requests per second"),
        )
        .with_retry_after(wait.max(Duration::from_millis(1))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_over_its_rate_waits_and_others_do_not() {
        let limiter = RateLimiter::new(10.0, 2.0);
        let start = Instant::now();
        assert!(limiter.check_at("acme", 0.0, start).is_ok());
        assert!(limiter.check_at("acme", 0.0, start).is_ok());
        let refused = limiter.check_at("acme", 0.0, start).unwrap_err();
        assert_eq!(refused.code, ErrorCode::ResourceExhausted);
        let wait = refused.retry_after.unwrap();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100), "{wait:?}");
        assert!(limiter.check_at("globex", 0.0, start).is_ok());
        assert!(
            limiter
                .check_at("acme", 0.0, start + Duration::from_millis(100))
                .is_ok()
        );
    }

    #[test]
    fn a_zero_rate_means_no_limit() {
        let limiter = RateLimiter::new(0.0, 1.0);
        let now = Instant::now();
        for _ in 0..100 {
            assert!(limiter.check_at("acme", 0.0, now).is_ok());
        }
    }
}
