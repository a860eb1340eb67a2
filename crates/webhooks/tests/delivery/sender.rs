//! One attempt against real receivers.

use std::time::Duration;

use shortlink_domain::{NextStep, Timestamp};
use shortlink_webhooks::{
    DEFAULT_TOLERANCE, HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, Outcome, SenderConfig,
    USER_AGENT, WebhookSender, verify,
};

use crate::helpers::{Behaviour, Receiver, claimed, closed_port};

fn sender(allow_private: bool) -> WebhookSender {
    WebhookSender::new(&SenderConfig {
        allow_private,
        ..SenderConfig::default()
    })
    .unwrap()
}

const WITHIN: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_2xx_receiver_gets_the_exact_body_and_headers_and_they_verify() {
    let receiver = Receiver::start(Behaviour::Status(200));
    let c = claimed(&receiver.url("/hooks/shortlink?src=test"));

    let before = Timestamp::now().unix_seconds();
    let attempt = sender(true).attempt(&c).await;
    let after = Timestamp::now().unix_seconds();

    assert_eq!(attempt.outcome, Outcome::Delivered { status: 200 });
    assert!(attempt.outcome.is_success());
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let req = &got[0];
    assert_eq!(req.path, "/hooks/shortlink");
    assert_eq!(req.body, c.delivery.payload.as_bytes());
    assert_eq!(req.header("content-type"), "application/json");
    assert_eq!(req.header("user-agent"), USER_AGENT);
    assert_eq!(req.header(HEADER_ID), c.delivery.event_id.to_string());
    let ts: i64 = req.header(HEADER_TIMESTAMP).parse().unwrap();
    assert!(
        (before..=after).contains(&ts),
        "{ts} not in {before}..={after}"
    );
    assert!(req.header(HEADER_SIGNATURE).starts_with("v1,"));
    assert_eq!(
        verify(&c.secret, &req.headers, &req.body, DEFAULT_TOLERANCE),
        Ok(())
    );

    let record = attempt
        .clone()
        .into_record(&c.delivery, NextStep::Delivered);
    assert_eq!(record.event_id, c.delivery.event_id);
    assert_eq!(record.webhook_id, c.delivery.webhook_id);
    assert_eq!(record.status_code, Some(200));
    assert_eq!(record.error, None);
    assert_eq!(record.duration_ms, attempt.duration_ms);
    assert_eq!(record.started_at, attempt.started_at);
}

#[tokio::test]
async fn a_500_is_a_failure_with_its_status() {
    let receiver = Receiver::start(Behaviour::Status(500));
    let attempt = sender(true).attempt(&claimed(&receiver.url("/"))).await;
    assert_eq!(attempt.outcome, Outcome::Rejected { status: 500 });
    assert!(!attempt.outcome.is_success());
    assert_eq!(attempt.outcome.status_code(), Some(500));
    assert_eq!(attempt.outcome.error(), None);
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let receiver = Receiver::start(Behaviour::Redirect);
    let attempt = sender(true).attempt(&claimed(&receiver.url("/hook"))).await;
    assert_eq!(attempt.outcome, Outcome::Rejected { status: 302 });
    let paths: Vec<_> = receiver.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/hook"]);
}

#[tokio::test]
async fn a_receiver_that_never_answers_times_out() {
    let receiver = Receiver::start(Behaviour::Hang);
    let sender = WebhookSender::new(&SenderConfig {
        timeout: Duration::from_secs(1),
        allow_private: true,
    })
    .unwrap();
    let attempt = sender.attempt(&claimed(&receiver.url("/"))).await;
    assert_eq!(
        attempt.outcome,
        Outcome::NoResponse {
            error: "timed out after 1s".into()
        }
    );
    assert!(
        (1000..5000).contains(&attempt.duration_ms),
        "{}",
        attempt.duration_ms
    );
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_closed_port_is_a_connection_failure() {
    let c = claimed(&format!("http://127.0.0.1:{}/", closed_port()));
    let attempt = sender(true).attempt(&c).await;
    let error = attempt.outcome.error().unwrap();
    assert!(error.starts_with("connection failed: "), "{error}");
    assert_eq!(attempt.outcome.status_code(), None);
    let record = attempt.clone().into_record(&c.delivery, NextStep::Failed);
    assert_eq!(record.status_code, None);
    assert_eq!(record.error.as_deref(), Some(error));
}

#[tokio::test]
async fn a_private_ip_literal_is_refused_unless_allowed() {
    let receiver = Receiver::start(Behaviour::Status(204));
    let c = claimed(&receiver.url("/"));

    let refused = sender(false).attempt(&c).await;
    assert_eq!(
        refused.outcome,
        Outcome::NoResponse {
            error: "refused: 127.0.0.1 is not a public address".into()
        }
    );
    assert!(receiver.received().is_empty());

    let allowed = sender(true).attempt(&c).await;
    assert_eq!(allowed.outcome, Outcome::Delivered { status: 204 });
    receiver.wait_for(1, WITHIN).await;
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_by_the_resolver() {
    let receiver = Receiver::start(Behaviour::Status(200));
    let c = claimed(&format!("http://localhost:{}/", receiver.port));

    let refused = sender(false).attempt(&c).await;
    let error = refused.outcome.error().unwrap();
    assert_eq!(
        error, "refused: localhost has no public address",
        "which addresses is not said"
    );
    assert!(receiver.received().is_empty());

    let allowed = sender(true).attempt(&c).await;
    assert_eq!(allowed.outcome, Outcome::Delivered { status: 200 });
}
