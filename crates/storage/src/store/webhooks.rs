//! Webhook endpoints and their deliveries: what the API lists and changes, the delivery
//! queue's depth and retention, and the worker's side ([`DeliveryQueue`]).

use super::*;

impl Store {
    /// Registers a webhook endpoint; `false`, registering nothing, when its workspace has
    /// [`MAX_WEBHOOKS`](shortlink_domain::MAX_WEBHOOKS) already.
    pub async fn create_webhook(&self, hook: &Webhook) -> Result<bool, StorageError> {
        self.create_webhook_completing(hook, None).await
    }

    /// [`Store::create_webhook`], whose transaction also completes an idempotency claim with its
    /// request's answer (not when the workspace has no place left).
    pub async fn create_webhook_completing(
        &self,
        hook: &Webhook,
        completion: Option<(IdempotencyClaim, StoredResponse)>,
    ) -> Result<bool, StorageError> {
        let hook = hook.clone();
        self.detached(
            |s| async move { dispatch!(s, write, insert_webhook(&hook, completion.as_ref())) },
        )
        .await
    }

    /// Webhook deliveries waiting for their next attempt: the delivery queue's depth.
    pub async fn pending_deliveries(&self) -> Result<u64, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, count_pending_deliveries()) })
            .await
    }

    /// Deletes the deliveries that ended (delivered or failed) before `before`, with their
    /// attempts, in transactions of about `batch` deliveries of each state. Returns how many.
    pub async fn forget_deliveries(
        &self,
        before: Timestamp,
        batch: i64,
    ) -> Result<usize, StorageError> {
        let before = before.unix_millis();
        self.delete_in_batches(batch, |s| async move {
            dispatch!(s, write, delete_deliveries_before(before, batch))
        })
        .await
    }

    /// The workspaces with an active endpoint subscribed to `kind`.
    pub async fn workspaces_subscribed(
        &self,
        kind: EventKind,
    ) -> Result<HashSet<WorkspaceId>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, workspaces_subscribed(kind)) })
            .await
    }

    /// The workspace's endpoints, newest first.
    pub async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Vec<Webhook>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, list_webhooks(workspace)) })
            .await
    }

    /// One of the workspace's endpoints.
    pub async fn get_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<Option<Webhook>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, get_webhook(workspace, id)) })
            .await
    }

    /// Deletes an endpoint with its deliveries; false when it is not the workspace's.
    pub async fn delete_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<bool, StorageError> {
        self.detached(|s| async move { dispatch!(s, write, delete_webhook(workspace, id)) })
            .await
    }

    /// The endpoint's latest `limit` deliveries, in any state: the first page of
    /// [`Store::list_deliveries_page`]; `None` when it is not the workspace's. (For tests.)
    #[cfg(feature = "testing")]
    pub async fn list_deliveries(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        limit: i64,
    ) -> Result<Option<Vec<Delivery>>, StorageError> {
        self.list_deliveries_page(workspace, id, None, None, limit)
            .await
    }

    /// A page of the endpoint's deliveries, newest first, in `state` if given, after the cursor
    /// `after` if given; `None` when it is not the workspace's.
    pub async fn list_deliveries_page(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        state: Option<shortlink_domain::DeliveryState>,
        after: Option<shortlink_domain::DeliveryCursor>,
        limit: i64,
    ) -> Result<Option<Vec<Delivery>>, StorageError> {
        self.detached(|s| async move {
            dispatch!(
                s,
                read,
                list_deliveries_page(workspace, id, state, after, limit)
            )
        })
        .await
    }
}

impl DeliveryQueue for Store {
    type Error = StorageError;

    async fn claim_due(
        &self,
        now: Timestamp,
        limit: i64,
        lease_until: Timestamp,
        in_flight: &InFlight,
    ) -> Result<Vec<ClaimedDelivery>, StorageError> {
        let in_flight = in_flight.clone();
        self.detached(|s| async move {
            dispatch!(s, write, claim_due(now, limit, lease_until, &in_flight))
        })
        .await
    }

    async fn record_attempts(&self, attempts: &[AttemptRecord]) -> Result<(), StorageError> {
        let attempts = attempts.to_vec();
        self.detached(|s| async move { dispatch!(s, write, record_attempts(&attempts)) })
            .await
    }

    async fn release(
        &self,
        event_id: MessageId,
        webhook_id: WebhookId,
    ) -> Result<(), StorageError> {
        self.detached(|s| async move { dispatch!(s, write, release(event_id, webhook_id)) })
            .await
    }
}
