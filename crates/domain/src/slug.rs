//! The one place that says what a short code may be.

use std::fmt;

use rand::Rng;
use rand::distr::Alphanumeric;

/// Longest accepted custom slug.
pub const MAX_SLUG_LEN: usize = 64;
/// Length of generated slugs: 62^7 ≈ 3.5 × 10^12 codes, so collisions are rare and retried.
pub const GENERATED_SLUG_LEN: usize = 7;

/// Paths the service answers itself, or may answer in future, so no link may take them, and
/// `bulk`, the one fixed name beside `/api/v1/links/{idOrShortCode}` (its route would take a link
/// of that code from the API). Compared case-insensitively. Entries with a `.` can never be slugs
/// anyway (the alphabet has no dot) and are listed so this stays the full list of reserved first
/// path segments.
pub const RESERVED_SLUGS: &[&str] = &[
    ".well-known",
    "admin",
    "api",
    "app",
    "assets",
    "bulk",
    "dashboard",
    "docs",
    "favicon.ico",
    "health",
    "healthz",
    "login",
    "logout",
    "metrics",
    "openapi.json",
    "readyz",
    "robots.txt",
    "static",
];

/// Why a string is not a slug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlugError {
    /// Empty, or longer than [`MAX_SLUG_LEN`].
    #[error("customSlug must be 1 to {MAX_SLUG_LEN} characters long")]
    Length,
    /// A character outside `[A-Za-z0-9_-]`.
    #[error("customSlug may contain only letters, digits, '-' and '_'")]
    Charset,
    /// One of [`RESERVED_SLUGS`], or shaped like a link id.
    #[error("customSlug '{0}' is reserved")]
    Reserved(String),
}

/// A short code: 1 to 64 characters of `[A-Za-z0-9_-]`, case-sensitive, not reserved.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slug(String);

impl Slug {
    /// Accepts a user-chosen slug.
    pub fn parse(s: &str) -> Result<Self, SlugError> {
        if s.is_empty() || s.len() > MAX_SLUG_LEN {
            return Err(SlugError::Length);
        }
        if !in_alphabet(s) {
            return Err(SlugError::Charset);
        }
        if is_reserved(s) || crate::LinkId::parse(s).is_ok() {
            return Err(SlugError::Reserved(s.to_owned()));
        }
        Ok(Self(s.to_owned()))
    }

    /// A fresh random slug of [`GENERATED_SLUG_LEN`] base62 characters from the thread's CSPRNG.
    pub fn generate() -> Self {
        loop {
            let s: String = rand::rng()
                .sample_iter(Alphanumeric)
                .take(GENERATED_SLUG_LEN)
                .map(char::from)
                .collect();
            if !is_reserved(&s) {
                return Self(s);
            }
        }
    }

    /// Rebuilds a slug read back from storage, where it was validated on the way in (the
    /// reserved list may have grown since, which must not hide existing links).
    pub fn from_trusted(s: String) -> Self {
        Self(s)
    }

    /// Whether `s` could be a stored slug: a slug's length and alphabet, reserved or not (see
    /// [`Slug::from_trusted`]). Any other text names no link, and needs no lookup.
    pub fn could_be(s: &str) -> bool {
        (1..=MAX_SLUG_LEN).contains(&s.len()) && in_alphabet(s)
    }

    /// The slug as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The slug as owned text.
    pub fn into_string(self) -> String {
        self.0
    }
}

fn in_alphabet(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_reserved(s: &str) -> bool {
    RESERVED_SLUGS.iter().any(|r| r.eq_ignore_ascii_case(s))
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_the_alphabet_and_bounds() {
        assert!(Slug::parse("a").is_ok());
        assert!(Slug::parse("Spring_Sale-2026").is_ok());
        assert!(Slug::parse(&"x".repeat(64)).is_ok());
        assert_eq!(Slug::parse(&"x".repeat(65)), Err(SlugError::Length));
        assert_eq!(Slug::parse(""), Err(SlugError::Length));
        assert_eq!(Slug::parse("a b"), Err(SlugError::Charset));
        assert_eq!(Slug::parse("ü"), Err(SlugError::Charset));
        assert_eq!(Slug::parse("a/b"), Err(SlugError::Charset));
    }

    #[test]
    fn reserved_paths_are_refused_in_any_case() {
        assert_eq!(Slug::parse("api"), Err(SlugError::Reserved("api".into())));
        assert_eq!(Slug::parse("Bulk"), Err(SlugError::Reserved("Bulk".into())));
        assert_eq!(
            Slug::parse("HealthZ"),
            Err(SlugError::Reserved("HealthZ".into()))
        );
        assert!(Slug::parse("apis").is_ok());
        // A slug shaped like a link id would make `/links/{idOrShortCode}` ambiguous.
        let id = crate::LinkId::generate().to_string();
        assert_eq!(Slug::parse(&id), Err(SlugError::Reserved(id.clone())));
    }

    #[test]
    fn generated_slugs_are_valid_base62() {
        for _ in 0..1000 {
            let s = Slug::generate();
            assert_eq!(s.as_str().len(), GENERATED_SLUG_LEN);
            assert_eq!(Slug::parse(s.as_str()), Ok(s));
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_accepted_slugs_round_trip(s in "\\PC{0,80}") {
            if let Ok(slug) = Slug::parse(&s) {
                prop_assert_eq!(slug.as_str(), s.as_str());
                prop_assert_eq!(Slug::parse(slug.as_str()), Ok(slug));
            }
        }

        #[test]
        fn every_string_of_the_alphabet_is_accepted_unless_reserved(s in "[A-Za-z0-9_-]{1,64}") {
            prop_assert_eq!(Slug::parse(&s).is_ok(), !is_reserved(&s) && crate::LinkId::parse(&s).is_err());
        }
    }
}
