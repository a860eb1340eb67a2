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

/// What a claim may start: the worker runs at most `capacity` attempts at once, of which `busy`
/// are running now, by endpoint (an endpoint not named has none). An attempt holds its slot until
/// it ends, a slow endpoint's for seconds, so without a bound such endpoints fill the worker and
/// pace every other endpoint by their own slowness.
///
/// The bound: an endpoint may start another attempt only while its attempts plus all of the
/// worker's stay within `capacity`. Alone it may hold half the slots; `k` endpoints that hold
/// theirs (slow ones) settle at a `k + 1`th each, so a `k + 1`th is always left to the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// Most attempts the worker runs at once.
    pub capacity: usize,
    /// Attempts in flight now, by endpoint.
    pub busy: HashMap<WebhookId, usize>,
}

impl InFlight {
    /// Nothing in flight yet, in a worker of `capacity` slots.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            busy: HashMap::new(),
        }
    }

    /// How many more attempts `endpoint` may start now.
    pub fn room(&self, endpoint: WebhookId) -> usize {
        let own = self.busy.get(&endpoint).copied().unwrap_or(0);
        Self::room_of(self.capacity, self.busy.values().sum(), own)
    }

    /// How many more attempts an endpoint with `own` attempts in flight may start, while the
    /// worker of `capacity` slots runs `running` in all (its own included).
    pub fn room_of(capacity: usize, running: usize, own: usize) -> usize {
        // Starting `k` more keeps `own + k + running + k` within `capacity`.
        let room = capacity.saturating_sub(running + own) / 2;
        // An endpoint with nothing running may always start one while a slot is free (in a
        // worker of one slot, half of it rounds down to nothing).
        if own == 0 && running < capacity {
            room.max(1)
        } else {
            room
        }
    }

    /// Counts `n` more attempts to `endpoint` as started: what a claim took, before the rest of
    /// the claim asks for room.
    pub fn start(&mut self, endpoint: WebhookId, n: usize) {
        if n > 0 {
            *self.busy.entry(endpoint).or_default() += n;
        }
    }

    /// Whether, with `claimed` started too, some endpoint with attempts in flight has no room
    /// left: it may have more due than it could be given, so its attempts' ends should call for
    /// another claim (that it got nothing this time does not mean it has nothing due).
    pub fn filled(&self, claimed: &[ClaimedDelivery]) -> bool {
        let mut after = self.clone();
        for c in claimed {
            after.start(c.delivery.webhook_id, 1);
        }
        after.busy.keys().any(|&endpoint| after.room(endpoint) == 0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_alone_may_hold_half_the_slots() {
        assert_eq!(InFlight::room_of(64, 0, 0), 32);
        assert_eq!(InFlight::room_of(64, 31, 31), 1);
        assert_eq!(InFlight::room_of(64, 32, 32), 0);
    }

    #[test]
    fn endpoints_that_hold_their_slots_leave_a_share_to_the_others() {
        // Two endpoints settled at their bound: a third of 63 each, a third left.
        assert_eq!(InFlight::room_of(63, 42, 21), 0);
        assert_eq!(InFlight::room_of(63, 42, 0), 10);
        // Three slow endpoints started one after another: 32, then 16, then 8 of 64.
        assert_eq!(InFlight::room_of(64, 32, 0), 16);
        assert_eq!(InFlight::room_of(64, 48, 0), 8);
    }

    #[test]
    fn an_endpoint_with_nothing_running_may_start_one_while_a_slot_is_free() {
        assert_eq!(InFlight::room_of(1, 0, 0), 1);
        assert_eq!(InFlight::room_of(64, 63, 0), 1);
        assert_eq!(InFlight::room_of(64, 64, 0), 0);
        assert_eq!(InFlight::room_of(64, 63, 1), 0);
    }

    #[test]
    fn what_a_claim_starts_counts_against_the_rest_of_it() {
        let (slow, other) = (WebhookId::generate(), WebhookId::generate());
        let mut in_flight = InFlight::new(8);
        assert_eq!(in_flight.room(slow), 4);
        in_flight.start(slow, 4);
        in_flight.start(other, 0);
        assert_eq!(in_flight.busy.len(), 1, "starting none counts nothing");
        assert_eq!((in_flight.room(slow), in_flight.room(other)), (0, 2));
    }
}
