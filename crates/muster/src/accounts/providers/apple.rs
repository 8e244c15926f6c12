//! Sign in with Apple: the identity token (an RS256 JWT) checked against Apple's key set, its
//! issuer, its audience (one of the configured bundle ids) and its expiry. Nakama imports the
//! email only; so does this.

use super::jwks::{IdClaims, TokenRules};
use super::{profile, Provider, ProviderError, ProviderProfile, Providers};

pub(super) async fn verify(
    providers: &Providers,
    token: &str,
) -> Result<ProviderProfile, ProviderError> {
    let provider = Provider::Apple;
    let config = &providers.config.apple;
    if config.bundle_ids.is_empty() {
        return Err(ProviderError::NotConfigured(provider));
    }
    let claims: IdClaims = providers
        .jwks
        .verify(
            &providers.http,
            &providers.gates.apple,
            &TokenRules {
                keys_url: &config.keys_url,
                issuers: std::slice::from_ref(&config.issuer),
                audiences: &config.bundle_ids,
            },
            token,
        )
        .await?;
    let email = claims.verified_email();
    profile(provider, claims.sub, email, None, None)
}
