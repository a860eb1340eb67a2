//! Links: creation (single and bulk share one path), lookup, listing, change, deletion.

use std::collections::{HashMap, HashSet};

use diesel::dsl::AsSelect;
use diesel::expression::BoxableExpression;
use diesel::prelude::*;
use diesel::sql_types::Bool;
use diesel_async::RunQueryDsl;
use shortlink_domain::{
    BaseUrl, Event, EventKind, Link, LinkId, LinkPatch, LinkRef, Slug, Timestamp, WorkspaceId,
};

use super::complete_idempotency_key;
use super::{
    Backend, Conn, Creation, announce, begin_creation, insert_new_links, lock_link,
    mark_link_days_stale, outbox, write_transaction,
};
use crate::StorageError;
use crate::hooks::{Hooks, Lookup, reading};
use crate::idempotency::PlacedCompletion;
use crate::model::{Change, CounterKey, CreateOutcome, LinkFilter, LinkUpdate, NewLink};
use crate::rows::{LinkRow, NewLinkRow, RedirectRow, with_clicks};
use crate::schema::{link_codes, link_codes_folded, link_tags, links};
use crate::stored_options::{rules_column, tags_column};

/// Generated slugs collide with probability ~n/62^7; after this many fresh draws for one link
/// something else is wrong.
const GENERATED_SLUG_ATTEMPTS: usize = 8;

/// Inserts every link that can be inserted, in one transaction with one multi-row insert (plus
/// one more per round of generated-slug collisions), and writes their `link.created` events to
/// the outbox in the same transaction (built only for workspaces with a subscriber: this runs
/// while the single SQLite writer is held). Outcomes are in input order, each created link's
/// with its counter key.
pub(crate) async fn create_links(
    c: &mut Conn,
    new: Vec<NewLink>,
    base: &BaseUrl,
    completions: &[PlacedCompletion],
    creation: &Creation<'_>,
) -> Result<Vec<(CreateOutcome, Option<CounterKey>)>, StorageError> {
    write_transaction(c, async |c| -> Result<_, StorageError> {
        begin_creation(c, creation).await?;
        let subs = outbox::subscriptions(c, new.iter().map(|l| l.workspace_id)).await?;
        let (mut outcomes, pending) = with_codes(new);
        insert_drawing_codes(c, pending, &mut outcomes, creation).await?;
        let outcomes: Vec<_> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or((CreateOutcome::SlugConflict, None)))
            .collect();
        let created: Vec<(&Link, CounterKey)> = outcomes
            .iter()
            .filter_map(|(outcome, counter)| match (outcome, counter) {
                (CreateOutcome::Created(link), Some(counter)) => Some((link, *counter)),
                _ => None,
            })
            .collect();
        let events: Vec<_> = created
            .iter()
            .filter(|(link, _)| subs.wants(link.workspace_id, EventKind::LinkCreated))
            .map(|(link, _)| (link.workspace_id, Event::link_created(link.view(base))))
            .collect();
        outbox::write(c, &subs, &events).await?;
        let tags = created
            .iter()
            .flat_map(|(link, counter)| tag_rows(*counter, link))
            .collect();
        write_tags(c, tags).await?;
        // Another instance may have cached a new code as unknown.
        let codes: Vec<Change> = created.iter().map(|(link, _)| link_change(link)).collect();
        announce(c, &codes).await?;
        for placed in completions {
            let own: Vec<CreateOutcome> = outcomes[placed.links.clone()]
                .iter()
                .map(|(outcome, _)| outcome.clone())
                .collect();
            let response = (placed.completion.render)(&own);
            complete_idempotency_key(c, &placed.completion.claim, &response).await?;
        }
        Ok(outcomes)
    })
    .await
}

/// A link waiting to be inserted: its place in the input, and whether its code was the
/// client's (a conflict is then the client's answer, not a reason to draw another).
struct Pending {
    index: usize,
    link: Link,
    custom: bool,
}

/// Outcomes by input place, to be filled in.
type Outcomes = Vec<Option<(CreateOutcome, Option<CounterKey>)>>;

/// The links to insert, each with its code (the client's, or one drawn); a custom code asked
/// for twice in one batch conflicts at its second place, before anything is inserted.
fn with_codes(new: Vec<NewLink>) -> (Outcomes, Vec<Pending>) {
    let mut outcomes = vec![None; new.len()];
    let mut seen_custom = HashSet::new();
    let mut pending = Vec::with_capacity(new.len());
    for (index, link) in new.into_iter().enumerate() {
        let custom = link.slug.is_some();
        if let Some(slug) = &link.slug
            && !seen_custom.insert(slug.clone())
        {
            outcomes[index] = Some((CreateOutcome::SlugConflict, None));
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
            options: link.options,
        };
        pending.push(Pending {
            index,
            link,
            custom,
        });
    }
    (outcomes, pending)
}

/// Inserts `pending`, drawing a fresh code for each generated one that collided and inserting
/// those again, up to [`GENERATED_SLUG_ATTEMPTS`] rounds; fills in each link's outcome.
async fn insert_drawing_codes(
    c: &mut Conn,
    mut pending: Vec<Pending>,
    outcomes: &mut Outcomes,
    creation: &Creation<'_>,
) -> Result<(), StorageError> {
    for _ in 0..GENERATED_SLUG_ATTEMPTS {
        if pending.is_empty() {
            return Ok(());
        }
        let rows = pending
            .iter()
            .map(|p| NewLinkRow::from_domain(&p.link))
            .collect();
        let inserted: HashMap<String, i64> = insert_new_links(c, rows, creation)
            .await?
            .into_iter()
            .collect();
        let mut retry = Vec::new();
        for mut p in pending {
            if let Some(&seq) = inserted.get(&p.link.id.to_string()) {
                outcomes[p.index] = Some((CreateOutcome::Created(p.link), Some(CounterKey(seq))));
            } else if p.custom {
                outcomes[p.index] = Some((CreateOutcome::SlugConflict, None));
            } else {
                p.link.short_code = Slug::generate();
                retry.push(p);
            }
        }
        pending = retry;
    }
    if pending.is_empty() {
        Ok(())
    } else {
        Err(StorageError::Corrupt("no free generated short code"))
    }
}

/// The workspace's link `link` refers to, with its counter; `recent` is the row number of the
/// link with the code `link` names, when [`recent_seq`] found it.
fn by_ref<'a>(
    workspace: WorkspaceId,
    link: &'a LinkRef,
    domain: &'a str,
    recent: Option<i64>,
) -> diesel::dsl::IntoBoxed<'a, diesel::dsl::Select<with_clicks, AsSelect<LinkRow, Backend>>, Backend>
{
    let query = with_clicks()
        .select(LinkRow::as_select())
        .filter(links::workspace_id.eq(workspace.to_string()))
        .into_boxed();
    match link {
        LinkRef::Id(id) => query.filter(links::id.eq(id.to_string())),
        LinkRef::Code(code) => query.filter(has_code(domain, code.as_str(), recent)),
    }
}

/// The row number of the link with `code` on `domain` in the code index.
#[diesel::dsl::auto_type]
fn indexed<'a>(domain: &'a str, code: &'a str) -> _ {
    link_codes::table
        .filter(link_codes::domain.eq(domain))
        .filter(link_codes::short_code.eq(code))
        .select(link_codes::link_seq)
        .single_value()
}

/// Finds the link with `code` on `domain`: by its row number when it is a recent link
/// (`recent`), else through the code index. A comparison of the row number, either way, so that
/// SQLite looks the link up by it rather than reading the workspace's links.
fn has_code<'a, QS>(
    domain: &'a str,
    code: &'a str,
    recent: Option<i64>,
) -> Box<dyn BoxableExpression<QS, Backend, SqlType = Bool> + 'a>
where
    diesel::dsl::Eq<links::seq, i64>: BoxableExpression<QS, Backend, SqlType = Bool> + 'a,
    diesel::dsl::AssumeNotNull<diesel::dsl::Eq<diesel::dsl::Nullable<links::seq>, indexed<'a>>>:
        BoxableExpression<QS, Backend, SqlType = Bool> + 'a,
{
    match recent {
        Some(seq) => Box::new(links::seq.eq(seq)),
        None => Box::new(
            links::seq
                .nullable()
                .eq(indexed(domain, code))
                .assume_not_null(),
        ),
    }
}

/// Recent links (past the fold mark, `sqlite/recent_codes.rs`) with `code` on `domain`: SQLite
/// reads the rows of `links` past the fold mark (about 20,000 at most: creations fold once that
/// many wait).
#[diesel::dsl::auto_type]
pub(crate) fn unfolded<'a>(domain: &'a str, code: &'a str) -> _ {
    let mark: link_codes_folded::through_seq = link_codes_folded::through_seq;
    links::table
        .filter(
            links::seq.gt(link_codes_folded::table
                .select(mark)
                .single_value()
                .assume_not_null()),
        )
        .filter(links::domain.eq(domain))
        .filter(links::short_code.eq(code))
        .select(links::seq)
}

/// The row number of the recent link with `code` on `domain`, as far as the backend's memory
/// tells or, when it may not know every recent link, as the recent rows of `links` tell. `None`
/// when the code index has it (always, on PostgreSQL).
async fn recent_seq(
    c: &mut Conn,
    domain: &str,
    code: &str,
    hooks: &impl Hooks,
) -> QueryResult<Option<i64>> {
    match hooks.lookup(domain, code) {
        Lookup::Recent(seq) => Ok(Some(seq)),
        Lookup::Indexed => Ok(None),
        Lookup::SearchRecent => unfolded(domain, code).get_result(c).await.optional(),
    }
}

/// Reads of links on a reader connection (`get_link`, `list_links`) hold the clicks gate from
/// before their query until their clicks are summed ([`Hooks::clicks_gate`]); changes run on the
/// writer connection, which a fold holds, and need no gate.
pub(crate) async fn get_link(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    hooks: &impl Hooks,
) -> Result<Option<Link>, StorageError> {
    let _gate = reading(hooks).await;
    find(c, workspace, link, domain, hooks)
        .await?
        .map(|row| row.into_domain(hooks))
        .transpose()
}

/// The click counter (and so the events) of the workspace's link `link` refers to.
pub(crate) async fn link_counter(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    hooks: &impl Hooks,
) -> Result<Option<CounterKey>, StorageError> {
    Ok(find(c, workspace, link, domain, hooks)
        .await?
        .map(|row| CounterKey(row.seq)))
}

/// The workspace's link `link` refers to, as a row (a change reads it in its own transaction).
async fn find(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    hooks: &impl Hooks,
) -> Result<Option<LinkRow>, StorageError> {
    let recent = match link {
        LinkRef::Code(code) => recent_seq(c, domain, code.as_str(), hooks).await?,
        LinkRef::Id(_) => None,
    };
    Ok(by_ref(workspace, link, domain, recent)
        .get_result(c)
        .await
        .optional()?)
}

/// The link with `code` on `domain`, whoever owns it (`recent` as for [`by_ref`]): the one query
/// behind the redirect's lookup on either backend.
pub(crate) fn by_code<'a>(
    domain: &'a str,
    code: &'a str,
    recent: Option<i64>,
) -> diesel::dsl::IntoBoxed<
    'a,
    diesel::dsl::Select<links::table, AsSelect<RedirectRow, Backend>>,
    Backend,
> {
    links::table
        .select(RedirectRow::as_select())
        .filter(has_code(domain, code, recent))
        .into_boxed()
}

diesel::define_sql_function!(fn lower(x: diesel::sql_types::Text) -> diesel::sql_types::Text);

/// `%text%` for LIKE, matching `text` literally (`\` escapes the wildcards), lower-cased.
fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Newest first; `before` is the id of the last link of the previous page. Archived links only
/// when the filter asks for them.
pub(crate) async fn list_links(
    c: &mut Conn,
    workspace: WorkspaceId,
    limit: i64,
    before: Option<LinkId>,
    filter: &LinkFilter,
    hooks: &impl Hooks,
) -> Result<Vec<Link>, StorageError> {
    let _gate = reading(hooks).await;
    let mut query = with_clicks()
        .filter(links::workspace_id.eq(workspace.to_string()))
        .select(LinkRow::as_select())
        .order(links::id.desc())
        .limit(limit)
        .into_boxed();
    if let Some(before) = before {
        query = query.filter(links::id.lt(before.to_string()));
    }
    if !filter.archived {
        query = query.filter(links::archived.eq(false));
    }
    if let Some(tag) = &filter.tag {
        let tagged = link_tags::table
            .filter(link_tags::tag.eq(tag.as_str().to_owned()))
            .select(link_tags::link_seq);
        query = query.filter(links::seq.eq_any(tagged));
    }
    if let Some(search) = &filter.search {
        let pattern = contains_pattern(search);
        query = query.filter(
            lower(links::short_code)
                .like(pattern.clone())
                .escape('\\')
                .or(lower(links::destination).like(pattern).escape('\\')),
        );
    }
    query
        .load(c)
        .await?
        .into_iter()
        .map(|row| row.into_domain(hooks))
        .collect()
}

/// Changes a link as `patch` says, with its `link.updated` event; `None` when it is not the
/// workspace's. A new short code must be free on the link's domain; the old one is free at once.
#[expect(
    clippy::too_many_arguments,
    reason = "one change, its context and the backend's hooks"
)]
pub(crate) async fn update_link(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    patch: &LinkPatch,
    base: &BaseUrl,
    now: Timestamp,
    hooks: &impl Hooks,
) -> Result<Option<LinkUpdate>, StorageError> {
    let changed = write_transaction(c, async |c| -> Result<Option<LinkUpdate>, StorageError> {
        let Some(found) = find(c, workspace, link, domain, hooks).await? else {
            return Ok(None);
        };
        let Some(row) = lock_link(c, found).await? else {
            return Ok(None);
        };
        let seq = row.seq;
        let before = row.into_domain(hooks)?;
        let mut after = before.clone();
        patch.apply(&mut after);
        let changed = |before, after| {
            Ok(Some(LinkUpdate::Changed {
                before: Box::new(before),
                after: Box::new(after),
                counter: CounterKey(seq),
            }))
        };
        if after == before {
            // Nothing to write, and no event: the link is as it was.
            return changed(before, after);
        }
        let new_code = (after.short_code != before.short_code).then_some(&after.short_code);
        if let Some(code) = new_code {
            let code = code.as_str();
            let recent = recent_seq(c, &after.domain, code, hooks).await?;
            let taken = by_code(&after.domain, code, recent)
                .get_result::<RedirectRow>(c)
                .await
                .optional()?;
            if taken.is_some() {
                return Ok(Some(LinkUpdate::SlugConflict));
            }
        }
        let options = &after.options;
        let updated = diesel::update(links::table.find(seq))
            .set((
                links::destination.eq(after.destination.as_str()),
                links::rules.eq(rules_column(&options.rules)),
                links::tags.eq(tags_column(&options.tags)),
                links::archived.eq(options.archived),
                links::updated_at.eq(now.unix_millis()),
            ))
            .execute(c)
            .await?;
        // Zero when a concurrent deletion came first (PostgreSQL): the link is gone.
        if updated == 0 {
            return Ok(None);
        }
        if let Some(code) = new_code {
            diesel::update(links::table.find(seq))
                .set(links::short_code.eq(code.as_str()))
                .execute(c)
                .await
                .map_err(slug_taken)?;
        }
        if options.tags != before.options.tags {
            diesel::delete(link_tags::table.filter(link_tags::link_seq.eq(seq)))
                .execute(c)
                .await?;
            write_tags(c, tag_rows(CounterKey(seq), &after).collect()).await?;
        }
        let subs = outbox::subscriptions(c, [workspace]).await?;
        if subs.wants(workspace, EventKind::LinkUpdated) {
            let event = Event::link_updated(after.view(base), now);
            outbox::write(c, &subs, &[(workspace, event)]).await?;
        }
        let mut changes = vec![link_change(&before)];
        if new_code.is_some() {
            changes.push(link_change(&after));
        }
        announce(c, &changes).await?;
        changed(before, after)
    })
    .await;
    match changed {
        Err(StorageError::AlreadyExists("short code")) => Ok(Some(LinkUpdate::SlugConflict)),
        other => other,
    }
}

/// A unique violation while giving a link a new code: another link took it concurrently
/// (PostgreSQL's constraint; SQLite's writer is single and the check above is exact).
fn slug_taken(e: diesel::result::Error) -> StorageError {
    match e {
        diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _,
        ) => StorageError::AlreadyExists("short code"),
        e => e.into(),
    }
}

/// What other instances' caches must forget of `link`.
fn link_change(link: &Link) -> Change {
    Change::Link {
        domain: link.domain.clone(),
        code: link.short_code.to_string(),
    }
}

/// The `link_tags` rows of a link.
fn tag_rows(counter: CounterKey, link: &Link) -> impl Iterator<Item = (i64, String)> + '_ {
    (link.options.tags.iter()).map(move |tag| (counter.0, tag.as_str().to_owned()))
}

/// Indexes the tags of links just written, for `GET /links?tag=`: a statement per row (at most
/// ten a link), as SQLite's batch insert is not available here.
async fn write_tags(c: &mut Conn, rows: Vec<(i64, String)>) -> Result<(), StorageError> {
    for (seq, tag) in rows {
        diesel::insert_into(link_tags::table)
            .values((link_tags::link_seq.eq(seq), link_tags::tag.eq(tag)))
            .execute(c)
            .await?;
    }
    Ok(())
}

/// Deletes the link; its counter goes with it (`ON DELETE CASCADE`), and its entry in the code
/// index (SQLite: a trigger; PostgreSQL: a view of `links`).
pub(crate) async fn delete_link(
    c: &mut Conn,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    base: &BaseUrl,
    hooks: &impl Hooks,
) -> Result<Option<Link>, StorageError> {
    write_transaction(c, async |c| -> Result<Option<Link>, StorageError> {
        let Some(row) = find(c, workspace, link, domain, hooks).await? else {
            return Ok(None);
        };
        let deleted = diesel::delete(links::table.find(row.seq))
            .execute(c)
            .await?;
        // Zero when a concurrent deletion came first (PostgreSQL): that one answers for it.
        if deleted == 0 {
            return Ok(None);
        }
        // Its events leave the workspace's analytics: the days it was clicked are rolled up
        // again without them.
        mark_link_days_stale(c, row.seq).await?;
        let link = row.into_domain(hooks)?;
        announce(c, &[link_change(&link)]).await?;
        let subs = outbox::subscriptions(c, [workspace]).await?;
        if subs.wants(workspace, EventKind::LinkDeleted) {
            let event = Event::link_deleted(link.view(base), Timestamp::now());
            outbox::write(c, &subs, &[(workspace, event)]).await?;
        }
        Ok(Some(link))
    })
    .await
}
