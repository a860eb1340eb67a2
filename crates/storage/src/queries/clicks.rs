//! Click counts, written in batches by the service's click flush.

use std::collections::HashMap;
use std::sync::Arc;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use shortlink_domain::{BaseUrl, ClickInfo, Event, EventKind, Timestamp};

use super::{
    Conn, count_clicks, insert_click_events, mark_late_days_stale, outbox, write_transaction,
};
use crate::StorageError;
use crate::hooks::Hooks;
use crate::model::{ClickBatch, LinkClicks};
use crate::rows::{LinkRow, with_clicks};
use crate::schema::links;

/// `link.clicked` events made before they are written to the outbox.
const EVENTS_PER_WRITE: usize = 100;

/// Adds each link's clicks to its counter (or, where the backend journals them, journals them) and
/// writes `link.clicked` events for subscribed endpoints, all in one transaction: either the
/// whole batch counts or none of it does, so a retry after a failure cannot count twice. Clicks
/// on links deleted meanwhile are dropped.
pub(crate) async fn record_clicks(
    c: &mut Conn,
    batch: &Arc<ClickBatch>,
    base: &BaseUrl,
    hooks: &impl Hooks,
) -> Result<(), StorageError> {
    // In key order, so consecutive updates land on the same or the next page of the counters.
    let mut counts: Vec<(i64, i64)> = batch
        .links
        .iter()
        .map(|l| (l.counter.0, i64::try_from(l.count).unwrap_or(i64::MAX)))
        .collect();
    counts.sort_unstable();
    write_transaction(c, async |c| -> Result<(), StorageError> {
        if batch.events {
            insert_click_events(c, batch).await?;
            mark_late_days_stale(c, batch).await?;
        }
        clicked_events(c, batch, base, hooks).await?;
        // Last: a counter's row stays locked from its update to the commit, so two flush parts
        // written at once (PostgreSQL) wait for each other only for that moment.
        count_clicks(c, &counts, hooks).await
    })
    .await?;
    if hooks.journals_clicks() {
        hooks.journaled(&counts);
    }
    Ok(())
}

/// Writes the `link.clicked` events of `batch` for the endpoints subscribed to them, before the
/// batch is counted: each link's view carries the batch's clicks added to its stored count.
async fn clicked_events(
    c: &mut Conn,
    batch: &ClickBatch,
    base: &BaseUrl,
    hooks: &impl Hooks,
) -> Result<(), StorageError> {
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
    // Each link's view once; its events are made and written `EVENTS_PER_WRITE` at a time, so a
    // batch's clicks are never all held as events and payloads at once.
    let mut views = Vec::with_capacity(wanted.len());
    for entry in wanted {
        let Some(row) = rows.remove(&entry.counter.0) else {
            continue;
        };
        let mut link = row.into_domain(hooks)?;
        link.clicks = link
            .clicks
            .saturating_add(i64::try_from(entry.count).unwrap_or(i64::MAX));
        views.push((link.workspace_id, link.view(base), entry));
    }
    // Clicks counted without their details (analytics off and the workspace not known to
    // listen yet) carry only the flush's time.
    let bare = ClickInfo::bare(Timestamp::now());
    let mut events = Vec::with_capacity(EVENTS_PER_WRITE);
    for (workspace, view, entry) in &views {
        for i in 0..usize::try_from(entry.count).unwrap_or(usize::MAX) {
            let click = entry.clicks.get(i).map_or(&bare, |event| &event.click);
            events.push((*workspace, Event::link_clicked(view.clone(), click.clone())));
            if events.len() == EVENTS_PER_WRITE {
                outbox::write(c, &subs, &events).await?;
                events.clear();
            }
        }
    }
    outbox::write(c, &subs, &events).await
}

/// The clicks counted so far on each of `keys` (those still journaled included); a key whose
/// link is gone is left out.
pub(crate) async fn clicks_of(
    c: &mut Conn,
    keys: &[i64],
    hooks: &impl Hooks,
) -> Result<HashMap<i64, i64>, StorageError> {
    use crate::schema::link_clicks;

    let _gate = crate::hooks::reading(hooks).await;
    let rows: Vec<(i64, i64)> = link_clicks::table
        .filter(link_clicks::link_seq.eq_any(keys))
        .select((link_clicks::link_seq, link_clicks::clicks))
        .load(c)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(key, clicks)| (key, clicks + hooks.unfolded_clicks(key)))
        .collect())
}
