//! The types of idempotent creation (`Idempotency-Key`): a request claims its key before it
//! creates anything, and the creation's own transaction completes the claim with the answer, so
//! a creation and its recorded answer are committed together or not at all.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use shortlink_domain::WorkspaceId;

use crate::CreateOutcome;

/// How long a key's answer is replayed.
pub const IDEMPOTENCY_KEY_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a claim whose request never completed it (its process died) holds the key. Far longer
/// than any creation runs, so a live request's claim is never taken over.
pub const ABANDONED_CLAIM: Duration = Duration::from_secs(5 * 60);

/// A request's hold on its idempotency key, won by [`crate::Store::claim_idempotency_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    /// The workspace the key belongs to: keys are per workspace.
    pub workspace_id: WorkspaceId,
    /// The client's key.
    pub key: String,
    /// What the request was (its route and body), hashed: another request under the same key is
    /// refused.
    pub fingerprint: String,
    /// Tells this request's claim from a later one that took over an expired key.
    pub token: String,
}

/// An answer recorded under a key, replayed to a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// The body, as sent.
    pub body: String,
}

/// What claiming a key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The key is this request's: create, and complete the claim in the same transaction.
    Claimed,
    /// The same request was answered before: answer this again, creating nothing.
    Replay(StoredResponse),
    /// The same key's first request is still running.
    InUse,
    /// The key was used for another request.
    Reused,
}

/// Renders a creation's answer from its outcomes (the request's share of its group, in order).
pub type RenderCreation = Arc<dyn Fn(&[CreateOutcome]) -> StoredResponse + Send + Sync>;

/// Completes a claim with the answer of a link creation.
#[derive(Clone)]
pub struct LinkCompletion {
    /// The claim to complete.
    pub claim: IdempotencyClaim,
    /// The answer, from the outcomes of the request's links.
    pub render: RenderCreation,
}

/// A [`LinkCompletion`] placed in a group of links: `links` are the positions of its request's
/// links among the group's.
#[derive(Clone)]
pub struct PlacedCompletion {
    /// Its request's links in the group.
    pub links: Range<usize>,
    /// The completion.
    pub completion: LinkCompletion,
}
