//! The receiver shown in docs/WEBHOOKS.md ("Verifying a delivery", Rust), run against the
//! sender: what the docs tell users to write works.

use std::net::TcpListener;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use shortlink_domain::WebhookSecret;
use shortlink_webhooks::{
    DEFAULT_TOLERANCE, Outcome, SenderConfig, SignatureHeaders, WebhookSender, verify,
};

use crate::helpers::claimed;

// The docs' example, from here to the end marker; docs.rs checks they are the same.
fn header<'a>(req: &'a HttpRequest, name: &str) -> &'a str {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn receive(
    req: HttpRequest,
    body: web::Bytes,
    secret: web::Data<WebhookSecret>, // WebhookSecret::from_stored("whsec_…".into())
) -> HttpResponse {
    let headers = SignatureHeaders {
        id: header(&req, "webhook-id"),
        timestamp: header(&req, "webhook-timestamp"),
        signature: header(&req, "webhook-signature"),
    };
    if let Err(e) = verify(&secret, &headers, &body, DEFAULT_TOLERANCE) {
        return HttpResponse::Unauthorized().body(e.to_string());
    }
    // Seen `headers.id` before? Answer 204 and stop. Otherwise parse `body` and handle it.
    HttpResponse::NoContent().finish()
}
// End of the docs' example.

fn start(secret: WebhookSecret) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let secret = web::Data::new(secret);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(secret.clone())
            .route("/", web::post().to(receive))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    port
}

#[tokio::test]
async fn the_documented_receiver_accepts_genuine_deliveries_only() {
    let sender = WebhookSender::new(&SenderConfig {
        allow_private: true,
        ..SenderConfig::default()
    })
    .unwrap();
    let secret = WebhookSecret::generate();
    let port = start(secret.clone());
    let mut to_receiver = claimed(&format!("http://127.0.0.1:{port}/"));
    to_receiver.secret = secret;
    let accepted = sender.attempt(&to_receiver).await;
    assert_eq!(accepted.outcome, Outcome::Delivered { status: 204 });

    to_receiver.secret = WebhookSecret::generate();
    let forged = sender.attempt(&to_receiver).await;
    assert_eq!(forged.outcome, Outcome::Rejected { status: 401 });
}
