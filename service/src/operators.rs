//! Operators: the people who log into the web UI and read fleet data (a
//! device's upload token only uploads and reads its directives, and ships
//! inside every app, so it is public). Each operator belongs to one group,
//! has an Argon2id password hash (a PHC string), and holds credentials:
//! web UI sessions (expiring) and API tokens (until revoked). A
//! credential's secret is 256 random bits given to the client once; the
//! store keeps only its SHA-256.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use ring::rand::SecureRandom;

use crate::tokens::valid_group;

/// An operator as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorRow {
    pub name: String,
    pub group: String,
    /// Argon2id, PHC string format.
    pub password_hash: String,
    pub created_unix_ns: u64,
}

/// What a credential is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    /// A web UI session (cookie), expiring.
    Session,
    /// An API token (`Authorization: Bearer`), valid until revoked.
    Api,
}

impl CredentialKind {
    /// Its name in the store.
    pub fn name(self) -> &'static str {
        match self {
            CredentialKind::Session => "session",
            CredentialKind::Api => "api",
        }
    }

    /// The kind a stored name means (an unknown one is a session, the
    /// narrower right).
    pub fn from_name(name: &str) -> CredentialKind {
        if name == "api" {
            CredentialKind::Api
        } else {
            CredentialKind::Session
        }
    }
}

/// A session or API token as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    /// SHA-256 of the secret.
    pub hash: [u8; 32],
    /// The operator's name (empty for a session of an open server).
    pub operator: String,
    /// The group it shows.
    pub group: String,
    pub kind: CredentialKind,
    pub created_unix_ns: u64,
    /// `None`: valid until revoked.
    pub expires_unix_ns: Option<u64>,
}

/// Why an operator command or login could not proceed.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("operator name `{0}` is not valid: 1-64 letters, digits, `.`, `_`, `-` or `@`")]
    BadName(String),
    #[error("{0}")]
    BadGroup(String),
    #[error("the password must be at least {MIN_PASSWORD_LEN} characters")]
    ShortPassword,
    #[error("no randomness available")]
    NoRandomness,
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

/// Shortest password accepted, characters.
pub const MIN_PASSWORD_LEN: usize = 8;

/// Whether `name` is a valid operator name.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

/// A new operator row: name and group checked, the password hashed with
/// Argon2id (slow on purpose: call it off the async threads).
pub fn new_operator(
    name: &str,
    group: &str,
    password: &str,
    now_unix_ns: u64,
) -> Result<OperatorRow, OperatorError> {
    if !valid_name(name) {
        return Err(OperatorError::BadName(name.to_string()));
    }
    if !valid_group(group) {
        return Err(OperatorError::BadGroup(format!(
            "group `{group}` is not valid: {}",
            crate::tokens::GROUP_RULE
        )));
    }
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(OperatorError::ShortPassword);
    }
    Ok(OperatorRow {
        name: name.to_string(),
        group: group.to_string(),
        password_hash: hash_password(password)?,
        created_unix_ns: now_unix_ns,
    })
}

/// The Argon2id PHC string of `password` with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, OperatorError> {
    let mut salt = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| OperatorError::NoRandomness)?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| OperatorError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| OperatorError::Hash(e.to_string()))
}

/// Whether `password` matches the PHC string `hash` (false for a hash
/// that does not parse). Slow on purpose: call it off the async threads.
pub fn verify_password(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// A hash to verify against when the name is unknown, so that an unknown
/// name takes as long as a wrong password.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("decoy password, never valid").unwrap_or_default())
}

/// A new credential secret: 256 random bits as 64 hex digits.
pub fn new_secret() -> Result<String, OperatorError> {
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| OperatorError::NoRandomness)?;
    Ok(hex::encode(bytes))
}

/// What the store keeps of a secret.
pub fn secret_hash(secret: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    let mut hash = [0u8; 32];
    hash.copy_from_slice(digest.as_ref());
    hash
}

/// Whether `text` looks like a credential secret (64 hex digits): anything
/// else is not looked up.
pub fn looks_like_secret(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_and_verify() {
        let op = new_operator("ann", "phones", "correct horse", 1).unwrap();
        assert!(op.password_hash.starts_with("$argon2id$"));
        assert!(verify_password(&op.password_hash, "correct horse"));
        assert!(!verify_password(&op.password_hash, "correct hors"));
        assert!(!verify_password("not a phc string", "correct horse"));
        assert!(!verify_password(decoy_hash(), ""));
    }

    #[test]
    fn names_groups_and_passwords_are_checked() {
        assert!(matches!(
            new_operator("a b", "phones", "long enough", 1),
            Err(OperatorError::BadName(_))
        ));
        assert!(matches!(
            new_operator("ann", "bad group", "long enough", 1),
            Err(OperatorError::BadGroup(_))
        ));
        assert!(matches!(
            new_operator("ann", "phones", "short", 1),
            Err(OperatorError::ShortPassword)
        ));
    }

    #[test]
    fn secrets_are_random_and_hashed() {
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert_ne!(a, b);
        assert!(looks_like_secret(&a));
        assert!(!looks_like_secret("phones-token-0123456789"));
        assert_eq!(secret_hash(&a), secret_hash(&a));
        assert_ne!(secret_hash(&a), secret_hash(&b));
    }
}
