#![doc = include_str!("../README.md")]

mod api_key;
mod attempt_source;
mod base_url;
mod destination;
mod event;
mod ids;
mod link;
mod link_options;
#[cfg(feature = "openapi")]
mod openapi;
mod ports;
mod slug;
mod throttled_log;
mod timestamp;
mod webhook;
mod workspace;

pub use api_key::{ApiKey, ApiKeyHash, ApiKeySecret};
pub use attempt_source::attempt_source;
pub use base_url::{BaseUrl, BaseUrlError};
pub use destination::{Destination, DestinationError, MAX_DESTINATION_LEN};
pub use event::{ClickInfo, Event, EventData, EventKind, UnknownEventKind, Visit};
pub use ids::{ApiKeyId, IdError, LinkId, MessageId, WebhookId, WorkspaceId};
pub use link::{Link, LinkRef, LinkView, OptionsView};
pub use link_options::{
    CountryCode, LinkOptions, LinkPatch, MAX_DESCRIPTION_LEN, MAX_MAX_CLICKS, MAX_PASSWORD_LEN,
    MAX_TAG_LEN, MAX_TAGS, MAX_TITLE_LEN, MaxClicks, OptionError, Password, PasswordHash, Preview,
    RedirectRules, RedirectType, Tag, Tags, TargetOs, parse_expires_at,
};
pub use ports::{AttemptRecord, ClaimedDelivery, DeliveryQueue, InFlight, NextStep};
pub use slug::{GENERATED_SLUG_LEN, MAX_SLUG_LEN, RESERVED_SLUGS, Slug, SlugError};
pub use throttled_log::{OUTAGE_LOGGED_EVERY, Repeated, ThrottledLog};
pub use timestamp::Timestamp;
pub use webhook::{
    Delivery, DeliveryCursor, DeliveryCursorError, DeliveryState, MAX_CONSECUTIVE_FAILURES,
    MAX_WEBHOOKS, Webhook, WebhookSecret, WebhookTarget, WebhookTargetError, is_public_ip,
};
pub use workspace::{DEFAULT_RATE_LIMIT, RateLimit, RateLimitError, Workspace};
