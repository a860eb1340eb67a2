//! Workspaces and API keys.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use shortlink_domain::{ApiKey, ApiKeyHash, ApiKeyId, RateLimit, Workspace, WorkspaceId};

use super::{Conn, HAS_MIGRATIONS_TABLE};
use crate::StorageError;
use crate::model::AuthenticatedKey;
use crate::rows::{ApiKeyRow, WorkspaceRow, found, rate_column};
use crate::schema::{api_keys, workspaces};

/// The version of the newest migration applied to the database (diesel's bookkeeping table);
/// `None` when none was (a new database has not even the table).
pub(crate) async fn schema_version(c: &mut Conn) -> Result<Option<String>, StorageError> {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    #[derive(QueryableByName)]
    struct Newest {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
        version: Option<String>,
    }
    let table: Count = diesel::sql_query(HAS_MIGRATIONS_TABLE)
        .get_result(c)
        .await?;
    if table.n == 0 {
        return Ok(None);
    }
    let newest: Newest =
        diesel::sql_query("SELECT max(version) AS version FROM __diesel_schema_migrations")
            .get_result(c)
            .await?;
    Ok(newest.version)
}

pub(crate) async fn ping(c: &mut Conn) -> Result<(), StorageError> {
    diesel::select(1.into_sql::<diesel::sql_types::Integer>())
        .get_result::<i32>(c)
        .await?;
    Ok(())
}

pub(crate) async fn insert_workspace(c: &mut Conn, w: &Workspace) -> Result<(), StorageError> {
    let inserted = diesel::insert_into(workspaces::table)
        .values(WorkspaceRow::from_domain(w))
        .on_conflict_do_nothing()
        .execute(c)
        .await?;
    if inserted == 0 {
        return Err(StorageError::AlreadyExists("a workspace with this name"));
    }
    Ok(())
}

/// Sets a workspace's rate; `false` when there is no such workspace. Keys cached with the old
/// rate are stale: every instance hears of it.
pub(crate) async fn set_rate_limit(
    c: &mut Conn,
    workspace: WorkspaceId,
    rate: RateLimit,
) -> Result<bool, StorageError> {
    let changed = diesel::update(workspaces::table.find(workspace.to_string()))
        .set(workspaces::rate_limit.eq(rate_column(rate)))
        .execute(c)
        .await?;
    if changed == 1 {
        super::announce(c, &[crate::model::Change::Keys]).await?;
    }
    Ok(changed == 1)
}

pub(crate) async fn list_workspaces(c: &mut Conn) -> Result<Vec<Workspace>, StorageError> {
    workspaces::table
        .order(workspaces::id.asc())
        .select(WorkspaceRow::as_select())
        .load(c)
        .await?
        .into_iter()
        .map(WorkspaceRow::into_domain)
        .collect()
}

pub(crate) async fn find_workspace(
    c: &mut Conn,
    name_or_id: &str,
) -> Result<Option<Workspace>, StorageError> {
    let query = workspaces::table
        .select(WorkspaceRow::as_select())
        .into_boxed();
    let query = match WorkspaceId::parse(name_or_id) {
        Ok(id) => query.filter(workspaces::id.eq(id.to_string())),
        Err(_) => query.filter(workspaces::name.eq(name_or_id)),
    };
    found(query.get_result(c).await, WorkspaceRow::into_domain)
}

pub(crate) async fn insert_api_key(
    c: &mut Conn,
    key: &ApiKey,
    hash: &ApiKeyHash,
) -> Result<(), StorageError> {
    diesel::insert_into(api_keys::table)
        .values(ApiKeyRow {
            id: key.id.to_string(),
            workspace_id: key.workspace_id.to_string(),
            name: key.name.clone(),
            prefix: key.prefix.clone(),
            key_hash: hash.as_str().to_owned(),
            created_at: key.created_at.unix_millis(),
            revoked_at: None,
        })
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn list_api_keys(
    c: &mut Conn,
    workspace: WorkspaceId,
) -> Result<Vec<ApiKey>, StorageError> {
    api_keys::table
        .filter(api_keys::workspace_id.eq(workspace.to_string()))
        .order(api_keys::id.asc())
        .select(ApiKeyRow::as_select())
        .load(c)
        .await?
        .into_iter()
        .map(ApiKeyRow::into_domain)
        .collect()
}

pub(crate) async fn revoke_api_key(
    c: &mut Conn,
    key: ApiKeyId,
    now: i64,
) -> Result<bool, StorageError> {
    let changed = diesel::update(api_keys::table)
        .filter(api_keys::id.eq(key.to_string()))
        .filter(api_keys::revoked_at.is_null())
        .set(api_keys::revoked_at.eq(now))
        .execute(c)
        .await?;
    if changed == 1 {
        super::announce(c, &[crate::model::Change::Keys]).await?;
    }
    Ok(changed == 1)
}

/// One indexed lookup by hash (`key_hash` is unique), joined with the key's workspace.
pub(crate) async fn authenticate(
    c: &mut Conn,
    hash: &ApiKeyHash,
) -> Result<Option<AuthenticatedKey>, StorageError> {
    let found: Option<(String, WorkspaceRow)> = api_keys::table
        .inner_join(workspaces::table)
        .filter(api_keys::key_hash.eq(hash.as_str()))
        .filter(api_keys::revoked_at.is_null())
        .select((api_keys::id, WorkspaceRow::as_select()))
        .get_result(c)
        .await
        .optional()?;
    found
        .map(|(key_id, ws)| {
            Ok(AuthenticatedKey {
                key_id: ApiKeyId::parse(&key_id)
                    .map_err(|_| StorageError::Corrupt("api key id"))?,
                workspace: ws.into_domain()?,
            })
        })
        .transpose()
}
