//! A short link, and the one JSON shape every response and event shows it in.

use serde::Serialize;

use crate::{BaseUrl, Destination, LinkId, Slug, Timestamp, WorkspaceId};

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
    /// Reads a path segment.
    pub fn parse(s: &str) -> Self {
        match LinkId::parse(s) {
            Ok(id) => LinkRef::Id(id),
            Err(_) => LinkRef::Code(s.to_owned()),
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
}
