//! Idempotency keys (see `crate::idempotency`): claim, complete in the creation's transaction,
//! release on failure, forget after their lifetime.

use diesel::prelude::*;
use diesel::upsert::excluded;
use diesel_async::RunQueryDsl;
use shortlink_domain::Timestamp;

use super::Conn;
use crate::StorageError;
use crate::idempotency::{
    ABANDONED_CLAIM, ClaimOutcome, IDEMPOTENCY_KEY_LIFETIME, IdempotencyClaim, StoredResponse,
};
use crate::schema::idempotency_keys as keys;

fn millis_before(now: Timestamp, age: std::time::Duration) -> i64 {
    now.unix_millis() - i64::try_from(age.as_millis()).unwrap_or(i64::MAX)
}

/// Claims `claim`'s key for its request, unless a live row holds it: a row past its lifetime, or
/// a claim abandoned by a request that never completed it, is taken over in the same statement,
/// so two concurrent requests (on any instance) can never both win.
pub(crate) async fn claim_idempotency_key(
    c: &mut Conn,
    claim: &IdempotencyClaim,
    now: Timestamp,
) -> Result<ClaimOutcome, StorageError> {
    let expired = keys::created_at
        .lt(millis_before(now, IDEMPOTENCY_KEY_LIFETIME))
        .or(keys::status
            .is_null()
            .and(keys::created_at.lt(millis_before(now, ABANDONED_CLAIM))));
    let upsert = diesel::insert_into(keys::table)
        .values((
            keys::workspace_id.eq(claim.workspace_id.to_string()),
            keys::idempotency_key.eq(&claim.key),
            keys::fingerprint.eq(&claim.fingerprint),
            keys::claim.eq(&claim.token),
            keys::created_at.eq(now.unix_millis()),
        ))
        .on_conflict((keys::workspace_id, keys::idempotency_key))
        .do_update()
        .set((
            keys::fingerprint.eq(excluded(keys::fingerprint)),
            keys::claim.eq(excluded(keys::claim)),
            keys::status.eq(None::<i32>),
            keys::body.eq(None::<String>),
            keys::created_at.eq(excluded(keys::created_at)),
        ));
    // `ON CONFLICT … DO UPDATE … WHERE`: the filter of the upsert, not of a query.
    let won: Vec<String> = diesel::query_dsl::methods::FilterDsl::filter(upsert, expired)
        .returning(keys::claim)
        .get_results(c)
        .await?;
    if won.contains(&claim.token) {
        return Ok(ClaimOutcome::Claimed);
    }
    let held: Option<(String, Option<i32>, Option<String>)> = keys::table
        .find((claim.workspace_id.to_string(), &claim.key))
        .select((keys::fingerprint, keys::status, keys::body))
        .get_result(c)
        .await
        .optional()?;
    Ok(match held {
        // Completed and forgotten between the two statements: as good as in use; a retry claims it.
        None => ClaimOutcome::InUse,
        Some((fingerprint, _, _)) if fingerprint != claim.fingerprint => ClaimOutcome::Reused,
        Some((_, Some(status), Some(body))) => ClaimOutcome::Replay(StoredResponse {
            status: u16::try_from(status).unwrap_or(500),
            body,
        }),
        Some(_) => ClaimOutcome::InUse,
    })
}

/// Records the answer under a claim; part of the creation's transaction, which fails with
/// [`StorageError::ClaimLost`] when the claim is no longer held (taken over after
/// [`ABANDONED_CLAIM`]): the request that took the key over creates instead.
pub(crate) async fn complete_idempotency_key(
    c: &mut Conn,
    claim: &IdempotencyClaim,
    response: &StoredResponse,
) -> Result<(), StorageError> {
    let updated = diesel::update(keys::table.find((claim.workspace_id.to_string(), &claim.key)))
        .filter(keys::claim.eq(&claim.token))
        .set((
            keys::status.eq(Some(i32::from(response.status))),
            keys::body.eq(Some(&response.body)),
        ))
        .execute(c)
        .await?;
    if updated == 0 {
        tracing::warn!(key = %claim.key, "an idempotency key's claim was taken over before its creation completed");
        return Err(StorageError::ClaimLost);
    }
    Ok(())
}

/// Gives a claimed key back after its creation failed, so a retry can run.
pub(crate) async fn release_idempotency_key(
    c: &mut Conn,
    claim: &IdempotencyClaim,
) -> Result<(), StorageError> {
    diesel::delete(keys::table.find((claim.workspace_id.to_string(), &claim.key)))
        .filter(keys::claim.eq(&claim.token))
        .filter(keys::status.is_null())
        .execute(c)
        .await?;
    Ok(())
}

/// Deletes keys past their lifetime; returns how many.
pub(crate) async fn forget_idempotency_keys(
    c: &mut Conn,
    now: Timestamp,
) -> Result<usize, StorageError> {
    Ok(diesel::delete(
        keys::table.filter(keys::created_at.lt(millis_before(now, IDEMPOTENCY_KEY_LIFETIME))),
    )
    .execute(c)
    .await?)
}
