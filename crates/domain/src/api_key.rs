//! API keys: the secret a client sends, and the hash that is all the database keeps.

use std::fmt;

use rand::Rng;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};

use crate::{ApiKeyId, Timestamp, WorkspaceId};

const SECRET_PREFIX: &str = "sk_";
const SECRET_RANDOM_LEN: usize = 40;
/// How many characters of the secret (after `sk_`) are kept in clear to tell keys apart.
const SHOWN_PREFIX_LEN: usize = 6;

/// The secret of an API key, `sk_` + 40 base62 characters from a CSPRNG. Shown once, at
/// creation; it does not print itself through `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeySecret(String);

impl ApiKeySecret {
    /// A new random secret.
    pub fn generate() -> Self {
        let random: String = rand::rng()
            .sample_iter(Alphanumeric)
            .take(SECRET_RANDOM_LEN)
            .map(char::from)
            .collect();
        Self(format!("{SECRET_PREFIX}{random}"))
    }

    /// Wraps a presented token. Any string is accepted: an unknown key is found out by lookup.
    pub fn from_presented(token: &str) -> Self {
        Self(token.to_owned())
    }

    /// The secret text, to show once to whoever created it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The SHA-256 of the secret, hex-encoded: the lookup key in storage. A fast hash is right
    /// here because the secret has ~238 bits of entropy; slow hashes protect guessable passwords.
    pub fn hash(&self) -> ApiKeyHash {
        let digest = Sha256::digest(self.0.as_bytes());
        let mut hex = String::with_capacity(64);
        for b in digest {
            use fmt::Write;
            let _ = write!(hex, "{b:02x}");
        }
        ApiKeyHash(hex)
    }

    /// `sk_` and the first few characters, safe to list so people can tell keys apart.
    pub fn display_prefix(&self) -> String {
        self.0
            .chars()
            .take(SECRET_PREFIX.len() + SHOWN_PREFIX_LEN)
            .collect()
    }
}

impl fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKeySecret(<redacted>)")
    }
}

/// Hex SHA-256 of an API key secret.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiKeyHash(String);

impl ApiKeyHash {
    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An API key's record (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// `key_<ulid>`.
    pub id: ApiKeyId,
    /// The workspace the key acts for.
    pub workspace_id: WorkspaceId,
    /// A label chosen by whoever created it.
    pub name: String,
    /// `sk_` and the first characters of the secret.
    pub prefix: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was revoked, if it was.
    pub revoked_at: Option<Timestamp>,
}

impl ApiKey {
    /// A new key for `workspace`, not yet stored, and its secret: show the secret once, and
    /// store the key with `secret.hash()` only.
    pub fn issue(workspace: WorkspaceId, name: impl Into<String>) -> (ApiKey, ApiKeySecret) {
        let secret = ApiKeySecret::generate();
        let key = ApiKey {
            id: ApiKeyId::generate(),
            workspace_id: workspace,
            name: name.into(),
            prefix: secret.display_prefix(),
            created_at: Timestamp::now(),
            revoked_at: None,
        };
        (key, secret)
    }

    /// Checks a key's name (a label, shown when keys are listed, one per line, in columns): 1
    /// to 100 characters, none of them a control character (a tab or a line break would forge
    /// a column or a row of the list).
    pub fn validate_name(name: &str) -> Result<(), &'static str> {
        let length = name.chars().count();
        if length == 0 || length > 100 {
            return Err("key name must be 1 to 100 characters");
        }
        if name.chars().any(char::is_control) {
            return Err("key name must not contain control characters (tabs, line breaks)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_are_1_to_100_characters_and_no_controls() {
        assert!(ApiKey::validate_name("ci").is_ok());
        assert!(ApiKey::validate_name(&"k".repeat(100)).is_ok());
        assert!(ApiKey::validate_name(&"é".repeat(100)).is_ok());
        assert!(ApiKey::validate_name("").is_err());
        assert!(ApiKey::validate_name(&"k".repeat(101)).is_err());
        for forged in ["a\tb", "a\nkey_FAKE", "a\rb", "a\u{1b}[31m"] {
            assert!(ApiKey::validate_name(forged).is_err(), "{forged:?}");
        }
    }

    #[test]
    fn an_issued_key_shows_its_secrets_prefix() {
        let workspace = WorkspaceId::generate();
        let (key, secret) = ApiKey::issue(workspace, "ci");
        assert_eq!((key.workspace_id, key.name.as_str()), (workspace, "ci"));
        assert_eq!(key.prefix, secret.display_prefix());
        assert_eq!(key.revoked_at, None);
    }

    #[test]
    fn secrets_are_long_random_and_hash_stably() {
        let a = ApiKeySecret::generate();
        let b = ApiKeySecret::generate();
        assert_ne!(a, b);
        assert!(a.expose().starts_with("sk_"));
        assert_eq!(a.expose().len(), 43);
        assert!(a.expose()[3..].bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(a.hash(), ApiKeySecret::from_presented(a.expose()).hash());
        assert_eq!(a.hash().as_str().len(), 64);
        assert_eq!(a.display_prefix().len(), 9);
        assert!(!format!("{a:?}").contains(&a.expose()[3..]));
    }
}
