//! Creating workspaces and keys, and changing a workspace's rate: shared by the command line
//! and the first-run set-up.

use anyhow::{Context, bail};
use shortlink_domain::{ApiKey, ApiKeySecret, RateLimit, Workspace};
use shortlink_storage::{StorageError, Store};

/// Creates a workspace after checking its rate (the store checks its name).
pub async fn create_workspace(
    store: &Store,
    name: &str,
    rate_limit: u32,
) -> anyhow::Result<Workspace> {
    let workspace = new_workspace(name, rate_limit)?;
    match store.create_workspace(&workspace).await {
        Ok(()) => Ok(workspace),
        Err(StorageError::AlreadyExists(_)) => bail!("a workspace named '{name}' already exists"),
        Err(e) => Err(refused(e)),
    }
}

/// A workspace not yet stored, after checking its rate.
pub fn new_workspace(name: &str, rate_limit: u32) -> anyhow::Result<Workspace> {
    Ok(Workspace::new(name, RateLimit::new(rate_limit)?))
}

/// Changes a workspace's rate after checking it.
pub async fn set_rate_limit(
    store: &Store,
    workspace: &Workspace,
    rate_limit: u32,
) -> anyhow::Result<()> {
    let rate = RateLimit::new(rate_limit)?;
    if !store.set_rate_limit(workspace.id, rate).await? {
        bail!("no workspace with id '{}'", workspace.id);
    }
    Ok(())
}

/// Finds a workspace by name or id, or says which one is unknown.
pub async fn find_workspace(store: &Store, name_or_id: &str) -> anyhow::Result<Workspace> {
    store
        .find_workspace(name_or_id)
        .await?
        .with_context(|| format!("no workspace named or with id '{name_or_id}'"))
}

/// Makes a key for `workspace`; the secret is returned once and stored only as its hash.
pub async fn create_key(
    store: &Store,
    workspace: &Workspace,
    name: &str,
) -> anyhow::Result<(ApiKey, ApiKeySecret)> {
    let (key, secret) = ApiKey::issue(workspace.id, name);
    store
        .create_api_key(&key, &secret.hash())
        .await
        .map_err(refused)?;
    Ok((key, secret))
}

/// A store's error as the command line says it: a name the store refuses by the domain's rules
/// (`validate_name`) in the rule's own words.
fn refused(e: StorageError) -> anyhow::Error {
    match e {
        StorageError::Invalid(rule) => anyhow::Error::msg(rule),
        e => e.into(),
    }
}
