//! The bodies that create and change links, and their validation: one list of option fields,
//! shared by POST `/links` (and each bulk item) and PATCH `/links/{link}`, validated in one place
//! into the domain's [`LinkPatch`]. In a PATCH an absent field is left alone and `null` clears
//! it; in a creation both mean unset.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use shortlink_domain::{
    BaseUrl, CountryCode, Destination, LinkPatch, MaxClicks, OptionError, Password, Preview,
    RedirectType, Slug, Tags, parse_expires_at,
};
use utoipa::ToSchema;

use crate::error::{ApiError, FieldError};

/// `Some(None)` for an explicit `null`, `Some(Some(v))` for a value; absent fields get `None`
/// through `#[serde(default)]`.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Declares a link body: its own fields, then every option field (the same in each body).
macro_rules! link_body {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Deserialize, ToSchema)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// RFC 3339 (any offset); from then on the link is expired.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, format = DateTime, example = "2030-01-01T00:00:00Z")]
            pub expires_at: Option<Option<String>>,
            /// 1 to 10^12: after that many counted clicks the link is expired.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<i64>, minimum = 1, maximum = 1_000_000_000_000_i64)]
            pub max_clicks: Option<Option<serde_json::Number>>,
            /// Where an expired link redirects (302); without it, an expired link answers 410.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, format = "uri")]
            pub expired_url: Option<Option<String>>,
            /// Write-only: visitors must give it first. Stored as an Argon2id hash; a Link shows
            /// `passwordProtected` instead. `null` removes it.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, min_length = 1, max_length = 128)]
            pub password: Option<Option<String>>,
            /// 301, 302 (default), 307 or 308.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<u16>, example = 302)]
            pub redirect_type: Option<Option<u16>>,
            /// Where visitors on iOS go.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, format = "uri")]
            pub ios: Option<Option<String>>,
            /// Where visitors on Android go.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, format = "uri")]
            pub android: Option<Option<String>>,
            /// Destinations by visitor country: `{"GB": "https://…"}` (ISO 3166-1 alpha-2).
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<BTreeMap<String, String>>)]
            pub geo: Option<Option<GeoEntries>>,
            /// Up to 10 tags of 1 to 50 characters.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<Vec<String>>, max_items = 10)]
            pub tags: Option<Option<Vec<String>>>,
            /// Archived links still redirect; `GET /links` leaves them out unless
            /// `archived=true`.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<bool>)]
            pub archived: Option<Option<bool>>,
            /// Link preview title (1 to 200 characters).
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
            pub title: Option<Option<String>>,
            /// Link preview description (1 to 1000 characters).
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, min_length = 1, max_length = 1000)]
            pub description: Option<Option<String>>,
            /// Link preview image: an absolute http(s) URL.
            #[serde(default, deserialize_with = "nullable")]
            #[schema(value_type = Option<String>, format = "uri")]
            pub image: Option<Option<String>>,
        }

        impl $name {
            /// The option fields, moved out.
            fn take_options(&mut self) -> OptionFields {
                OptionFields {
                    expires_at: self.expires_at.take(),
                    max_clicks: self.max_clicks.take(),
                    expired_url: self.expired_url.take(),
                    password: self.password.take(),
                    redirect_type: self.redirect_type.take(),
                    ios: self.ios.take(),
                    android: self.android.take(),
                    geo: self.geo.take(),
                    tags: self.tags.take(),
                    archived: self.archived.take(),
                    title: self.title.take(),
                    description: self.description.take(),
                    image: self.image.take(),
                }
            }
        }
    };
}

link_body! {
    /// The body of POST `/links` and of each bulk item.
    pub struct CreateLinkRequest {
        /// Absolute http(s) URL, at most 8192 characters, without credentials or whitespace.
        #[schema(format = "uri", max_length = 8192, example = "https://example.com/page?a=1")]
        pub destination: String,
        /// Optional slug: 1 to 64 of `[A-Za-z0-9_-]`, case-sensitive, not reserved. Generated
        /// (7 base62 characters) when absent.
        #[serde(default)]
        #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$", example = "spring-sale")]
        pub custom_slug: Option<String>,
    }
}

impl crate::extract::BodyShape for CreateLinkRequest {}
impl crate::extract::BodyShape for UpdateLinkRequest {}

link_body! {
    /// The body of PATCH `/links/{idOrShortCode}`: what changes. An absent field stays as it
    /// is; `null` clears an option.
    pub struct UpdateLinkRequest {
        /// The new destination (not `null`: a link always has one).
        #[serde(default, deserialize_with = "nullable")]
        #[schema(value_type = String, format = "uri", max_length = 8192, example = "https://example.com/new")]
        pub destination: Option<Option<String>>,
        /// A new short code (409 if taken); the old one answers 404 at once. Not `null`: a link
        /// always has one.
        #[serde(default, deserialize_with = "nullable")]
        #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$", example = "summer-sale")]
        pub custom_slug: Option<Option<String>>,
    }
}

/// `geo` as written: each country key with its URL, in order, a key given twice kept twice, so
/// that `geo_of` refuses it as it refuses `gb` beside `GB` (a map would keep the last value
/// silently).
#[derive(Debug, Default)]
pub struct GeoEntries(Vec<(String, String)>);

impl<'de> Deserialize<'de> for GeoEntries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = GeoEntries;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of country codes and URLs")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<GeoEntries, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(16));
                while let Some(entry) = map.next_entry::<String, String>()? {
                    entries.push(entry);
                }
                Ok(GeoEntries(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// The option fields of a body.
struct OptionFields {
    expires_at: Option<Option<String>>,
    max_clicks: Option<Option<serde_json::Number>>,
    expired_url: Option<Option<String>>,
    password: Option<Option<String>>,
    redirect_type: Option<Option<u16>>,
    ios: Option<Option<String>>,
    android: Option<Option<String>>,
    geo: Option<Option<GeoEntries>>,
    tags: Option<Option<Vec<String>>>,
    archived: Option<Option<bool>>,
    title: Option<Option<String>>,
    description: Option<Option<String>>,
    image: Option<Option<String>>,
}

/// A validated body: the change, and the password still to hash (`Some(None)` removes it).
#[derive(Debug)]
pub struct ValidBody {
    /// Everything but the password.
    pub patch: LinkPatch,
    /// The new password, if the body set or removed it.
    pub password: Option<Option<Password>>,
}

/// Collects every bad field of a body before answering.
struct Checker<'a> {
    base: &'a BaseUrl,
    errors: Vec<FieldError>,
}

impl Checker<'_> {
    fn check<T, E: ToString>(&mut self, field: &str, result: Result<T, E>) -> Option<T> {
        result
            .map_err(|e| self.errors.push(FieldError::new(field, e)))
            .ok()
    }

    /// A field that may be null: `Some(None)` clears it.
    fn nullable<T, U, E: ToString>(
        &mut self,
        field: &str,
        value: Option<Option<T>>,
        parse: impl FnOnce(T) -> Result<U, E>,
    ) -> Option<Option<U>> {
        match value? {
            None => Some(None),
            Some(value) => self.check(field, parse(value)).map(Some),
        }
    }

    /// A field that may be left out but not cleared: `null` is an error naming it.
    fn required<T, U>(
        &mut self,
        field: &str,
        value: Option<Option<T>>,
        parse: impl FnOnce(T) -> Result<U, String>,
    ) -> Option<U> {
        match value? {
            None => self.check(field, Err(format!("{field} cannot be null"))),
            Some(value) => self.check(field, parse(value)),
        }
    }

    fn url(&mut self, field: &str, value: Option<Option<String>>) -> Option<Option<Destination>> {
        let base = self.base;
        self.nullable(field, value, |url| {
            Destination::parse(&url, base)
                .map_err(|e| e.to_string().replacen("destination", field, 1))
        })
    }

    fn finish<T>(self, value: T) -> Result<T, ApiError> {
        match self.errors.first() {
            None => Ok(value),
            Some(first) => Err(ApiError::Validation {
                message: first.message.clone(),
                details: self.errors,
            }),
        }
    }
}

/// Validates a creation body into its destination, slug and options.
pub fn validate_creation(
    base: &BaseUrl,
    mut body: CreateLinkRequest,
) -> Result<(Destination, Option<Slug>, ValidBody), ApiError> {
    let options = body.take_options();
    let mut checker = Checker {
        base,
        errors: Vec::new(),
    };
    let destination = checker.check("destination", Destination::parse(&body.destination, base));
    let slug = (body.custom_slug.as_deref()).map(|s| checker.check("customSlug", Slug::parse(s)));
    let valid = options_of(&mut checker, options);
    checker.finish(()).map(|()| {
        // Every check passed, so every value is there.
        let destination = destination.unwrap_or_else(|| unreachable!("checked"));
        (destination, slug.flatten(), valid)
    })
}

/// Validates a PATCH body into the change it asks for.
pub fn validate_update(base: &BaseUrl, mut body: UpdateLinkRequest) -> Result<ValidBody, ApiError> {
    let options = body.take_options();
    let mut checker = Checker {
        base,
        errors: Vec::new(),
    };
    let destination = checker.required("destination", body.destination, |d| {
        Destination::parse(&d, base).map_err(|e| e.to_string())
    });
    let slug = checker.required("customSlug", body.custom_slug, |s| {
        Slug::parse(&s).map_err(|e| e.to_string())
    });
    let mut valid = options_of(&mut checker, options);
    valid.patch.destination = destination;
    valid.patch.slug = slug;
    checker.finish(valid)
}

fn options_of(checker: &mut Checker<'_>, o: OptionFields) -> ValidBody {
    let base = checker.base;
    let patch = LinkPatch {
        destination: None,
        slug: None,
        expires_at: checker.nullable("expiresAt", o.expires_at, |s| parse_expires_at(&s)),
        max_clicks: checker.nullable("maxClicks", o.max_clicks, |n| {
            whole(&n).map_or(Err(OptionError::MaxClicks), MaxClicks::new)
        }),
        expired_url: checker.url("expiredUrl", o.expired_url),
        password: None,
        redirect_type: checker
            .nullable("redirectType", o.redirect_type, RedirectType::from_status)
            .map(Option::unwrap_or_default),
        ios: checker.url("ios", o.ios),
        android: checker.url("android", o.android),
        geo: checker
            .nullable("geo", o.geo, |geo| geo_of(base, geo))
            .map(Option::unwrap_or_default),
        title: checker.nullable("title", o.title, |s| Preview::title(&s)),
        description: checker.nullable("description", o.description, |s| Preview::description(&s)),
        image: checker.url("image", o.image),
        tags: checker
            .nullable("tags", o.tags, |tags| Tags::parse(&tags))
            .map(Option::unwrap_or_default),
        archived: o.archived.map(|a| a.unwrap_or(false)),
    };
    let password = checker.nullable("password", o.password, |s| Password::parse(&s));
    ValidBody { patch, password }
}

/// A JSON number that is a whole one (`5` or `5.0`: JSON does not tell them apart), as an i64.
fn whole(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        let f = n.as_f64()?;
        (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
    })
}

/// `geo`'s countries and destinations. A country named twice (`GB` twice, or `gb` and `GB`) is
/// an error, not one of them silently dropped.
fn geo_of(base: &BaseUrl, geo: GeoEntries) -> Result<BTreeMap<CountryCode, Destination>, String> {
    let mut countries = BTreeMap::new();
    for (country, url) in geo.0 {
        let code = CountryCode::parse(&country).map_err(|e| e.to_string())?;
        let to = Destination::parse(&url, base).map_err(|e| {
            format!(
                "geo.{country}: {}",
                e.to_string().replacen("destination", "the URL", 1)
            )
        })?;
        if countries.insert(code, to).is_some() {
            return Err(format!("geo names {} more than once", code.as_str()));
        }
    }
    Ok(countries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::parse_json;

    fn base() -> BaseUrl {
        BaseUrl::parse("https://sho.rt").unwrap()
    }

    fn fields(e: ApiError) -> Vec<String> {
        match e {
            ApiError::Validation { details, .. } => details.into_iter().map(|d| d.field).collect(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn every_bad_option_is_named() {
        let body: CreateLinkRequest = parse_json(
            br#"{"destination": "https://x.com", "expiresAt": "soon", "maxClicks": 0,
                "redirectType": 303, "geo": {"GBR": "https://x.co.uk"}, "tags": [""],
                "ios": "ftp://x", "password": "", "title": "a\u0007"}"#,
        )
        .unwrap();
        let e = validate_creation(&base(), body).unwrap_err();
        assert_eq!(
            fields(e),
            [
                "expiresAt",
                "maxClicks",
                "redirectType",
                "ios",
                "geo",
                "title",
                "tags",
                "password"
            ]
        );
    }

    #[test]
    fn null_clears_and_absence_keeps() {
        let body: UpdateLinkRequest =
            parse_json(br#"{"expiresAt": null, "tags": ["a"], "redirectType": null}"#).unwrap();
        let valid = validate_update(&base(), body).unwrap();
        assert_eq!(valid.patch.expires_at, Some(None));
        assert_eq!(valid.patch.max_clicks, None);
        assert_eq!(valid.patch.redirect_type, Some(RedirectType::Found));
        assert_eq!(valid.patch.tags, Some(Tags::parse(&["a"]).unwrap()));
        assert_eq!(valid.password, None);
        let body: UpdateLinkRequest = parse_json(br#"{"password": null}"#).unwrap();
        assert_eq!(validate_update(&base(), body).unwrap().password, Some(None));
    }

    #[test]
    fn what_a_link_always_has_cannot_be_cleared() {
        let body: UpdateLinkRequest =
            parse_json(br#"{"destination": null, "customSlug": null}"#).unwrap();
        let e = validate_update(&base(), body).unwrap_err();
        assert_eq!(fields(e), ["destination", "customSlug"]);
    }

    #[test]
    fn a_country_key_given_twice_is_refused() {
        let body: CreateLinkRequest = parse_json(
            br#"{"destination": "https://x.com",
                "geo": {"GB": "https://a.example/", "GB": "https://b.example/"}}"#,
        )
        .expect("the body parses");
        let e = validate_creation(&base(), body).expect_err("the body is refused");
        assert_eq!(fields(e), ["geo"]);
    }

    #[test]
    fn empty_previews_and_a_country_named_twice_are_refused() {
        let body: CreateLinkRequest = parse_json(
            br#"{"destination": "https://x.com", "title": "", "description": "",
                "geo": {"gb": "https://x.co.uk", "GB": "https://y.co.uk"}}"#,
        )
        .unwrap();
        let e = validate_creation(&base(), body).unwrap_err();
        assert_eq!(fields(e), ["geo", "title", "description"]);
    }
}
