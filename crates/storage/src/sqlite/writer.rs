//! The single writer connection, held, and the proof that it is.
//!
//! The redirect index and the recent codes are exact because they change in commit order: every
//! change of theirs is made by the writer connection's holder, after its transaction ended and
//! before it lets the connection go (or, for a creation's tentative codes, inside its
//! transaction). [`Held`] is that rule as a type: every in-memory mutation of the index and of
//! the recent codes takes a `&Held`, and only a [`Writer`] gives one out, for as long as it is
//! borrowed, so a change made anywhere else does not compile.

use diesel_async::pooled_connection::deadpool::Object;

use super::Conn;
use super::pool::SqlitePool;
use crate::StorageError;

/// The writer connection, taken from its pool of one.
pub(crate) struct Writer {
    conn: Object<Conn>,
    held: Held,
}

/// Proof that the writer connection is held (see the module docs). Not `Clone`, made only
/// here: a `&Held` lives no longer than the [`Writer`] it was borrowed from.
#[derive(Debug)]
pub(crate) struct Held(());

impl Writer {
    /// Waits for the writer connection.
    pub(crate) async fn take(pool: &SqlitePool) -> Result<Self, StorageError> {
        Ok(Self {
            conn: pool.get().await?,
            held: Held(()),
        })
    }

    /// The connection, for queries.
    pub(crate) fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    /// The proof, for in-memory changes.
    pub(crate) fn held(&self) -> &Held {
        &self.held
    }

    /// Both at once: a query whose in-memory effects it applies itself.
    pub(crate) fn split(&mut self) -> (&mut Conn, &Held) {
        (&mut self.conn, &self.held)
    }
}

#[cfg(test)]
impl Held {
    /// For unit tests of the in-memory structures, which have no connection.
    pub(crate) fn for_test() -> Self {
        Held(())
    }
}
