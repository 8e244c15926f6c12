//! Friends imported from an identity provider: the player's friends at Facebook or Steam who
//! have accounts here become their friends ([`Friends::import`]), as Nakama's `?sync=true`
//! sign-ins and `POST /v2/friend/{facebook,steam}` do.

use uuid::Uuid;

use super::{FriendError, Friends};
use crate::accounts::providers::Provider;
use crate::accounts::AccountError;

/// Why friends could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The provider refused the token or could not be asked (Nakama's answer for both).
    #[error("Could not authenticate {} profile.", .0.name())]
    Refused(Provider),
    /// Only Facebook and Steam have friends' lists to import.
    #[error("Friends are imported from Facebook and Steam only.")]
    NoFriendsList,
    #[error(transparent)]
    Accounts(#[from] AccountError),
    #[error(transparent)]
    Friends(#[from] FriendError),
}

impl Friends {
    /// Makes `user`'s friends at `provider` (listed with `token` for Facebook, by the player's
    /// `provider_id` for Steam) who have accounts here their friends; with `reset`, their
    /// other friends here go first.
    pub async fn import_from_provider(
        &self,
        user: Uuid,
        username: &str,
        (provider, token): (Provider, String),
        provider_id: &str,
        reset: bool,
    ) -> Result<(), ImportError> {
        let providers = self.accounts.providers();
        let (listed, label) = match provider {
            Provider::Facebook => (providers.facebook_friends(&token).await, "facebook"),
            Provider::Steam => (providers.steam_friends(provider_id).await, "steam"),
            _ => return Err(ImportError::NoFriendsList),
        };
        let friends = listed.map_err(|error| {
            tracing::info!(%error, "a friends' list was refused by its provider");
            ImportError::Refused(provider)
        })?;
        let mut ids = self.accounts.ids_by_social(provider, friends).await?;
        // A provider's list may name more players than one import takes: the first ones.
        ids.truncate(super::MAX_IMPORT);
        self.import(user, username, label, ids, reset).await?;
        Ok(())
    }
}
