//! Password hashing with Argon2id (the `argon2` crate's defaults: 19 MiB, 2 passes). Hashing is
//! deliberately slow, so it runs on blocking threads, at most a few at a time so a burst of email
//! logins cannot exhaust memory.

use std::sync::Arc;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use tokio::sync::Semaphore;

/// A hash of a password nobody has, verified against when an email is unknown so that the
/// answer takes as long as for a known email (no account enumeration by timing).
const DECOY_PASSWORD: &str = "muster-decoy-password";

#[derive(Clone)]
pub struct Hasher {
    permits: Arc<Semaphore>,
    decoy: Arc<String>,
}

impl Hasher {
    pub fn new() -> anyhow::Result<Hasher> {
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        let decoy = hash_now(DECOY_PASSWORD)?;
        Ok(Hasher {
            permits: Arc::new(Semaphore::new(parallel)),
            decoy: Arc::new(decoy),
        })
    }

    pub async fn hash(&self, password: String) -> anyhow::Result<String> {
        let _permit = self.permits.acquire().await?;
        tokio::task::spawn_blocking(move || hash_now(&password)).await?
    }

    /// True when `password` matches `hash`; with no hash, spends the same time and answers false.
    pub async fn verify(&self, password: String, hash: Option<String>) -> bool {
        let Ok(_permit) = self.permits.acquire().await else {
            return false;
        };
        let known = hash.is_some();
        let hash = hash.unwrap_or_else(|| self.decoy.as_str().to_owned());
        let matched = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&hash)
                .map(|parsed| {
                    Argon2::default()
                        .verify_password(password.as_bytes(), &parsed)
                        .is_ok()
                })
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        known && matched
    }
}

fn hash_now(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("password hashing failed: {e}"))
}
