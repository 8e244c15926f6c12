//! Sign-in, link and unlink with an identity provider: the proof checked by the provider
//! ([`crate::accounts::providers`]), then the account found, created or changed by the player's
//! id there, with Nakama's messages and codes.

use uuid::Uuid;

use super::lifecycle::LAST_CREDENTIAL;
use super::providers::{Provider, ProviderError, ProviderProfile, ProviderProof};
use super::store::{AccountUpdate, Credential, Identity};
use super::{AccountError, Accounts};
use crate::store::StoreError;

/// Longest proof field accepted (tokens, signed data, URLs): far above any provider's.
const MAX_PROOF_BYTES: usize = 16 * 1024;

/// Nakama's message when a required part of the proof is missing, if one is.
fn missing(proof: &ProviderProof) -> Option<&'static str> {
    let empty = |s: &str| s.is_empty();
    match proof {
        ProviderProof::Apple { token } if empty(token) => Some("Apple ID token is required."),
        ProviderProof::Google { token } if empty(token) => Some("Google access token is required."),
        ProviderProof::Facebook { token } if empty(token) => {
            Some("Facebook access token is required.")
        }
        ProviderProof::FacebookInstantGame { signed_player_info } if empty(signed_player_info) => {
            Some("Signed Player Info for a Facebook Instant Game is required.")
        }
        ProviderProof::Steam { token } if empty(token) => Some("Steam access token is required."),
        ProviderProof::GameCenter {
            player_id,
            bundle_id,
            timestamp_seconds,
            salt,
            signature,
            public_key_url,
        } => {
            if empty(bundle_id) {
                Some("GameCenter bundle ID is required.")
            } else if empty(player_id) {
                Some("GameCenter player ID is required.")
            } else if empty(public_key_url) {
                Some("GameCenter public key URL is required.")
            } else if empty(salt) {
                Some("GameCenter salt is required.")
            } else if empty(signature) {
                Some("GameCenter signature is required.")
            } else if *timestamp_seconds == 0 {
                Some("GameCenter timestamp is required.")
            } else {
                None
            }
        }
        _ => None,
    }
}

fn too_long(proof: &ProviderProof) -> bool {
    let long = |s: &String| s.len() > MAX_PROOF_BYTES;
    match proof {
        ProviderProof::Apple { token }
        | ProviderProof::Google { token }
        | ProviderProof::Facebook { token }
        | ProviderProof::Steam { token } => long(token),
        ProviderProof::FacebookInstantGame { signed_player_info } => long(signed_player_info),
        ProviderProof::GameCenter {
            player_id,
            bundle_id,
            salt,
            signature,
            public_key_url,
            ..
        } => [player_id, bundle_id, salt, signature, public_key_url]
            .into_iter()
            .any(long),
    }
}

/// Checks the proof's shape (Nakama's messages for a missing part).
fn validate(proof: &ProviderProof) -> Result<(), AccountError> {
    if let Some(message) = missing(proof) {
        return Err(AccountError::Invalid(message.into()));
    }
    if too_long(proof) {
        return Err(AccountError::Invalid(format!(
            "{} credentials must be at most {MAX_PROOF_BYTES} bytes.",
            proof.provider().name()
        )));
    }
    Ok(())
}

/// Nakama's message when another account has the provider's id.
fn taken(provider: Provider) -> &'static str {
    match provider {
        Provider::Apple => "Apple ID is already in use.",
        Provider::Google => "Google ID is already in use.",
        Provider::Facebook => "Facebook ID is already in use.",
        Provider::FacebookInstantGame => "Facebook Instant Game ID is already in use.",
        Provider::Steam => "Steam ID is already in use.",
        Provider::GameCenter => "GameCenter ID is already in use.",
    }
}

/// What the client is told when a provider refused the proof or could not be asked (the cause
/// is logged): Nakama's answer, the same for both.
fn refused(provider: Provider, error: ProviderError, signing_in: bool) -> AccountError {
    match error {
        ProviderError::NotConfigured(_) => AccountError::NotConfigured(error.to_string()),
        ProviderError::Refused(..) | ProviderError::Unavailable(..) => {
            tracing::info!(provider = provider.name(), %error, "identity provider refused a proof");
            if signing_in && provider == Provider::FacebookInstantGame {
                // Nakama's authenticate answers this one case with DataLoss.
                return AccountError::DataLoss(
                    "Error extracting the Facebook Instant Game player ID or validating the signature"
                        .into(),
                );
            }
            AccountError::Unauthenticated(format!(
                "Could not authenticate {} profile.",
                provider.name()
            ))
        }
    }
}

impl Accounts {
    /// The player a proof names, as its provider tells it.
    pub async fn verify_proof(
        &self,
        proof: &ProviderProof,
        signing_in: bool,
    ) -> Result<ProviderProfile, AccountError> {
        validate(proof)?;
        let provider = proof.provider();
        self.providers
            .verify(proof)
            .await
            .map_err(|e| refused(provider, e, signing_in))
    }

    /// Signs in with a provider's proof: the account of the player's id there, created on first
    /// use when `create` is set (with the email, name and avatar the provider gives, as Nakama
    /// imports them).
    pub(super) async fn social_identity(
        &self,
        proof: ProviderProof,
        create: bool,
        username: Option<String>,
    ) -> Result<(Identity, bool, ProviderProfile), AccountError> {
        let profile = self.verify_proof(&proof, true).await?;
        let provider = proof.provider();
        let credential = Credential::Social(provider, profile.id.clone());
        let (identity, created) = self
            .find_or_create(
                credential,
                create,
                username,
                None,
                "User account not found.",
            )
            .await?;
        if created {
            self.import_profile(identity.user_id, provider, &profile)
                .await;
        }
        Ok((identity, created, profile))
    }

    /// Copies what the provider told of a new player onto their account, as Nakama does: a
    /// failure (an email another account has) is logged and the sign-in goes on.
    async fn import_profile(&self, user_id: Uuid, provider: Provider, profile: &ProviderProfile) {
        let update = AccountUpdate {
            display_name: profile.display_name.clone().filter(|n| n.len() <= 255),
            avatar_url: profile.avatar_url.clone().filter(|u| u.len() <= 512),
            ..AccountUpdate::default()
        };
        let now = crate::base::clock::now_ms();
        if !update.is_empty() {
            if let Err(error) = self.store.update_account(user_id, update, now).await {
                tracing::warn!(%error, provider = provider.name(), "could not import a new player's profile");
            }
        }
        if let Some(email) = profile
            .email
            .as_deref()
            .and_then(|e| super::validate_email(e).ok())
        {
            match self
                .store
                .link(user_id, Credential::Email(email), None, now)
                .await
            {
                Ok(()) | Err(StoreError::CredentialTaken) => {}
                Err(error) => {
                    tracing::warn!(%error, provider = provider.name(), "could not import a new player's email")
                }
            }
        }
    }

    /// Links the player a proof names to `user_id`'s account; the id at the provider that
    /// another account has is refused (`AlreadyExists`, Nakama's message). Answers the profile.
    pub async fn link_social(
        &self,
        user_id: Uuid,
        proof: ProviderProof,
    ) -> Result<ProviderProfile, AccountError> {
        let profile = self.verify_proof(&proof, false).await?;
        let provider = proof.provider();
        let credential = Credential::Social(provider, profile.id.clone());
        let now = crate::base::clock::now_ms();
        match self.store.link(user_id, credential, None, now).await {
            Ok(()) => Ok(profile),
            Err(StoreError::CredentialTaken) => {
                Err(AccountError::AlreadyExists(taken(provider).into()))
            }
            Err(StoreError::NotFound) => Err(AccountError::NotFound("Account not found.".into())),
            Err(other) => Err(other.into()),
        }
    }

    /// Unlinks the player a proof names from `user_id`'s account (the proof is checked, as in
    /// Nakama; an empty proof unlinks whichever id the account has there); refused when that
    /// id is not the account's or is its last way in.
    pub async fn unlink_social(
        &self,
        user_id: Uuid,
        proof: ProviderProof,
    ) -> Result<(), AccountError> {
        let id = if missing(&proof).is_some() {
            String::new()
        } else {
            self.verify_proof(&proof, false).await?.id
        };
        let credential = Credential::Social(proof.provider(), id);
        let now = crate::base::clock::now_ms();
        if self.store.unlink(user_id, credential, now).await? {
            Ok(())
        } else {
            Err(AccountError::PermissionDenied(LAST_CREDENTIAL.into()))
        }
    }

    /// The accounts whose id at `provider` is one of `ids` (friends' ids to import).
    pub async fn ids_by_social(
        &self,
        provider: Provider,
        ids: Vec<String>,
    ) -> Result<Vec<Uuid>, AccountError> {
        Ok(self.store.users_by_social(provider, ids).await?)
    }
}
