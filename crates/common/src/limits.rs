//! Admission: who may start a request now, who waits, and who is told to come back later.
//!
//! One [`Admission`] per process guards every service it runs (gRPC and the REST facade);
//! health and reflection stay outside it, so a liveness probe is never starved. A request is
//! admitted when
//! 1. its tenant is within its rate (a token bucket per tenant, refilled continuously),
//! 2. a seat is free: the process serves at most `concurrency_limit` requests at once, and one
//!    tenant at most `tenant_concurrency_limit` of them; while other tenants are active (a
//!    request in flight or waiting, or one that ended within [`ACTIVE_FOR`]), no more than an
//!    equal share of the process's effective seats (below; rounded down, at least one). A
//!    tenant alone may use every seat its limit allows; when another one comes, the seats the
//!    first holds past its share are not given back to it as they are freed, so the newcomer
//!    finds a seat at once.
//!
//! When no seat is free the request waits in its tenant's queue, and seats freed by finished
//! requests go to the waiting tenants in turn (round robin), so a tenant that floods the
//! process waits behind its own requests, not in front of everyone else's. A request waits at
//! most `queue_timeout`; then, or when its tenant's queue is full, it is shed with
//! RESOURCE_EXHAUSTED and a Retry-After hint, instead of queueing until its caller has given
//! up. Work that is shed for lack of capacity anywhere else (the embedding queue, say) answers
//! the same way through [`overloaded`].
//!
//! Capacity shedding keeps the deadline: admission learns how long requests hold their seat
//! (a moving average and deviation per kind of work, the gRPC method or the REST facade), so it
//! can tell how long a newcomer would wait (seats turn over every `hold / seats`, and the
//! waiters ahead go first) and how long its own work takes. A request whose wait and work
//! would pass its deadline is shed on arrival, told to come back after that wait, instead of
//! queueing for a seat it could not use; one that waits gives up at the latest moment its work
//! could still finish in time. Until a kind of work has been timed, nothing is shed early.
//!
//! The shares are shares of what the machine serves side by side, not of the configured seats.
//! Work that runs on the process's cores (embedding, parsing) takes longer the more of it runs
//! at once: past the cores, another seat only stretches every request's hold, and a flooding
//! tenant's share of 64 seats would be 32 requests sharing two cores with everyone else's. So
//! admission learns, per kind of work, how long a seat is held when few are taken (no more
//! than the floor, `server.concurrency_floor`, the cores by default); when a request held its
//! seat notably longer than that, it estimates how many requests were really served side by
//! side (the crowd it ran in over how much longer it took) and lowers the effective seats
//! towards that, plus one, never under the floor; requests that hold their seats no longer
//! than alone in a crowd as large as the effective seats (work waiting on the network or a
//! disk) grow them back towards `concurrency_limit`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::config::ServerConfig;
use crate::error::{ApiError, ErrorCode};

/// The Retry-After hint of a request shed for lack of capacity (the least one: a longer
/// expected wait is told as it is).
pub const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How long a tenant still counts as active after its last request ended: a client sending
/// one request after another is between two of them for a moment, and must not lose its share
/// of the seats to a flooding tenant then.
pub const ACTIVE_FOR: Duration = Duration::from_secs(1);

/// Kinds of work timed apart; others share the process-wide figure (a client can send any
/// method name, so the table must not grow with them).
const MAX_KINDS_TIMED: usize = 64;

/// RESOURCE_EXHAUSTED with a Retry-After hint: the one way every part of the process says
/// "too busy now, try again in `retry_after`" (gRPC `retry-after` metadata, HTTP 429 with a
/// `Retry-After` header). `what` says what is full, for the caller and the metrics.
pub fn overloaded(what: &str, retry_after: Duration) -> ApiError {
    overloaded_because(what, None, retry_after)
}

/// [`overloaded`] with the reason spelled out for the caller (`what` stays the metric's label).
pub fn overloaded_because(what: &str, why: Option<&str>, retry_after: Duration) -> ApiError {
    crate::metrics::METRICS.shed.with_label_values(&[what]).inc();
    let message = match why {
        Some(why) => format!("the server is too busy ({what}: {why}); retry later"),
        None => format!("the server is too busy ({what}); retry later"),
    };
    ApiError::new(ErrorCode::ResourceExhausted, message).with_retry_after(retry_after.max(Duration::from_millis(1)))
}

/// How long seats are held: a moving average and mean deviation (weights 1/8 and 1/4, as TCP
/// estimates its round trip), in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Hold {
    mean: f64,
    deviation: f64,
    samples: u64,
}

impl Hold {
    fn record(&mut self, seconds: f64) {
        if self.samples == 0 {
            self.mean = seconds;
            self.deviation = seconds / 2.0;
        } else {
            self.deviation += ((seconds - self.mean).abs() - self.deviation) / 4.0;
            self.mean += (seconds - self.mean) / 8.0;
        }
        self.samples += 1;
    }

    /// The time to reserve for one more such request: most finish within it.
    fn budget(&self) -> Duration {
        Duration::from_secs_f64(self.mean + 2.0 * self.deviation)
    }

    fn mean(&self) -> Duration {
        Duration::from_secs_f64(self.mean)
    }
}

/// Hold times of the process's requests, all together and by kind of work.
#[derive(Default)]
struct Holds {
    all: Hold,
    by_work: HashMap<String, Hold>,
}

impl Holds {
    fn record(&mut self, work: &str, held: Duration) {
        let seconds = held.as_secs_f64();
        self.all.record(seconds);
        if let Some(hold) = self.by_work.get_mut(work) {
            hold.record(seconds);
        } else if self.by_work.len() < MAX_KINDS_TIMED {
            self.by_work.entry(work.to_string()).or_default().record(seconds);
        }
    }

    /// The time to reserve for `work`, None before any request was timed.
    fn budget(&self, work: &str) -> Option<Duration> {
        match self.by_work.get(work) {
            Some(hold) => Some(hold.budget()),
            None if self.all.samples > 0 => Some(self.all.budget()),
            None => None,
        }
    }
}

/// A hold this many times a kind's hold alone means the request was slowed by the others
/// running beside it.
const SLOWED: f64 = 1.5;

/// The effective seats: the configured seats, lowered while requests take longer the more of
/// them run at once (see the module's documentation).
#[derive(Debug, Clone)]
struct Capacity {
    /// The effective seats, between the floor and the configured seats.
    seats: f64,
    floor: usize,
    max: usize,
    /// A kind's hold when no more than the floor's seats were taken (a moving average), in
    /// seconds.
    alone: HashMap<String, f64>,
}

impl Capacity {
    fn new(floor: usize, max: usize) -> Self {
        let floor = floor.clamp(1, max.max(1));
        Self {
            seats: max as f64,
            floor,
            max,
            alone: HashMap::new(),
        }
    }

    /// The seats requests may take now.
    fn seats(&self) -> usize {
        (self.seats.round() as usize).clamp(self.floor, self.max)
    }

    /// Learns from a request of `work` that held its seat `held` among `crowd` seats taken
    /// (its own included) when it got it.
    fn observe(&mut self, work: &str, held: Duration, crowd: usize) {
        if self.floor >= self.max {
            return;
        }
        let held = held.as_secs_f64().max(1e-6);
        if crowd <= self.floor {
            if let Some(alone) = self.alone.get_mut(work) {
                *alone += (held - *alone) / 8.0;
            } else if self.alone.len() < MAX_KINDS_TIMED {
                self.alone.insert(work.to_string(), held);
            }
        }
        let Some(alone) = self.alone.get(work).copied() else {
            return;
        };
        let slowed = held / alone;
        let target = if slowed >= SLOWED {
            // Served side by side: the crowd, over how much longer each took; one more seat
            // keeps the cores busy between requests.
            (crowd as f64 / slowed + 1.0).min(self.seats)
        } else {
            // Not slowed: room for one more than this crowd (work waiting on the network or a
            // disk grows the seats back as its crowds grow).
            (crowd as f64 + 1.0).max(self.seats)
        };
        self.seats = (self.seats + (target - self.seats) / 8.0).clamp(self.floor as f64, self.max as f64);
        crate::metrics::METRICS.effective_seats.set(self.seats() as i64);
    }
}

/// The kind of work of an HTTP request, for [`Admission::admit`]: its method and the leading
/// words of its path, up to three; a segment that is not a word (an id) ends it, so the kinds
/// are the routes, not the resources.
pub fn http_work(method: &http::Method, path: &str) -> String {
    let mut work = format!("{method} ");
    for segment in path.split('/').filter(|s| !s.is_empty()).take(3) {
        if !segment.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            break;
        }
        work.push('/');
        work.push_str(segment);
    }
    work
}

/// The limits of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Requests served at once by the process.
    pub seats: usize,
    /// The fewest seats kept when requests slow each other down (at or over `seats`: the
    /// seats stay as configured).
    pub floor: usize,
    /// Requests of one tenant served at once (unless its key says otherwise).
    pub tenant_seats: usize,
    /// Requests of one tenant waiting for a seat; more are shed at once.
    pub tenant_queue: usize,
    /// Requests per second per tenant (unless its key says otherwise); 0 turns rates off.
    pub rate_per_second: f64,
    /// Burst of the rate, in requests.
    pub rate_burst: f64,
    /// The longest a request waits for a seat.
    pub queue_timeout: Duration,
}

impl Limits {
    pub fn from_config(config: &ServerConfig) -> Self {
        let seats = config.concurrency_limit.max(1);
        let floor = match config.concurrency_floor {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            floor => floor,
        };
        Self {
            seats,
            floor: floor.min(seats),
            tenant_seats: config.tenant_concurrency_limit.clamp(1, seats),
            tenant_queue: config.tenant_queue_limit,
            rate_per_second: config.tenant_rate_per_second.max(0.0),
            rate_burst: config.tenant_rate_burst.max(1.0),
            queue_timeout: Duration::from_millis(config.queue_timeout_ms),
        }
    }
}

/// What a tenant's key may override.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TenantLimits {
    /// Requests per second; 0 for the process default.
    pub rate_per_second: f64,
    /// Requests at once; 0 for the process default.
    pub concurrency: usize,
}

struct Waiter {
    id: u64,
    work: String,
    seat: oneshot::Sender<Seat>,
}

struct Tenant {
    in_flight: usize,
    /// Its own limit (the key's or the process default).
    seats: usize,
    waiting: VecDeque<Waiter>,
    tokens: f64,
    refilled: Instant,
    /// When it last asked for a seat or freed one.
    last_active: Instant,
}

impl Tenant {
    fn active(&self, now: Instant) -> bool {
        self.in_flight > 0 || !self.waiting.is_empty() || now.saturating_duration_since(self.last_active) < ACTIVE_FOR
    }

    /// The seats it may hold now: its own limit, and while other tenants are active no more
    /// than an equal share of the process's effective `seats` among the `active` tenants
    /// (rounded down, at least one).
    fn cap(&self, seats: usize, active: usize) -> usize {
        if active <= 1 {
            return self.seats.max(1);
        }
        self.seats.min(seats / active).max(1)
    }
}

struct State {
    /// Seats taken.
    in_use: usize,
    capacity: Capacity,
    tenants: HashMap<String, Tenant>,
    /// Tenants with waiters, in the order their turn comes.
    turns: VecDeque<String>,
    next_waiter: u64,
    holds: Holds,
}

/// Seats and rates of one process. Cheap to clone.
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

struct Inner {
    limits: Limits,
    state: Mutex<State>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").field("limits", &self.inner.limits).finish()
    }
}

/// A seat held by an admitted request; dropping it gives the seat to the next waiter.
#[must_use = "the request holds its seat until this is dropped"]
pub struct Seat {
    inner: Arc<Inner>,
    tenant: String,
    /// The kind of work it was taken for, and when: its hold time is learned when it is freed.
    work: String,
    taken: Instant,
    /// Seats taken when it was, its own included.
    crowd: usize,
    /// False for a seat that was never handed out (a waiter that had left).
    armed: bool,
}

impl std::fmt::Debug for Seat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seat").field("tenant", &self.tenant).finish()
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let held = self.taken.elapsed();
        let mut state = self.inner.state.lock();
        if let Some(tenant) = state.tenants.get_mut(&self.tenant) {
            tenant.in_flight = tenant.in_flight.saturating_sub(1);
            tenant.last_active = Instant::now();
        }
        state.in_use = state.in_use.saturating_sub(1);
        state.holds.record(&self.work, held);
        state.capacity.observe(&self.work, held, self.crowd);
        self.inner.dispatch(&mut state);
    }
}

impl State {
    /// Tenants active now (at least one).
    fn active(&self, now: Instant) -> usize {
        self.tenants.values().filter(|t| t.active(now)).count().max(1)
    }

    /// Seats free now.
    fn free(&self) -> usize {
        self.capacity.max.saturating_sub(self.in_use)
    }
}

impl Inner {
    /// Gives free seats to waiters, one tenant's turn at a time; a tenant at its cap (its own
    /// limit or its share) is passed over.
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        let active = state.active(Instant::now());
        let seats = state.capacity.seats();
        let mut passes = state.turns.len();
        while state.free() > 0 && passes > 0 {
            let Some(name) = state.turns.pop_front() else {
                break;
            };
            let Some(tenant) = state.tenants.get_mut(&name) else {
                passes -= 1;
                continue;
            };
            if tenant.in_flight >= tenant.cap(seats, active) {
                // This tenant is at its cap: its waiters wait for its own requests.
                if !tenant.waiting.is_empty() {
                    state.turns.push_back(name);
                }
                passes -= 1;
                continue;
            }
            let Some(waiter) = tenant.waiting.pop_front() else {
                passes -= 1;
                continue;
            };
            tenant.in_flight += 1;
            let more = !tenant.waiting.is_empty();
            state.in_use += 1;
            let seat = Seat {
                inner: Arc::clone(self),
                tenant: name.clone(),
                work: waiter.work,
                taken: Instant::now(),
                crowd: state.in_use,
                armed: true,
            };
            if let Err(mut seat) = waiter.seat.send(seat) {
                // The waiter gave up in the meantime: take the seat back without dropping it
                // armed (that would lock the state again).
                seat.armed = false;
                state.in_use -= 1;
                if let Some(tenant) = state.tenants.get_mut(&name) {
                    tenant.in_flight -= 1;
                }
            } else {
                passes = state.turns.len() + 1;
            }
            if more {
                state.turns.push_back(name);
            }
        }
    }
}

impl Admission {
    pub fn new(limits: Limits) -> Self {
        let capacity = Capacity::new(limits.floor, limits.seats);
        crate::metrics::METRICS.effective_seats.set(capacity.seats() as i64);
        Self {
            inner: Arc::new(Inner {
                limits,
                state: Mutex::new(State {
                    in_use: 0,
                    capacity,
                    tenants: HashMap::new(),
                    turns: VecDeque::new(),
                    next_waiter: 0,
                    holds: Holds::default(),
                }),
            }),
        }
    }

    /// Admission of the configured limits.
    pub fn from_config(config: &ServerConfig) -> Self {
        Self::new(Limits::from_config(config))
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Admits one request of `tenant` doing `work` (the gRPC method's path, or one name for a
    /// facade: requests of one kind are timed together): at once when its rate allows and a
    /// seat is free; after a wait when it can still be done by `deadline` once seated, giving
    /// up at the queue timeout or the latest moment its work could start; or never
    /// (RESOURCE_EXHAUSTED with Retry-After), at once when the expected wait and work would
    /// pass the deadline.
    pub async fn admit(
        &self,
        tenant: &str,
        overrides: TenantLimits,
        work: &str,
        deadline: Option<Instant>,
    ) -> Result<Seat, ApiError> {
        let now = Instant::now();
        let (id, receiver, budget) = {
            let mut state = self.inner.state.lock();
            let limits = &self.inner.limits;
            let free = state.free();
            let effective = state.capacity.seats();
            let seats = if overrides.concurrency > 0 {
                overrides.concurrency.min(limits.seats)
            } else {
                limits.tenant_seats
            };
            let entry = state.tenants.entry(tenant.to_string()).or_insert_with(|| Tenant {
                in_flight: 0,
                seats,
                waiting: VecDeque::new(),
                tokens: limits.rate_burst,
                refilled: now,
                last_active: now,
            });
            entry.seats = seats;
            entry.last_active = now;
            let rate = if overrides.rate_per_second > 0.0 {
                overrides.rate_per_second
            } else {
                limits.rate_per_second
            };
            if rate > 0.0 {
                let burst = limits.rate_burst.max(1.0);
                let elapsed = now.saturating_duration_since(entry.refilled).as_secs_f64();
                entry.tokens = (entry.tokens + elapsed * rate).min(burst);
                entry.refilled = now;
                if entry.tokens < 1.0 {
                    let wait = Duration::from_secs_f64((1.0 - entry.tokens) / rate);
                    crate::metrics::METRICS.shed.with_label_values(&["tenant rate"]).inc();
                    return Err(ApiError::new(
                        ErrorCode::ResourceExhausted,
                        format!("tenant {tenant:?} is over its rate limit of {rate} requests per second"),
                    )
                    .with_retry_after(wait.max(Duration::from_millis(1))));
                }
                entry.tokens -= 1.0;
            }
            // Seats are handed to waiters as they are freed, so a free seat and a waiter
            // coexist only while the waiter's tenant is at its cap: a newcomer under its own
            // cap takes a free seat without jumping anyone's turn.
            let active = state.active(now);
            let entry = state.tenants.get_mut(tenant).expect("inserted above");
            let cap = entry.cap(effective, active);
            if free > 0 && entry.in_flight < cap {
                entry.in_flight += 1;
                state.in_use += 1;
                return Ok(Seat {
                    inner: Arc::clone(&self.inner),
                    tenant: tenant.to_string(),
                    work: work.to_string(),
                    taken: now,
                    crowd: state.in_use,
                    armed: true,
                });
            }
            let at_own_limit = entry.in_flight >= cap;
            let what = if !at_own_limit {
                "server concurrency"
            } else if cap < entry.seats {
                "tenant share"
            } else {
                "tenant concurrency"
            };
            // How long it would wait: seats turn over every `hold / seats`, and the waiters
            // ahead of it (its tenant's when the tenant is at its own limit, everyone's when
            // the process is full) are seated first.
            let (own_waiting, own_seats) = (entry.waiting.len(), cap);
            let hold = state.holds.all.mean();
            let own_wait = if at_own_limit {
                hold.mul_f64((own_waiting + 1) as f64 / own_seats as f64)
            } else {
                Duration::ZERO
            };
            let queued_wait = if free == 0 {
                let waiting: usize = state.tenants.values().map(|t| t.waiting.len()).sum();
                hold.mul_f64((waiting + 1) as f64 / limits.seats as f64)
            } else {
                Duration::ZERO
            };
            let expected_wait = own_wait.max(queued_wait);
            let retry_after = expected_wait.max(BUSY_RETRY_AFTER);
            if own_waiting >= limits.tenant_queue {
                return Err(overloaded(what, retry_after));
            }
            let budget = state.holds.budget(work);
            if let (Some(deadline), Some(budget)) = (deadline, budget)
                && now + expected_wait + budget > deadline
            {
                let why = format!(
                    "a wait of about {} ms and {} ms of work would pass the deadline in {} ms",
                    expected_wait.as_millis(),
                    budget.as_millis(),
                    deadline.saturating_duration_since(now).as_millis()
                );
                return Err(overloaded_because(what, Some(&why), retry_after));
            }
            let (sender, receiver) = oneshot::channel();
            let id = state.next_waiter;
            state.next_waiter += 1;
            let entry = state.tenants.get_mut(tenant).expect("inserted above");
            let first = entry.waiting.is_empty();
            entry.waiting.push_back(Waiter {
                id,
                work: work.to_string(),
                seat: sender,
            });
            if first {
                state.turns.push_back(tenant.to_string());
            }
            (id, receiver, budget)
        };
        // It waits no longer than the queue timeout, nor past the latest moment its work can
        // start and still be done by its deadline.
        let mut wait = self.inner.limits.queue_timeout;
        if let Some(deadline) = deadline {
            let latest_start = deadline.checked_sub(budget.unwrap_or(Duration::ZERO)).unwrap_or(now);
            wait = wait.min(latest_start.saturating_duration_since(now));
        }
        match tokio::time::timeout(wait, receiver).await {
            Ok(Ok(seat)) => Ok(seat),
            _ => {
                let mut state = self.inner.state.lock();
                let active = state.active(Instant::now());
                let seats = state.capacity.seats();
                let what = match state.tenants.get_mut(tenant) {
                    Some(entry) => {
                        entry.waiting.retain(|waiter| waiter.id != id);
                        let cap = entry.cap(seats, active);
                        if entry.in_flight < cap {
                            "server concurrency"
                        } else if cap < entry.seats {
                            "tenant share"
                        } else {
                            "tenant concurrency"
                        }
                    }
                    None => "server concurrency",
                };
                drop(state);
                Err(overloaded(what, BUSY_RETRY_AFTER))
            }
        }
    }

    /// Folds one hold time of `work` into what admission has learned, as a freed seat does.
    #[cfg(test)]
    fn learn(&self, work: &str, held: Duration) {
        self.inner.state.lock().holds.record(work, held);
    }

    /// Folds one hold time of `work` among `crowd` seats into the effective seats, as a freed
    /// seat does.
    #[cfg(test)]
    fn observe(&self, work: &str, held: Duration, crowd: usize) {
        self.inner.state.lock().capacity.observe(work, held, crowd);
    }

    /// The seats requests may take now (the effective seats).
    pub fn seats(&self) -> usize {
        self.inner.state.lock().capacity.seats()
    }

    /// Requests in flight and waiting, for one tenant or the whole process.
    pub fn load(&self, tenant: Option<&str>) -> (usize, usize) {
        let state = self.inner.state.lock();
        match tenant {
            Some(name) => state
                .tenants
                .get(name)
                .map_or((0, 0), |t| (t.in_flight, t.waiting.len())),
            None => (state.in_use, state.tenants.values().map(|t| t.waiting.len()).sum()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORK: &str = "/test.v1.Test/Work";

    /// Fixed seats (the floor at the seats: no adaptation).
    fn limits(seats: usize, tenant_seats: usize) -> Limits {
        Limits {
            seats,
            floor: seats,
            tenant_seats,
            tenant_queue: 8,
            rate_per_second: 0.0,
            rate_burst: 1.0,
            queue_timeout: Duration::from_millis(200),
        }
    }

    #[tokio::test]
    async fn a_tenant_over_its_rate_waits_and_others_do_not() {
        let admission = Admission::new(Limits {
            rate_per_second: 10.0,
            rate_burst: 2.0,
            ..limits(16, 16)
        });
        let none = TenantLimits::default();
        let _a = admission.admit("acme", none, WORK, None).await.unwrap();
        let _b = admission.admit("acme", none, WORK, None).await.unwrap();
        let refused = admission.admit("acme", none, WORK, None).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::ResourceExhausted);
        let wait = refused.retry_after.unwrap();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100), "{wait:?}");
        assert!(admission.admit("globex", none, WORK, None).await.is_ok());
        tokio::time::sleep(Duration::from_millis(110)).await;
        assert!(admission.admit("acme", none, WORK, None).await.is_ok());
        let custom = TenantLimits {
            rate_per_second: 1000.0,
            concurrency: 0,
        };
        for _ in 0..2 {
            let _ = admission.admit("initech", custom, WORK, None).await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_flooding_tenant_is_capped_and_others_get_seats_at_once() {
        let admission = Admission::new(limits(4, 2));
        let none = TenantLimits::default();
        let held: Vec<Seat> = vec![
            admission.admit("flood", none, WORK, None).await.unwrap(),
            admission.admit("flood", none, WORK, None).await.unwrap(),
        ];
        // Its third request waits for one of its own, then is shed.
        let started = Instant::now();
        let err = admission.admit("flood", none, WORK, None).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::ResourceExhausted);
        assert!(err.message.contains("tenant concurrency"), "{}", err.message);
        assert_eq!(err.retry_after, Some(BUSY_RETRY_AFTER));
        assert!(started.elapsed() >= Duration::from_millis(150), "it waited first");
        // Another tenant is not held up by the flood.
        let started = Instant::now();
        let other = admission.admit("quiet", none, WORK, None).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(50));
        assert_eq!(admission.load(Some("flood")), (2, 0));
        drop(held);
        drop(other);
        assert_eq!(admission.load(None), (0, 0));
    }

    #[tokio::test]
    async fn freed_seats_go_to_waiting_tenants_in_turn() {
        let admission = Admission::new(Limits {
            queue_timeout: Duration::from_secs(5),
            ..limits(3, 3)
        });
        let none = TenantLimits::default();
        let mut flood = vec![
            admission.admit("flood", none, WORK, None).await.unwrap(),
            admission.admit("flood", none, WORK, None).await.unwrap(),
        ];
        let _busy = admission.admit("busy", none, WORK, None).await.unwrap();
        // The flooding tenant queues more, then another tenant arrives.
        let queued_flood = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit("flood", none, WORK, None).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let quiet = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit("quiet", none, WORK, None).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(admission.load(None), (3, 2));
        // Three tenants active: a share of one seat each. The first seat the flood frees does
        // not go back to it (it still holds one, its share): the quiet tenant gets it although
        // the flood asked first; the flood's waiter is seated once it holds none.
        drop(flood.pop());
        let quiet = quiet.await.unwrap().unwrap();
        assert_eq!(quiet.tenant, "quiet");
        assert_eq!(admission.load(Some("flood")), (1, 1));
        drop(flood.pop());
        let first = queued_flood.await.unwrap().unwrap();
        assert_eq!(first.tenant, "flood");
    }

    #[tokio::test]
    async fn while_another_tenant_is_active_a_flooding_tenant_gets_its_share_not_every_seat() {
        let admission = Admission::new(Limits {
            tenant_queue: 0,
            ..limits(4, 4)
        });
        let none = TenantLimits::default();
        // Alone, a tenant may take every seat its limit allows.
        let alone: Vec<Seat> = seats_of(&admission, "flood", 4).await;
        assert_eq!(admission.load(None), (4, 0));
        drop(alone);
        // Another tenant is active (a request in flight): the flood gets half the seats.
        let quiet = admission.admit("quiet", none, WORK, None).await.unwrap();
        let flood = seats_of(&admission, "flood", 2).await;
        let refused = admission.admit("flood", none, WORK, None).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::ResourceExhausted);
        assert!(refused.message.contains("tenant share"), "{}", refused.message);
        assert!(refused.retry_after.is_some());
        assert_eq!(admission.load(None), (3, 0), "a seat stays free for the other tenant");
        // The other tenant is admitted at once, up to its own share.
        let again = admission.admit("quiet", none, WORK, None).await.unwrap();
        assert_eq!(again.tenant, "quiet");
        assert!(
            admission.admit("quiet", none, WORK, None).await.is_err(),
            "the process is full"
        );
        drop((quiet, again, flood));
    }

    async fn seats_of(admission: &Admission, tenant: &str, count: usize) -> Vec<Seat> {
        let mut seats = Vec::with_capacity(count);
        for _ in 0..count {
            seats.push(
                admission
                    .admit(tenant, TenantLimits::default(), WORK, None)
                    .await
                    .unwrap(),
            );
        }
        seats
    }

    #[tokio::test]
    async fn a_request_never_waits_past_its_deadline() {
        let admission = Admission::new(Limits {
            queue_timeout: Duration::from_secs(30),
            ..limits(1, 1)
        });
        let none = TenantLimits::default();
        let _held = admission.admit("a", none, WORK, None).await.unwrap();
        let started = Instant::now();
        let err = admission
            .admit("b", none, WORK, Some(Instant::now() + Duration::from_millis(50)))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::ResourceExhausted);
        assert!(err.message.contains("server concurrency"), "{}", err.message);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(admission.load(None), (1, 0), "the waiter left the queue");
    }

    #[tokio::test]
    async fn a_full_queue_sheds_at_once() {
        let admission = Admission::new(Limits {
            tenant_queue: 0,
            queue_timeout: Duration::from_secs(30),
            ..limits(1, 1)
        });
        let none = TenantLimits::default();
        let _held = admission.admit("a", none, WORK, None).await.unwrap();
        let started = Instant::now();
        assert!(admission.admit("a", none, WORK, None).await.is_err());
        assert!(started.elapsed() < Duration::from_millis(50));
    }

    fn saturated(queue_timeout: Duration) -> Admission {
        Admission::new(Limits {
            queue_timeout,
            ..limits(1, 1)
        })
    }

    #[tokio::test]
    async fn a_saturated_service_sheds_at_once_a_request_whose_deadline_cannot_be_met() {
        let admission = saturated(Duration::from_secs(30));
        // Requests hold their seat 1 s: a newcomer waits about 1 s and needs 1 s to 2 s more.
        admission.learn(WORK, Duration::from_secs(1));
        let none = TenantLimits::default();
        let _held = admission.admit("a", none, WORK, None).await.unwrap();
        let asked = Instant::now();
        let deadline = asked + Duration::from_millis(1500);
        let err = admission.admit("b", none, WORK, Some(deadline)).await.unwrap_err();
        assert!(
            Instant::now() < asked + Duration::from_millis(1000),
            "refused without waiting"
        );
        assert_eq!(err.code, ErrorCode::ResourceExhausted);
        assert!(err.message.contains("server concurrency"), "{}", err.message);
        assert!(err.message.contains("would pass the deadline"), "{}", err.message);
        assert_eq!(
            err.retry_after,
            Some(Duration::from_secs(1)),
            "come back after the expected wait"
        );
        assert_eq!(admission.load(None), (1, 0), "it never queued");
        let status = crate::error::to_status(&err);
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(status.metadata().get("retry-after").unwrap(), "1");
    }

    #[tokio::test]
    async fn a_request_with_room_waits_for_its_seat_and_is_served() {
        let admission = saturated(Duration::from_secs(30));
        admission.learn(WORK, Duration::from_secs(1));
        let none = TenantLimits::default();
        let held = admission.admit("a", none, WORK, None).await.unwrap();
        let waiter = {
            let admission = admission.clone();
            let deadline = Instant::now() + Duration::from_secs(60);
            tokio::spawn(async move { admission.admit("b", none, WORK, Some(deadline)).await })
        };
        while admission.load(None) != (1, 1) {
            tokio::task::yield_now().await;
        }
        drop(held);
        let seat = waiter.await.unwrap().expect("served once the seat is free");
        assert_eq!(seat.tenant, "b");
    }

    #[tokio::test]
    async fn a_waiter_gives_up_while_its_work_could_still_finish_in_time() {
        let admission = saturated(Duration::from_secs(30));
        // 1 s of wait and at most 2 s of work fit a 4 s deadline: it queues, and when no seat
        // came free by 2 s before the deadline it is shed then, not at the deadline.
        admission.learn(WORK, Duration::from_secs(1));
        let none = TenantLimits::default();
        let _held = admission.admit("a", none, WORK, None).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(4);
        let err = admission.admit("b", none, WORK, Some(deadline)).await.unwrap_err();
        assert!(Instant::now() < deadline, "shed before its deadline");
        assert_eq!(err.code, ErrorCode::ResourceExhausted);
        assert!(
            !err.message.contains("would pass the deadline"),
            "it did wait: {}",
            err.message
        );
        assert_eq!(admission.load(None), (1, 0), "the waiter left the queue");
    }

    #[test]
    fn http_work_is_the_route_not_the_resource() {
        assert_eq!(
            http_work(&http::Method::POST, "/api/turn/prepare"),
            "POST /api/turn/prepare"
        );
        assert_eq!(
            http_work(&http::Method::GET, "/api/memory/0199ab-77/history"),
            "GET /api/memory"
        );
        assert_eq!(
            http_work(&http::Method::GET, "/api/session/summary/s1"),
            "GET /api/session/summary"
        );
        assert_eq!(http_work(&http::Method::GET, "/"), "GET ");
    }

    #[tokio::test]
    async fn each_kind_of_work_is_timed_apart() {
        let admission = saturated(Duration::from_millis(100));
        admission.learn("/slow", Duration::from_secs(2));
        admission.learn("/fast", Duration::from_millis(100));
        let none = TenantLimits::default();
        let _held = admission.admit("a", none, "/slow", None).await.unwrap();
        let deadline = Instant::now() + Duration::from_millis(2500);
        // The wait (about 1.8 s) leaves room for the fast work only.
        let slow = admission.admit("b", none, "/slow", Some(deadline)).await.unwrap_err();
        assert!(slow.message.contains("would pass the deadline"), "{}", slow.message);
        let fast = admission.admit("b", none, "/fast", Some(deadline)).await.unwrap_err();
        assert!(
            !fast.message.contains("would pass the deadline"),
            "it queued: {}",
            fast.message
        );
    }

    /// Admission of 64 seats (16 a tenant) on a machine whose floor is 2 seats (two cores).
    fn adaptive() -> Admission {
        Admission::new(Limits {
            floor: 2,
            ..limits(64, 16)
        })
    }

    #[tokio::test]
    async fn holds_that_grow_with_the_crowd_shrink_the_seats_and_the_shares_with_them() {
        let admission = adaptive();
        assert_eq!(admission.seats(), 64, "nothing learned yet: the seats as configured");
        // Alone (one or two seats taken) a request holds its seat 100 ms; with 16 taken, 800 ms:
        // two cores serve two at a time.
        for _ in 0..8 {
            admission.observe(WORK, Duration::from_millis(100), 1);
        }
        assert_eq!(admission.seats(), 64, "holds alone say nothing about crowds");
        for _ in 0..200 {
            admission.observe(WORK, Duration::from_millis(800), 16);
        }
        let seats = admission.seats();
        assert!((2..=4).contains(&seats), "{seats} seats for what two cores serve");
        // A flooding tenant now gets a share of those seats, not 16 (its own limit) of 64.
        let none = TenantLimits::default();
        let _quiet = admission.admit("quiet", none, "/other", None).await.unwrap();
        let share = (seats / 2).max(1);
        let _flood = seats_of(&admission, "flood", share).await;
        let refused = admission.admit("flood", none, "/other", None).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::ResourceExhausted);
        assert!(refused.message.contains("tenant share"), "{}", refused.message);
    }

    #[test]
    fn holds_that_do_not_grow_with_the_crowd_give_the_seats_back() {
        let admission = adaptive();
        for _ in 0..8 {
            admission.observe(WORK, Duration::from_millis(100), 1);
        }
        for _ in 0..200 {
            admission.observe(WORK, Duration::from_millis(800), 16);
        }
        assert!(admission.seats() <= 4);
        // The work now waits on the network: as many at once take no longer than one alone.
        for _ in 0..1000 {
            let full = admission.seats();
            admission.observe(WORK, Duration::from_millis(100), full);
        }
        assert_eq!(admission.seats(), 64);
    }

    #[test]
    fn a_floor_at_the_seats_keeps_them_as_configured() {
        let admission = Admission::new(limits(8, 8));
        for _ in 0..8 {
            admission.observe(WORK, Duration::from_millis(100), 1);
        }
        for _ in 0..200 {
            admission.observe(WORK, Duration::from_millis(800), 8);
        }
        assert_eq!(admission.seats(), 8);
        // And the seats never go under the floor, however slow.
        let admission = adaptive();
        admission.observe(WORK, Duration::from_millis(100), 1);
        for _ in 0..500 {
            admission.observe(WORK, Duration::from_secs(60), 64);
        }
        assert_eq!(admission.seats(), 2);
    }
}
