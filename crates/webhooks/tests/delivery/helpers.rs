//! A real HTTP receiver (actix-web on 127.0.0.1, port 0), an in-memory delivery queue, and
//! builders for deliveries.

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use shortlink_domain::{
    AttemptRecord, ClaimedDelivery, Delivery, DeliveryQueue, DeliveryState, Event, EventKind,
    InFlight, LinkId, LinkView, MessageId, NextStep, Timestamp, WebhookId, WebhookSecret,
    WebhookTarget,
};
use tokio::sync::{Notify, Semaphore};

/// One request as the receiver got it.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .unwrap()
    }
}

/// What the receiver answers.
#[derive(Clone)]
pub enum Behaviour {
    /// This status to every request.
    Status(u16),
    /// The n-th request (from 0) gets the n-th status; later ones the last.
    Script(Vec<u16>),
    /// A 302 to `/elsewhere` (which answers 200 and is recorded like any other request).
    Redirect,
    /// Never answers.
    Hang,
    /// Answers 200 once the test opens the gate (adds a permit).
    Gated(Arc<Semaphore>),
}

struct ReceiverState {
    behaviour: Behaviour,
    received: Mutex<Vec<Received>>,
    arrived: Notify,
}

/// A running receiver; stops when dropped.
pub struct Receiver {
    pub port: u16,
    state: Arc<ReceiverState>,
    server: actix_web::dev::ServerHandle,
}

impl Receiver {
    /// Binds 127.0.0.1:0 first, then serves: connections made after this returns are queued by
    /// the kernel, so no readiness wait is needed.
    pub fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ReceiverState {
            behaviour,
            received: Mutex::new(Vec::new()),
            arrived: Notify::new(),
        });
        let data = web::Data::from(Arc::clone(&state));
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(receive))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(0)
        .listen(listener)
        .unwrap()
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            port,
            state,
            server: handle,
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests arrived, for at most `within`.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        tokio::time::timeout(within, async {
            loop {
                let arrived = self.state.arrived.notified();
                let got = self.received();
                if got.len() >= n {
                    return got;
                }
                arrived.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{n} requests did not arrive within {within:?}"))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Not awaited: the test's runtime ends right after and takes the server with it.
        drop(self.server.stop(false));
    }
}

async fn receive(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<ReceiverState>,
) -> HttpResponse {
    let mut headers = http::HeaderMap::new();
    for (name, value) in req.headers() {
        headers.append(
            http::HeaderName::from_bytes(name.as_str().as_bytes()).unwrap(),
            http::HeaderValue::from_bytes(value.as_bytes()).unwrap(),
        );
    }
    let index = {
        let mut received = state.received.lock().unwrap();
        received.push(Received {
            path: req.path().to_owned(),
            headers,
            body: body.to_vec(),
        });
        received.len() - 1
    };
    state.arrived.notify_waiters();
    let status = match &state.behaviour {
        Behaviour::Status(s) => *s,
        Behaviour::Script(statuses) => *statuses
            .get(index)
            .or(statuses.last())
            .expect("a script has statuses"),
        Behaviour::Redirect if req.path() == "/elsewhere" => 200,
        Behaviour::Redirect => {
            return HttpResponse::Found()
                .insert_header(("location", "/elsewhere"))
                .finish();
        }
        Behaviour::Hang => std::future::pending().await,
        Behaviour::Gated(gate) => {
            gate.acquire().await.unwrap().forget();
            200
        }
    };
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).finish()
}

/// A port nobody listens on (bound, then closed).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

pub fn link_view() -> LinkView {
    LinkView {
        id: LinkId::parse("link_01JD8X3Z6Q9T2V4W5Y7A0B1C2D").unwrap(),
        domain: "sho.rt".into(),
        short_code: "x7Kp2Qa".into(),
        short_url: "https://sho.rt/x7Kp2Qa".into(),
        destination: "https://example.com/page?a=1".into(),
        clicks: 0,
        created_at: Timestamp::from_unix_millis(1_795_647_752_123),
        options: Default::default(),
    }
}

/// A fresh, never attempted delivery of a `link.created` event to `target`.
pub fn claimed(target: &str) -> ClaimedDelivery {
    let now = Timestamp::now();
    ClaimedDelivery {
        delivery: Delivery {
            event_id: MessageId::generate(),
            webhook_id: WebhookId::generate(),
            event_type: EventKind::LinkCreated,
            payload: Event::link_created(link_view()).to_json(),
            state: DeliveryState::Pending,
            attempts: 0,
            next_attempt_at: now,
            last_status_code: None,
            last_error: None,
            created_at: now,
            updated_at: now,
        },
        // Trusted, not parsed: the tests deliver to 127.0.0.1, which registration would refuse.
        target: WebhookTarget::from_trusted(target).unwrap(),
        secret: WebhookSecret::generate(),
    }
}

/// Another fresh delivery to the endpoint of `to`.
pub fn claimed_like(to: &ClaimedDelivery) -> ClaimedDelivery {
    let mut c = claimed(to.target.as_str());
    c.delivery.webhook_id = to.delivery.webhook_id;
    c
}

/// The memory queue's only error: "the database is down".
#[derive(Debug, thiserror::Error)]
#[error("queue unavailable")]
pub struct Unavailable;

/// An in-memory [`DeliveryQueue`] for testing the worker's loop without a database. It keeps
/// the leasing rules of the real queue in their simplest form; the database-backed queue
/// (`shortlink-storage`) is tested against a real database in the server's integration tests.
#[derive(Clone, Default)]
pub struct MemoryQueue {
    state: Arc<Mutex<QueueState>>,
    claims: Arc<AtomicUsize>,
    failing_claims: Arc<AtomicUsize>,
    claim_gate: Option<Arc<Semaphore>>,
    record_gate: Option<Arc<Semaphore>>,
    claim_entered: Arc<Notify>,
}

#[derive(Default)]
struct QueueState {
    rows: Vec<Row>,
    records: Vec<AttemptRecord>,
    released: Vec<MessageId>,
}

struct Row {
    claimed: ClaimedDelivery,
    leased_until: Option<Timestamp>,
}

impl MemoryQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next `n` claims fail as if the database were down.
    pub fn fail_next_claims(&self, n: usize) {
        self.failing_claims.store(n, Ordering::SeqCst);
    }

    /// Every claim waits for a permit of `gate` after it has taken its deliveries.
    pub fn with_claim_gate(mut self, gate: Arc<Semaphore>) -> Self {
        self.claim_gate = Some(gate);
        self
    }

    /// Every record of attempts waits for a permit of `gate` before it writes them.
    pub fn with_record_gate(mut self, gate: Arc<Semaphore>) -> Self {
        self.record_gate = Some(gate);
        self
    }

    pub fn push(&self, claimed: ClaimedDelivery) {
        self.state.lock().unwrap().rows.push(Row {
            claimed,
            leased_until: None,
        });
    }

    pub fn claims(&self) -> usize {
        self.claims.load(Ordering::SeqCst)
    }

    pub async fn wait_for_claim_entered(&self, within: Duration) {
        tokio::time::timeout(within, self.claim_entered.notified())
            .await
            .expect("the worker did not claim in time");
    }

    pub fn delivery(&self, id: MessageId) -> Delivery {
        let state = self.state.lock().unwrap();
        let row = state
            .rows
            .iter()
            .find(|r| r.claimed.delivery.event_id == id)
            .expect("a delivery of that id");
        row.claimed.delivery.clone()
    }

    pub fn records(&self) -> Vec<AttemptRecord> {
        self.state.lock().unwrap().records.clone()
    }

    pub fn released(&self) -> Vec<MessageId> {
        self.state.lock().unwrap().released.clone()
    }

    /// Due deliveries in the order they were pushed, up to `limit` and each endpoint's room.
    fn take_due(
        &self,
        now: Timestamp,
        limit: i64,
        lease_until: Timestamp,
        in_flight: &InFlight,
    ) -> Vec<ClaimedDelivery> {
        let mut state = self.state.lock().unwrap();
        let limit = usize::try_from(limit).unwrap();
        let mut in_flight = in_flight.clone();
        let mut out = Vec::new();
        for row in &mut state.rows {
            if out.len() == limit {
                break;
            }
            let d = &row.claimed.delivery;
            let free = row.leased_until.is_none_or(|until| until <= now);
            let room = in_flight.room(d.webhook_id);
            if d.state == DeliveryState::Pending && d.next_attempt_at <= now && free && room > 0 {
                in_flight.start(d.webhook_id, 1);
                row.leased_until = Some(lease_until);
                out.push(row.claimed.clone());
            }
        }
        out
    }
}

impl DeliveryQueue for MemoryQueue {
    type Error = Unavailable;

    async fn claim_due(
        &self,
        now: Timestamp,
        limit: i64,
        lease_until: Timestamp,
        in_flight: &InFlight,
    ) -> Result<Vec<ClaimedDelivery>, Unavailable> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        self.claim_entered.notify_one();
        let failing = self
            .failing_claims
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(Unavailable);
        }
        let batch = self.take_due(now, limit, lease_until, in_flight);
        if let Some(gate) = &self.claim_gate {
            gate.acquire().await.unwrap().forget();
        }
        Ok(batch)
    }

    async fn record_attempts(&self, attempts: &[AttemptRecord]) -> Result<(), Unavailable> {
        if let Some(gate) = &self.record_gate {
            gate.acquire().await.unwrap().forget();
        }
        let mut state = self.state.lock().unwrap();
        for attempt in attempts {
            state.records.push(attempt.clone());
            let row = state
                .rows
                .iter_mut()
                .find(|r| {
                    r.claimed.delivery.event_id == attempt.event_id
                        && r.claimed.delivery.webhook_id == attempt.webhook_id
                })
                .expect("an attempt of a known delivery");
            row.leased_until = None;
            let d = &mut row.claimed.delivery;
            d.attempts += 1;
            d.last_status_code = attempt.status_code;
            d.last_error = attempt.error.clone();
            match attempt.next {
                NextStep::Delivered => d.state = DeliveryState::Delivered,
                NextStep::Failed => d.state = DeliveryState::Failed,
                NextStep::RetryAt(at) => d.next_attempt_at = at,
            }
        }
        Ok(())
    }

    async fn release(&self, event_id: MessageId, webhook_id: WebhookId) -> Result<(), Unavailable> {
        let mut state = self.state.lock().unwrap();
        state.released.push(event_id);
        for row in &mut state.rows {
            let d = &row.claimed.delivery;
            if d.event_id == event_id && d.webhook_id == webhook_id {
                row.leased_until = None;
            }
        }
        Ok(())
    }
}

/// Polls `check` every 10 ms until it gives a value, for at most `within`.
pub async fn eventually<T>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
