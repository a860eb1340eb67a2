//! Analytics: the visitor hash's secret, totals, breakdowns, time series, the export, the
//! events' partitions and retention, and the daily rollups.

use super::*;

impl Store {
    /// The secret the daily visitor keys derive from, the same for every instance on this
    /// database.
    pub async fn analytics_secret(&self) -> Result<String, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, read_analytics_secret()) })
            .await
    }

    /// Clicks and unique visitors of the events `filter` selects.
    pub async fn analytics_totals(&self, filter: &EventFilter) -> Result<Tally, StorageError> {
        let filter = filter.clone();
        self.detached(|s| async move { dispatch!(s, read, analytics_totals(&filter)) })
            .await
    }

    /// Clicks and unique visitors by `dimension`, most clicks first, at most `limit` groups (at
    /// least one: otherwise [`StorageError::Invalid`]).
    pub async fn analytics_breakdown(
        &self,
        filter: &EventFilter,
        dimension: Dimension,
        limit: i64,
    ) -> Result<Vec<Tally>, StorageError> {
        if limit < 1 {
            return Err(StorageError::Invalid(
                "a breakdown's limit must be at least 1",
            ));
        }
        let filter = filter.clone();
        self.detached(|s| async move {
            dispatch!(s, read, analytics_breakdown(&filter, dimension, limit))
        })
        .await
    }

    /// Clicks and unique visitors of the events `filter` selects in buckets of `width` ms from
    /// `origin` (at or before `filter.start`: a first bucket may begin before the range, and
    /// counts only the range's part of it), keyed by bucket number (0 for the first); buckets
    /// without events are left out. A `width` under 1 ms is [`StorageError::Invalid`].
    pub async fn analytics_series(
        &self,
        filter: &EventFilter,
        origin: i64,
        width: i64,
    ) -> Result<Vec<Tally<i64>>, StorageError> {
        if width < 1 {
            return Err(StorageError::Invalid(
                "a series' buckets must be at least 1 ms wide",
            ));
        }
        let filter = filter.clone();
        self.detached(
            |s| async move { dispatch!(s, read, analytics_series(&filter, origin, width)) },
        )
        .await
    }

    /// Up to `limit` events `filter` selects after `after` (an [`ExportedEvent::position`]), in
    /// time order.
    pub async fn export_events(
        &self,
        filter: &EventFilter,
        after: Option<(i64, i64)>,
        limit: i64,
    ) -> Result<Vec<ExportedEvent>, StorageError> {
        let filter = filter.clone();
        self.detached(|s| async move { dispatch!(s, read, export_events(&filter, after, limit)) })
            .await
    }

    /// Keeps the events table in shape: on PostgreSQL, creates the monthly partitions missing
    /// from the month of `keep_after` (this month without it) to the coming months, and drops
    /// those wholly before `keep_after`; on both, deletes older events left elsewhere in batches
    /// of `batch` (each a short transaction of its own). Returns how many events were deleted
    /// row by row.
    pub async fn maintain_events(
        &self,
        now: Timestamp,
        keep_after: Option<Timestamp>,
        batch: i64,
    ) -> Result<usize, StorageError> {
        if let Backend::Postgres(pool) = &self.backend {
            let mut conn = within(ANSWER_WITHIN, async { Ok(pool.get().await?) }).await?;
            crate::pg::partitions::maintain(&mut conn, now, keep_after).await?;
        }
        let Some(keep_after) = keep_after else {
            return Ok(0);
        };
        let horizon = keep_after.unix_millis().div_euclid(DAY);
        self.detached(|s| async move { dispatch!(s, write, forget_rollups_before(horizon)) })
            .await?;
        let before = keep_after.unix_millis();
        self.delete_in_batches(batch, |s| async move {
            dispatch!(s, write, delete_events_before(before, batch))
        })
        .await
    }

    /// Rolls up the analytics of every day from `keep_after`'s (or the oldest event's) to the
    /// last that ended [`ROLL_UP_AFTER`] before `now`, where it is not rolled up yet or has gone
    /// stale; oldest first, each day read from its events and then written in a short
    /// transaction of its own. Returns how many days it rolled up.
    pub async fn roll_up_analytics(
        &self,
        now: Timestamp,
        keep_after: Option<Timestamp>,
    ) -> Result<usize, StorageError> {
        let Some(oldest) = self
            .detached(|s| async move { dispatch!(s, read, first_event_day()) })
            .await?
        else {
            return Ok(0);
        };
        let first = keep_after.map_or(oldest, |at| at.unix_millis().div_euclid(DAY).max(oldest));
        let end = (now.unix_millis() - ROLL_UP_AFTER).div_euclid(DAY);
        let days = self
            .detached(|s| async move { dispatch!(s, read, days_to_roll_up(first, end)) })
            .await?;
        for &day in &days {
            let (seen, rows) = self
                .detached_within(ROLL_UP_WITHIN, |s| async move {
                    // The mark first: a change after it leaves the mark for the next roll-up.
                    let seen = dispatch!(s, read, stale_version(day))?;
                    Ok((seen, dispatch!(s, read, day_rollup(day))?))
                })
                .await?;
            self.detached(|s| async move { dispatch!(s, write, replace_day(day, &rows, seen)) })
                .await?;
        }
        Ok(days.len())
    }
}

#[cfg(test)]
mod tests {
    use diesel_async::AsyncConnection;

    use crate::sqlite::{Conn, queries};
    use crate::testing::TestDatabase;

    /// A change of a day's events while its first roll-up runs (a flush of clicks written late,
    /// a link deleted) keeps the day to be rolled up again: the roll-up may have read the events
    /// before the change. Before, the change marked only days rolled up already, and the day
    /// kept totals that missed it until retention removed it.
    #[tokio::test]
    async fn a_day_changed_during_its_first_roll_up_is_rolled_up_again() {
        let db = TestDatabase::sqlite();
        db.store().await;
        let mut c = Conn::establish(db.url.trim_start_matches("sqlite://"))
            .await
            .unwrap();
        let day = 20_000;
        // `roll_up_analytics`' steps, with the change between the read and the write.
        let seen = queries::stale_version(&mut c, day).await.unwrap();
        let rows = queries::day_rollup(&mut c, day).await.unwrap();
        queries::mark_stale(&mut c, &[day]).await.unwrap();
        queries::replace_day(&mut c, day, &rows, seen)
            .await
            .unwrap();
        assert_eq!(
            queries::days_to_roll_up(&mut c, day, day + 1)
                .await
                .unwrap(),
            [day]
        );

        // The next roll-up reads the mark, and clears it.
        let seen = queries::stale_version(&mut c, day).await.unwrap();
        let rows = queries::day_rollup(&mut c, day).await.unwrap();
        queries::replace_day(&mut c, day, &rows, seen)
            .await
            .unwrap();
        assert!(
            (queries::days_to_roll_up(&mut c, day, day + 1)
                .await
                .unwrap())
            .is_empty()
        );
    }
}
