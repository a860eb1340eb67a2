//! Time series of clicks in a time zone's buckets, for the HTTP API's `groupBy=timeseries` and
//! any Rust program embedding the service alike.

use shortlink_analytics::{Interval, TimeZone, Zoned, buckets};
use shortlink_domain::Timestamp;
use shortlink_storage::{EventFilter, Tally};

use crate::{Service, ServiceError};

impl Service {
    /// Clicks and unique visitors of `filter`'s events per `interval`, each bucket keyed by where
    /// it begins in `zone` (days, weeks and months begin at its midnight, so a day with a
    /// daylight-saving change is 23 or 25 hours long). The first bucket begins at or before
    /// `filter.start` and counts from it; the last ends at `filter.end`. Empty buckets are
    /// included, oldest first. More than [`shortlink_analytics::MAX_BUCKETS`] is
    /// [`ServiceError::Buckets`].
    ///
    /// Buckets of one length in a row (hours; days and weeks between two daylight-saving
    /// changes) are counted by one query grouped by bucket number; a bucket of another length
    /// (a day with a change, a month) by a query of its own.
    pub async fn time_series(
        &self,
        filter: &EventFilter,
        interval: Interval,
        zone: &TimeZone,
    ) -> Result<Vec<Tally<Zoned>>, ServiceError> {
        let starts = buckets(
            filter.start.unix_millis(),
            filter.end.unix_millis(),
            interval,
            zone,
        )?;
        let start_ms: Vec<i64> = starts
            .iter()
            .map(|z| z.timestamp().as_millisecond())
            .collect();
        let ends: Vec<i64> = (start_ms.iter().skip(1).copied())
            .chain([filter.end.unix_millis()])
            .collect();
        let mut series: Vec<Tally<Zoned>> = starts
            .into_iter()
            .map(|key| Tally {
                key,
                clicks: 0,
                visitors: 0,
            })
            .collect();
        let mut first = 0;
        while first < start_ms.len() {
            let width = ends[first] - start_ms[first];
            let run = (first..start_ms.len())
                .take_while(|&i| ends[i] - start_ms[i] == width)
                .count();
            let origin = start_ms[first];
            let within = EventFilter {
                // The first bucket begins at or before the range (a week's Monday, a day's
                // midnight), and counts only the range's part of it.
                start: Timestamp::from_unix_millis(origin.max(filter.start.unix_millis())),
                end: Timestamp::from_unix_millis(ends[first + run - 1]),
                ..filter.clone()
            };
            for tally in self
                .store()
                .analytics_series(&within, origin, width)
                .await?
            {
                let Some(bucket) = usize::try_from(tally.key)
                    .ok()
                    .filter(|&i| i < run)
                    .and_then(|i| series.get_mut(first + i))
                else {
                    continue;
                };
                bucket.clicks = tally.clicks;
                bucket.visitors = tally.visitors;
            }
            first += run;
        }
        Ok(series)
    }
}
