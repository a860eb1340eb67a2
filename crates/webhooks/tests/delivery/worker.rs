//! The delivery loop, against real receivers and the in-memory queue.

use std::sync::Arc;
use std::time::Duration;

use shortlink_domain::{DeliveryState, MessageId, NextStep};
use shortlink_webhooks::{
    DEFAULT_TOLERANCE, DeliveryWorker, HEADER_ID, RetrySchedule, WakeHandle, WorkerConfig,
    WorkerError, verify,
};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::helpers::{Behaviour, MemoryQueue, Receiver, claimed, claimed_like, eventually};

const WITHIN: Duration = Duration::from_secs(10);

fn config(schedule: &str) -> WorkerConfig {
    WorkerConfig {
        poll_interval: Duration::from_millis(20),
        schedule: schedule.parse().unwrap(),
        allow_private: true,
        ..WorkerConfig::default()
    }
}

/// A worker that polls only hourly: within a test, it claims only when woken or when an ended
/// attempt calls for it.
fn hourly_poll(schedule: &str) -> WorkerConfig {
    WorkerConfig {
        poll_interval: Duration::from_secs(3600),
        ..config(schedule)
    }
}

/// A running worker and the sender of its stop signal.
struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    wake: WakeHandle,
}

fn start(queue: &MemoryQueue, config: WorkerConfig) -> Running {
    let worker = DeliveryWorker::new(queue.clone(), config).unwrap();
    let wake = worker.wake_handle();
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.changed().await;
    }));
    Running { stop, task, wake }
}

impl Running {
    async fn stop(self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(WITHIN, self.task)
            .await
            .expect("the worker stops")
            .unwrap();
    }
}

#[test]
fn a_lease_shorter_than_twice_the_request_timeout_is_refused() {
    let with = |lease, request_timeout| WorkerConfig {
        lease: Duration::from_secs(lease),
        request_timeout: Duration::from_secs(request_timeout),
        ..WorkerConfig::default()
    };
    let refused = DeliveryWorker::new(MemoryQueue::new(), with(19, 10)).unwrap_err();
    assert!(matches!(
        refused,
        WorkerError::LeaseTooShort { lease, request_timeout }
            if lease == Duration::from_secs(19) && request_timeout == Duration::from_secs(10)
    ));
    assert!(DeliveryWorker::new(MemoryQueue::new(), with(20, 10)).is_ok());
}

#[tokio::test]
async fn retries_with_the_same_id_until_delivered() {
    let receiver = Receiver::start(Behaviour::Script(vec![500, 503, 200]));
    let queue = MemoryQueue::new();
    let c = claimed(&receiver.url("/"));
    let id = c.delivery.event_id;
    queue.push(c.clone());
    let worker = start(&queue, config("50ms,50ms,50ms"));

    let delivery = eventually("delivery", WITHIN, || {
        let d = queue.delivery(id);
        (d.state == DeliveryState::Delivered).then_some(d)
    })
    .await;
    worker.stop().await;

    assert_eq!(delivery.attempts, 3);
    assert_eq!(delivery.last_status_code, Some(200));
    let got = receiver.received();
    assert_eq!(got.len(), 3);
    for req in &got {
        assert_eq!(req.header(HEADER_ID), id.to_string());
        assert_eq!(req.body, c.delivery.payload.as_bytes());
        assert_eq!(
            verify(&c.secret, &req.headers, &req.body, DEFAULT_TOLERANCE),
            Ok(())
        );
    }
    let records = queue.records();
    let statuses: Vec<_> = records.iter().map(|r| r.status_code).collect();
    assert_eq!(statuses, [Some(500), Some(503), Some(200)]);
    assert!(matches!(records[0].next, NextStep::RetryAt(_)));
    assert!(matches!(records[1].next, NextStep::RetryAt(_)));
    assert_eq!(records[2].next, NextStep::Delivered);
    // The retry waited its delay, counted from the end of the failed attempt.
    if let NextStep::RetryAt(at) = records[0].next {
        let started = records[0].started_at.unix_millis() + records[0].duration_ms;
        assert!(at.unix_millis() >= started + 50);
        assert!(records[1].started_at >= at);
    }
}

/// Once a claim came back with slots to spare, nothing more was due: the worker asks again when
/// woken or at its poll, not because an attempt ended or its record was written.
#[tokio::test]
async fn an_idle_worker_does_not_ask_again_after_its_last_delivery() {
    let receiver = Receiver::start(Behaviour::Status(200));
    let queue = MemoryQueue::new();
    let c = claimed(&receiver.url("/"));
    let id = c.delivery.event_id;
    queue.push(c);
    let worker = start(&queue, hourly_poll("1h"));
    eventually("delivery", WITHIN, || {
        (queue.delivery(id).state == DeliveryState::Delivered).then_some(())
    })
    .await;
    // Time for any claim the record would cause.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(queue.claims(), 1, "the one claim that found the delivery");
    worker.stop().await;
}

#[tokio::test]
async fn fails_after_one_try_plus_the_schedule() {
    let receiver = Receiver::start(Behaviour::Status(500));
    let queue = MemoryQueue::new();
    let c = claimed(&receiver.url("/"));
    let id = c.delivery.event_id;
    queue.push(c);
    let schedule: RetrySchedule = "10ms,10ms,10ms".parse().unwrap();
    let worker = start(
        &queue,
        WorkerConfig {
            schedule: schedule.clone(),
            ..config("1ms")
        },
    );

    let delivery = eventually("failure", WITHIN, || {
        let d = queue.delivery(id);
        (d.state == DeliveryState::Failed).then_some(d)
    })
    .await;
    worker.stop().await;

    assert_eq!(delivery.attempts, 4);
    assert_eq!(
        delivery.attempts,
        i32::try_from(schedule.max_attempts()).unwrap()
    );
    assert_eq!(receiver.received().len(), 4);
    let nexts: Vec<_> = queue.records().iter().map(|r| r.next).collect();
    assert!(matches!(
        nexts[..3],
        [
            NextStep::RetryAt(_),
            NextStep::RetryAt(_),
            NextStep::RetryAt(_)
        ]
    ));
    assert_eq!(nexts[3], NextStep::Failed);
}

#[tokio::test]
async fn a_wake_up_starts_delivery_without_waiting_for_the_poll() {
    let receiver = Receiver::start(Behaviour::Status(200));
    let queue = MemoryQueue::new();
    let worker = start(&queue, hourly_poll("1s"));
    // The worker has looked once, found nothing, and now waits an hour for its next poll.
    eventually("the first claim", WITHIN, || {
        (queue.claims() >= 1).then_some(())
    })
    .await;

    let c = claimed(&receiver.url("/"));
    let id = c.delivery.event_id;
    queue.push(c);
    worker.wake.wake();

    receiver.wait_for(1, WITHIN).await;
    eventually("the record", WITHIN, || {
        (queue.delivery(id).state == DeliveryState::Delivered).then_some(())
    })
    .await;
    worker.stop().await;
}

#[tokio::test]
async fn queue_errors_are_retried_after_the_poll_interval() {
    let receiver = Receiver::start(Behaviour::Status(200));
    let queue = MemoryQueue::new();
    queue.fail_next_claims(3);
    let c = claimed(&receiver.url("/"));
    let id = c.delivery.event_id;
    queue.push(c);
    let worker = start(&queue, config("1s"));

    eventually("delivery after the queue came back", WITHIN, || {
        (queue.delivery(id).state == DeliveryState::Delivered).then_some(())
    })
    .await;
    assert!(queue.claims() >= 4, "{}", queue.claims());
    assert!(!worker.task.is_finished());
    worker.stop().await;
}

#[tokio::test]
async fn stopping_lets_the_attempt_in_flight_finish_and_records_it() {
    let gate = Arc::new(Semaphore::new(0));
    let receiver = Receiver::start(Behaviour::Gated(Arc::clone(&gate)));
    let queue = MemoryQueue::new();
    let c = claimed(&receiver.url("/"));
    let id = c.delivery.event_id;
    queue.push(c);
    let mut worker = start(&queue, config("1s"));

    receiver.wait_for(1, WITHIN).await;
    worker.stop.send(true).unwrap();
    // Stopping waits for the receiver, which has not answered yet.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut worker.task)
            .await
            .is_err(),
        "the worker returned with an attempt in flight"
    );
    assert!(queue.records().is_empty());

    gate.add_permits(1);
    tokio::time::timeout(WITHIN, worker.task)
        .await
        .expect("the worker stops once the attempt is done")
        .unwrap();
    let delivery = queue.delivery(id);
    assert_eq!(delivery.state, DeliveryState::Delivered);
    assert_eq!(delivery.attempts, 1);
    assert_eq!(queue.records().len(), 1);
    assert!(queue.released().is_empty());
}

#[tokio::test]
async fn what_was_claimed_while_stopping_is_released_not_sent() {
    let receiver = Receiver::start(Behaviour::Status(200));
    let gate = Arc::new(Semaphore::new(0));
    let queue = MemoryQueue::new().with_claim_gate(Arc::clone(&gate));
    let c = claimed(&receiver.url("/"));
    let id = c.delivery.event_id;
    queue.push(c);
    let worker = start(&queue, config("1s"));

    // The worker is inside `claim_due`, holding the delivery; the stop signal comes now.
    queue.wait_for_claim_entered(WITHIN).await;
    worker.stop.send(true).unwrap();
    gate.add_permits(1);
    tokio::time::timeout(WITHIN, worker.task)
        .await
        .expect("the worker stops")
        .unwrap();

    assert_eq!(queue.released(), [id]);
    assert!(queue.records().is_empty());
    assert!(receiver.received().is_empty());
    assert_eq!(queue.delivery(id).state, DeliveryState::Pending);
}

/// `n` deliveries to `receiver`, queued; their event ids.
fn queue_deliveries(queue: &MemoryQueue, receiver: &Receiver, n: usize) -> Vec<MessageId> {
    (0..n)
        .map(|_| {
            let c = claimed(&receiver.url("/"));
            let id = c.delivery.event_id;
            queue.push(c);
            id
        })
        .collect()
}

/// Waits until every one of `ids` is delivered.
async fn all_delivered(queue: &MemoryQueue, ids: &[MessageId]) {
    eventually("every delivery", WITHIN, || {
        ids.iter()
            .all(|id| queue.delivery(*id).state == DeliveryState::Delivered)
            .then_some(())
    })
    .await;
}

/// Attempts that ended wait for their records before others start, beyond a bound of the
/// concurrency plus one record's batch (256): their deliveries stay leased until recorded, and
/// a worker that ran ahead of a slow database left every claim to scan past thousands of them.
#[tokio::test]
async fn runs_no_further_ahead_of_its_records_than_its_bound() {
    let gate = Arc::new(Semaphore::new(0));
    let receiver = Receiver::start(Behaviour::Status(200));
    let queue = MemoryQueue::new().with_record_gate(Arc::clone(&gate));
    let ids = queue_deliveries(&queue, &receiver, 300);
    let worker = start(
        &queue,
        WorkerConfig {
            concurrency: 4,
            ..config("1s")
        },
    );

    let bound = 4 + 256;
    receiver.wait_for(bound, WITHIN).await;
    assert!(
        tokio::time::timeout(
            Duration::from_millis(300),
            receiver.wait_for(bound + 1, WITHIN)
        )
        .await
        .is_err(),
        "an attempt started beyond the bound while nothing was recorded"
    );

    gate.add_permits(1_000);
    all_delivered(&queue, &ids).await;
    assert_eq!(receiver.received().len(), 300);
    worker.stop().await;
}

#[tokio::test]
async fn runs_no_more_attempts_at_once_than_its_concurrency() {
    let gate = Arc::new(Semaphore::new(0));
    let receiver = Receiver::start(Behaviour::Gated(Arc::clone(&gate)));
    let queue = MemoryQueue::new();
    let ids = queue_deliveries(&queue, &receiver, 5);
    let worker = start(
        &queue,
        WorkerConfig {
            concurrency: 2,
            ..config("1s")
        },
    );

    receiver.wait_for(2, WITHIN).await;
    // Two are held by the receiver; while they are, no third attempt starts.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), receiver.wait_for(3, WITHIN))
            .await
            .is_err(),
        "a third attempt started"
    );
    assert_eq!(receiver.received().len(), 2);

    gate.add_permits(5);
    all_delivered(&queue, &ids).await;
    assert_eq!(receiver.received().len(), 5);
    worker.stop().await;
}

/// An endpoint that takes long to answer holds its attempts' slots: bounded per endpoint, it
/// leaves the other endpoints the rest, where it used to fill every slot and hold them to its
/// pace.
#[tokio::test]
async fn a_slow_endpoint_takes_no_more_than_its_share_of_the_slots() {
    let gate = Arc::new(Semaphore::new(0));
    let slow = Receiver::start(Behaviour::Gated(Arc::clone(&gate)));
    let fast = Receiver::start(Behaviour::Status(204));
    let queue = MemoryQueue::new();
    let (to_slow, to_fast) = (claimed(&slow.url("/")), claimed(&fast.url("/")));
    // The slow endpoint's backlog first, so that a claim in order would take only its.
    for _ in 0..20 {
        queue.push(claimed_like(&to_slow));
    }
    for _ in 0..20 {
        queue.push(claimed_like(&to_fast));
    }
    let worker = start(
        &queue,
        WorkerConfig {
            concurrency: 8,
            ..config("1s")
        },
    );

    fast.wait_for(20, WITHIN).await;
    assert_eq!(
        slow.received().len(),
        4,
        "the slow endpoint's share, waiting"
    );
    gate.add_permits(20);
    slow.wait_for(20, WITHIN).await;
    worker.stop().await;
}

/// Two slow endpoints each hold their slots: a third endpoint still gets some and goes on at its
/// own pace, where with a fixed bound of half the slots each the two slow ones took them all.
#[tokio::test]
async fn two_slow_endpoints_leave_the_others_room() {
    let gate = Arc::new(Semaphore::new(0));
    let slow = [
        Receiver::start(Behaviour::Gated(Arc::clone(&gate))),
        Receiver::start(Behaviour::Gated(Arc::clone(&gate))),
    ];
    let fast = Receiver::start(Behaviour::Status(204));
    let queue = MemoryQueue::new();
    for receiver in slow.iter().chain([&fast]) {
        let to = claimed(&receiver.url("/"));
        for _ in 0..20 {
            queue.push(claimed_like(&to));
        }
    }
    let worker = start(
        &queue,
        WorkerConfig {
            concurrency: 8,
            ..hourly_poll("1s")
        },
    );

    fast.wait_for(20, WITHIN).await;
    // Of 8 slots, the first slow endpoint took half, the second half of the rest; the
    // remaining two went to the third, one at a time.
    let waiting = slow.each_ref().map(|r| r.received().len());
    assert_eq!(waiting, [4, 2], "the slow endpoints' attempts, waiting");
    gate.add_permits(40);
    for receiver in &slow {
        receiver.wait_for(20, WITHIN).await;
    }
    worker.stop().await;
}

/// A claim held back by an endpoint's bound leaves it more due: its ended attempts call for the
/// next claim, as a full claim's do, instead of the next poll.
#[tokio::test]
async fn an_endpoint_at_its_bound_is_claimed_again_as_its_attempts_end() {
    let receiver = Receiver::start(Behaviour::Status(204));
    let queue = MemoryQueue::new();
    let endpoint = claimed(&receiver.url("/"));
    for _ in 0..40 {
        queue.push(claimed_like(&endpoint));
    }
    let worker = start(
        &queue,
        WorkerConfig {
            concurrency: 8,
            ..hourly_poll("1s")
        },
    );
    receiver.wait_for(40, WITHIN).await;
    worker.stop().await;
}
