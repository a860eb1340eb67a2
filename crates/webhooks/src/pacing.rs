//! When the delivery worker asks its queue for more: often enough that no slot stays idle while
//! deliveries are due, seldom enough that each claim's transaction serves several attempts.

use shortlink_domain::InFlight;

/// What the worker's loop has seen since its last claim, and whether that calls for another.
#[derive(Debug)]
pub(crate) struct Pacing {
    /// The worker's slots.
    concurrency: usize,
    /// A quarter of them: the most a claim waits for.
    quarter: usize,
    /// Something asked for a claim (a wake-up, the poll, a record written while more is due).
    asked: bool,
    /// The last claim filled every free slot: more is probably due, so an ended attempt should
    /// be replaced at once.
    more_due: bool,
    /// The last claim left an endpoint in flight at its bound ([`InFlight::filled`]): it may
    /// have more due, claimed again once a claim's worth of attempts has ended, not one delivery
    /// per claim as each attempt ends.
    held_back: bool,
    /// Attempts ended since the last claim.
    ended: usize,
}

impl Pacing {
    /// A worker of `concurrency` slots, which claims at once.
    pub(crate) fn new(concurrency: usize) -> Self {
        Self {
            concurrency,
            quarter: (concurrency / 4).max(1),
            asked: true,
            more_due: false,
            held_back: false,
            ended: 0,
        }
    }

    /// A wake-up or the poll: claim when there is room.
    pub(crate) fn ask(&mut self) {
        self.asked = true;
    }

    /// Records were written, freeing their permits: like an ended attempt, a reason to claim
    /// only when the last claim suggested more is due.
    pub(crate) fn recorded(&mut self) {
        self.asked |= self.more_due;
    }

    /// An attempt ended.
    pub(crate) fn ended(&mut self) {
        self.ended += 1;
    }

    /// Whether to claim now, with `running` attempts in flight and `free` slots (running ones
    /// and unrecorded ones counted); if so, the claim is taken as made.
    pub(crate) fn claim_now(&mut self, running: usize, free: usize) -> bool {
        let worth = self.worth(running);
        self.asked |= self.ended > 0 && (self.more_due || (self.held_back && self.ended >= worth));
        if self.asked && (free >= worth || (free > 0 && running == 0)) {
            self.asked = false;
            self.ended = 0;
            true
        } else {
            false
        }
    }

    /// The claim's answer: `claimed` of the `free` slots it was offered, and whether it left an
    /// endpoint at its bound.
    pub(crate) fn answered(&mut self, claimed: usize, free: usize, held_back: bool) {
        self.more_due = claimed >= free;
        self.held_back = held_back;
    }

    /// The claim failed (the queue cannot be reached): the poll asks again.
    pub(crate) fn failed(&mut self) {
        self.more_due = false;
    }

    /// How many free slots make a claim worth its transaction, with `running` attempts in
    /// flight: a quarter of the slots, or what an endpoint with nothing running may start now
    /// ([`InFlight::room_of`]), whichever is less. When slow endpoints hold most slots, a
    /// quarter may never come free, and the others' deliveries would wait for the slow ones'
    /// timeouts.
    fn worth(&self, running: usize) -> usize {
        InFlight::room_of(self.concurrency, running, 0).clamp(1, self.quarter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_look_claims_at_once() {
        let mut pacing = Pacing::new(64);
        assert!(pacing.claim_now(0, 64));
        assert!(!pacing.claim_now(0, 64), "nothing asked since");
    }

    #[test]
    fn ended_attempts_call_for_a_claim_when_more_is_due() {
        let mut pacing = Pacing::new(64);
        // 20 free slots (the rest wait for their records), all filled.
        assert!(pacing.claim_now(0, 20));
        pacing.answered(20, 20, false);
        pacing.ended();
        assert!(!pacing.claim_now(19, 1), "one slot is not a claim's worth");
        for _ in 0..15 {
            pacing.ended();
        }
        assert!(pacing.claim_now(4, 16), "a quarter of the slots is");
    }

    #[test]
    fn without_more_due_only_a_wake_up_or_the_poll_calls_for_a_claim() {
        let mut pacing = Pacing::new(64);
        assert!(pacing.claim_now(0, 64));
        pacing.answered(3, 64, false);
        pacing.ended();
        pacing.recorded();
        assert!(!pacing.claim_now(2, 62));
        pacing.ask();
        assert!(pacing.claim_now(2, 62));
    }

    #[test]
    fn an_endpoint_held_at_its_bound_is_claimed_again_as_its_attempts_end() {
        let mut pacing = Pacing::new(64);
        assert!(pacing.claim_now(0, 64));
        // One endpoint alone took its half.
        pacing.answered(32, 64, true);
        for _ in 0..15 {
            pacing.ended();
        }
        assert!(!pacing.claim_now(17, 47));
        pacing.ended();
        assert!(pacing.claim_now(16, 48), "a quarter of the slots ended");
    }

    #[test]
    fn a_claims_worth_shrinks_to_what_slow_endpoints_leave() {
        let mut pacing = Pacing::new(64);
        assert!(pacing.claim_now(0, 64));
        // Three slow endpoints hold 56 slots; another's 4 attempts end quickly.
        pacing.answered(60, 64, true);
        for _ in 0..4 {
            pacing.ended();
        }
        assert!(
            pacing.claim_now(56, 8),
            "what a new endpoint may start is the worth"
        );
    }
}
