//! The baseline: a bare actix-web server that answers every GET with the same 302. It does
//! nothing a redirect service could skip, so its figures are the framework's limit on this
//! machine. It runs as a separate process (`shortlink-bench baseline-server`), like shortlink,
//! so the load generator competes for the CPU with each in the same way.

use actix_web::http::header;
use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Context;

/// Where the baseline sends every client; about as long as the bench links' destinations.
const LOCATION: &str = "https://example.com/landing/000000";

/// Serves until SIGTERM or SIGINT. Workers: actix-web's default (one per CPU), the same as
/// shortlink, which does not set them either.
pub fn serve(listen: &str) -> anyhow::Result<()> {
    actix_web::rt::System::new().block_on(async {
        HttpServer::new(|| App::new().default_service(web::get().to(redirect)))
            .bind(listen)
            .with_context(|| format!("could not listen on {listen}"))?
            .run()
            .await
            .context("the baseline server failed")
    })
}

async fn redirect() -> HttpResponse {
    HttpResponse::Found()
        .insert_header((header::LOCATION, LOCATION))
        .finish()
}
