//! `nk.httpRequest`: the one way out of the sandbox. Only hosts the settings allow
//! (`runtime.js_http_allow`), redirects not followed (a redirect could leave the list), a
//! timeout and a most-bytes bound on the answer.

use std::collections::BTreeMap;
use std::time::Duration;

use muster_js::JsError;
use serde_json::{json, Value};

use super::context::{invalid, Args, ServerHost};

pub(super) const NAMES: &[&str] = &["httpRequest"];

pub(super) fn call(host: &ServerHost, _name: &str, args: &Args) -> Result<Value, JsError> {
    let rules = &host.http;
    // httpRequest(url, method, headers?, body?, timeout?, insecure?)
    let url = args.string(0, "url")?;
    let url = reqwest::Url::parse(&url).map_err(|e| invalid(format!("url: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("url: only http and https are allowed"));
    }
    if !rules.allows(&url) {
        return Err(JsError::new(
            format!(
                "httpRequest: {} is not in runtime.js_http_allow",
                url.host_str().unwrap_or_default()
            ),
            7,
        ));
    }
    let method = args.opt_string(1).unwrap_or_else(|| "get".into());
    let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
        .map_err(|_| invalid(format!("method {method:?} is not an HTTP method")))?;
    let timeout = args
        .int(4, "timeout")?
        .filter(|ms| *ms > 0)
        .map_or(rules.timeout, |ms| {
            rules.timeout.min(Duration::from_millis(ms as u64))
        });
    let mut request = rules.client.request(method, url).timeout(timeout);
    if let Some(headers) = args.get(2).as_object() {
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str().unwrap_or_default());
        }
    }
    if let Some(body) = args.get(3).as_str() {
        request = request.body(body.to_owned());
    }
    let max_bytes = rules.max_bytes;
    let answer = host.wait(async move {
        let response = request.send().await?;
        let code = response.status().as_u16();
        let mut headers = BTreeMap::new();
        for (name, value) in response.headers() {
            headers.insert(
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            );
        }
        match crate::base::http_answer::read_bounded(response, max_bytes).await? {
            Some(body) => Ok::<_, reqwest::Error>(Ok((code, headers, body))),
            None => Ok(Err(max_bytes)),
        }
    })?;
    match answer {
        Ok(Ok((code, headers, body))) => Ok(json!({
            "code": code,
            "headers": headers,
            "body": String::from_utf8_lossy(&body),
        })),
        Ok(Err(max)) => Err(JsError::new(
            format!("httpRequest: the answer is larger than {max} bytes"),
            8,
        )),
        Err(error) if error.is_timeout() => Err(JsError::new("httpRequest: timed out", 4)),
        Err(error) => Err(JsError::new(format!("httpRequest: {error}"), 14)),
    }
}
