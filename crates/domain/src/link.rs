//! A short link, and the one JSON shape every response and event shows it in.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{BaseUrl, Destination, LinkId, LinkOptions, Slug, Timestamp, WorkspaceId};

/// How a client names a link in a path: by id (`link_<ulid>`) or by short code. Custom slugs
/// can never have the shape of a link id, so the two cannot be confused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkRef {
    /// By identifier.
    Id(LinkId),
    /// By short code (on the service's domain).
    Code(String),
}

impl LinkRef {
    /// Reads a path segment; `None` when it can name no link (neither an id nor shaped as a
    /// code), which is then not found without asking the database.
    pub fn parse(s: &str) -> Option<Self> {
        match LinkId::parse(s) {
            Ok(id) => Some(LinkRef::Id(id)),
            Err(_) => Slug::could_be(s).then(|| LinkRef::Code(s.to_owned())),
        }
    }
}

/// A short link as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its identifier.
    pub id: LinkId,
    /// The workspace that owns it; no other workspace can see it.
    pub workspace_id: WorkspaceId,
    /// `host[:port]` of the short URL; slugs are unique per domain.
    pub domain: String,
    /// The slug.
    pub short_code: Slug,
    /// Where the redirect goes.
    pub destination: Destination,
    /// Counted redirects.
    pub clicks: i64,
    /// When it was created.
    pub created_at: Timestamp,
    /// Expiry, password, targeting, tags, … (all unset for a plain link).
    pub options: LinkOptions,
}

impl Link {
    /// The link as clients see it.
    pub fn view(&self, base: &BaseUrl) -> LinkView {
        LinkView {
            id: self.id,
            short_url: base.short_url_on(&self.domain, self.short_code.as_str()),
            domain: self.domain.clone(),
            short_code: self.short_code.to_string(),
            destination: self.destination.to_string(),
            clicks: self.clicks,
            created_at: self.created_at,
            options: OptionsView::of(&self.options),
        }
    }
}

/// The Link resource of the API: a superset of every shape the API document shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LinkView {
    /// `link_<ulid>`.
    pub id: LinkId,
    /// `host[:port]` of the short URL.
    #[cfg_attr(feature = "openapi", schema(example = "sho.rt"))]
    pub domain: String,
    /// The slug.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "x7Kp2Qa", pattern = "^[A-Za-z0-9_-]{1,64}$")
    )]
    pub short_code: String,
    /// `<base-url>/<shortCode>`.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uri", example = "https://sho.rt/x7Kp2Qa")
    )]
    pub short_url: String,
    /// Where the redirect goes.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uri", example = "https://example.com/page?a=1")
    )]
    pub destination: String,
    /// Counted redirects.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub clicks: i64,
    /// RFC 3339 UTC with milliseconds.
    pub created_at: Timestamp,
    /// The link's options.
    #[serde(flatten)]
    pub options: OptionsView,
}

/// A link's options as the API shows them: null (or the default) when unset; the password never,
/// only whether there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OptionsView {
    /// From then on the link is expired.
    pub expires_at: Option<Timestamp>,
    /// After this many counted clicks the link is expired.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub max_clicks: Option<i64>,
    /// Where an expired link redirects (302); null: it answers 410.
    #[cfg_attr(feature = "openapi", schema(format = "uri"))]
    pub expired_url: Option<String>,
    /// Whether visitors must give a password first.
    pub password_protected: bool,
    /// 301, 302, 307 or 308.
    #[cfg_attr(feature = "openapi", schema(example = 302))]
    pub redirect_type: u16,
    /// Where visitors on iOS go.
    #[cfg_attr(feature = "openapi", schema(format = "uri"))]
    pub ios: Option<String>,
    /// Where visitors on Android go.
    #[cfg_attr(feature = "openapi", schema(format = "uri"))]
    pub android: Option<String>,
    /// Destinations by visitor country (ISO 3166-1 alpha-2).
    pub geo: Option<BTreeMap<String, String>>,
    /// Labels to find the link by.
    pub tags: Vec<String>,
    /// Hidden from `GET /links` unless `archived=true`; still redirects.
    pub archived: bool,
    /// Link preview title.
    pub title: Option<String>,
    /// Link preview description.
    pub description: Option<String>,
    /// Link preview image.
    #[cfg_attr(feature = "openapi", schema(format = "uri"))]
    pub image: Option<String>,
}

/// A plain link's options.
impl Default for OptionsView {
    fn default() -> Self {
        Self::of(&LinkOptions::default())
    }
}

impl OptionsView {
    fn of(options: &LinkOptions) -> Self {
        let rules = &options.rules;
        let text = |d: &Option<Destination>| d.as_ref().map(Destination::to_string);
        Self {
            expires_at: rules.expires_at,
            max_clicks: rules.max_clicks.map(crate::MaxClicks::get),
            expired_url: text(&rules.expired_url),
            password_protected: rules.password.is_some(),
            redirect_type: rules.redirect_type.status(),
            ios: text(&rules.ios),
            android: text(&rules.android),
            geo: (!rules.geo.is_empty()).then(|| {
                (rules.geo.iter())
                    .map(|(country, to)| (country.as_str().to_owned(), to.to_string()))
                    .collect()
            }),
            tags: options.tags.iter().map(|t| t.as_str().to_owned()).collect(),
            archived: options.archived,
            title: rules.preview.title.clone(),
            description: rules.preview.description.clone(),
            image: text(&rules.preview.image),
        }
    }
}
