//! How a link's options are stored: the redirect rules as one JSON column, NULL for a plain link
//! (so a plain link is read, cached and held in the redirect index as before options existed),
//! and its tags as a JSON array, NULL for none. Values were validated on the way in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use shortlink_domain::{
    CountryCode, Destination, MaxClicks, PasswordHash, Preview, RedirectRules, RedirectType, Tags,
    Timestamp,
};

use crate::StorageError;

/// The `rules` column's JSON: unset rules are left out.
#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct StoredRules {
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_clicks: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expired_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    password: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    redirect_type: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ios: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    android: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    geo: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<String>,
}

fn text(d: &Option<Destination>) -> Option<String> {
    d.as_ref().map(|d| d.as_str().to_owned())
}

fn trusted(s: Option<String>) -> Option<Destination> {
    s.map(Destination::from_trusted)
}

/// The `rules` column for `rules`: `None` for a plain link.
pub(crate) fn rules_column(rules: &RedirectRules) -> Option<String> {
    if rules.is_plain() {
        return None;
    }
    let stored = StoredRules {
        expires_at: rules.expires_at.map(Timestamp::unix_millis),
        max_clicks: rules.max_clicks.map(MaxClicks::get),
        expired_url: text(&rules.expired_url),
        password: rules.password.as_ref().map(|p| p.as_str().to_owned()),
        redirect_type: (rules.redirect_type != RedirectType::default())
            .then(|| rules.redirect_type.status()),
        ios: text(&rules.ios),
        android: text(&rules.android),
        geo: (rules.geo.iter())
            .map(|(country, to)| (country.as_str().to_owned(), to.as_str().to_owned()))
            .collect(),
        title: rules.preview.title.clone(),
        description: rules.preview.description.clone(),
        image: text(&rules.preview.image),
    };
    // A struct of strings and numbers always serialises.
    serde_json::to_string(&stored).ok()
}

/// The redirect rules a `rules` column holds: `None` for a plain link.
pub(crate) fn rules_from_column(
    column: Option<&str>,
) -> Result<Option<RedirectRules>, StorageError> {
    let Some(json) = column else { return Ok(None) };
    let corrupt = || StorageError::Corrupt("link rules");
    let stored: StoredRules = serde_json::from_str(json).map_err(|_| corrupt())?;
    let geo = (stored.geo.into_iter())
        .map(|(country, to)| Ok((CountryCode::parse(&country)?, Destination::from_trusted(to))))
        .collect::<Result<_, shortlink_domain::OptionError>>()
        .map_err(|_| corrupt())?;
    let rules = RedirectRules {
        expires_at: stored.expires_at.map(Timestamp::from_unix_millis),
        max_clicks: stored
            .max_clicks
            .map(MaxClicks::new)
            .transpose()
            .map_err(|_| corrupt())?,
        expired_url: trusted(stored.expired_url),
        password: stored.password.map(PasswordHash::from_phc),
        redirect_type: stored
            .redirect_type
            .map(RedirectType::from_status)
            .transpose()
            .map_err(|_| corrupt())?
            .unwrap_or_default(),
        ios: trusted(stored.ios),
        android: trusted(stored.android),
        geo,
        preview: Preview {
            title: stored.title,
            description: stored.description,
            image: trusted(stored.image),
        },
    };
    Ok(Some(rules))
}

/// The `tags` column for `tags`: `None` for none.
pub(crate) fn tags_column(tags: &Tags) -> Option<String> {
    if tags.is_empty() {
        return None;
    }
    let tags: Vec<&str> = tags.iter().map(|t| t.as_str()).collect();
    serde_json::to_string(&tags).ok()
}

/// The tags a `tags` column holds.
pub(crate) fn tags_from_column(column: Option<&str>) -> Result<Tags, StorageError> {
    let Some(json) = column else {
        return Ok(Tags::default());
    };
    let tags: Vec<String> =
        serde_json::from_str(json).map_err(|_| StorageError::Corrupt("link tags"))?;
    Ok(Tags::from_trusted(tags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_link_stores_nothing_and_rules_round_trip() {
        assert_eq!(rules_column(&RedirectRules::default()), None);
        assert_eq!(rules_from_column(None).unwrap(), None);
        let rules = RedirectRules {
            expires_at: Some(Timestamp::from_unix_millis(1_234)),
            max_clicks: Some(MaxClicks::new(3).unwrap()),
            expired_url: Some(Destination::from_trusted("https://x.com/gone".into())),
            password: Some(PasswordHash::from_phc("$argon2id$v=19$...".into())),
            redirect_type: RedirectType::Permanent,
            ios: Some(Destination::from_trusted("https://apple.com/".into())),
            android: None,
            geo: BTreeMap::from([(
                CountryCode::parse("GB").unwrap(),
                Destination::from_trusted("https://x.co.uk/".into()),
            )]),
            preview: Preview {
                title: Some("T \"<b>\"".into()),
                description: None,
                image: Some(Destination::from_trusted("https://x.com/i.png".into())),
            },
        };
        let column = rules_column(&rules).unwrap();
        assert_eq!(rules_from_column(Some(&column)).unwrap(), Some(rules));
        assert!(rules_from_column(Some("{\"redirectType\": 303}")).is_err());
    }

    #[test]
    fn tags_round_trip() {
        let tags = Tags::parse(&["a", "b \"c\""]).unwrap();
        let column = tags_column(&tags);
        assert_eq!(tags_from_column(column.as_deref()).unwrap(), tags);
        assert_eq!(tags_column(&Tags::default()), None);
    }
}
