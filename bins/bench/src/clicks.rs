//! Are the clicks exact? Every link's `clicks` must equal the 302s the load generator received for
//! it. Checked twice: through the API while the server runs (a sample, polled until it matches,
//! which also shows how soon counts are visible), and for every link through storage after a
//! graceful stop, which writes every pending click.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use shortlink_storage::{PoolOptions, Store};

use crate::api::ApiClient;
use crate::seed::WORKSPACE;

/// How long the bench waits for the API to show every sampled count: generous, for counts are
/// written every quarter second (API.md), and the report says how long it took.
const API_DEADLINE: Duration = Duration::from_secs(5);
/// Between two polls of the sample.
const API_POLL: Duration = Duration::from_millis(50);
/// Links listed per storage read.
const PAGE: i64 = 10_000;

/// One link whose counter disagrees with the load generator.
#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    /// Its short code.
    pub code: String,
    /// 302s the load generator received.
    pub expected: u64,
    /// The server's counter (`None`: the link was not found).
    pub counted: Option<u64>,
}

/// The outcome of a click check.
#[derive(Debug, Clone, Serialize)]
pub struct ClickCheck {
    /// Links compared.
    pub links: usize,
    /// 302s received, all links together.
    pub expected_total: u64,
    /// Clicks counted by the server, all links together.
    pub counted_total: u64,
    /// The first mismatches (at most 20), and how many there were.
    pub mismatches: Vec<Mismatch>,
    /// How many links disagreed.
    pub mismatch_count: usize,
}

impl ClickCheck {
    /// Whether every counter matched.
    pub fn ok(&self) -> bool {
        self.mismatch_count == 0
    }
}

/// Polls `GET /api/v1/links/{code}` for up to `sample` clicked links until every counter equals
/// what was received; returns how long that took, or `None` past the deadline.
pub async fn visible_through_api(
    addr: SocketAddr,
    key: &str,
    codes: &[String],
    redirects: &[u32],
    sample: usize,
) -> anyhow::Result<Option<Duration>> {
    let picked: Vec<(&str, u64)> = codes
        .iter()
        .zip(redirects)
        .filter(|(_, n)| **n > 0)
        .take(sample)
        .map(|(code, n)| (code.as_str(), u64::from(*n)))
        .collect();
    let mut client = ApiClient::open(addr, key).await?;
    let started = Instant::now();
    while started.elapsed() < API_DEADLINE {
        let mut all_equal = true;
        for (code, expected) in &picked {
            if client.clicks(code).await? != *expected {
                all_equal = false;
                break;
            }
        }
        if all_equal {
            return Ok(Some(started.elapsed()));
        }
        tokio::time::sleep(API_POLL).await;
    }
    Ok(None)
}

/// Reads every link of the bench workspace through storage (the server must be stopped, so that
/// its pending clicks are written) and compares each counter with the 302s received.
pub async fn check_stored(
    database_url: &str,
    codes: &[String],
    redirects: &[u32],
) -> anyhow::Result<ClickCheck> {
    let store = Store::connect(database_url, PoolOptions::default())?;
    let workspace = store
        .find_workspace(WORKSPACE)
        .await?
        .context("the bench workspace is missing")?;
    let mut counted: HashMap<String, u64> = HashMap::with_capacity(codes.len());
    let mut before = None;
    let max_pages = codes.len() / PAGE as usize + 2;
    for _ in 0..max_pages {
        let page = store
            .list_links(workspace.id, PAGE, before, &Default::default())
            .await?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        for link in page {
            // A negative counter would be a bug; it shows as 0 and so as a mismatch.
            let clicks = u64::try_from(link.clicks).unwrap_or_default();
            counted.insert(link.short_code.into_string(), clicks);
        }
    }
    Ok(compare(codes, redirects, &counted))
}

fn compare(codes: &[String], redirects: &[u32], counted: &HashMap<String, u64>) -> ClickCheck {
    let mut check = ClickCheck {
        links: codes.len(),
        expected_total: 0,
        counted_total: 0,
        mismatches: Vec::new(),
        mismatch_count: 0,
    };
    for (code, received) in codes.iter().zip(redirects) {
        let expected = u64::from(*received);
        let stored = counted.get(code).copied();
        check.expected_total += expected;
        check.counted_total += stored.unwrap_or(0);
        if stored != Some(expected) {
            check.mismatch_count += 1;
            if check.mismatches.len() < 20 {
                check.mismatches.push(Mismatch {
                    code: code.clone(),
                    expected,
                    counted: stored,
                });
            }
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_wrong_and_missing_counters() {
        let codes: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let counted = HashMap::from([("a".to_owned(), 3), ("b".to_owned(), 1)]);
        let check = compare(&codes, &[3, 2, 0], &counted);
        assert_eq!(check.mismatch_count, 2);
        assert_eq!((check.expected_total, check.counted_total), (5, 4));
        assert_eq!(check.mismatches[0].code, "b");
        assert_eq!(check.mismatches[1].counted, None);
        assert!(compare(&codes[..1], &[3], &counted).ok());
    }
}
