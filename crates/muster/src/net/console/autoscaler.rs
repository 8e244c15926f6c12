//! The autoscaler's decisions with their reasons: read from the autoscaler's own endpoint
//! (`console.autoscaler_url` + `/decisions`; `muster autoscale run` is a process of its own) and
//! passed on as it answered.

use std::time::Duration;

use axum::Json;
use serde_json::{json, Value};

use super::auth::{As, Readonly};
use super::Answer;

/// How long the autoscaler is waited for.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest answer read (200 decisions are far smaller).
const MAX_ANSWER: usize = 1 << 20;

/// `GET /api/autoscaler`: `{configured: false}` without `console.autoscaler_url`; else the
/// autoscaler's answer, or `{error}` when it cannot be read.
pub async fn decisions(As { state, .. }: As<Readonly>) -> Answer {
    let base = state
        .services
        .config
        .console
        .autoscaler_url
        .trim_end_matches('/');
    if base.is_empty() {
        return Ok(Json(json!({ "configured": false })));
    }
    let url = format!("{base}/decisions");
    let answer = match read(&url).await {
        Ok(mut answer) => {
            answer["configured"] = true.into();
            answer
        }
        Err(error) => json!({"configured": true, "error": error}),
    };
    Ok(Json(answer))
}

async fn read(url: &str) -> Result<Value, String> {
    let client = reqwest::Client::builder()
        .timeout(ASK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("the autoscaler did not answer: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("the autoscaler answered {}", response.status()));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("the autoscaler's answer was cut: {e}"))?;
    if body.len() > MAX_ANSWER {
        return Err("the autoscaler's answer is too large".into());
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|_| "the autoscaler's answer is not JSON".to_string())?;
    if value.is_object() {
        Ok(value)
    } else {
        Err("the autoscaler's answer is not a JSON object".into())
    }
}
