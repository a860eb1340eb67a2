//! Webhook endpoints and the read side of their deliveries.

use std::collections::HashSet;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use shortlink_domain::{
    Delivery, DeliveryCursor, DeliveryState, EventKind, Webhook, WebhookId, WorkspaceId,
};

use super::{Conn, write_transaction};
use crate::StorageError;
use crate::idempotency::{IdempotencyClaim, StoredResponse};
use crate::rows::{DeliveryRow, WebhookRow, found, parsed, split_events};
use crate::schema::{webhook_deliveries, webhooks};

/// Inserts an endpoint and, in the same transaction, completes its request's idempotency claim;
/// `false`, writing nothing, when its workspace has [`shortlink_domain::MAX_WEBHOOKS`] already.
/// The count is made with the workspace's row locked (PostgreSQL; SQLite's writer is one), so
/// two creations at once cannot both take the last place.
pub(crate) async fn insert_webhook(
    c: &mut Conn,
    hook: &Webhook,
    completion: Option<&(IdempotencyClaim, StoredResponse)>,
) -> Result<bool, StorageError> {
    write_transaction(c, async |c| -> Result<bool, StorageError> {
        let workspace = hook.workspace_id.to_string();
        super::lock_workspace(c, &workspace).await?;
        let registered: i64 = webhooks::table
            .filter(webhooks::workspace_id.eq(&workspace))
            .count()
            .get_result(c)
            .await?;
        if registered >= shortlink_domain::MAX_WEBHOOKS {
            return Ok(false);
        }
        diesel::insert_into(webhooks::table)
            .values(WebhookRow::from_domain(hook))
            .execute(c)
            .await?;
        if let Some((claim, response)) = completion {
            super::complete_idempotency_key(c, claim, response).await?;
        }
        Ok(true)
    })
    .await
}

/// The workspaces with an active endpoint subscribed to `kind`.
pub(crate) async fn workspaces_subscribed(
    c: &mut Conn,
    kind: EventKind,
) -> Result<HashSet<WorkspaceId>, StorageError> {
    let rows: Vec<(String, String)> = webhooks::table
        .filter(webhooks::disabled_at.is_null())
        .select((webhooks::workspace_id, webhooks::events))
        .load(c)
        .await?;
    let mut subscribed = HashSet::new();
    for (workspace, kinds) in rows {
        if split_events(&kinds)?.contains(&kind) {
            subscribed.insert(parsed(WorkspaceId::parse(&workspace), "workspace id")?);
        }
    }
    Ok(subscribed)
}

pub(crate) async fn list_webhooks(
    c: &mut Conn,
    workspace: WorkspaceId,
) -> Result<Vec<Webhook>, StorageError> {
    webhooks::table
        .filter(webhooks::workspace_id.eq(workspace.to_string()))
        .order(webhooks::id.desc())
        .select(WebhookRow::as_select())
        .load(c)
        .await?
        .into_iter()
        .map(WebhookRow::into_domain)
        .collect()
}

pub(crate) async fn get_webhook(
    c: &mut Conn,
    workspace: WorkspaceId,
    id: WebhookId,
) -> Result<Option<Webhook>, StorageError> {
    let row = webhooks::table
        .filter(webhooks::workspace_id.eq(workspace.to_string()))
        .filter(webhooks::id.eq(id.to_string()))
        .select(WebhookRow::as_select())
        .get_result(c)
        .await;
    found(row, WebhookRow::into_domain)
}

/// Deletes the endpoint and, by cascade, its deliveries and their attempts.
pub(crate) async fn delete_webhook(
    c: &mut Conn,
    workspace: WorkspaceId,
    id: WebhookId,
) -> Result<bool, StorageError> {
    let id = id.to_string();
    write_transaction(c, async |c| -> Result<bool, StorageError> {
        // The endpoint's row first, then its deliveries: the one lock order (see
        // `lock_subscribed`). On PostgreSQL no foreign key deletes them by cascade.
        let deleted = diesel::delete(webhooks::table)
            .filter(webhooks::workspace_id.eq(workspace.to_string()))
            .filter(webhooks::id.eq(&id))
            .execute(c)
            .await?;
        if deleted == 1 {
            diesel::delete(webhook_deliveries::table)
                .filter(webhook_deliveries::webhook_id.eq(&id))
                .execute(c)
                .await?;
        }
        Ok(deleted == 1)
    })
    .await
}

/// One page of the endpoint's deliveries, newest first (by creation time, then event id),
/// optionally only those in `state`, starting after `after`; `None` when the endpoint is not the
/// workspace's.
pub(crate) async fn list_deliveries_page(
    c: &mut Conn,
    workspace: WorkspaceId,
    id: WebhookId,
    state: Option<DeliveryState>,
    after: Option<DeliveryCursor>,
    limit: i64,
) -> Result<Option<Vec<Delivery>>, StorageError> {
    use webhook_deliveries::{created_at, event_id, webhook_id};
    if get_webhook(c, workspace, id).await?.is_none() {
        return Ok(None);
    }
    let mut query = webhook_deliveries::table
        .filter(webhook_id.eq(id.to_string()))
        .order((created_at.desc(), event_id.desc()))
        .limit(limit)
        .select(DeliveryRow::as_select())
        .into_boxed();
    if let Some(state) = state {
        query = query.filter(webhook_deliveries::state.eq(state.as_str()));
    }
    if let Some(after) = after {
        let (at, event) = (after.created_at_millis(), after.event_id().to_string());
        query = query.filter(
            created_at
                .lt(at)
                .or(created_at.eq(at).and(event_id.lt(event))),
        );
    }
    let rows = query.load(c).await?;
    rows.into_iter()
        .map(DeliveryRow::into_domain)
        .collect::<Result<_, _>>()
        .map(Some)
}
