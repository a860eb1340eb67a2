//! The loop that drains the outbox: claim what is due, send it, record how it went.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use shortlink_domain::{
    AttemptRecord, ClaimedDelivery, DeliveryQueue, InFlight, NextStep, OUTAGE_LOGGED_EVERY,
    ThrottledLog, Timestamp, WebhookId,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinError, JoinHandle, JoinSet};
use tokio::time::{Instant, sleep_until};

use crate::pacing::Pacing;
use crate::schedule::RetrySchedule;
use crate::sender::{DEFAULT_REQUEST_TIMEOUT, SenderConfig, SenderError, WebhookSender};

/// How a [`DeliveryWorker`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Attempts in flight at once. Default 64; zero counts as one.
    pub concurrency: usize,
    /// How long a claimed delivery stays leased to this worker. At least twice
    /// `request_timeout` ([`DeliveryWorker::new`] refuses less): a lease that ends while its
    /// attempt still runs, or before the attempt is recorded, lets another process claim the
    /// delivery and send it twice. Default 60 s.
    pub lease: Duration,
    /// How often to look for due deliveries (retries coming due, events written by other
    /// processes) when nothing wakes the worker, and how long to wait after a queue error.
    /// Default 500 ms.
    pub poll_interval: Duration,
    /// When failed deliveries are tried again. Default [`RetrySchedule::default`].
    pub schedule: RetrySchedule,
    /// Deliver to loopback, private and link-local addresses too. Default false.
    pub allow_private: bool,
    /// The limit on one attempt. Default [`DEFAULT_REQUEST_TIMEOUT`] (10 s).
    pub request_timeout: Duration,
}

/// A [`DeliveryWorker`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] SenderError),
    /// [`WorkerConfig::lease`] is shorter than twice [`WorkerConfig::request_timeout`].
    #[error(
        "a webhook lease of {lease:?} is too short for a request timeout of {request_timeout:?}: \
         it must be at least twice as long"
    )]
    LeaseTooShort {
        /// The lease asked for.
        lease: Duration,
        /// The request timeout asked for.
        request_timeout: Duration,
    },
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            concurrency: 64,
            lease: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
            schedule: RetrySchedule::default(),
            allow_private: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Told the next step of every attempt as it ends (a metrics counter, say); it must be quick,
/// as it runs on the attempt's task.
pub type AttemptObserver = Arc<dyn Fn(&NextStep) + Send + Sync>;

/// Wakes a [`DeliveryWorker`] that is waiting for its next poll, so new events go out within
/// milliseconds. Cheap to clone; waking a worker that is busy, or one that is not running, is
/// harmless (the wake-up is kept until the worker next waits, and several collapse into one).
#[derive(Debug, Clone, Default)]
pub struct WakeHandle(Arc<Notify>);

impl WakeHandle {
    /// A handle not yet attached to a worker; attach it with
    /// [`DeliveryWorker::with_wake_handle`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the worker to look for due deliveries now. Call it after committing the transaction
    /// that wrote new events to the outbox.
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// Delivers the webhook events of a [`DeliveryQueue`].
///
/// Any number of workers, in one process or in several sharing a database, may drain one
/// queue: the queue's leases keep each attempt to one worker.
pub struct DeliveryWorker<Q> {
    queue: Q,
    config: WorkerConfig,
    sender: WebhookSender,
    wake: WakeHandle,
    observer: Option<AttemptObserver>,
}

impl<Q> fmt::Debug for DeliveryWorker<Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeliveryWorker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<Q: DeliveryQueue> DeliveryWorker<Q> {
    /// A worker for `queue`; builds its HTTP client.
    pub fn new(queue: Q, config: WorkerConfig) -> Result<Self, WorkerError> {
        if config.lease < config.request_timeout.saturating_mul(2) {
            return Err(WorkerError::LeaseTooShort {
                lease: config.lease,
                request_timeout: config.request_timeout,
            });
        }
        let sender = WebhookSender::new(&SenderConfig {
            timeout: config.request_timeout,
            allow_private: config.allow_private,
        })?;
        Ok(Self {
            queue,
            config,
            sender,
            wake: WakeHandle::new(),
            observer: None,
        })
    }

    /// Tells `observer` the next step of every attempt.
    pub fn with_observer(mut self, observer: AttemptObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Uses `wake` as this worker's wake-up handle, for a handle made before the worker.
    pub fn with_wake_handle(mut self, wake: WakeHandle) -> Self {
        self.wake = wake;
        self
    }

    /// The handle that wakes this worker.
    pub fn wake_handle(&self) -> WakeHandle {
        self.wake.clone()
    }

    /// Runs until `shutdown` completes, then stops gracefully: claims nothing more, releases
    /// deliveries it claimed but did not start, waits for the attempts in flight (each bounded
    /// by the request timeout) and records them, and returns.
    ///
    /// `shutdown` is any future: `token.cancelled_owned()` of a
    /// `tokio_util::sync::CancellationToken`, `async { rx.changed().await.ok(); }` for a
    /// `tokio::sync::watch::Receiver`, or `tokio::signal::ctrl_c()` mapped to `()`.
    ///
    /// Queue errors (the database down) are logged and retried after the poll interval; they
    /// never end the loop. Attempts run as tokio tasks, so this must run inside a tokio runtime.
    pub async fn run<S>(self, shutdown: S)
    where
        S: Future<Output = ()> + Send,
    {
        let mut running = Running::start(self);
        let mut shutdown = std::pin::pin!(shutdown);
        tracing::info!(
            concurrency = running.concurrency,
            "webhook delivery worker started"
        );
        loop {
            running.reap();
            if running.claim(shutdown.as_mut()).await == Step::Stop
                || running.wait(shutdown.as_mut()).await == Step::Stop
            {
                break;
            }
        }
        running.finish().await;
    }
}

/// Whether [`DeliveryWorker::run`]'s loop goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Continue,
    /// The shutdown future completed.
    Stop,
}

/// A running worker's state: its attempts in flight, the bound on attempts not yet recorded,
/// the recorder they go to, and when and whether to claim next.
struct Running<Q> {
    queue: Q,
    sender: WebhookSender,
    wake: WakeHandle,
    observer: Option<AttemptObserver>,
    schedule: Arc<RetrySchedule>,
    lease: Duration,
    poll_interval: Duration,
    concurrency: usize,
    busy: Busy,
    pacing: Pacing,
    in_flight: JoinSet<()>,
    /// Permits for attempts not yet recorded ([`Unrecorded`]).
    unrecorded: Arc<Semaphore>,
    records: UnboundedSender<Unrecorded>,
    /// Told by the recorder after each write.
    written: Arc<Notify>,
    recorder: JoinHandle<()>,
    next_poll: Instant,
    /// Claims failed in a row: an outage is logged at its first failure and once every
    /// `OUTAGE_LOGGED_EVERY` after, not at every poll.
    failed_claims: u32,
    claim_failures: ThrottledLog,
}

impl<Q: DeliveryQueue> Running<Q> {
    /// Starts the recorder; the first claim is due at once.
    fn start(worker: DeliveryWorker<Q>) -> Self {
        let DeliveryWorker {
            queue,
            config,
            sender,
            wake,
            observer,
        } = worker;
        let concurrency = config.concurrency.max(1);
        let (records, recorded) = tokio::sync::mpsc::unbounded_channel();
        let written = Arc::new(Notify::new());
        let recorder = tokio::spawn(record(queue.clone(), recorded, Arc::clone(&written)));
        Self {
            queue,
            sender,
            wake,
            observer,
            schedule: Arc::new(config.schedule),
            lease: config.lease,
            poll_interval: config.poll_interval,
            concurrency,
            busy: Busy::default(),
            pacing: Pacing::new(concurrency),
            in_flight: JoinSet::new(),
            unrecorded: Arc::new(Semaphore::new(concurrency + RECORD_BATCH)),
            records,
            written,
            recorder,
            next_poll: Instant::now(),
            failed_claims: 0,
            claim_failures: ThrottledLog::new(OUTAGE_LOGGED_EVERY),
        }
    }

    /// Takes note of the attempts that have ended.
    fn reap(&mut self) {
        while let Some(done) = self.in_flight.try_join_next() {
            log_panic(done);
            self.pacing.ended();
        }
    }

    /// Claims what is due and starts it, when the pacing calls for a claim now. Stops when
    /// `shutdown` completed while the queue answered: what was claimed then goes back at once
    /// rather than waiting for its lease to end.
    async fn claim<S: Future<Output = ()>>(&mut self, shutdown: Pin<&mut S>) -> Step {
        let free = self
            .concurrency
            .saturating_sub(self.in_flight.len())
            .min(self.unrecorded.available_permits());
        if !self.pacing.claim_now(self.in_flight.len(), free) {
            return Step::Continue;
        }
        self.next_poll = Instant::now() + self.poll_interval;
        let now = Timestamp::now();
        let limit = i64::try_from(free).unwrap_or(i64::MAX);
        let room = self.busy.in_flight(self.concurrency);
        let batch = match self
            .queue
            .claim_due(now, limit, now.plus(self.lease), &room)
            .await
        {
            Ok(batch) => batch,
            Err(e) => {
                self.claim_failed(&e);
                return Step::Continue;
            }
        };
        if self.failed_claims > 0 {
            tracing::info!(
                failed_claims = self.failed_claims,
                "claiming webhook deliveries again"
            );
            self.failed_claims = 0;
        }
        self.pacing.answered(batch.len(), free, room.filled(&batch));
        let step = match shutdown.now_or_never() {
            Some(()) => Step::Stop,
            None => Step::Continue,
        };
        for claimed in batch {
            // No more was claimed than there were permits, and only this loop takes them: one
            // is always there.
            let permit = Arc::clone(&self.unrecorded).try_acquire_owned();
            match (step, permit) {
                (Step::Continue, Ok(permit)) => self.send(claimed, permit),
                _ => release(&self.queue, &claimed).await,
            }
        }
        step
    }

    /// Starts the attempt of a claimed delivery.
    fn send(&mut self, claimed: ClaimedDelivery, permit: OwnedSemaphorePermit) {
        let endpoint = self.busy.start(claimed.delivery.webhook_id);
        self.in_flight.spawn(deliver(
            self.records.clone(),
            permit,
            endpoint,
            self.sender.clone(),
            Arc::clone(&self.schedule),
            self.observer.clone(),
            claimed,
        ));
    }

    fn claim_failed(&mut self, e: &Q::Error) {
        self.pacing.failed();
        self.failed_claims = self.failed_claims.saturating_add(1);
        if let Some(repeated) = self.claim_failures.occurred(std::time::Instant::now()) {
            tracing::error!(
                error = e as &dyn std::error::Error,
                failed_claims = self.failed_claims,
                retries = repeated.times,
                retry_in_ms = self.poll_interval.as_millis(),
                "cannot claim webhook deliveries"
            );
        }
    }

    /// Waits for the next thing that matters: the shutdown, an attempt ending, a wake-up, a
    /// write of records, the poll. `shutdown` is never polled again once it completed: the loop
    /// ends right after.
    async fn wait<S: Future<Output = ()>>(&mut self, shutdown: Pin<&mut S>) -> Step {
        tokio::select! {
            biased;
            () = shutdown => return Step::Stop,
            Some(done) = self.in_flight.join_next(), if !self.in_flight.is_empty() => {
                log_panic(done);
                self.pacing.ended();
            }
            () = self.wake.0.notified() => self.pacing.ask(),
            () = self.written.notified() => self.pacing.recorded(),
            () = sleep_until(self.next_poll) => {
                self.pacing.ask();
                // Also when every slot is busy, so a full worker does not spin on a timer that
                // has already fired.
                self.next_poll = Instant::now() + self.poll_interval;
            }
        }
        Step::Continue
    }

    /// Waits for the attempts in flight, then for their records to be written.
    async fn finish(mut self) {
        tracing::info!(
            in_flight = self.in_flight.len(),
            "webhook delivery worker stopping; finishing the attempts in flight"
        );
        while let Some(done) = self.in_flight.join_next().await {
            log_panic(done);
        }
        drop(self.records);
        if let Err(e) = self.recorder.await {
            tracing::error!(error = %e, "webhook attempt recorder failed");
        }
        tracing::info!("webhook delivery worker stopped");
    }
}

/// Most attempts recorded in one transaction.
const RECORD_BATCH: usize = 256;

/// An attempt's record on its way to the recorder, with the permit its attempt took from the
/// worker's bound on attempts not yet recorded (`concurrency + RECORD_BATCH`). A delivery stays
/// leased and pending until its record commits, and every claim's scan passes over such rows:
/// a worker that ran ahead of its recorder (the database slowed by a burst of clicks) left
/// thousands of them, and each claim grew slower the further it got ahead. Bounded, the worker
/// waits for its records instead; the recorder tells it after each write.
type Unrecorded = (AttemptRecord, OwnedSemaphorePermit);

/// Attempts in flight, by endpoint, for the claims' [`InFlight`]; each attempt holds a
/// [`Started`] until it ends.
#[derive(Debug, Clone, Default)]
struct Busy(Arc<Mutex<HashMap<WebhookId, usize>>>);

/// One attempt in flight to an endpoint, counted in [`Busy`] until dropped.
struct Started {
    busy: Busy,
    endpoint: WebhookId,
}

impl Busy {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<WebhookId, usize>> {
        // The counts stay right whatever panicked while they were held: each change is one
        // step.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an attempt to `endpoint` until the returned value is dropped.
    fn start(&self, endpoint: WebhookId) -> Started {
        *self.counts().entry(endpoint).or_default() += 1;
        Started {
            busy: self.clone(),
            endpoint,
        }
    }

    /// What a claim may start now, in a worker of `capacity` slots.
    fn in_flight(&self, capacity: usize) -> InFlight {
        InFlight {
            capacity,
            busy: self.counts().clone(),
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let mut counts = self.busy.counts();
        if let Some(n) = counts.get_mut(&self.endpoint) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.endpoint);
            }
        }
    }
}

/// One attempt; its record goes to the recorder, holding `permit` until it is written. The
/// attempt counts as its endpoint's while it runs (`started`).
async fn deliver(
    records: UnboundedSender<Unrecorded>,
    permit: OwnedSemaphorePermit,
    started: Started,
    sender: WebhookSender,
    schedule: Arc<RetrySchedule>,
    observer: Option<AttemptObserver>,
    claimed: ClaimedDelivery,
) {
    let attempt = sender.attempt(&claimed).await;
    drop(started);
    let delivery = &claimed.delivery;
    let attempts_made = u32::try_from(delivery.attempts)
        .unwrap_or(0)
        .saturating_add(1);
    let next = if attempt.outcome.is_success() {
        NextStep::Delivered
    } else {
        schedule.next_step(attempts_made, Timestamp::now())
    };
    // A delivered attempt is logged at `debug`: its line would be the volume of the traffic
    // itself (a `link.clicked` delivery per click), and the deliveries list keeps its outcome.
    // An attempt that failed says what needs attention.
    if attempt.outcome.is_success() {
        tracing::debug!(
            event_id = %delivery.event_id,
            webhook_id = %delivery.webhook_id,
            attempt = attempts_made,
            duration_ms = attempt.duration_ms,
            "webhook delivered"
        );
    } else {
        tracing::info!(
            event_id = %delivery.event_id,
            webhook_id = %delivery.webhook_id,
            attempt = attempts_made,
            status = attempt.outcome.status_code(),
            error = attempt.outcome.error(),
            duration_ms = attempt.duration_ms,
            next = ?next,
            "webhook attempt failed"
        );
    }
    if let Some(observe) = &observer {
        observe(&next);
    }
    // The recorder outlives every attempt: it stops once the worker dropped its sender, after
    // the last attempt ended.
    let _ = records.send((attempt.into_record(delivery, next), permit));
}

/// Writes attempts' records as they come, each write taking every record that arrived while
/// the last one ran (a group commit: one transaction for many attempts), until the worker and
/// its attempts have dropped their senders.
async fn record<Q: DeliveryQueue>(
    queue: Q,
    mut records: UnboundedReceiver<Unrecorded>,
    written: Arc<Notify>,
) {
    let mut received = Vec::with_capacity(RECORD_BATCH);
    while records.recv_many(&mut received, RECORD_BATCH).await > 0 {
        let (batch, permits): (Vec<AttemptRecord>, Vec<_>) = received.drain(..).unzip();
        if let Err(e) = queue.record_attempts(&batch).await {
            // Their leases run out and the deliveries come due again, so they are sent once
            // more: at-least-once, which receivers handle by de-duplicating on webhook-id.
            tracing::error!(
                error = &e as &dyn std::error::Error,
                attempts = batch.len(),
                "cannot record webhook attempts; they will be retried when their leases end"
            );
        }
        // Written (or given up on: their leases end): the worker may claim in their place.
        drop(permits);
        written.notify_one();
    }
}

async fn release<Q: DeliveryQueue>(queue: &Q, claimed: &ClaimedDelivery) {
    let delivery = &claimed.delivery;
    if let Err(e) = queue.release(delivery.event_id, delivery.webhook_id).await {
        tracing::warn!(
            error = &e as &dyn std::error::Error,
            event_id = %delivery.event_id,
            webhook_id = %delivery.webhook_id,
            "cannot release webhook delivery; it is retried when its lease ends"
        );
    }
}

fn log_panic(done: Result<(), JoinError>) {
    if let Err(e) = done {
        tracing::error!(error = %e, "webhook attempt task failed");
    }
}
