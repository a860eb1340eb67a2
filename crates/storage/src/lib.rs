#![doc = include_str!("../README.md")]

mod error;
mod hooks;
mod idempotency;
mod migrate;
mod model;
mod pg;
#[cfg(test)]
mod plans;
mod pool;
mod rows;
mod schema;
mod sqlite;
mod store;
mod stored_options;
#[cfg(feature = "testing")]
pub mod testing;
mod transaction;

pub use error::StorageError;
pub use idempotency::{
    ABANDONED_CLAIM, ClaimOutcome, IDEMPOTENCY_KEY_LIFETIME, IdempotencyClaim, LinkCompletion,
    PlacedCompletion, RenderCreation, StoredResponse,
};
pub use model::{
    AuthenticatedKey, CLICK_FOLD_INTERVAL, Change, ClickBatch, ClickEvent, CounterKey,
    CreateOutcome, DEFAULT_REDIRECT_INDEX_MIB, DatabaseKind, Dimension, EventFilter, ExportedEvent,
    LinkClicks, LinkFilter, LinkUpdate, NewLink, PoolOptions, PoolUsage, RedirectTarget,
    ServerOptions, StoreOptions, Tally,
};
pub use pg::changes::{ChangeListener, LISTENER_QUIET_FOR};
pub use pool::ANSWER_WITHIN;
pub use store::{ROLL_UP_AFTER, Schema, Store};
