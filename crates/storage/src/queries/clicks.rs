//! Click counts, written in batches by the server's click batcher.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use shortlink_domain::{BaseUrl, ClickInfo, Event, EventKind, Timestamp};

use super::{Conn, outbox};
use crate::rows::LinkRow;
use crate::schema::links;
use crate::{ClickBatch, StorageError};

/// Adds each link's clicks to its counter and writes `link.clicked` events for subscribed
/// endpoints, all in one transaction: either the whole batch counts or none of it does, so a
/// retry after a failure cannot count twice. Clicks on links deleted meanwhile are dropped.
pub(crate) async fn record_clicks(
    c: &mut Conn,
    batch: &ClickBatch,
    base: &BaseUrl,
) -> Result<(), StorageError> {
    c.transaction(async |c| -> Result<(), StorageError> {
        let subs = outbox::subscriptions(c, batch.links.iter().map(|l| l.workspace_id)).await?;
        let mut events = Vec::new();
        for entry in &batch.links {
            let count = i64::try_from(entry.count).unwrap_or(i64::MAX);
            let target = links::table.find(entry.link_id.to_string());
            let update = diesel::update(target).set(links::clicks.eq(links::clicks + count));
            if !subs.wants(entry.workspace_id, EventKind::LinkClicked) {
                update.execute(c).await?;
                continue;
            }
            let Some(row) = update
                .returning(LinkRow::as_returning())
                .get_result(c)
                .await
                .optional()?
            else {
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
