//! The links service's HTML: the index page with its form, the page showing a new link, and the
//! page a browser visitor sees for a link that is gone or unknown. Self-contained (inline CSS,
//! no script, no external asset), and served with a Content-Security-Policy that allows nothing
//! else.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f4f4f6;color:#1d1d22}\
main{max-width:34rem;margin:3rem auto;padding:2rem;background:#fff;border-radius:12px;box-shadow:0 2px 12px #0001}\
h1{font-size:1.4rem;margin-top:0}label{display:block;margin:.9rem 0 .3rem;font-weight:600}\
input{width:100%;box-sizing:border-box;padding:.55rem;border:1px solid #bbb;border-radius:6px;font-size:1rem}\
button{margin-top:1.2rem;padding:.6rem 1.4rem;border:0;border-radius:6px;background:#3b5bdb;color:#fff;font-size:1rem}\
.error{background:#fff0f0;border:1px solid #e03131;padding:.7rem;border-radius:6px}\
.made{background:#f0fff4;border:1px solid #2f9e44;padding:.7rem;border-radius:6px;word-break:break-all}\
small{color:#666}";

/// Escapes text for HTML element content and quoted attribute values. Five replacements; not
/// worth a dependency.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A page: `body` is HTML already escaped where it holds user text.
fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <title>{}</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>",
        escape(title)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response()
}

fn form(max_url_bytes: usize, url: &str, slug: &str) -> String {
    format!(
        "<form method=\"post\" action=\"/\">\
         <label for=\"url\">Long URL</label>\
         <input id=\"url\" name=\"url\" type=\"url\" required maxlength=\"{max_url_bytes}\" \
          placeholder=\"https://example.com/invite?team=red\" value=\"{}\">\
         <label for=\"slug\">Custom code <small>(optional: 3 to 64 letters, digits, - or _)</small></label>\
         <input id=\"slug\" name=\"slug\" pattern=\"[A-Za-z0-9_\\-]{{3,64}}\" value=\"{}\">\
         <label for=\"key\">Key <small>(the links API key or a session token; not needed where public creation is on)</small></label>\
         <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"off\">\
         <button id=\"shorten\" type=\"submit\">Shorten</button></form>",
        escape(url),
        escape(slug)
    )
}

/// The index page: the form, with a notice above it (already HTML) if any.
pub fn index(
    status: StatusCode,
    max_url_bytes: usize,
    notice: &str,
    url: &str,
    slug: &str,
) -> Response {
    let body = format!(
        "<h1>Shorten a link</h1>{notice}{}",
        form(max_url_bytes, url, slug)
    );
    page(status, "Shorten a link", &body)
}

/// The form again, with why the last attempt was refused.
pub fn refused(
    status: StatusCode,
    max_url_bytes: usize,
    message: &str,
    url: &str,
    slug: &str,
) -> Response {
    let notice = format!(
        "<p class=\"error\" id=\"error\" role=\"alert\">{}</p>",
        escape(message)
    );
    index(status, max_url_bytes, &notice, url, slug)
}

/// The new (or existing) link, its QR code, and the form for the next one.
pub fn made(
    status: StatusCode,
    max_url_bytes: usize,
    short_url: &str,
    code: &str,
    url: &str,
) -> Response {
    let notice = format!(
        "<div class=\"made\"><p>Your link: <a id=\"short-url\" href=\"{short}\">{short}</a></p>\
         <p><small>to <span id=\"long-url\">{long}</span></small></p>\
         <img id=\"qr\" alt=\"QR code of the link\" width=\"200\" height=\"200\" src=\"/{code}/qr.svg\"></div>",
        short = escape(short_url),
        long = escape(url),
        code = escape(code),
    );
    index(status, max_url_bytes, &notice, "", "")
}

/// What a browser shows for a link that cannot be followed.
pub fn message(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<h1>{}</h1><p id=\"error\">{}</p>",
        escape(status.canonical_reason().unwrap_or("Error")),
        escape(message)
    );
    page(status, "Link", &body)
}

/// True when the client asked for HTML (a browser) rather than JSON.
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup() {
        assert_eq!(
            super::escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
