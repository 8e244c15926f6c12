//! The configuration in force, with every secret redacted (admins only).

use axum::Json;
use serde_json::Value;

use super::auth::{Admin, As};
use super::{Answer, ConsoleApiError};

/// What a redacted value reads.
const REDACTED: &str = "(redacted)";

/// `GET /api/config`.
pub async fn config(As { state, .. }: As<Admin>) -> Answer {
    let mut value =
        serde_json::to_value(&*state.services.config).map_err(|_| ConsoleApiError::Internal)?;
    redact(&mut value);
    Ok(Json(value))
}

/// Blanks every non-empty setting whose name says it is a secret, every variable of a module's
/// environment, and the credentials of every
/// URL (`postgres://user:password@host` → `postgres://(redacted)@host`).
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, field) in map.iter_mut() {
                let secret = ["key", "password", "secret", "token"]
                    .iter()
                    .any(|word| name.contains(word));
                match field {
                    // A module's environment (`runtime.env`) holds its API keys.
                    Value::Object(vars) if name == "env" => {
                        for var in vars.values_mut() {
                            *var = Value::String(REDACTED.into());
                        }
                    }
                    Value::String(text) if secret && !text.is_empty() => {
                        *text = REDACTED.into();
                    }
                    Value::Array(items) if secret => {
                        for item in items.iter_mut().filter(|i| i.is_string()) {
                            *item = Value::String(REDACTED.into());
                        }
                    }
                    Value::String(text) => {
                        if let Some(clean) = without_credentials(text) {
                            *text = clean;
                        }
                    }
                    other => redact(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// `text` with the user info of each URL in it replaced (several URLs may be comma-separated),
/// when it has any.
fn without_credentials(text: &str) -> Option<String> {
    if !text.contains("://") || !text.contains('@') {
        return None;
    }
    let parts: Vec<String> = text
        .split(',')
        .map(|part| match part.split_once("://") {
            Some((scheme, rest)) => match rest.split_once('@') {
                Some((_, host)) => format!("{scheme}://{REDACTED}@{host}"),
                None => part.to_owned(),
            },
            None => part.to_owned(),
        })
        .collect();
    Some(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_url_credentials_are_redacted() {
        let mut config = serde_json::to_value(crate::config::Config {
            database_url: "postgres://muster:hunter2@db:5432/muster".into(),
            server_key: "sekrit".into(),
            ..Default::default()
        })
        .expect("serializes");
        config["console"]["admin_password"] = "pw".into();
        config["cluster"]["nats_url"] = "nats://u:p@a:4222,nats://b:4222".into();
        config["runtime"]["env"] = serde_json::json!({"STRIPE": "sk_live_x"});
        redact(&mut config);
        let text = config.to_string();
        for secret in ["hunter2", "sekrit", "\"pw\"", "u:p@", "sk_live_x"] {
            assert!(!text.contains(secret), "{secret} leaked");
        }
        assert_eq!(
            config["database_url"],
            "postgres://(redacted)@db:5432/muster"
        );
        assert_eq!(
            config["cluster"]["nats_url"],
            "nats://(redacted)@a:4222,nats://b:4222"
        );
        assert_eq!(
            config["console"]["listen"], "127.0.0.1:7353",
            "the rest is as it is"
        );
    }
}
