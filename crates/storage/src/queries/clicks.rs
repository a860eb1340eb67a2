//! Click counts, written in batches by the server's click batcher.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, RunQueryDsl};
use shortlink_domain::{BaseUrl, ClickInfo, Event, EventKind, Timestamp};

use super::{Backend, Conn, outbox, placeholder};
use crate::rows::{LinkRow, with_clicks};
use crate::schema::links;
use crate::{ClickBatch, LinkClicks, StorageError};

/// Links per counter update: 2 bound values each, well under either backend's limit.
const UPDATE_CHUNK: usize = 1000;

/// Adds each link's clicks to its counter and writes `link.clicked` events for subscribed
/// endpoints, all in one transaction: either the whole batch counts or none of it does, so a
/// retry after a failure cannot count twice. Clicks on links deleted meanwhile are dropped.
pub(crate) async fn record_clicks(
    c: &mut Conn,
    batch: &ClickBatch,
    base: &BaseUrl,
) -> Result<(), StorageError> {
    c.transaction(async |c| -> Result<(), StorageError> {
        for chunk in batch.links.chunks(UPDATE_CHUNK) {
            add_clicks(c, chunk).await?;
        }
        let subs = outbox::subscriptions(c, batch.links.iter().map(|l| l.workspace_id)).await?;
        let wanted: Vec<&LinkClicks> = batch
            .links
            .iter()
            .filter(|l| subs.wants(l.workspace_id, EventKind::LinkClicked))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let keys: Vec<i64> = wanted.iter().map(|l| l.counter.0).collect();
        let mut rows: HashMap<i64, LinkRow> = with_clicks()
            .filter(links::seq.eq_any(&keys))
            .select(LinkRow::as_select())
            .load(c)
            .await?
            .into_iter()
            .map(|row| (row.seq, row))
            .collect();
        let mut events = Vec::new();
        for entry in wanted {
            let Some(row) = rows.remove(&entry.counter.0) else {
                continue;
            };
            let link = row.into_domain()?;
            let view = link.view(base);
            // Clicks counted while the batcher was over its detail bound carry no headers.
            let bare = ClickInfo {
                timestamp: Timestamp::now(),
                referrer: None,
                user_agent: None,
            };
            let missing = entry.count.saturating_sub(entry.clicks.len() as u64);
            let clicks = entry
                .clicks
                .iter()
                .chain(std::iter::repeat_n(&bare, missing as usize));
            for click in clicks {
                events.push((
                    link.workspace_id,
                    Event::link_clicked(view.clone(), click.clone()),
                ));
            }
        }
        outbox::write(c, &subs, &events).await
    })
    .await
}

/// One statement for many counters: `WITH v(k, n) AS (VALUES (…), …) UPDATE link_clicks SET
/// clicks = link_clicks.clicks + v.n FROM v …`. A statement per link cost a round trip (or, on
/// SQLite, a thread handoff) per clicked link.
async fn add_clicks(c: &mut Conn, chunk: &[LinkClicks]) -> Result<(), StorageError> {
    let values: Vec<String> = (0..chunk.len())
        .map(|i| format!("({}, {})", placeholder(2 * i + 1), placeholder(2 * i + 2)))
        .collect();
    let sql = format!(
        "WITH v (k, n) AS (VALUES {}) UPDATE link_clicks \
         SET clicks = link_clicks.clicks + v.n FROM v WHERE link_clicks.link_seq = v.k",
        values.join(", ")
    );
    let mut query = diesel::sql_query(sql).into_boxed::<Backend>();
    for entry in chunk {
        let count = i64::try_from(entry.count).unwrap_or(i64::MAX);
        query = query
            .bind::<BigInt, _>(entry.counter.0)
            .bind::<BigInt, _>(count);
    }
    query.execute(c).await?;
    Ok(())
}
