//! The values the storage API takes and returns (the DTOs), beside the domain's records. The
//! bottom of the crate: every other module may use these, and this one uses none of them.

use std::time::Duration;

use std::sync::Arc;

use shortlink_domain::{
    ApiKeyId, ClickInfo, Destination, Link, LinkId, LinkOptions, RedirectRules, Slug, Tag,
    Timestamp, Workspace, WorkspaceId,
};

/// How long journaled clicks wait for a fold by default (a server's `--click-fold-seconds`).
///
/// A fold costs a B-tree search and a row write per link it touches, however many clicks that
/// link had, so the longer clicks wait, the less a click costs: with clicks spread over a
/// million links, a fold every 5 s touched 0.85 of a counter per click, one every 60 s touches
/// about 0.2 at the same rate (docs/PERFORMANCE-ROUNDS.md, "A million links: clicks folded once
/// a minute"; `sqlite/click_journal.rs` has the how). The price is paid elsewhere: another
/// process reading the file sees counters up to this old, and a crash leaves this much journal
/// for the next start to fold (a few megabytes at most).
pub const CLICK_FOLD_INTERVAL: Duration = Duration::from_secs(60);

/// Which database a `Store` speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// How busy one connection pool is (metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUsage {
    /// `postgres`, or SQLite's `reader` and `writer`.
    pub pool: &'static str,
    /// Connections handed out now.
    pub in_use: usize,
    /// The most it opens.
    pub max: usize,
}

impl PoolUsage {
    pub(crate) fn of<M: deadpool::managed::Manager>(
        pool: &'static str,
        of: &deadpool::managed::Pool<M>,
    ) -> Self {
        let status = of.status();
        Self {
            pool,
            in_use: status.size.saturating_sub(status.available),
            max: status.max_size,
        }
    }
}

/// Pool sizing.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// PostgreSQL connections, or SQLite reader connections (SQLite always has one writer).
    pub max_connections: usize,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
        }
    }
}

/// Enough for about a million links with destinations of 60 characters: the redirect index's
/// default budget ([`ServerOptions::redirect_index_mib`]).
pub const DEFAULT_REDIRECT_INDEX_MIB: usize = 128;

/// How `Store::open` sets a store up.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreOptions {
    /// Pool sizing.
    pub pool: PoolOptions,
    /// Set the store up as its database's one server (see [`ServerOptions`]); `None` for any
    /// other user of the database (a command-line tool, a test), which counts clicks in place.
    pub server: Option<ServerOptions>,
}

/// What a SQLite file's one server keeps in memory, and for how long; nothing on PostgreSQL,
/// whose links and counters several servers share.
#[derive(Debug, Clone, Copy)]
pub struct ServerOptions {
    /// MiB of memory for every link's redirect target (0: none; `Store::resolve` then reads
    /// the database). Links that do not fit, at start or later, turn the index off with a warning.
    pub redirect_index_mib: usize,
    /// How often journaled clicks are folded into the file's counters: how old the counts
    /// another process reads from the file may be.
    pub click_fold_interval: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            redirect_index_mib: DEFAULT_REDIRECT_INDEX_MIB,
            click_fold_interval: CLICK_FOLD_INTERVAL,
        }
    }
}

/// A link to create. Without a slug, one is generated (and regenerated on collision).
#[derive(Debug, Clone)]
pub struct NewLink {
    /// Its id.
    pub id: LinkId,
    /// Its owner.
    pub workspace_id: WorkspaceId,
    /// Its domain (`host[:port]`).
    pub domain: String,
    /// The client's custom slug, if any.
    pub slug: Option<Slug>,
    /// Where it points.
    pub destination: Destination,
    /// When it was created.
    pub created_at: Timestamp,
    /// Its options (a password already hashed).
    pub options: LinkOptions,
}

/// What became of one link to create.
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "outcomes live as long as one creation request, at most a bulk's worth"
)]
pub enum CreateOutcome {
    /// Stored.
    Created(Link),
    /// The custom slug is taken on that domain (possibly earlier in the same batch).
    SlugConflict,
}

/// The key a request presented, and its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedKey {
    /// The key.
    pub key_id: ApiKeyId,
    /// Its workspace.
    pub workspace: Workspace,
}

/// Clicks to add to the counters, as gathered by the service's click flush.
#[derive(Debug, Clone, Default)]
pub struct ClickBatch {
    /// One entry per clicked link.
    pub links: Vec<LinkClicks>,
    /// Whether every click of the batch is written as an analytics event (analytics on); each
    /// link then carries the details of all its clicks.
    pub events: bool,
}

/// The key of a link's click counter: the link's row number in this database. A link's counter
/// is found through this key, not through the link's id, because the counters are written
/// often and their table is kept narrow (docs/PERFORMANCE-ROUNDS.md, "What the second round
/// changed, and why").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterKey(pub i64);

/// What a redirect needs of a link: where to send the client, and where its click is counted.
/// Narrower than [`Link`] on purpose: it is looked up on every redirect the cache misses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectTarget {
    /// The link's click counter, which also finds the link for its `link.clicked` events.
    pub counter: CounterKey,
    /// Its workspace, whose webhooks hear of the click.
    pub workspace_id: WorkspaceId,
    /// Where to send the client.
    pub destination: Destination,
    /// Expiry, password, targeting, …; `None` for a plain link, whose redirect needs nothing
    /// more (shared: a cache and the redirect index hand out clones).
    pub rules: Option<Arc<RedirectRules>>,
}

impl RedirectTarget {
    /// What the redirect needs of `link`, whose counter is `counter`.
    pub fn of(link: &Link, counter: CounterKey) -> Self {
        let rules = &link.options.rules;
        Self {
            counter,
            workspace_id: link.workspace_id,
            destination: link.destination.clone(),
            rules: (!rules.is_plain()).then(|| Arc::new(rules.clone())),
        }
    }
}

/// What became of a change of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkUpdate {
    /// Changed.
    Changed {
        /// As it was.
        before: Box<Link>,
        /// As it is now.
        after: Box<Link>,
        /// Its click counter.
        counter: CounterKey,
    },
    /// The new short code is taken on the link's domain.
    SlugConflict,
}

/// Which of a workspace's links a listing shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkFilter {
    /// Only links with this tag.
    pub tag: Option<Tag>,
    /// Only links whose code or destination contains this text (case-insensitively).
    pub search: Option<String>,
    /// Archived links too (left out otherwise).
    pub archived: bool,
}

/// The clicks one link received.
#[derive(Debug, Clone)]
pub struct LinkClicks {
    /// The link's click counter (from [`RedirectTarget::counter`]).
    pub counter: CounterKey,
    /// Its workspace (whose webhooks hear of the clicks).
    pub workspace_id: WorkspaceId,
    /// How many clicks to add.
    pub count: u64,
    /// Details of up to `count` of them: each becomes an analytics event when the batch
    /// [records events](ClickBatch::events), and a `link.clicked` event for subscribed endpoints.
    pub clicks: Vec<ClickEvent>,
}

/// One click as its analytics event and its `link.clicked` event know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickEvent {
    /// What is known of the click.
    pub click: ClickInfo,
    /// Its visitor: a daily keyed hash of client address and User-Agent.
    pub visitor: i64,
}

/// A change other instances' caches must follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The link with `code` on `domain` was created, changed or deleted.
    Link {
        /// Its domain.
        domain: String,
        /// Its code.
        code: String,
    },
    /// A key was revoked or a workspace's rate changed: whatever was cached of keys is stale.
    Keys,
}

impl Change {
    /// As one line of a notification: `link <domain> <code>` or `keys`.
    pub(crate) fn to_line(&self) -> String {
        match self {
            Change::Link { domain, code } => format!("link {domain} {code}"),
            Change::Keys => "keys".to_owned(),
        }
    }

    /// A line of a notification; `None` for one this build does not know.
    pub(crate) fn from_line(line: &str) -> Option<Self> {
        let mut parts = line.splitn(3, ' ');
        match (parts.next()?, parts.next(), parts.next()) {
            ("link", Some(domain), Some(code)) => Some(Change::Link {
                domain: domain.to_owned(),
                code: code.to_owned(),
            }),
            ("keys", None, None) => Some(Change::Keys),
            _ => None,
        }
    }
}

/// A UTC day in milliseconds: analytics rollups are by `occurred_at / DAY`.
pub(crate) const DAY: i64 = 86_400_000;

/// Which click events an analytics query reads: one workspace's (or one link's), in
/// `[start, end)`, matching every filter given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFilter {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// One of its links (by its counter), or all of them.
    pub link: Option<CounterKey>,
    /// First instant included.
    pub start: Timestamp,
    /// First instant excluded.
    pub end: Timestamp,
    /// Equality filters, combined with AND.
    pub country: Option<String>,
    /// See `country`.
    pub city: Option<String>,
    /// See `country`.
    pub device: Option<String>,
    /// See `country`.
    pub browser: Option<String>,
    /// See `country`.
    pub os: Option<String>,
    /// See `country`.
    pub referrer: Option<String>,
}

impl EventFilter {
    /// Every event of `workspace_id` (or of its `link`) in `[start, end)`, with no other filter.
    pub fn between(
        workspace_id: WorkspaceId,
        link: Option<CounterKey>,
        start: Timestamp,
        end: Timestamp,
    ) -> Self {
        Self {
            workspace_id,
            link,
            start,
            end,
            country: None,
            city: None,
            device: None,
            browser: None,
            os: None,
            referrer: None,
        }
    }

    /// The value the events must have in `dimension` (never one for `links`: `link` selects a
    /// link).
    pub fn value(&self, dimension: Dimension) -> Option<&str> {
        match dimension {
            Dimension::Country => self.country.as_deref(),
            Dimension::City => self.city.as_deref(),
            Dimension::Device => self.device.as_deref(),
            Dimension::Browser => self.browser.as_deref(),
            Dimension::Os => self.os.as_deref(),
            Dimension::Referrer => self.referrer.as_deref(),
            Dimension::Link => None,
        }
    }
}

/// What an analytics breakdown groups by. A new one joins [`Dimension::ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// ISO country code.
    Country,
    /// City name.
    City,
    /// Device kind.
    Device,
    /// Browser family.
    Browser,
    /// OS family.
    Os,
    /// Referrer host.
    Referrer,
    /// The link (its id).
    Link,
}

impl Dimension {
    /// Every dimension.
    pub const ALL: [Dimension; 7] = [
        Dimension::Country,
        Dimension::City,
        Dimension::Device,
        Dimension::Browser,
        Dimension::Os,
        Dimension::Referrer,
        Dimension::Link,
    ];
}

/// Clicks and unique visitors of one group (or of everything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally<K = Option<String>> {
    /// The group's value; `None` for unknown (or for a total). A time series' bucket number.
    pub key: K,
    /// Clicks.
    pub clicks: u64,
    /// Unique visitors (distinct daily visitor hashes).
    pub visitors: u64,
}

/// One click event as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedEvent {
    /// Where the next page starts: (time, id).
    pub position: (i64, i64),
    /// When.
    pub timestamp: Timestamp,
    /// The link's id (a deleted link's events leave the export with it).
    pub link_id: String,
    /// Its short code.
    pub short_code: String,
    /// The event's fields.
    pub country: Option<String>,
    /// See `country`.
    pub city: Option<String>,
    /// See `country`.
    pub device: String,
    /// See `country`.
    pub browser: Option<String>,
    /// See `country`.
    pub os: Option<String>,
    /// See `country`.
    pub referrer: String,
    /// See `country`.
    pub referrer_url: Option<String>,
}
