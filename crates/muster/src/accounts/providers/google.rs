//! Google: the ID token (an RS256 JWT) checked against Google's key set, its issuer
//! (`accounts.google.com` or `https://accounts.google.com`), its audience (one of the configured
//! client ids) and its expiry. As Nakama, the email, name and picture are imported (the email
//! unless the token says it is not verified).

use super::jwks::{IdClaims, TokenRules};
use super::{profile, Provider, ProviderError, ProviderProfile, Providers};

pub(super) async fn verify(
    providers: &Providers,
    token: &str,
) -> Result<ProviderProfile, ProviderError> {
    let provider = Provider::Google;
    let config = &providers.config.google;
    if config.client_ids.is_empty() {
        return Err(ProviderError::NotConfigured(provider));
    }
    let claims: IdClaims = providers
        .jwks
        .verify(
            &providers.http,
            &providers.gates.google,
            &TokenRules {
                keys_url: &config.keys_url,
                issuers: &config.issuers,
                audiences: &config.client_ids,
            },
            token,
        )
        .await?;
    let email = claims.verified_email();
    profile(provider, claims.sub, email, claims.name, claims.picture)
}
