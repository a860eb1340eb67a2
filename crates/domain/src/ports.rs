//! The traits through which the outer crates meet. `webhooks` delivers through a
//! [`DeliveryQueue`] that `storage` implements, so neither depends on the other.

use std::collections::HashMap;
use std::future::Future;

use crate::{Delivery, MessageId, Timestamp, WebhookId, WebhookSecret, WebhookTarget};

/// A delivery a worker has leased: nobody else attempts it until the lease ends.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    /// The delivery.
    pub delivery: Delivery,
    /// Where to send it.
    pub target: WebhookTarget,
    /// What to sign it with.
    pub secret: WebhookSecret,
}

/// What one attempt ended in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// The event.
    pub event_id: MessageId,
    /// The endpoint.
    pub webhook_id: WebhookId,
    /// When the attempt started.
    pub started_at: Timestamp,
    /// How long it took, in milliseconds.
    pub duration_ms: i64,
    /// The receiver's HTTP status, when one answered.
    pub status_code: Option<i32>,
    /// Why no acceptable answer came (timeout, refused, non-public address, …).
    pub error: Option<String>,
    /// What happens next.
    pub next: NextStep,
}

/// The delivery's next state after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// A 2xx came back: done.
    Delivered,
    /// Try again at this instant.
    RetryAt(Timestamp),
    /// That was the last try of the schedule.
    Failed,
}

/// How many attempts a claim may start per endpoint: each may have at most `per_endpoint` in
/// flight, of which `busy` are running now (an endpoint not named has none). An attempt holds
/// its slot until it ends, a slow endpoint's for seconds: shares of each claim alone let such an
/// endpoint fill the worker's slots and pace every other endpoint by its own slowness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// Most attempts one endpoint may have in flight.
    pub per_endpoint: usize,
    /// Attempts in flight now, by endpoint.
    pub busy: HashMap<WebhookId, usize>,
}

impl InFlight {
    /// Nothing in flight yet; at most `per_endpoint` per endpoint.
    pub fn new(per_endpoint: usize) -> Self {
        Self {
            per_endpoint,
            busy: HashMap::new(),
        }
    }

    /// How many more attempts `endpoint` may start.
    pub fn room(&self, endpoint: WebhookId) -> usize {
        let busy = self.busy.get(&endpoint).copied().unwrap_or(0);
        self.per_endpoint.saturating_sub(busy)
    }

    /// Whether `claimed` took some endpoint's whole room: that endpoint may have more due.
    pub fn filled(&self, claimed: &[ClaimedDelivery]) -> bool {
        let mut taken: HashMap<WebhookId, usize> = HashMap::new();
        for c in claimed {
            *taken.entry(c.delivery.webhook_id).or_default() += 1;
        }
        taken
            .into_iter()
            .any(|(endpoint, n)| n >= self.room(endpoint))
    }
}

/// The durable outbox the delivery worker drains.
pub trait DeliveryQueue: Clone + Send + Sync + 'static {
    /// The store's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Leases up to `limit` pending deliveries due at or before `now` to the caller until
    /// `lease_until`, to no endpoint more than `in_flight` leaves it room for. Several processes
    /// may call this at once; each delivery goes to one of them.
    fn claim_due(
        &self,
        now: Timestamp,
        limit: i64,
        lease_until: Timestamp,
        in_flight: &InFlight,
    ) -> impl Future<Output = Result<Vec<ClaimedDelivery>, Self::Error>> + Send;

    /// Records attempts, each moving its delivery on and ending its lease, together (one
    /// transaction: a worker records what its attempts ended in as a batch). Keeps each
    /// endpoint's count of consecutive failed deliveries and disables it at the limit.
    fn record_attempts(
        &self,
        attempts: &[AttemptRecord],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Ends the lease of a delivery that was claimed but not attempted (graceful stop), so
    /// another worker can take it at once.
    fn release(
        &self,
        event_id: MessageId,
        webhook_id: WebhookId,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}
