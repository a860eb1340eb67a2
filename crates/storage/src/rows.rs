//! Rows as the database holds them, and their conversion to domain records.
//!
//! A row that cannot be converted (an id or state that fails to parse) means the database was
//! written by something else than this crate; it is reported as [`StorageError::Corrupt`] rather
//! than a panic.

use diesel::prelude::*;
use shortlink_domain::{
    ApiKey, ApiKeyId, Delivery, DeliveryState, Destination, EventKind, Link, LinkId, LinkOptions,
    MessageId, RateLimit, Slug, Timestamp, Webhook, WebhookId, WebhookSecret, WebhookTarget,
    Workspace, WorkspaceId,
};

use crate::StorageError;
use crate::hooks::Hooks;
use crate::model::{CounterKey, RedirectTarget};
use crate::schema::{
    api_keys, link_clicks, links, webhook_attempts, webhook_deliveries, webhooks, workspaces,
};
use crate::stored_options::{rules_column, rules_from_column, tags_column, tags_from_column};

/// What a lookup by a unique key found, as a domain record: `None` when no row matched, an error
/// when the query failed or the row does not convert.
pub(crate) fn found<R, T>(
    row: diesel::QueryResult<R>,
    into_domain: impl FnOnce(R) -> Result<T, StorageError>,
) -> Result<Option<T>, StorageError> {
    row.optional()?.map(into_domain).transpose()
}

fn corrupt(what: &'static str) -> impl FnOnce() -> StorageError {
    move || StorageError::Corrupt(what)
}

/// A value parsed from a column, or `Corrupt` naming the column's meaning.
pub(crate) fn parsed<T, E>(value: Result<T, E>, what: &'static str) -> Result<T, StorageError> {
    value.map_err(|_| StorageError::Corrupt(what))
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = workspaces)]
pub(crate) struct WorkspaceRow {
    pub id: String,
    pub name: String,
    pub rate_limit: i32,
    pub created_at: i64,
}

/// A rate as its column holds it.
pub(crate) fn rate_column(rate: RateLimit) -> i32 {
    i32::try_from(rate.per_second()).unwrap_or(i32::MAX)
}

impl WorkspaceRow {
    pub fn from_domain(w: &Workspace) -> Self {
        Self {
            id: w.id.to_string(),
            name: w.name.clone(),
            rate_limit: rate_column(w.rate_limit),
            created_at: w.created_at.unix_millis(),
        }
    }

    pub fn into_domain(self) -> Result<Workspace, StorageError> {
        Ok(Workspace {
            id: parsed(WorkspaceId::parse(&self.id), "workspace id")?,
            name: self.name,
            rate_limit: u32::try_from(self.rate_limit)
                .ok()
                .and_then(|r| RateLimit::new(r).ok())
                .ok_or_else(corrupt("rate limit"))?,
            created_at: ts(self.created_at),
        })
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = api_keys, treat_none_as_default_value = false)]
pub(crate) struct ApiKeyRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub prefix: String,
    pub key_hash: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

impl ApiKeyRow {
    pub fn into_domain(self) -> Result<ApiKey, StorageError> {
        Ok(ApiKey {
            id: parsed(ApiKeyId::parse(&self.id), "api key id")?,
            workspace_id: parsed(WorkspaceId::parse(&self.workspace_id), "workspace id")?,
            name: self.name,
            prefix: self.prefix,
            created_at: ts(self.created_at),
            revoked_at: self.revoked_at.map(ts),
        })
    }
}

/// A link as read: the row joined with its click counter ([`with_clicks`]).
#[derive(Queryable, Selectable)]
#[diesel(table_name = links)]
pub(crate) struct LinkRow {
    pub seq: i64,
    pub id: String,
    pub workspace_id: String,
    pub domain: String,
    pub short_code: String,
    pub destination: String,
    #[diesel(select_expression = link_clicks::clicks)]
    pub clicks: i64,
    pub created_at: i64,
    pub rules: Option<String>,
    pub tags: Option<String>,
    pub archived: bool,
}

/// Links with their counters: every link has exactly one counter row (see the migration
/// `click_counters`), so an inner join finds each link once.
#[diesel::dsl::auto_type]
pub(crate) fn with_clicks() -> _ {
    links::table.inner_join(link_clicks::table)
}

impl LinkRow {
    /// The link, its clicks including those the backend counts in memory and has not yet
    /// written to its counter.
    pub fn into_domain(self, hooks: &impl Hooks) -> Result<Link, StorageError> {
        Ok(Link {
            id: parsed(LinkId::parse(&self.id), "link id")?,
            workspace_id: parsed(WorkspaceId::parse(&self.workspace_id), "workspace id")?,
            domain: self.domain,
            short_code: Slug::from_trusted(self.short_code),
            destination: Destination::from_trusted(self.destination),
            clicks: self.clicks + hooks.unfolded_clicks(self.seq),
            created_at: ts(self.created_at),
            options: LinkOptions {
                rules: rules_from_column(self.rules.as_deref())?.unwrap_or_default(),
                tags: tags_from_column(self.tags.as_deref())?,
                archived: self.archived,
            },
        })
    }
}

/// What the redirect reads of a link: no counter, so a lookup is one index and one table search.
#[derive(Queryable, Selectable)]
#[diesel(table_name = links)]
pub(crate) struct RedirectRow {
    pub seq: i64,
    pub workspace_id: String,
    pub destination: String,
    pub rules: Option<String>,
}

impl RedirectRow {
    pub fn into_target(self) -> Result<RedirectTarget, StorageError> {
        Ok(RedirectTarget {
            counter: CounterKey(self.seq),
            workspace_id: parsed(WorkspaceId::parse(&self.workspace_id), "workspace id")?,
            destination: Destination::from_trusted(self.destination),
            rules: rules_from_column(self.rules.as_deref())?.map(std::sync::Arc::new),
        })
    }
}

/// A click event as inserted (`queries/event_inserts.rs`), borrowed from its batch.
pub(crate) struct EventRow<'a> {
    pub link_seq: i64,
    pub occurred_at: i64,
    pub country: Option<&'a str>,
    pub city: Option<&'a str>,
    pub device: &'a str,
    pub browser: Option<&'a str>,
    pub os: Option<&'a str>,
    pub referrer: &'a str,
    pub referrer_url: Option<&'a str>,
    pub visitor: i64,
}

/// Every click of `batch` as an event row, by link in key order and then in order: consecutive
/// rows land on the same or the next page of the events' `(link, time)` index.
pub(crate) fn event_rows(batch: &crate::model::ClickBatch) -> impl Iterator<Item = EventRow<'_>> {
    let mut links: Vec<_> = batch.links.iter().collect();
    links.sort_unstable_by_key(|link| link.counter.0);
    links.into_iter().flat_map(|link| {
        link.clicks.iter().map(move |event| {
            let click = &event.click;
            EventRow {
                link_seq: link.counter.0,
                occurred_at: click.timestamp.unix_millis(),
                country: click.country.as_deref(),
                city: click.city.as_deref(),
                device: &click.device,
                browser: click.browser.as_deref(),
                os: click.os.as_deref(),
                referrer: &click.referrer,
                referrer_url: click.referrer_url.as_deref(),
                visitor: event.visitor,
            }
        })
    })
}

/// `rows` split greedily into runs of `sizes` (largest first): the runs of a multi-row insert
/// whose SQL depends only on its number of rows, so that diesel prepares a statement for each
/// size once per connection and keeps it. A size of 1 is used when none of `sizes` fits.
pub(crate) fn fixed_size_runs<'a, T>(
    mut rows: &'a [T],
    sizes: &'static [usize],
) -> impl Iterator<Item = &'a [T]> {
    std::iter::from_fn(move || {
        if rows.is_empty() {
            return None;
        }
        let size = sizes.iter().copied().find(|&size| size <= rows.len());
        let (run, rest) = rows.split_at(size.unwrap_or(1));
        rows = rest;
        Some(run)
    })
}

/// A link as inserted: the database numbers it and creates its counter.
#[derive(Insertable, Clone)]
#[diesel(table_name = links)]
pub(crate) struct NewLinkRow {
    pub id: String,
    pub workspace_id: String,
    pub domain: String,
    pub short_code: String,
    pub destination: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub rules: Option<String>,
    pub tags: Option<String>,
    pub archived: bool,
}

impl NewLinkRow {
    pub fn from_domain(l: &Link) -> Self {
        Self {
            id: l.id.to_string(),
            workspace_id: l.workspace_id.to_string(),
            domain: l.domain.clone(),
            short_code: l.short_code.to_string(),
            destination: l.destination.to_string(),
            created_at: l.created_at.unix_millis(),
            updated_at: l.created_at.unix_millis(),
            rules: rules_column(&l.options.rules),
            tags: tags_column(&l.options.tags),
            archived: l.options.archived,
        }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = webhooks, treat_none_as_default_value = false)]
pub(crate) struct WebhookRow {
    pub id: String,
    pub workspace_id: String,
    pub target_url: String,
    pub secret: String,
    pub events: String,
    pub created_at: i64,
    pub disabled_at: Option<i64>,
    pub consecutive_failures: i32,
}

pub(crate) fn join_events(events: &[EventKind]) -> String {
    events
        .iter()
        .map(|e| e.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn split_events(events: &str) -> Result<Vec<EventKind>, StorageError> {
    events
        .split(',')
        .map(|e| e.parse().map_err(|_| StorageError::Corrupt("event kind")))
        .collect()
}

impl WebhookRow {
    pub fn from_domain(w: &Webhook) -> Self {
        Self {
            id: w.id.to_string(),
            workspace_id: w.workspace_id.to_string(),
            target_url: w.target.as_str().to_owned(),
            secret: w.secret.expose().to_owned(),
            events: join_events(&w.events),
            created_at: w.created_at.unix_millis(),
            disabled_at: w.disabled_at.map(Timestamp::unix_millis),
            consecutive_failures: w.consecutive_failures,
        }
    }

    pub fn into_domain(self) -> Result<Webhook, StorageError> {
        Ok(Webhook {
            id: parsed(WebhookId::parse(&self.id), "webhook id")?,
            workspace_id: parsed(WorkspaceId::parse(&self.workspace_id), "workspace id")?,
            target: WebhookTarget::from_trusted(&self.target_url)
                .ok_or_else(corrupt("target url"))?,
            events: split_events(&self.events)?,
            secret: WebhookSecret::from_stored(self.secret),
            created_at: ts(self.created_at),
            disabled_at: self.disabled_at.map(ts),
            consecutive_failures: self.consecutive_failures,
        })
    }
}

/// One row of a day's analytics rollup (`queries/rollups.rs`).
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = crate::schema::click_rollups, treat_none_as_default_value = false)]
pub(crate) struct RollupRow {
    pub workspace_id: String,
    pub day: i64,
    pub dimension: &'static str,
    pub value: Option<String>,
    pub clicks: i64,
    pub visitors: i64,
}

/// One attempt's record, inserted with the batch's others in one statement.
#[derive(Insertable)]
#[diesel(table_name = webhook_attempts, treat_none_as_default_value = false)]
pub(crate) struct AttemptRow {
    pub event_id: String,
    pub webhook_id: String,
    pub attempt: i32,
    pub started_at: i64,
    pub duration_ms: i64,
    pub status_code: Option<i32>,
    pub error: Option<String>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = webhook_deliveries, treat_none_as_default_value = false)]
pub(crate) struct DeliveryRow {
    pub event_id: String,
    pub webhook_id: String,
    pub event_type: String,
    pub payload: String,
    pub state: String,
    pub attempts: i32,
    pub next_attempt_at: i64,
    pub locked_until: Option<i64>,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl DeliveryRow {
    pub fn into_domain(self) -> Result<Delivery, StorageError> {
        Ok(Delivery {
            event_id: parsed(MessageId::parse(&self.event_id), "event id")?,
            webhook_id: parsed(WebhookId::parse(&self.webhook_id), "webhook id")?,
            event_type: self
                .event_type
                .parse()
                .map_err(|_| StorageError::Corrupt("event kind"))?,
            payload: self.payload,
            state: DeliveryState::parse(&self.state).ok_or_else(corrupt("delivery state"))?,
            attempts: self.attempts,
            next_attempt_at: ts(self.next_attempt_at),
            last_status_code: self.last_status_code,
            last_error: self.last_error,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::fixed_size_runs;

    #[test]
    fn runs_cover_every_row_in_order_with_the_largest_sizes_that_fit() {
        let rows: Vec<u32> = (0..301).collect();
        let runs: Vec<&[u32]> = fixed_size_runs(&rows, &[128, 16, 4, 1]).collect();
        let sizes: Vec<usize> = runs.iter().map(|r| r.len()).collect();
        assert_eq!(sizes, [128, 128, 16, 16, 4, 4, 4, 1]);
        assert_eq!(runs.concat(), rows);

        assert_eq!(fixed_size_runs(&rows[..3], &[4]).count(), 3);
        assert_eq!(fixed_size_runs(&rows[..0], &[128, 1]).count(), 0);
    }
}
