//! Embedded migrations. `serve` and `migrate` both run them; on PostgreSQL under an advisory lock
//! so that instances starting together apply each migration once.

use diesel::migration::MigrationSource;
use diesel::{Connection, RunQueryDsl, SqliteConnection};
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::StorageError;

const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");
const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

/// Any fixed number; it only has to be the same in every instance.
const ADVISORY_LOCK_KEY: i64 = i64::from_be_bytes(*b"shortlnk");

fn failed(e: impl std::fmt::Display) -> StorageError {
    StorageError::Migration(e.to_string())
}

/// The versions of the migrations `embedded` holds for the backend `DB`.
fn versions<DB: diesel::backend::Backend>(embedded: &EmbeddedMigrations) -> Vec<String>
where
    EmbeddedMigrations: MigrationSource<DB>,
{
    (embedded.migrations().into_iter().flatten())
        .map(|m| m.name().version().to_string())
        .collect()
}

/// Refuses a database a newer build has migrated (it has applied a migration this build does
/// not embed), before anything is written to it: this build would write rows into a schema it
/// does not know, and a newer build's invariants with them.
fn refuse_newer<DB: diesel::backend::Backend>(
    conn: &mut impl MigrationHarness<DB>,
    embedded: &EmbeddedMigrations,
) -> Result<(), StorageError>
where
    EmbeddedMigrations: MigrationSource<DB>,
{
    let known = versions::<DB>(embedded);
    let applied = conn.applied_migrations().map_err(failed)?;
    let unknown = (applied.iter().map(ToString::to_string)).filter(|v| !known.contains(v));
    match unknown.max() {
        Some(newest) => Err(failed(format!(
            "the database was migrated by a newer build of shortlink (migration {newest}; this \
             build expects {}): run that build or a newer one",
            known.iter().max().map_or("none", String::as_str)
        ))),
        None => Ok(()),
    }
}

/// A row of `PRAGMA foreign_key_check`: a reference to a row that does not exist.
#[derive(diesel::QueryableByName)]
struct Dangling {
    #[diesel(sql_type = diesel::sql_types::Text)]
    table: String,
}

/// Applies pending SQLite migrations and turns on WAL (a persistent property of the file), then
/// folds the codes of links no store folded yet (`sqlite/recent_codes.rs`), so that every store
/// starts with all codes in `link_codes`.
///
/// Foreign keys are off while migrations run: rebuilding a table (SQLite's only way to drop a
/// constraint) drops the old one, which would otherwise delete the rows that refer to it. A check
/// afterwards fails the migration if any reference is left dangling.
pub(crate) async fn sqlite(path: String) -> Result<usize, StorageError> {
    tokio::task::spawn_blocking(move || {
        let mut conn = SqliteConnection::establish(&path)
            .map_err(|e| StorageError::Unavailable(e.to_string()))?;
        // First: switching to WAL needs a lock, which the last connection of a process that just
        // closed the file may still hold while it checkpoints.
        diesel::sql_query("PRAGMA busy_timeout = 5000").execute(&mut conn)?;
        diesel::sql_query("PRAGMA journal_mode = WAL").execute(&mut conn)?;
        diesel::sql_query("PRAGMA foreign_keys = OFF").execute(&mut conn)?;
        refuse_newer(&mut conn, &SQLITE)?;
        let applied = conn.run_pending_migrations(SQLITE).map_err(failed)?.len();
        let dangling: Vec<Dangling> =
            diesel::sql_query("PRAGMA foreign_key_check").load(&mut conn)?;
        if let Some(row) = dangling.first() {
            return Err(failed(format!(
                "{} rows refer to rows that do not exist (first in table {})",
                dangling.len(),
                row.table
            )));
        }
        crate::sqlite::fold_codes(&mut conn)?;
        Ok(applied)
    })
    .await
    .map_err(failed)?
}

/// Applies pending PostgreSQL migrations while holding a session advisory lock.
pub(crate) async fn postgres(url: String) -> Result<usize, StorageError> {
    let conn = crate::pool::establish(&url)
        .await
        .map_err(|e| StorageError::Unavailable(e.to_string()))?;
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::from(conn);
        diesel::sql_query(format!("SELECT pg_advisory_lock({ADVISORY_LOCK_KEY})"))
            .execute(&mut conn)?;
        let result = refuse_newer(&mut conn, &POSTGRES).and_then(|()| {
            conn.run_pending_migrations(POSTGRES)
                .map(|v| v.len())
                .map_err(failed)
        });
        diesel::sql_query(format!("SELECT pg_advisory_unlock({ADVISORY_LOCK_KEY})"))
            .execute(&mut conn)?;
        result
    })
    .await
    .map_err(failed)?
}

/// The version of the newest migration this build embeds for the backend: a database whose
/// newest applied migration is another is not the schema this build speaks.
pub(crate) fn latest_version(kind: crate::model::DatabaseKind) -> Option<String> {
    let versions = match kind {
        crate::model::DatabaseKind::Sqlite => versions::<diesel::sqlite::Sqlite>(&SQLITE),
        crate::model::DatabaseKind::Postgres => versions::<diesel::pg::Pg>(&POSTGRES),
    };
    versions.into_iter().max()
}
