//! The worker's side of the outbox: claiming due deliveries under a lease, recording attempts.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use shortlink_domain::{
    AttemptRecord, ClaimedDelivery, DeliveryState, MAX_CONSECUTIVE_FAILURES, MessageId, NextStep,
    Timestamp, WebhookId, WebhookSecret, WebhookTarget,
};

use super::{Conn, lock_due, lock_endpoint};
use crate::StorageError;
use crate::rows::DeliveryRow;
use crate::schema::{webhook_attempts, webhook_deliveries, webhooks};

/// Leases up to `limit` due deliveries until `lease_until`. A lease that runs out (its worker
/// crashed) makes the delivery due again, which is what makes delivery at-least-once.
pub(crate) async fn claim_due(
    c: &mut Conn,
    now: Timestamp,
    limit: i64,
    lease_until: Timestamp,
) -> Result<Vec<ClaimedDelivery>, StorageError> {
    c.transaction(async |c| -> Result<Vec<ClaimedDelivery>, StorageError> {
        let keys = lock_due(c, now.unix_millis(), limit).await?;
        let mut claimed = Vec::with_capacity(keys.len());
        for (event_id, webhook_id) in keys {
            let key = webhook_deliveries::table.find((event_id, webhook_id.clone()));
            let row: DeliveryRow = diesel::update(key)
                .set(webhook_deliveries::locked_until.eq(lease_until.unix_millis()))
                .returning(DeliveryRow::as_returning())
                .get_result(c)
                .await?;
            let (target, secret): (String, String) = webhooks::table
                .find(webhook_id)
                .select((webhooks::target_url, webhooks::secret))
                .get_result(c)
                .await?;
            claimed.push(ClaimedDelivery {
                delivery: row.into_domain()?,
                target: WebhookTarget::from_trusted(&target)
                    .ok_or(StorageError::Corrupt("webhook target"))?,
                secret: WebhookSecret::from_stored(secret),
            });
        }
        Ok(claimed)
    })
    .await
}

pub(crate) async fn record_attempt(c: &mut Conn, a: &AttemptRecord) -> Result<(), StorageError> {
    c.transaction(async |c| -> Result<(), StorageError> {
        lock_endpoint(c, &a.webhook_id.to_string()).await?;
        let now = Timestamp::now().unix_millis();
        let (state, next_at) = match a.next {
            NextStep::Delivered => (DeliveryState::Delivered, None),
            NextStep::RetryAt(at) => (DeliveryState::Pending, Some(at.unix_millis())),
            NextStep::Failed => (DeliveryState::Failed, None),
        };
        let key =
            webhook_deliveries::table.find((a.event_id.to_string(), a.webhook_id.to_string()));
        let attempts: Option<i32> = diesel::update(key)
            .set((
                webhook_deliveries::attempts.eq(webhook_deliveries::attempts + 1),
                webhook_deliveries::state.eq(state.as_str()),
                webhook_deliveries::next_attempt_at
                    .eq(next_at.unwrap_or(a.started_at.unix_millis())),
                webhook_deliveries::locked_until.eq(None::<i64>),
                webhook_deliveries::last_status_code.eq(a.status_code),
                webhook_deliveries::last_error.eq(a.error.as_deref()),
                webhook_deliveries::updated_at.eq(now),
            ))
            .returning(webhook_deliveries::attempts)
            .get_result(c)
            .await
            .optional()?;
        // The endpoint was deleted while the attempt ran: nothing left to record.
        let Some(attempt) = attempts else {
            return Ok(());
        };
        diesel::insert_into(webhook_attempts::table)
            .values((
                webhook_attempts::event_id.eq(a.event_id.to_string()),
                webhook_attempts::webhook_id.eq(a.webhook_id.to_string()),
                webhook_attempts::attempt.eq(attempt),
                webhook_attempts::started_at.eq(a.started_at.unix_millis()),
                webhook_attempts::duration_ms.eq(a.duration_ms),
                webhook_attempts::status_code.eq(a.status_code),
                webhook_attempts::error.eq(a.error.as_deref()),
            ))
            .execute(c)
            .await?;
        let hook = webhooks::table.find(a.webhook_id.to_string());
        match a.next {
            // Written only when it changes: every delivery of a healthy endpoint rewriting
            // its one row left a dead row version per delivery and queued attempts on its lock.
            NextStep::Delivered => {
                diesel::update(hook)
                    .filter(webhooks::consecutive_failures.ne(0))
                    .set(webhooks::consecutive_failures.eq(0))
                    .execute(c)
                    .await?;
            }
            NextStep::Failed => {
                let failures: i32 = diesel::update(hook.clone())
                    .set(webhooks::consecutive_failures.eq(webhooks::consecutive_failures + 1))
                    .returning(webhooks::consecutive_failures)
                    .get_result(c)
                    .await?;
                if failures >= MAX_CONSECUTIVE_FAILURES {
                    diesel::update(hook)
                        .filter(webhooks::disabled_at.is_null())
                        .set(webhooks::disabled_at.eq(now))
                        .execute(c)
                        .await?;
                }
            }
            NextStep::RetryAt(_) => {}
        }
        Ok(())
    })
    .await
}

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

/// Keys of pending deliveries that are due and not leased, oldest due first. Each backend adds
/// its own locking (see `lock_due`).
#[diesel::dsl::auto_type]
pub(crate) fn due(now: i64, limit: i64) -> _ {
    webhook_deliveries::table
        .filter(webhook_deliveries::state.eq("pending"))
        .filter(webhook_deliveries::next_attempt_at.le(now))
        .filter(
            webhook_deliveries::locked_until
                .is_null()
                .or(webhook_deliveries::locked_until.lt(now)),
        )
        .select((webhook_deliveries::event_id, webhook_deliveries::webhook_id))
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
