//! Telling every instance on a PostgreSQL database what changed, so their caches follow within a
//! moment: `pg_notify` in the changing transaction (delivered at its commit, never for a change
//! rolled back), and a listener on a connection of its own.

use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::StreamExt;

use std::time::Duration;

use crate::StorageError;
use crate::model::Change;
use crate::pool::ANSWER_WITHIN;

/// The channel.
const CHANNEL: &str = "shortlink_changes";

/// How long the listener waits for a notification before it checks that its connection answers.
pub const LISTENER_QUIET_FOR: Duration = Duration::from_secs(10);

/// A payload stays under PostgreSQL's 8,000-byte limit.
const MAX_PAYLOAD: usize = 7_000;

/// Announces `changes` when the caller's transaction commits; several share one notification.
pub(crate) async fn announce(
    c: &mut AsyncPgConnection,
    changes: &[Change],
) -> Result<(), StorageError> {
    let mut payload = String::new();
    for change in changes {
        let line = change.to_line();
        if !payload.is_empty() && payload.len() + line.len() + 1 > MAX_PAYLOAD {
            notify(c, &payload).await?;
            payload.clear();
        }
        if !payload.is_empty() {
            payload.push('\n');
        }
        payload.push_str(&line);
    }
    if !payload.is_empty() {
        notify(c, &payload).await?;
    }
    Ok(())
}

async fn notify(c: &mut AsyncPgConnection, payload: &str) -> Result<(), StorageError> {
    diesel::sql_query("SELECT pg_notify($1, $2)")
        .bind::<Text, _>(CHANNEL)
        .bind::<Text, _>(payload)
        .execute(c)
        .await?;
    Ok(())
}

/// A connection listening for changes.
pub struct ChangeListener {
    conn: AsyncPgConnection,
}

impl std::fmt::Debug for ChangeListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeListener").finish_non_exhaustive()
    }
}

impl ChangeListener {
    /// Connects to `url` and listens.
    pub(crate) async fn connect(url: &str) -> Result<Self, StorageError> {
        let mut conn = crate::pool::establish(url)
            .await
            .map_err(|e| StorageError::Unavailable(e.to_string()))?;
        diesel::sql_query(format!("LISTEN {CHANNEL}"))
            .execute(&mut conn)
            .await?;
        Ok(Self { conn })
    }

    /// The next changes announced; `None` once the connection is lost, or does not answer
    /// within [`ANSWER_WITHIN`] when asked after [`LISTENER_QUIET_FOR`] without a notification: a
    /// connection cut off without a word (a failover, a dropped route) would otherwise wait for
    /// the system's TCP keepalive, two hours by default, while changes went unheard.
    pub async fn next(&mut self) -> Option<Vec<Change>> {
        loop {
            let waited = {
                let mut notifications = std::pin::pin!(self.conn.notifications_stream());
                // Cancel-safe: a notification that arrives meanwhile waits in the channel.
                tokio::time::timeout(LISTENER_QUIET_FOR, notifications.next()).await
            };
            match waited {
                Ok(Some(Ok(notification))) => {
                    return Some(
                        notification
                            .payload
                            .lines()
                            .filter_map(Change::from_line)
                            .collect(),
                    );
                }
                Ok(_) => return None,
                Err(_quiet) => {
                    let asked = diesel::sql_query("SELECT 1").execute(&mut self.conn);
                    if !matches!(tokio::time::timeout(ANSWER_WITHIN, asked).await, Ok(Ok(_))) {
                        return None;
                    }
                }
            }
        }
    }
}
