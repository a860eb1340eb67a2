//! Time series of clicks in a time zone's buckets, for the HTTP API's `groupBy=timeseries` and
//! any Rust program embedding the service alike.

use shortlink_analytics::Zoned;
use shortlink_domain::Timestamp;
use shortlink_storage::{EventFilter, Tally};

use crate::{Service, ServiceError};

impl Service {
    /// Clicks and unique visitors of `filter`'s events per bucket, each keyed by where it
    /// begins. The buckets begin at `starts`, as [`shortlink_analytics::buckets`] gives them
    /// for a range, an interval and a time zone (the first at or before `filter.start`, which
    /// it counts from); the last one ends at `filter.end`. Empty buckets are included, oldest
    /// first.
    ///
    /// Buckets of one length in a row (hours; days and weeks between two daylight-saving
    /// changes) are counted by one query grouped by bucket number; a bucket of another length
    /// (a day with a change, a month) by a query of its own.
    pub async fn time_series(
        &self,
        filter: &EventFilter,
        starts: &[Zoned],
    ) -> Result<Vec<Tally<Zoned>>, ServiceError> {
        let start_ms: Vec<i64> = starts
            .iter()
            .map(|z| z.timestamp().as_millisecond())
            .collect();
        let ends: Vec<i64> = (start_ms.iter().skip(1).copied())
            .chain([filter.end.unix_millis()])
            .collect();
        let mut buckets: Vec<Tally<Zoned>> = starts
            .iter()
            .map(|start| Tally {
                key: start.clone(),
                clicks: 0,
                visitors: 0,
            })
            .collect();
        let mut first = 0;
        while first < starts.len() {
            let width = ends[first] - start_ms[first];
            let run = (first..starts.len())
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
                    .and_then(|i| buckets.get_mut(first + i))
                else {
                    continue;
                };
                bucket.clicks = tally.clicks;
                bucket.visitors = tally.visitors;
            }
            first += run;
        }
        Ok(buckets)
    }
}
