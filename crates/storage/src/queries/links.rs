//! Links: creation (single and bulk share one path), lookup, listing, change, deletion.

use std::collections::{HashMap, HashSet};

use diesel::dsl::AsSelect;
use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use shortlink_domain::{BaseUrl, Destination, Event, Link, LinkId, LinkRef, Slug, WorkspaceId};

use super::{Backend, Conn, insert_new_links, outbox};
use crate::click_journal::{ClickJournal, reading};
use crate::rows::{LinkRow, NewLinkRow, RedirectRow, found, with_clicks};
use crate::schema::links;
use crate::{CounterKey, CreateOutcome, NewLink, RedirectTarget, StorageError};

/// Generated slugs collide with probability ~n/62^7; after this many fresh draws for one link
/// something else is wrong.
const GENERATED_SLUG_ATTEMPTS: usize = 8;

/// Inserts every link that can be inserted, in one transaction with one multi-row insert (plus
/// one more per round of generated-slug collisions), and writes their `link.created` events to
/// the outbox in the same transaction. Outcomes are in input order, each created link's with its
/// counter key.
pub(crate) async fn create_links(
    c: &mut Conn,
    new: Vec<NewLink>,
    base: &BaseUrl,
) -> Result<Vec<(CreateOutcome, Option<CounterKey>)>, StorageError> {
    c.transaction(async |c| -> Result<_, StorageError> {
        let mut outcomes: Vec<Option<(CreateOutcome, Option<CounterKey>)>> = vec![None; new.len()];
        let mut seen_custom = HashSet::new();
        // (input index, link, whether the slug was chosen by the client)
        let mut pending: Vec<(usize, Link, bool)> = Vec::with_capacity(new.len());
        for (i, link) in new.into_iter().enumerate() {
            let custom = link.slug.is_some();
            if let Some(slug) = &link.slug
                && !seen_custom.insert(slug.clone())
            {
                outcomes[i] = Some((CreateOutcome::SlugConflict, None));
                continue;
            }
            let link = Link {
                id: link.id,
                workspace_id: link.workspace_id,
                domain: link.domain,
                short_code: link.slug.unwrap_or_else(Slug::generate),
                destination: link.destination,
                clicks: 0,
                created_at: link.created_at,
            };
            pending.push((i, link, custom));
        }

        let mut created = Vec::new();
        for _ in 0..GENERATED_SLUG_ATTEMPTS {
            if pending.is_empty() {
                break;
            }
            let rows = pending
                .iter()
                .map(|(_, link, _)| NewLinkRow::from_domain(link))
                .collect();
            let inserted: HashMap<String, i64> =
                insert_new_links(c, rows).await?.into_iter().collect();
            let mut retry = Vec::new();
            for (i, mut link, custom) in pending {
                if let Some(&seq) = inserted.get(&link.id.to_string()) {
                    created.push((link.workspace_id, Event::link_created(link.view(base))));
                    outcomes[i] = Some((CreateOutcome::Created(link), Some(CounterKey(seq))));
                } else if custom {
                    outcomes[i] = Some((CreateOutcome::SlugConflict, None));
                } else {
                    link.short_code = Slug::generate();
                    retry.push((i, link, custom));
                }
            }
            pending = retry;
        }
        if !pending.is_empty() {
            return Err(StorageError::Corrupt("no free generated short code"));
        }
        outbox::enqueue(c, &created).await?;
        Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or((CreateOutcome::SlugConflict, None)))
            .collect())
    })
    .await
}

/// The workspace's link `link` refers to, with its counter.
fn by_ref<'a>(
    workspace: WorkspaceId,
    link: &'a LinkRef,
    domain: &'a str,
) -> diesel::dsl::IntoBoxed<'a, diesel::dsl::Select<with_clicks, AsSelect<LinkRow, Backend>>, Backend>
{
    let query = with_clicks()
        .select(LinkRow::as_select())
        .filter(links::workspace_id.eq(workspace.to_string()))
        .into_boxed();
    match link {
        LinkRef::Id(id) => query.filter(links::id.eq(id.to_string())),
        LinkRef::Code(code) => query
            .filter(links::domain.eq(domain))
            .filter(links::short_code.eq(code.as_str())),
    }
}

/// Reads of links on a reader connection (`get_link`, `list_links`) hold the click journal's
/// gate from before their query until their clicks are summed (see `crate::click_journal`);
/// changes run on the writer connection, which a fold holds, and need no gate.
pub(crate) async fn get_link(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    journal: Option<&ClickJournal>,
) -> Result<Option<Link>, StorageError> {
    let _gate = reading(journal).await;
    find(c, workspace, link, domain)
        .await?
        .map(|row| row.into_domain(journal))
        .transpose()
}

/// The workspace's link `link` refers to, as a row (a change reads it in its own transaction).
async fn find(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
) -> Result<Option<LinkRow>, StorageError> {
    Ok(by_ref(workspace, link, domain)
        .get_result(c)
        .await
        .optional()?)
}

/// The redirect's lookup: by domain and code, across workspaces.
pub(crate) async fn resolve(
    c: &mut Conn,
    domain: &str,
    code: &str,
) -> Result<Option<RedirectTarget>, StorageError> {
    found(
        by_code(domain, code).get_result(c).await,
        RedirectRow::into_target,
    )
}

/// The link with `code` on `domain`, whoever owns it: the one query behind [`resolve`] and
/// SQLite's synchronous redirect lookup.
#[diesel::dsl::auto_type]
pub(crate) fn by_code<'a>(domain: &'a str, code: &'a str) -> _ {
    let as_select: AsSelect<RedirectRow, Backend> = RedirectRow::as_select();
    links::table
        .filter(links::domain.eq(domain))
        .filter(links::short_code.eq(code))
        .select(as_select)
}

/// Newest first; `before` is the id of the last link of the previous page.
pub(crate) async fn list_links(
    c: &mut Conn,
    workspace: WorkspaceId,
    limit: i64,
    before: Option<LinkId>,
    journal: Option<&ClickJournal>,
) -> Result<Vec<Link>, StorageError> {
    let _gate = reading(journal).await;
    let mut query = with_clicks()
        .filter(links::workspace_id.eq(workspace.to_string()))
        .select(LinkRow::as_select())
        .order(links::id.desc())
        .limit(limit)
        .into_boxed();
    if let Some(before) = before {
        query = query.filter(links::id.lt(before.to_string()));
    }
    query
        .load(c)
        .await?
        .into_iter()
        .map(|row| row.into_domain(journal))
        .collect()
}

pub(crate) async fn update_destination(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    destination: &Destination,
    now: i64,
    journal: Option<&ClickJournal>,
) -> Result<Option<Link>, StorageError> {
    c.transaction(async |c| -> Result<Option<Link>, StorageError> {
        let Some(mut row) = find(c, workspace, link, domain).await? else {
            return Ok(None);
        };
        let updated = diesel::update(links::table.find(row.seq))
            .set((
                links::destination.eq(destination.as_str()),
                links::updated_at.eq(now),
            ))
            .execute(c)
            .await?;
        // Zero when a concurrent deletion came first (PostgreSQL): the link is gone.
        if updated == 0 {
            return Ok(None);
        }
        row.destination = destination.to_string();
        row.into_domain(journal).map(Some)
    })
    .await
}

/// Deletes the link; its counter goes with it (`ON DELETE CASCADE`).
pub(crate) async fn delete_link(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    journal: Option<&ClickJournal>,
) -> Result<Option<Link>, StorageError> {
    c.transaction(async |c| -> Result<Option<Link>, StorageError> {
        let Some(row) = find(c, workspace, link, domain).await? else {
            return Ok(None);
        };
        let deleted = diesel::delete(links::table.find(row.seq))
            .execute(c)
            .await?;
        // Zero when a concurrent deletion came first (PostgreSQL): that one answers for it.
        if deleted == 0 {
            return Ok(None);
        }
        row.into_domain(journal).map(Some)
    })
    .await
}
