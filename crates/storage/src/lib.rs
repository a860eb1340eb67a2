#![doc = include_str!("../README.md")]

mod checkpoint;
mod click_journal;
mod error;
mod migrate;
mod pg;
mod pool;
mod recent_codes;
mod redirect_index;
mod rows;
mod schema;
mod sqlite;
mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use click_journal::FOLD_INTERVAL as CLICK_FOLD_INTERVAL;
pub use error::StorageError;
pub use store::{
    AuthenticatedKey, ClickBatch, CounterKey, CreateOutcome, DEFAULT_REDIRECT_INDEX_MIB,
    DatabaseKind, LinkClicks, NewLink, PoolOptions, RedirectTarget, ServerOptions, Store,
    StoreOptions,
};
