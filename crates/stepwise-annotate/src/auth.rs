//! Secrets: random tokens (invite links, sessions, CSRF) from the OS, admin passwords hashed with Argon2id.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use stepwise_core::{Error, Result};

/// `bytes` random bytes from the operating system as lowercase hex. Tokens are secrets, not seeded: a study's
/// outputs never depend on them.
pub fn new_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // getrandom fails only when the OS has no entropy source at all; there is nothing safe to fall back to.
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Argon2id (the crate's default parameters: 19 MiB, 2 passes) with a random salt, as a PHC string.
pub fn hash_password(password: &str) -> Result<String> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| Error::runtime(format!("random source: {e}")))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| Error::runtime(format!("password salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::runtime(format!("password hash: {e}")))
}

/// Whether `password` matches the PHC string `hash` (false for a malformed hash).
pub fn verify_password(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// Compare two secrets without an early exit on the first differing byte.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_only_themselves() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "correct hors"));
        assert!(!verify_password("not a hash", "correct horse"));
        assert_ne!(h, hash_password("correct horse").unwrap(), "salted");
    }

    #[test]
    fn tokens_are_hex_and_distinct() {
        let (a, b) = (new_token(16), new_token(16));
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(same_secret(&a, &a.clone()) && !same_secret(&a, &b) && !same_secret(&a, "x"));
    }
}
