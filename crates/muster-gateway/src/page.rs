//! The query page (`GET` on the endpoint): a query and its variables, the caller's token, a Run
//! button, the JSON answer, and the schema's query fields on demand.
//!
//! It is one self-contained HTML file, its style and script inline, and it loads nothing: no
//! asset from a CDN or anywhere else at run time, so it works offline and shows exactly the code
//! in this repository. (GraphiQL, as async-graphql serves it, loads React and its own bundle from
//! unpkg; vendoring those is some 1.5 MB of minified third-party code and routes of their own.)
//! [`CONTENT_SECURITY_POLICY`] makes the browser hold the page to that.

/// The page's HTML, its endpoint a placeholder.
const PAGE: &str = include_str!("page.html");

/// The policy to serve the page with: nothing may load from anywhere (its style and script are
/// inline), and it may talk to its own origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The page, posting its queries to `endpoint` (a path on the same origin, e.g. `/graphql`).
pub fn query_page(endpoint: &str) -> String {
    PAGE.replace("{{ENDPOINT}}", &escape_attribute(endpoint))
}

/// `text` safe inside a double-quoted HTML attribute.
fn escape_attribute(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_and_posts_to_its_endpoint() {
        let page = query_page("/graphql");
        assert!(page.contains(r#"data-endpoint="/graphql""#));
        let lower = page.to_lowercase();
        for external in [
            "http://", "https://", "//unpkg", "//cdn", " src=", " href=", "@import",
        ] {
            assert!(!lower.contains(external), "the page holds {external:?}");
        }
        let hostile = query_page(r#""><script>alert(1)</script>"#);
        assert!(!hostile.contains("<script>alert"));
    }
}
