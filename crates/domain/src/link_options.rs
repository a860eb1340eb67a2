//! The options a link may carry beyond its destination, each with the one rule that says what it
//! may be: when it ends, who may follow it, where a visitor goes, and how it is found again.
//!
//! [`RedirectRules`] is what the redirect needs; a link without any ([`RedirectRules::is_plain`])
//! redirects exactly as before options existed. Tags and the archived flag only matter to the API.

use std::collections::BTreeMap;
use std::fmt;

use crate::{Destination, Timestamp};

/// Most tags on one link.
pub const MAX_TAGS: usize = 10;
/// Longest tag, in characters.
pub const MAX_TAG_LEN: usize = 50;
/// Longest preview title, in characters.
pub const MAX_TITLE_LEN: usize = 200;
/// Longest preview description, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 1000;
/// Longest accepted password, in characters.
pub const MAX_PASSWORD_LEN: usize = 128;
/// Largest `maxClicks`.
pub const MAX_MAX_CLICKS: i64 = 1_000_000_000_000;

/// Why an option's value is not acceptable; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// `tags`: too many.
    #[error("tags holds at most {MAX_TAGS} tags")]
    TooManyTags,
    /// `tags`: one is empty, too long, or has control characters.
    #[error(
        "each tag must be 1 to {MAX_TAG_LEN} characters, without control characters or \
         surrounding spaces"
    )]
    BadTag,
    /// `maxClicks` out of range.
    #[error("maxClicks must be a whole number from 1 to {MAX_MAX_CLICKS}")]
    MaxClicks,
    /// `redirectType` not one of the four.
    #[error("redirectType must be 301, 302, 307 or 308")]
    RedirectType,
    /// `geo`: a key that is not a country code.
    #[error("geo keys must be ISO 3166-1 alpha-2 country codes, such as GB")]
    Country,
    /// `expiresAt` not an RFC 3339 instant.
    #[error("expiresAt must be an RFC 3339 date-time, such as 2030-01-01T00:00:00Z")]
    ExpiresAt,
    /// `title` blank, too long or with control characters.
    #[error(
        "title must be 1 to {MAX_TITLE_LEN} characters, not all spaces, without control characters"
    )]
    Title,
    /// `description` blank, too long or with control characters.
    #[error(
        "description must be 1 to {MAX_DESCRIPTION_LEN} characters, not all spaces, without \
         control characters"
    )]
    Description,
    /// `password` empty or too long.
    #[error("password must be 1 to {MAX_PASSWORD_LEN} characters")]
    Password,
}

/// A tag: 1 to [`MAX_TAG_LEN`] characters, no control characters, no surrounding spaces.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(String);

impl Tag {
    /// Validates a tag.
    pub fn parse(s: &str) -> Result<Self, OptionError> {
        let len = s.chars().count();
        if len == 0 || len > MAX_TAG_LEN || s.chars().any(char::is_control) || s.trim() != s {
            return Err(OptionError::BadTag);
        }
        Ok(Self(s.to_owned()))
    }

    /// Rebuilds a tag read back from storage.
    pub fn from_trusted(s: String) -> Self {
        Self(s)
    }

    /// The tag as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A link's tags, at most [`MAX_TAGS`], in the order given, each once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tags(Vec<Tag>);

impl Tags {
    /// Validates a list of tags; a tag given twice is kept once. At most [`MAX_TAGS`] are given,
    /// whether or not some repeat: the bound is on the list as sent, as the API's schema
    /// (`maxItems`) states it.
    pub fn parse<S: AsRef<str>>(tags: &[S]) -> Result<Self, OptionError> {
        if tags.len() > MAX_TAGS {
            return Err(OptionError::TooManyTags);
        }
        let mut kept: Vec<Tag> = Vec::with_capacity(tags.len());
        for tag in tags {
            let tag = Tag::parse(tag.as_ref())?;
            if !kept.contains(&tag) {
                kept.push(tag);
            }
        }
        Ok(Self(kept))
    }

    /// Rebuilds tags read back from storage.
    pub fn from_trusted(tags: Vec<String>) -> Self {
        Self(tags.into_iter().map(Tag::from_trusted).collect())
    }

    /// The tags.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Tag> {
        self.0.iter()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `maxClicks`: after this many counted clicks the link is expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MaxClicks(i64);

impl MaxClicks {
    /// Validates a click limit.
    pub fn new(n: i64) -> Result<Self, OptionError> {
        if (1..=MAX_MAX_CLICKS).contains(&n) {
            Ok(Self(n))
        } else {
            Err(OptionError::MaxClicks)
        }
    }

    /// The limit.
    pub fn get(self) -> i64 {
        self.0
    }
}

/// The status a redirect answers with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RedirectType {
    /// 301 Moved Permanently: browsers cache it, so later visits may not reach the service.
    Permanent,
    /// 302 Found, the default.
    #[default]
    Found,
    /// 307 Temporary Redirect: like 302, keeping the method.
    Temporary,
    /// 308 Permanent Redirect: like 301, keeping the method.
    PermanentKeepMethod,
}

impl RedirectType {
    /// From the status code.
    pub fn from_status(status: u16) -> Result<Self, OptionError> {
        match status {
            301 => Ok(Self::Permanent),
            302 => Ok(Self::Found),
            307 => Ok(Self::Temporary),
            308 => Ok(Self::PermanentKeepMethod),
            _ => Err(OptionError::RedirectType),
        }
    }

    /// The status code.
    pub fn status(self) -> u16 {
        match self {
            Self::Permanent => 301,
            Self::Found => 302,
            Self::Temporary => 307,
            Self::PermanentKeepMethod => 308,
        }
    }
}

/// An ISO 3166-1 alpha-2 country code, upper case.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CountryCode([u8; 2]);

impl CountryCode {
    /// Two ASCII letters, either case.
    pub fn parse(s: &str) -> Result<Self, OptionError> {
        match s.as_bytes() {
            &[a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                Ok(Self([a.to_ascii_uppercase(), b.to_ascii_uppercase()]))
            }
            _ => Err(OptionError::Country),
        }
    }

    /// The code as text.
    pub fn as_str(&self) -> &str {
        // Two ASCII letters, by construction.
        std::str::from_utf8(&self.0).unwrap_or("??")
    }
}

impl fmt::Debug for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a chat app or social network shows when the short URL is pasted: its crawler gets a page
/// with these as Open Graph and Twitter card tags instead of the redirect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preview {
    /// `og:title`.
    pub title: Option<String>,
    /// `og:description`.
    pub description: Option<String>,
    /// `og:image`: an absolute http(s) URL.
    pub image: Option<Destination>,
}

impl Preview {
    /// Validates a title.
    pub fn title(s: &str) -> Result<String, OptionError> {
        text(s, MAX_TITLE_LEN, false).ok_or(OptionError::Title)
    }

    /// Validates a description (line breaks allowed).
    pub fn description(s: &str) -> Result<String, OptionError> {
        text(s, MAX_DESCRIPTION_LEN, true).ok_or(OptionError::Description)
    }

    /// Whether there is anything to show.
    pub fn is_set(&self) -> bool {
        self.title.is_some() || self.description.is_some() || self.image.is_some()
    }
}

/// `s`, when it has 1 to `max` characters, not all of them spaces, and no control characters (but
/// line breaks, where `line_breaks` allows them). A blank one would be shown as an empty preview;
/// `null` clears it.
fn text(s: &str, max: usize, line_breaks: bool) -> Option<String> {
    let allowed = |c: char| !c.is_control() || (line_breaks && matches!(c, '\n' | '\r'));
    let blank = s.chars().all(char::is_whitespace);
    (!blank && s.chars().count() <= max && s.chars().all(allowed)).then(|| s.to_owned())
}

/// A password as a client sent it, checked for length; hashed before it is stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Validates a password.
    pub fn parse(s: &str) -> Result<Self, OptionError> {
        let len = s.chars().count();
        if len == 0 || len > MAX_PASSWORD_LEN {
            return Err(OptionError::Password);
        }
        Ok(Self(s.to_owned()))
    }

    /// The password itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(…)")
    }
}

/// A password's hash in the PHC string format (Argon2id), as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl PasswordHash {
    /// Wraps a PHC string made by the hasher, or read back from storage.
    pub fn from_phc(s: String) -> Self {
        Self(s)
    }

    /// The PHC string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(…)")
    }
}

/// Parses `expiresAt`: RFC 3339, any offset, kept to the millisecond.
pub fn parse_expires_at(s: &str) -> Result<Timestamp, OptionError> {
    Timestamp::parse_rfc3339(s).ok_or(OptionError::ExpiresAt)
}

/// What the redirect of a link needs besides its destination. The default is a plain link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedirectRules {
    /// From then on the link is expired.
    pub expires_at: Option<Timestamp>,
    /// After this many counted clicks the link is expired.
    pub max_clicks: Option<MaxClicks>,
    /// Where an expired link sends visitors (302); without it, the 410 page.
    pub expired_url: Option<Destination>,
    /// Visitors must give the password first.
    pub password: Option<PasswordHash>,
    /// The redirect's status.
    pub redirect_type: RedirectType,
    /// Where visitors on iOS go.
    pub ios: Option<Destination>,
    /// Where visitors on Android go.
    pub android: Option<Destination>,
    /// Where visitors from these countries go.
    pub geo: BTreeMap<CountryCode, Destination>,
    /// What link-preview crawlers are shown.
    pub preview: Preview,
}

/// The operating systems a link can send elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetOs {
    /// iPhone, iPad, iPod.
    Ios,
    /// Android.
    Android,
}

impl RedirectRules {
    /// Whether no rule is set: the redirect follows the destination with a 302, as always.
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }

    /// Whether `now` is at or past the expiry time.
    pub fn expired_at(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }

    /// Whether the destination depends on the visitor's system.
    pub fn targets_devices(&self) -> bool {
        self.ios.is_some() || self.android.is_some()
    }

    /// Whether the destination depends on the visitor's country.
    pub fn targets_countries(&self) -> bool {
        !self.geo.is_empty()
    }

    /// Where a visitor on `os` from `country` goes: their system's destination, else their
    /// country's, else `default`.
    pub fn destination_for<'a>(
        &'a self,
        default: &'a Destination,
        os: Option<TargetOs>,
        country: Option<&str>,
    ) -> &'a Destination {
        let by_os = match os {
            Some(TargetOs::Ios) => self.ios.as_ref(),
            Some(TargetOs::Android) => self.android.as_ref(),
            None => None,
        };
        let by_country = || {
            let code = CountryCode::parse(country?).ok()?;
            self.geo.get(&code)
        };
        by_os.or_else(by_country).unwrap_or(default)
    }
}

/// Every option of a link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkOptions {
    /// What the redirect follows.
    pub rules: RedirectRules,
    /// Labels to find the link by.
    pub tags: Tags,
    /// Hidden from the list unless asked for; still redirects.
    pub archived: bool,
}

/// A change of a link (PATCH): each field `None` leaves that part as it is; an inner `None`
/// clears an option.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPatch {
    /// A new destination.
    pub destination: Option<Destination>,
    /// A new short code; the old one stops answering at once.
    pub slug: Option<crate::Slug>,
    /// Expiry time.
    pub expires_at: Option<Option<Timestamp>>,
    /// Click limit.
    pub max_clicks: Option<Option<MaxClicks>>,
    /// Where an expired link sends visitors.
    pub expired_url: Option<Option<Destination>>,
    /// Password (already hashed).
    pub password: Option<Option<PasswordHash>>,
    /// Redirect status.
    pub redirect_type: Option<RedirectType>,
    /// iOS destination.
    pub ios: Option<Option<Destination>>,
    /// Android destination.
    pub android: Option<Option<Destination>>,
    /// Destinations by country (replaces them all; empty clears).
    pub geo: Option<BTreeMap<CountryCode, Destination>>,
    /// Preview title.
    pub title: Option<Option<String>>,
    /// Preview description.
    pub description: Option<Option<String>>,
    /// Preview image.
    pub image: Option<Option<Destination>>,
    /// Tags (replaces them all; empty clears).
    pub tags: Option<Tags>,
    /// Archived or not.
    pub archived: Option<bool>,
}

impl LinkPatch {
    /// Applies the change to `link`.
    pub fn apply(&self, link: &mut crate::Link) {
        fn set<T: Clone>(to: &Option<T>, field: &mut T) {
            if let Some(value) = to {
                *field = value.clone();
            }
        }
        set(&self.destination, &mut link.destination);
        set(&self.slug, &mut link.short_code);
        self.apply_options(&mut link.options);
    }

    /// Applies the change to a link's options (all of it but destination and slug).
    pub fn apply_options(&self, options: &mut LinkOptions) {
        fn set<T: Clone>(to: &Option<T>, field: &mut T) {
            if let Some(value) = to {
                *field = value.clone();
            }
        }
        let rules = &mut options.rules;
        set(&self.expires_at, &mut rules.expires_at);
        set(&self.max_clicks, &mut rules.max_clicks);
        set(&self.expired_url, &mut rules.expired_url);
        set(&self.password, &mut rules.password);
        set(&self.redirect_type, &mut rules.redirect_type);
        set(&self.ios, &mut rules.ios);
        set(&self.android, &mut rules.android);
        set(&self.geo, &mut rules.geo);
        set(&self.title, &mut rules.preview.title);
        set(&self.description, &mut rules.preview.description);
        set(&self.image, &mut rules.preview.image);
        set(&self.tags, &mut options.tags);
        set(&self.archived, &mut options.archived);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Destination {
        Destination::from_trusted(s.into())
    }

    #[test]
    fn tags_are_checked_and_kept_once_in_order() {
        let tags = Tags::parse(&["b", "a", "b"]).unwrap();
        let names: Vec<&str> = tags.iter().map(Tag::as_str).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(Tags::parse(&[""]), Err(OptionError::BadTag));
        assert_eq!(Tags::parse(&[" x"]), Err(OptionError::BadTag));
        assert_eq!(Tags::parse(&["a\nb"]), Err(OptionError::BadTag));
        assert!(Tags::parse(&["é".repeat(50)]).is_ok());
        assert_eq!(Tags::parse(&["é".repeat(51)]), Err(OptionError::BadTag));
        let eleven: Vec<String> = (0..11).map(|i| i.to_string()).collect();
        assert_eq!(Tags::parse(&eleven), Err(OptionError::TooManyTags));
        // Eleven given, ten different: the list as sent is over the bound.
        let repeated: Vec<String> = (0..11).map(|i| (i % 10).to_string()).collect();
        assert_eq!(Tags::parse(&repeated), Err(OptionError::TooManyTags));
    }

    #[test]
    fn limits_and_statuses_have_their_ranges() {
        assert!(MaxClicks::new(0).is_err() && MaxClicks::new(-1).is_err());
        assert_eq!(MaxClicks::new(1).map(MaxClicks::get), Ok(1));
        assert!(MaxClicks::new(MAX_MAX_CLICKS + 1).is_err());
        for status in [301, 302, 307, 308] {
            assert_eq!(RedirectType::from_status(status).unwrap().status(), status);
        }
        assert!(RedirectType::from_status(303).is_err());
        assert_eq!(RedirectType::default().status(), 302);
    }

    #[test]
    fn country_codes_are_two_letters_upper_cased() {
        assert_eq!(CountryCode::parse("gb").unwrap().as_str(), "GB");
        for bad in ["", "G", "GBR", "G1", "ÉÉ"] {
            assert!(CountryCode::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_system_beats_the_country_which_beats_the_destination() {
        let rules = RedirectRules {
            ios: Some(url("https://apps.apple.com/x")),
            geo: BTreeMap::from([(CountryCode::parse("GB").unwrap(), url("https://x.co.uk/"))]),
            ..RedirectRules::default()
        };
        let default = url("https://x.com/");
        let to = |os, country| rules.destination_for(&default, os, country).as_str();
        assert_eq!(
            to(Some(TargetOs::Ios), Some("GB")),
            "https://apps.apple.com/x"
        );
        assert_eq!(to(Some(TargetOs::Android), Some("GB")), "https://x.co.uk/");
        assert_eq!(to(None, Some("US")), "https://x.com/");
        assert_eq!(to(None, None), "https://x.com/");
        assert!(!rules.is_plain() && RedirectRules::default().is_plain());
    }

    #[test]
    fn expiry_starts_at_the_instant() {
        let at = Timestamp::from_unix_millis(1_000);
        let rules = RedirectRules {
            expires_at: Some(at),
            ..RedirectRules::default()
        };
        assert!(!rules.expired_at(Timestamp::from_unix_millis(999)));
        assert!(rules.expired_at(at));
    }

    #[test]
    fn preview_text_and_passwords_have_bounds() {
        assert!(Preview::title(&"t".repeat(MAX_TITLE_LEN)).is_ok());
        assert!(Preview::title(&"t".repeat(MAX_TITLE_LEN + 1)).is_err());
        assert!(Preview::title("a\u{7}").is_err());
        assert!(Preview::title("").is_err());
        assert!(Preview::title(" \u{3000} ").is_err(), "blank");
        assert!(Preview::title(" a ").is_ok());
        assert!(Preview::description("two\nlines").is_ok());
        assert!(Preview::description(" \n\r\n ").is_err(), "blank");
        assert!(Password::parse("").is_err());
        assert!(Password::parse(&"p".repeat(MAX_PASSWORD_LEN)).is_ok());
        assert_eq!(
            format!("{:?}", Password::parse("secret").unwrap()),
            "Password(…)"
        );
    }

    #[test]
    fn expiry_times_take_any_offset() {
        let at = parse_expires_at("2030-01-01T01:00:00+01:00").unwrap();
        assert_eq!(at.to_string(), "2030-01-01T00:00:00.000Z");
        assert!(parse_expires_at("tomorrow").is_err());
    }
}
