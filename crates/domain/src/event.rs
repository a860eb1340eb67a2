//! Webhook events: their kinds and the JSON body a receiver gets.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;

use crate::{LinkView, Timestamp};

/// The kinds of event a webhook can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A link was created (single or bulk).
    LinkCreated,
    /// A redirect was counted as a click.
    LinkClicked,
    /// A link was changed (PATCH).
    LinkUpdated,
    /// A link was deleted.
    LinkDeleted,
}

impl EventKind {
    /// Every kind's name, comma-separated, for messages that list them.
    pub fn names() -> String {
        EventKind::ALL.map(EventKind::as_str).join(", ")
    }

    /// Every kind, in the order the docs list them.
    pub const ALL: [EventKind; 4] = [
        EventKind::LinkCreated,
        EventKind::LinkClicked,
        EventKind::LinkUpdated,
        EventKind::LinkDeleted,
    ];

    /// The wire name, e.g. `link.created`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::LinkCreated => "link.created",
            EventKind::LinkClicked => "link.clicked",
            EventKind::LinkUpdated => "link.updated",
            EventKind::LinkDeleted => "link.deleted",
        }
    }
}

/// A string that names no event kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event '{0}'; known events are {known}", known = EventKind::names())]
pub struct UnknownEventKind(pub String);

impl FromStr for EventKind {
    type Err = UnknownEventKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownEventKind(s.to_owned()))
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for EventKind {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(EventKind::ALL.map(EventKind::as_str)))
            .description(Some("An event kind."))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for EventKind {}

impl Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What is known of one click, as sent in `link.clicked` and kept as its analytics event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClickInfo {
    /// When the redirect was answered.
    pub timestamp: Timestamp,
    /// The visitor's country (ISO 3166-1 alpha-2), from the GeoIP database; null without one
    /// or without an answer.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[A-Z]{2}$", example = "GB"))]
    pub country: Option<String>,
    /// The visitor's city (English name), likewise.
    #[cfg_attr(feature = "openapi", schema(example = "London"))]
    pub city: Option<String>,
    /// `desktop`, `mobile`, `tablet` or `other`.
    #[cfg_attr(feature = "openapi", schema(example = "desktop"))]
    pub device: String,
    /// The browser family (`Chrome`, `Firefox`, `Safari`, `Edge`, …); null when unknown.
    #[cfg_attr(feature = "openapi", schema(example = "Chrome"))]
    pub browser: Option<String>,
    /// The OS family (`Windows`, `macOS`, `iOS`, `Android`, `Linux`, …); null when unknown.
    #[cfg_attr(feature = "openapi", schema(example = "Windows"))]
    pub os: Option<String>,
    /// The `Referer`'s host, or `(direct)`.
    #[cfg_attr(feature = "openapi", schema(example = "news.example"))]
    pub referrer: String,
    /// The whole `Referer` (at most 2,048 characters), if any.
    pub referrer_url: Option<String>,
    /// The `User-Agent` header, if any (sent to webhooks; not stored with the event).
    // Shared with the `Visit` it comes from, not copied.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub user_agent: Option<Arc<str>>,
}

impl ClickInfo {
    /// A click at `timestamp` of which nothing else is known.
    pub fn bare(timestamp: Timestamp) -> Self {
        Self {
            timestamp,
            country: None,
            city: None,
            device: "other".into(),
            browser: None,
            os: None,
            referrer: "(direct)".into(),
            referrer_url: None,
            user_agent: None,
        }
    }
}

/// What the redirect saw of one click, recorded as it happens; what it says of the visitor
/// (country, browser, …) is worked out later, off the request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visit {
    /// When the redirect was answered.
    pub timestamp: Timestamp,
    /// The client address (behind trusted proxies), if known.
    pub address: Option<std::net::IpAddr>,
    /// The `Referer` header, if any.
    pub referrer: Option<String>,
    /// The `User-Agent` header, if any. Shared, not copied: traffic repeats a limited set of
    /// agents, and the redirect hands every click of a recently seen one the same text.
    pub user_agent: Option<Arc<str>>,
}

/// What happened, and the `data` it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventData {
    /// `data` is the Link.
    LinkCreated(LinkView),
    /// `data` is `{"link", "click"}`.
    LinkClicked {
        /// The link as it was when clicked.
        link: LinkView,
        /// The click (boxed: it is most of the event's size).
        click: Box<ClickInfo>,
    },
    /// `data` is the Link after the change.
    LinkUpdated(LinkView),
    /// `data` is the Link before its deletion.
    LinkDeleted(LinkView),
}

/// One event, as written to the outbox and sent to receivers: `{"type", "timestamp", "data"}`,
/// in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When it happened.
    pub timestamp: Timestamp,
    /// What happened.
    pub data: EventData,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;

        #[derive(Serialize)]
        struct Clicked<'a> {
            link: &'a LinkView,
            click: &'a ClickInfo,
        }

        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("type", &self.kind())?;
        map.serialize_entry("timestamp", &self.timestamp)?;
        match &self.data {
            EventData::LinkCreated(link)
            | EventData::LinkUpdated(link)
            | EventData::LinkDeleted(link) => map.serialize_entry("data", link)?,
            EventData::LinkClicked { link, click } => {
                map.serialize_entry("data", &Clicked { link, click })?
            }
        }
        map.end()
    }
}

impl Event {
    /// A `link.created` event.
    pub fn link_created(link: LinkView) -> Self {
        Self {
            timestamp: link.created_at,
            data: EventData::LinkCreated(link),
        }
    }

    /// A `link.clicked` event.
    pub fn link_clicked(link: LinkView, click: ClickInfo) -> Self {
        Self {
            timestamp: click.timestamp,
            data: EventData::LinkClicked {
                link,
                click: Box::new(click),
            },
        }
    }

    /// A `link.updated` event at `at`.
    pub fn link_updated(link: LinkView, at: Timestamp) -> Self {
        Self {
            timestamp: at,
            data: EventData::LinkUpdated(link),
        }
    }

    /// A `link.deleted` event at `at`.
    pub fn link_deleted(link: LinkView, at: Timestamp) -> Self {
        Self {
            timestamp: at,
            data: EventData::LinkDeleted(link),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> EventKind {
        match self.data {
            EventData::LinkCreated(_) => EventKind::LinkCreated,
            EventData::LinkClicked { .. } => EventKind::LinkClicked,
            EventData::LinkUpdated(_) => EventKind::LinkUpdated,
            EventData::LinkDeleted(_) => EventKind::LinkDeleted,
        }
    }

    /// The JSON body receivers get. Serialising these plain structs cannot fail.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkId, Timestamp};

    fn view() -> LinkView {
        LinkView {
            id: LinkId::parse("link_01JD0000000000000000000000").unwrap(),
            domain: "sho.rt".into(),
            short_code: "abc".into(),
            short_url: "https://sho.rt/abc".into(),
            destination: "https://example.com/".into(),
            clicks: 0,
            created_at: Timestamp::from_unix_millis(0),
            options: crate::OptionsView::default(),
        }
    }

    #[test]
    fn bodies_have_type_timestamp_and_data() {
        let created: serde_json::Value =
            serde_json::from_str(&Event::link_created(view()).to_json()).unwrap();
        assert_eq!(created["type"], "link.created");
        assert_eq!(created["timestamp"], "1970-01-01T00:00:00.000Z");
        assert_eq!(created["data"]["shortUrl"], "https://sho.rt/abc");

        let click = ClickInfo {
            user_agent: Some("ua".into()),
            ..ClickInfo::bare(Timestamp::from_unix_millis(1000))
        };
        let clicked: serde_json::Value =
            serde_json::from_str(&Event::link_clicked(view(), click).to_json()).unwrap();
        assert_eq!(clicked["type"], "link.clicked");
        assert_eq!(clicked["timestamp"], "1970-01-01T00:00:01.000Z");
        assert_eq!(clicked["data"]["link"]["shortCode"], "abc");
        assert_eq!(clicked["data"]["click"]["userAgent"], "ua");
        assert_eq!(clicked["data"]["click"]["referrer"], "(direct)");
        assert!(clicked["data"]["click"]["country"].is_null());
        assert_eq!(clicked["data"]["click"]["device"], "other");
    }

    #[test]
    fn kinds_parse_by_wire_name_only() {
        assert_eq!("link.clicked".parse(), Ok(EventKind::LinkClicked));
        assert_eq!("link.deleted".parse(), Ok(EventKind::LinkDeleted));
        assert!("link.archived".parse::<EventKind>().is_err());
        assert!("LINK.CREATED".parse::<EventKind>().is_err());
    }
}
