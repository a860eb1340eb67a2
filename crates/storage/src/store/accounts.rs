//! Workspaces and their API keys.

use super::*;

impl Store {
    /// Creates a workspace; a taken name is [`StorageError::AlreadyExists`], one the domain
    /// refuses ([`Workspace::validate_name`]) [`StorageError::Invalid`].
    pub async fn create_workspace(&self, workspace: &Workspace) -> Result<(), StorageError> {
        Workspace::validate_name(&workspace.name).map_err(StorageError::Invalid)?;
        let workspace = workspace.clone();
        self.detached(|s| async move { dispatch!(s, write, insert_workspace(&workspace)) })
            .await
    }

    /// Sets a workspace's rate limit; `false` when there is no such workspace. Every instance
    /// applies it within its key cache's lifetime, and on PostgreSQL at once.
    pub async fn set_rate_limit(
        &self,
        workspace: WorkspaceId,
        rate: RateLimit,
    ) -> Result<bool, StorageError> {
        self.detached(|s| async move { dispatch!(s, write, set_rate_limit(workspace, rate)) })
            .await
    }

    /// Every workspace, oldest first.
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, list_workspaces()) })
            .await
    }

    /// A workspace by name or `ws_…` id.
    pub async fn find_workspace(
        &self,
        name_or_id: &str,
    ) -> Result<Option<Workspace>, StorageError> {
        let name_or_id = name_or_id.to_owned();
        self.detached(|s| async move { dispatch!(s, read, find_workspace(&name_or_id)) })
            .await
    }

    /// Stores a key's record and the hash of its secret; a name the domain refuses
    /// ([`ApiKey::validate_name`]) is [`StorageError::Invalid`].
    pub async fn create_api_key(
        &self,
        key: &ApiKey,
        hash: &ApiKeyHash,
    ) -> Result<(), StorageError> {
        ApiKey::validate_name(&key.name).map_err(StorageError::Invalid)?;
        let (key, hash) = (key.clone(), hash.clone());
        self.detached(|s| async move { dispatch!(s, write, insert_api_key(&key, &hash)) })
            .await
    }

    /// The workspace's keys, oldest first (revoked ones included, marked).
    pub async fn list_api_keys(&self, workspace: WorkspaceId) -> Result<Vec<ApiKey>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, list_api_keys(workspace)) })
            .await
    }

    /// Revokes a key; false when there is no such active key.
    pub async fn revoke_api_key(&self, key: ApiKeyId) -> Result<bool, StorageError> {
        dispatch!(
            self,
            write,
            revoke_api_key(key, Timestamp::now().unix_millis())
        )
    }

    /// The active key with this hash, and its workspace.
    pub async fn authenticate(
        &self,
        hash: &ApiKeyHash,
    ) -> Result<Option<AuthenticatedKey>, StorageError> {
        let hash = hash.clone();
        self.detached(|s| async move { dispatch!(s, read, authenticate(&hash)) })
            .await
    }
}
