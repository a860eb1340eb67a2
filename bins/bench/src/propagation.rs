//! How soon a change made through one instance shows on another: two shortlink instances on one
//! PostgreSQL database (a throw-away one on the server `TEST_POSTGRES_URL` names), one link
//! cached by the second; its destination changed through the first again and again, the second
//! asked until it answers the new destination. Skipped, and said so, without PostgreSQL.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use hyper::StatusCode;
use serde::Serialize;

use crate::api::ApiClient;
use crate::http::Connection;
use crate::postgres::TempDatabase;
use crate::seed;
use crate::servers::{free_loopback_addr, start_shortlink};

/// Changes measured.
const CHANGES: usize = 200;
/// Between two looks at the second instance: short against the 250 ms target, long enough not
/// to make the look itself the load.
const POLL: Duration = Duration::from_millis(1);
/// A change not seen within this fails the run (the tests require one second).
const GIVE_UP: Duration = Duration::from_secs(5);

/// From a change's answer (200 from the first instance) to the second instance's first redirect
/// to the new destination.
#[derive(Debug, Clone, Serialize)]
pub struct PropagationFigure {
    /// Changes measured.
    pub changes: usize,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// The slowest, ms.
    pub max_ms: f64,
}

/// Both instances as users run them, on a database created for the purpose and dropped after.
pub async fn measure(
    bin: &Path,
    dir: &Path,
    base_url: &str,
    admin_url: &str,
) -> anyhow::Result<PropagationFigure> {
    eprintln!("propagation: {CHANGES} changes through one instance, seen by another");
    TempDatabase::around(admin_url, async |url: &str| {
        between_two(bin, dir, base_url, url).await
    })
    .await
}

async fn between_two(
    bin: &Path,
    dir: &Path,
    base_url: &str,
    url: &str,
) -> anyhow::Result<PropagationFigure> {
    let key = seed::workspace_and_key(bin, url)?;
    let (first_addr, second_addr) = (free_loopback_addr()?, free_loopback_addr()?);
    let log = |name: &str| dir.join(format!("propagation-{name}.log"));
    let mut first = start_shortlink(bin, url, first_addr, base_url, &[], log("first"), None)?;
    first.wait_ready("/healthz").await?;
    let mut second = start_shortlink(bin, url, second_addr, base_url, &[], log("second"), None)?;
    second.wait_ready("/healthz").await?;

    let mut api = ApiClient::open(first_addr, &key).await?;
    let code = api.create_bulk(&[seed::destination(0)]).await?.remove(0);
    let path = format!("/{code}");
    let mut visitor = Connection::open(second_addr).await?;
    let mut took = Vec::with_capacity(CHANGES);
    for i in 1..=CHANGES {
        // The second instance has the link cached before every change.
        let (status, _) = visitor.redirect(&path).await?;
        if status != StatusCode::FOUND {
            bail!("the second instance answered {status} for {code}");
        }
        let destination = seed::destination(i);
        api.change(&code, &serde_json::json!({ "destination": destination }))
            .await?;
        let changed = Instant::now();
        loop {
            let (_, location) = visitor.redirect(&path).await?;
            if location.as_deref() == Some(destination.as_str()) {
                took.push(changed.elapsed().as_secs_f64() * 1e3);
                break;
            }
            if changed.elapsed() > GIVE_UP {
                bail!("change {i} did not reach the second instance within {GIVE_UP:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }
    first.stop()?;
    second.stop()?;
    took.sort_by(f64::total_cmp);
    let at = |q: f64| took[((took.len() as f64 * q).ceil() as usize).clamp(1, took.len()) - 1];
    Ok(PropagationFigure {
        changes: CHANGES,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
    })
}
