//! Idempotency keys: claims, their release, and their expiry.

use super::*;

impl Store {
    /// Claims an idempotency key for a creating request (see [`ClaimOutcome`]). A claimed key is
    /// completed by the creation's transaction ([`Store::create_links_completing`],
    /// [`Store::create_webhook_completing`]), or given back with [`Store::release_idempotency_key`].
    pub async fn claim_idempotency_key(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<ClaimOutcome, StorageError> {
        let claim = claim.clone();
        self.detached(|s| async move {
            dispatch!(s, write, claim_idempotency_key(&claim, Timestamp::now()))
        })
        .await
    }

    /// Gives back a key whose creation failed, so that a retry runs instead of waiting.
    pub async fn release_idempotency_key(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<(), StorageError> {
        let claim = claim.clone();
        self.detached(|s| async move { dispatch!(s, write, release_idempotency_key(&claim)) })
            .await
    }

    /// Deletes idempotency keys past their lifetime; returns how many.
    pub async fn forget_idempotency_keys(&self) -> Result<usize, StorageError> {
        self.detached(
            |s| async move { dispatch!(s, write, forget_idempotency_keys(Timestamp::now())) },
        )
        .await
    }
}
