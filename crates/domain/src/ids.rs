//! Prefixed identifiers: `link_<ulid>`, `ws_<ulid>`, `key_<ulid>`, `wh_<ulid>`, `msg_<ulid>`.
//!
//! ULIDs sort by creation time, so "newest first" is "greatest id first" and an id can serve
//! as a pagination cursor.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use ulid::Ulid;

/// A ULID greater than every one this process made before, even within one millisecond (plain
/// ULIDs order randomly inside a millisecond, which would shuffle "newest first").
fn monotonic_ulid() -> Ulid {
    static GENERATOR: std::sync::Mutex<ulid::Generator> =
        std::sync::Mutex::new(ulid::Generator::new());
    let mut generator = GENERATOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Fails only when 2^80 ids were made in one millisecond.
    generator.generate().unwrap_or_else(|_| Ulid::new())
}

/// An identifier string that is not `<prefix><26-character ULID>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected an identifier of the form {prefix}<ULID>")]
pub struct IdError {
    /// The prefix that was expected, e.g. `link_`.
    pub prefix: &'static str,
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Ulid);

        impl $name {
            /// The prefix every identifier of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// A new identifier, ordered after every identifier made earlier in this process.
            pub fn generate() -> Self {
                Self(monotonic_ulid())
            }

            /// Parses `<prefix><ULID>`; anything else is an error, never a panic.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                s.strip_prefix($prefix)
                    .filter(|rest| rest.len() == ulid::ULID_LEN)
                    .and_then(|rest| Ulid::from_string(rest).ok())
                    .map(Self)
                    .ok_or(IdError { prefix: $prefix })
            }

            /// Parses an identifier only as this service writes it: [`Self::parse`] also takes
            /// lower case, and wraps a first digit past 7, forms that are never issued (for a
            /// cursor, which must be one the service gave).
            pub fn parse_as_written(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
                    .ok()
                    .filter(|id| id.to_string() == s)
                    .ok_or(IdError { prefix: $prefix })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::openapi::string_schema(
                    concat!("`", $prefix, "` followed by a 26-character ULID."),
                    Some(concat!("^", $prefix, "[0-7][0-9A-HJKMNP-TV-Z]{25}$")),
                    None,
                )
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

prefixed_id!(
    /// Identifies a link: `link_<ulid>`.
    LinkId,
    "link_"
);
prefixed_id!(
    /// Identifies a workspace: `ws_<ulid>`.
    WorkspaceId,
    "ws_"
);
prefixed_id!(
    /// Identifies an API key (not the secret): `key_<ulid>`.
    ApiKeyId,
    "key_"
);
prefixed_id!(
    /// Identifies a webhook endpoint: `wh_<ulid>`.
    WebhookId,
    "wh_"
);
prefixed_id!(
    /// Identifies one event message, the same on every delivery attempt: `msg_<ulid>`.
    MessageId,
    "msg_"
);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips_and_rejects_other_prefixes() {
        let id = LinkId::generate();
        assert_eq!(LinkId::parse(&id.to_string()), Ok(id));
        assert!(WebhookId::parse(&id.to_string()).is_err());
        assert!(LinkId::parse("link_").is_err());
        assert!(LinkId::parse("link_01JD0000000000000000000000X").is_err());
    }

    #[test]
    fn later_ids_sort_after_earlier_ones_even_in_one_millisecond() {
        let ids: Vec<LinkId> = (0..1000).map(|_| LinkId::generate()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = LinkId::parse(&s);
            let _ = MessageId::parse(&s);
        }
    }
}
