//! The app association documents iOS and Android fetch from the link domain's root before they
//! open its links in the app (they do not follow redirects, which is why a shortener serves
//! them itself): built once from configuration, served as they are.

use serde_json::json;

use crate::links::config::LinksConfig;

pub struct AppAssociations {
    /// `apple-app-site-association`, when iOS apps are configured.
    pub apple: Option<String>,
    /// `assetlinks.json`, when an Android app is configured.
    pub android: Option<String>,
}

impl AppAssociations {
    pub fn from_config(config: &LinksConfig) -> AppAssociations {
        let apple = (!config.apple_app_ids.is_empty()).then(|| {
            let components: Vec<_> = config
                .apple_paths
                .iter()
                .map(|p| json!({ "/": p }))
                .collect();
            // The current format (`appIDs`, `components`, iOS 13+) and, per app, the older one
            // (`appID`, `paths`) that iOS 12 reads.
            let mut details = vec![json!({
                "appIDs": config.apple_app_ids,
                "components": components,
            })];
            details.extend(
                config
                    .apple_app_ids
                    .iter()
                    .map(|id| json!({ "appID": id, "paths": config.apple_paths })),
            );
            json!({ "applinks": { "apps": [], "details": details } }).to_string()
        });
        let android = (!config.android_package.is_empty()).then(|| {
            json!([{
                "relation": ["delegate_permission/common.handle_all_urls"],
                "target": {
                    "namespace": "android_app",
                    "package_name": config.android_package,
                    "sha256_cert_fingerprints": config.android_sha256_fingerprints,
                }
            }])
            .to_string()
        });
        AppAssociations { apple, android }
    }
}
