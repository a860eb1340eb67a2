//! Writing events to the outbox: one delivery row per (event, subscribed active endpoint of the
//! event's workspace), in the caller's transaction. No subscriber, no row: a workspace without
//! webhooks pays one indexed read per transaction and nothing else.

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use shortlink_domain::{DeliveryState, Event, EventKind, MessageId, Timestamp, WorkspaceId};

use super::{Conn, insert_deliveries, lock_subscribed};
use crate::StorageError;
use crate::rows::{DeliveryRow, parsed, split_events};
use crate::schema::webhooks;

/// Rows per insert statement, well under SQLite's bound-parameter limit.
const INSERT_CHUNK: usize = 500;

/// The active endpoints of some workspaces, with the kinds each subscribes to.
pub(crate) struct Subscriptions(HashMap<WorkspaceId, Vec<(String, Vec<EventKind>)>>);

impl Subscriptions {
    /// Whether any endpoint of `workspace` wants `kind`.
    pub(crate) fn wants(&self, workspace: WorkspaceId, kind: EventKind) -> bool {
        self.0
            .get(&workspace)
            .is_some_and(|hooks| hooks.iter().any(|(_, kinds)| kinds.contains(&kind)))
    }
}

pub(crate) async fn subscriptions(
    c: &mut Conn,
    workspaces: impl IntoIterator<Item = WorkspaceId>,
) -> Result<Subscriptions, StorageError> {
    let ids: HashSet<String> = workspaces.into_iter().map(|w| w.to_string()).collect();
    let mut subs: HashMap<WorkspaceId, Vec<(String, Vec<EventKind>)>> = HashMap::new();
    if ids.is_empty() {
        return Ok(Subscriptions(subs));
    }
    let rows = lock_subscribed(c, ids.into_iter().collect()).await?;
    for (hook, workspace, kinds) in rows {
        let workspace = parsed(WorkspaceId::parse(&workspace), "workspace id")?;
        subs.entry(workspace)
            .or_default()
            .push((hook, split_events(&kinds)?));
    }
    Ok(Subscriptions(subs))
}

/// The active endpoints of `workspaces`: `(id, workspace id, events)`. A backend's
/// `lock_subscribed` adds its locking: deliveries are written for the endpoints read here, which
/// must not be deleted before the transaction commits.
#[diesel::dsl::auto_type]
pub(crate) fn subscribed(workspaces: Vec<String>) -> _ {
    webhooks::table
        .filter(webhooks::workspace_id.eq_any(workspaces))
        .filter(webhooks::disabled_at.is_null())
        .select((webhooks::id, webhooks::workspace_id, webhooks::events))
}

/// Writes each event for the subscribed endpoints of the workspace it is paired with, a few
/// hundred rows per statement.
pub(crate) async fn write(
    c: &mut Conn,
    subs: &Subscriptions,
    events: &[(WorkspaceId, Event)],
) -> Result<(), StorageError> {
    let now = Timestamp::now().unix_millis();
    let mut rows = Vec::with_capacity(INSERT_CHUNK);
    for (workspace, event) in events {
        let kind = event.kind();
        let Some(hooks) = subs.0.get(workspace) else {
            continue;
        };
        // One message id per event, shared by every endpoint that receives it.
        let event_id = MessageId::generate().to_string();
        let payload = event.to_json();
        for (hook, _) in hooks.iter().filter(|(_, kinds)| kinds.contains(&kind)) {
            rows.push(DeliveryRow {
                event_id: event_id.clone(),
                webhook_id: hook.clone(),
                event_type: kind.as_str().to_owned(),
                payload: payload.clone(),
                state: DeliveryState::Pending.as_str().to_owned(),
                attempts: 0,
                next_attempt_at: now,
                locked_until: None,
                last_status_code: None,
                last_error: None,
                created_at: now,
                updated_at: now,
            });
        }
        if rows.len() >= INSERT_CHUNK {
            insert_deliveries(
                c,
                std::mem::replace(&mut rows, Vec::with_capacity(INSERT_CHUNK)),
            )
            .await?;
        }
    }
    if !rows.is_empty() {
        insert_deliveries(c, rows).await?;
    }
    Ok(())
}
