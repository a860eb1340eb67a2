//! Every query, written once. This module is compiled twice, once in `crate::pg` and once in
//! `crate::sqlite`, each time against that backend's connection type `Conn`; the
//! [`Store`](crate::Store) picks the copy that matches its pool. What a query needs of the
//! backend beyond the connection it asks through [`Hooks`](crate::hooks::Hooks), or, for a
//! creation, through that backend's `Creation`.
//!
//! Lookups by a unique key use `get_result`, not `first`: `first` adds a bound `LIMIT ?`, and
//! SQLite re-prepares a statement whose LIMIT is a bound parameter on every call, which made the
//! redirect's cache misses several times slower.

mod analytics;
mod clicks;
mod deliveries;
mod event_inserts;
mod idempotency;
mod links;
mod outbox;
mod rollups;
mod webhooks;
mod workspaces;

pub(crate) use super::{
    Conn, Creation, EXPORT_JOINS_LINKS, HAS_MIGRATIONS_TABLE, IN_BYTE_ORDER, INSERT_EVENTS,
    announce, begin_creation, count_clicks, exclude_delivery_writers, insert_attempts,
    insert_deliveries, insert_event_rows, insert_new_links, insert_rollup_rows, load_rows,
    lock_due, lock_endpoint, lock_link, lock_subscribed, lock_workspace, write_transaction,
};

/// The backend the queries are compiled for.
pub(crate) type Backend = <Conn as diesel_async::AsyncConnectionCore>::Backend;
pub(crate) use analytics::*;
pub(crate) use clicks::*;
pub(crate) use deliveries::*;
pub(crate) use event_inserts::InsertEvents;
pub(crate) use idempotency::*;
pub(crate) use links::*;
pub(crate) use outbox::subscribed;
pub(crate) use rollups::*;
pub(crate) use webhooks::*;
pub(crate) use workspaces::*;
