//! The worker's side of the outbox: claiming due deliveries under a lease, recording attempts.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use shortlink_domain::{
    AttemptRecord, ClaimedDelivery, DeliveryState, InFlight, MAX_CONSECUTIVE_FAILURES, MessageId,
    NextStep, Timestamp, WebhookId, WebhookSecret, WebhookTarget,
};

use super::{
    Conn, exclude_delivery_writers, insert_attempts, lock_due, lock_endpoint, write_transaction,
};
use crate::StorageError;
use crate::rows::{AttemptRow, DeliveryRow, parsed};
use crate::schema::{webhook_deliveries, webhooks};

/// Leases up to `limit` due deliveries until `lease_until`. A lease that runs out (its worker
/// crashed) makes the delivery due again, which is what makes delivery at-least-once.
///
/// Fair between endpoints: each active endpoint gets an equal share of `limit` (its oldest due
/// deliveries), starting from an endpoint that moves on with the clock, and what shares leave
/// unused goes, in a second round, to endpoints that had more. So one endpoint's backlog never
/// holds back another's first delivery for more than a claim. No endpoint gets more than
/// `in_flight` leaves it room for, so slow ones cannot take every slot. Each endpoint's
/// deliveries are leased in one statement.
pub(crate) async fn claim_due(
    c: &mut Conn,
    now: Timestamp,
    limit: i64,
    lease_until: Timestamp,
    in_flight: &InFlight,
) -> Result<Vec<ClaimedDelivery>, StorageError> {
    let limit = usize::try_from(limit).unwrap_or(0);
    write_transaction(c, async |c| -> Result<Vec<ClaimedDelivery>, StorageError> {
        let endpoints: Vec<(String, String, String)> = webhooks::table
            .filter(webhooks::disabled_at.is_null())
            .select((webhooks::id, webhooks::target_url, webhooks::secret))
            .order(webhooks::id)
            .load(c)
            .await?;
        let mut claimed = Vec::with_capacity(limit);
        if endpoints.is_empty() {
            return Ok(claimed);
        }
        let n = endpoints.len();
        let start = usize::try_from(now.unix_millis()).unwrap_or(0) % n;
        let share = (limit / n).max(1);
        // What is running, with what this claim takes counted as it takes it: an endpoint's
        // room shrinks as the others' claims fill the worker.
        let mut in_flight = in_flight.clone();
        let ids: Vec<WebhookId> = endpoints
            .iter()
            .map(|(id, _, _)| parsed(WebhookId::parse(id), "webhook id"))
            .collect::<Result<_, _>>()?;
        // Endpoints that filled their share in the first round, and so may have more.
        let mut more = Vec::new();
        for round in [0, 1] {
            let order: Vec<usize> = match round {
                0 => (0..n).map(|i| (start + i) % n).collect(),
                _ => std::mem::take(&mut more),
            };
            for endpoint in order {
                let left = limit - claimed.len();
                if left == 0 {
                    break;
                }
                let wanted = match round {
                    0 => share.min(left),
                    _ => left,
                }
                .min(in_flight.room(ids[endpoint]));
                if wanted == 0 {
                    continue;
                }
                let (id, target, secret) = &endpoints[endpoint];
                let leased = lease(c, id, now, wanted, lease_until).await?;
                in_flight.start(ids[endpoint], leased.len());
                if leased.len() == wanted && in_flight.room(ids[endpoint]) > 0 {
                    more.push(endpoint);
                }
                let target = WebhookTarget::from_trusted(target)
                    .ok_or(StorageError::Corrupt("webhook target"))?;
                for row in leased {
                    claimed.push(ClaimedDelivery {
                        delivery: row.into_domain()?,
                        target: target.clone(),
                        secret: WebhookSecret::from_stored(secret.clone()),
                    });
                }
            }
        }
        Ok(claimed)
    })
    .await
}

/// Leases up to `limit` of `webhook`'s due deliveries: retries first, then those never tried,
/// each oldest due first (`Due`).
async fn lease(
    c: &mut Conn,
    webhook: &str,
    now: Timestamp,
    limit: usize,
    lease_until: Timestamp,
) -> Result<Vec<DeliveryRow>, StorageError> {
    let now = now.unix_millis();
    let mut keys = lock_due(c, Due::Retries, webhook, now, limit).await?;
    if keys.len() < limit {
        let left = limit - keys.len();
        keys.extend(lock_due(c, Due::FirstTries, webhook, now, left).await?);
    }
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    Ok(diesel::update(
        webhook_deliveries::table
            .filter(webhook_deliveries::webhook_id.eq(webhook))
            .filter(webhook_deliveries::event_id.eq_any(keys)),
    )
    .set(webhook_deliveries::locked_until.eq(lease_until.unix_millis()))
    .returning(DeliveryRow::as_returning())
    .get_results(c)
    .await?)
}

/// Records a batch of attempts in one transaction, in the order of their endpoints (every
/// transaction that writes an endpoint and its deliveries takes the endpoint first; in one
/// order, two batches cannot wait for each other), and each endpoint's in the order they ended
/// (its count of consecutive failures follows them).
pub(crate) async fn record_attempts(
    c: &mut Conn,
    attempts: &[AttemptRecord],
) -> Result<(), StorageError> {
    let mut attempts: Vec<&AttemptRecord> = attempts.iter().collect();
    // Stable: the order within an endpoint stays.
    attempts.sort_by_key(|a| a.webhook_id);
    let endpoints: Vec<Vec<&AttemptRecord>> = attempts
        .chunk_by(|a, b| a.webhook_id == b.webhook_id)
        .map(<[_]>::to_vec)
        .collect();
    write_transaction(c, async |c| -> Result<(), StorageError> {
        let mut rows = Vec::with_capacity(attempts.len());
        for attempts in endpoints {
            let webhook = attempts[0].webhook_id.to_string();
            // The endpoint's row is locked before any of its deliveries, in the strength its
            // writes need: a failure may count (and disable it), a delivery may reset a count.
            let delivered = |a: &&AttemptRecord| a.next == NextStep::Delivered;
            let may_fail = !attempts.iter().all(delivered);
            // `None` when the endpoint was deleted while its attempts ran (its deliveries went
            // with it: nothing left to record).
            let Some((mut failures, mut disabled_at)) =
                lock_endpoint(c, &webhook, may_fail).await?
            else {
                continue;
            };
            if !may_fail && failures != 0 {
                // Deliveries alone, on an endpoint that had failed: they reset its count.
                let Some(locked) = lock_endpoint(c, &webhook, true).await? else {
                    continue;
                };
                (failures, disabled_at) = locked;
            }
            let mut endpoint = Endpoint {
                failures,
                disabled: disabled_at.is_some(),
            };
            for attempt in attempts {
                rows.extend(record_one(c, attempt, &mut endpoint).await?);
            }
        }
        // The attempts' rows in few statements rather than one each: on SQLite every statement
        // is a handoff to the connection's thread.
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let some = rows.by_ref().take(ATTEMPT_ROWS_PER_INSERT).collect();
            insert_attempts(c, some).await?;
        }
        Ok(())
    })
    .await
}

/// Attempt rows per insert: 7 values each, far within either backend's bound on a statement's
/// parameters (SQLite's is 32,766).
const ATTEMPT_ROWS_PER_INSERT: usize = 1000;

/// An endpoint as a batch of records follows it: its count of consecutive failed deliveries
/// (written only when it changes) and whether it is disabled.
struct Endpoint {
    failures: i32,
    disabled: bool,
}

/// Moves one attempt's delivery on, in the caller's transaction, and returns the attempt's row
/// (`None` when the delivery is gone) for the caller to insert; `endpoint` is kept up to date.
async fn record_one(
    c: &mut Conn,
    a: &AttemptRecord,
    endpoint: &mut Endpoint,
) -> Result<Option<AttemptRow>, StorageError> {
    let now = Timestamp::now().unix_millis();
    // A disabled endpoint receives nothing more: an attempt that would be retried has failed.
    let next = match a.next {
        NextStep::RetryAt(_) if endpoint.disabled => NextStep::Failed,
        next => next,
    };
    let (state, next_at) = match next {
        NextStep::Delivered => (DeliveryState::Delivered, None),
        NextStep::RetryAt(at) => (DeliveryState::Pending, Some(at.unix_millis())),
        NextStep::Failed => (DeliveryState::Failed, None),
    };
    // A delivered one stays so: a record that comes after its lease ran out (a stalled worker)
    // may end an attempt that another worker's later one made needless.
    let key = webhook_deliveries::table
        .find((a.event_id.to_string(), a.webhook_id.to_string()))
        .filter(webhook_deliveries::state.ne(DeliveryState::Delivered.as_str()));
    let attempts: Option<i32> = diesel::update(key)
        .set((
            webhook_deliveries::attempts.eq(webhook_deliveries::attempts + 1),
            webhook_deliveries::state.eq(state.as_str()),
            webhook_deliveries::next_attempt_at.eq(next_at.unwrap_or(a.started_at.unix_millis())),
            webhook_deliveries::locked_until.eq(None::<i64>),
            webhook_deliveries::last_status_code.eq(a.status_code),
            webhook_deliveries::last_error.eq(a.error.as_deref()),
            webhook_deliveries::updated_at.eq(now),
        ))
        .returning(webhook_deliveries::attempts)
        .get_result(c)
        .await
        .optional()?;
    let Some(attempt) = attempts else {
        return Ok(None);
    };
    let webhook = a.webhook_id.to_string();
    let hook = webhooks::table.find(&webhook);
    match next {
        // Written only when it changes: every delivery of a healthy endpoint rewriting its one
        // row left a dead row version per delivery and queued attempts on its lock.
        NextStep::Delivered if endpoint.failures != 0 => {
            diesel::update(hook)
                .set(webhooks::consecutive_failures.eq(0))
                .execute(c)
                .await?;
            endpoint.failures = 0;
        }
        NextStep::Failed => {
            endpoint.failures = diesel::update(hook)
                .set(webhooks::consecutive_failures.eq(webhooks::consecutive_failures + 1))
                .returning(webhooks::consecutive_failures)
                .get_result(c)
                .await?;
            if endpoint.failures >= MAX_CONSECUTIVE_FAILURES && !endpoint.disabled {
                disable(c, &webhook, now).await?;
                endpoint.disabled = true;
            }
        }
        NextStep::Delivered | NextStep::RetryAt(_) => {}
    }
    Ok(Some(AttemptRow {
        event_id: a.event_id.to_string(),
        webhook_id: a.webhook_id.to_string(),
        attempt,
        started_at: a.started_at.unix_millis(),
        duration_ms: a.duration_ms,
        status_code: a.status_code,
        error: a.error.clone(),
    }))
}

/// Disables an endpoint, and fails every delivery still pending for it: none will be tried
/// again (a claim passes disabled endpoints over), and one left pending would wait for ever.
/// Attempts in flight record their own outcome over this when they end.
async fn disable(c: &mut Conn, webhook: &str, now: i64) -> Result<(), StorageError> {
    // Deliveries being written now are failed below too, and none is written after.
    exclude_delivery_writers(c, webhook).await?;
    diesel::update(webhooks::table.find(webhook))
        .filter(webhooks::disabled_at.is_null())
        .set(webhooks::disabled_at.eq(now))
        .execute(c)
        .await?;
    let pending = webhook_deliveries::table
        .filter(webhook_deliveries::webhook_id.eq(webhook))
        .filter(webhook_deliveries::state.eq(DeliveryState::Pending.as_str()));
    // Those never tried say why; one that was tried keeps what its last attempt got.
    diesel::update(pending.filter(webhook_deliveries::attempts.eq(0)))
        .set(webhook_deliveries::last_error.eq(ENDPOINT_DISABLED))
        .execute(c)
        .await?;
    diesel::update(pending)
        .set((
            webhook_deliveries::state.eq(DeliveryState::Failed.as_str()),
            webhook_deliveries::locked_until.eq(None::<i64>),
            webhook_deliveries::updated_at.eq(now),
        ))
        .execute(c)
        .await?;
    Ok(())
}

/// Why a delivery that was never tried failed.
const ENDPOINT_DISABLED: &str = "not sent: the endpoint was disabled after consecutive failures";

pub(crate) async fn release(
    c: &mut Conn,
    event_id: MessageId,
    webhook_id: WebhookId,
) -> Result<(), StorageError> {
    let key = webhook_deliveries::table.find((event_id.to_string(), webhook_id.to_string()));
    diesel::update(key)
        .set(webhook_deliveries::locked_until.eq(None::<i64>))
        .execute(c)
        .await?;
    Ok(())
}

/// Ends every lease; returns how many there were. Only for a database one server uses alone
/// (SQLite), at its start: a lease then was held by a process that is gone, and its deliveries
/// go out at once instead of when the lease runs out.
pub(crate) async fn end_leases(c: &mut Conn) -> Result<usize, StorageError> {
    Ok(diesel::update(
        webhook_deliveries::table
            .filter(webhook_deliveries::state.eq(DeliveryState::Pending.as_str()))
            .filter(webhook_deliveries::locked_until.is_not_null()),
    )
    .set(webhook_deliveries::locked_until.eq(None::<i64>))
    .execute(c)
    .await?)
}

/// Which of an endpoint's due deliveries a claim looks for: those tried before (retries) are
/// leased first, then those never tried. Oldest due first throughout would put a retry behind
/// every delivery that came due before it: an endpoint slower than its events would get its
/// retries late or never, and a dead one would never spend a delivery's tries and be disabled.
#[derive(Clone, Copy)]
pub(crate) enum Due {
    Retries,
    FirstTries,
}

/// `webhook`'s deliveries that are due and not leased.
#[diesel::dsl::auto_type]
fn due_unleased<'a>(webhook: &'a str, now: i64) -> _ {
    webhook_deliveries::table
        .filter(webhook_deliveries::webhook_id.eq(webhook))
        .filter(webhook_deliveries::next_attempt_at.le(now))
        .filter(
            webhook_deliveries::locked_until
                .is_null()
                .or(webhook_deliveries::locked_until.lt(now)),
        )
}

/// The predicate of the partial index `webhook_deliveries_retries`, written into the query as
/// text, where diesel would bind the values: PostgreSQL plans a statement it has prepared before
/// without its bound values, and such a plan cannot use a partial index whose predicate it cannot
/// read in the query (`plans.rs` holds both backends to the index).
const RETRYING: &str = "webhook_deliveries.state = 'pending' AND webhook_deliveries.attempts > 0";

/// Event ids of `webhook`'s due retries, oldest due first, through the partial index
/// `webhook_deliveries_retries` (which finds them without reading the endpoint's backlog of
/// deliveries never tried, and needs no sort). Each backend adds its own locking (`lock_due`).
#[diesel::dsl::auto_type]
pub(crate) fn due_retries<'a>(webhook: &'a str, now: i64, limit: i64) -> _ {
    let retrying: diesel::expression::SqlLiteral<diesel::sql_types::Bool> =
        diesel::dsl::sql(RETRYING);
    let unleased: due_unleased<'a> = due_unleased(webhook, now);
    unleased
        .filter(retrying)
        .select(webhook_deliveries::event_id)
        .order(webhook_deliveries::next_attempt_at.asc())
        .limit(limit)
}

/// Event ids of `webhook`'s due deliveries never tried, oldest first, through the `(webhook_id,
/// state, next_attempt_at)` index (which needs no sort; the retries it passes over are the few
/// leased ones, since a claim looks here only once it has leased every due retry).
#[diesel::dsl::auto_type]
pub(crate) fn due_first_tries<'a>(webhook: &'a str, now: i64, limit: i64) -> _ {
    let unleased: due_unleased<'a> = due_unleased(webhook, now);
    unleased
        // `DeliveryState::Pending`'s text, written out: `auto_type` names each expression's
        // type, and a method call's has no name it can write.
        .filter(webhook_deliveries::state.eq("pending"))
        .filter(webhook_deliveries::attempts.eq(0_i32))
        .select(webhook_deliveries::event_id)
        .order(webhook_deliveries::next_attempt_at.asc())
        .limit(limit)
}

/// Deliveries still to be made (the queue's depth), through the `(state, next_attempt_at)` index.
pub(crate) async fn count_pending_deliveries(c: &mut Conn) -> Result<u64, StorageError> {
    let count: i64 = webhook_deliveries::table
        .filter(webhook_deliveries::state.eq(DeliveryState::Pending.as_str()))
        .count()
        .get_result(c)
        .await?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Deletes up to about `limit` deliveries of each ended state (delivered, failed) whose last
/// attempt began before `before` (an ended delivery's `next_attempt_at`; one never tried, its
/// endpoint disabled, keeps the time it was due), with their attempts (by cascade). Returns how
/// many deliveries it deleted.
pub(crate) async fn delete_deliveries_before(
    c: &mut Conn,
    before: i64,
    limit: i64,
) -> Result<usize, StorageError> {
    let mut deleted = 0;
    for state in [DeliveryState::Delivered, DeliveryState::Failed] {
        let ended = || {
            webhook_deliveries::table
                .filter(webhook_deliveries::state.eq(state.as_str()))
                .filter(webhook_deliveries::next_attempt_at.lt(before))
        };
        let doomed: Vec<(String, String)> = ended()
            .select((webhook_deliveries::event_id, webhook_deliveries::webhook_id))
            .limit(limit)
            .load(c)
            .await?;
        if doomed.is_empty() {
            continue;
        }
        let (events, mut endpoints): (Vec<String>, Vec<String>) = doomed.into_iter().unzip();
        endpoints.sort_unstable();
        endpoints.dedup();
        // Pairs of these events and endpoints that were not read are as old and ended too.
        deleted += diesel::delete(
            ended()
                .filter(webhook_deliveries::event_id.eq_any(events))
                .filter(webhook_deliveries::webhook_id.eq_any(endpoints)),
        )
        .execute(c)
        .await?;
    }
    Ok(deleted)
}
