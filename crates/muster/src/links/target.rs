//! What a link may point to, and the URL a visitor is sent to.
//!
//! A target is an absolute http or https URL with a host, no credentials, not longer than
//! `links.max_url_bytes`, not on a blocked domain and not the shortener itself (a link to a
//! link loops). It is stored normalized (`url`'s serialization: lower-case host, punycode,
//! percent-encoding), so two spellings of one URL share a code.

use url::Url;

/// The checks every URL given to the links service passes.
pub struct TargetRules {
    max_bytes: usize,
    /// Lower-case host names, each blocking itself and its subdomains.
    blocked: Vec<String>,
    /// The configured public host of the shortener: no link may point anywhere on it.
    own_host: Option<String>,
}

impl TargetRules {
    pub fn new(max_bytes: usize, blocked: &[String], public_url: &str) -> TargetRules {
        TargetRules {
            max_bytes,
            blocked: blocked
                .iter()
                .map(|d| d.trim_matches('.').to_ascii_lowercase())
                .collect(),
            own_host: Url::parse(public_url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_ascii_lowercase)),
        }
    }

    /// The normalized URL, or why `raw` (the value of `field`) may not be linked to.
    /// `called_as` is the host:port the client called the shortener on: a link to exactly that
    /// is refused too.
    pub fn check(&self, field: &str, raw: &str, called_as: Option<&str>) -> Result<String, String> {
        if raw.len() > self.max_bytes {
            return Err(format!(
                "{field} is {} bytes; at most {} are accepted.",
                raw.len(),
                self.max_bytes
            ));
        }
        let url =
            Url::parse(raw.trim()).map_err(|e| format!("{field} is not a valid URL: {e}."))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "{field}: only http and https URLs can be linked to, not {}:.",
                url.scheme()
            ));
        }
        let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
            return Err(format!("{field} has no host."));
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("{field} must not carry a user name or password."));
        }
        let host = host.trim_end_matches('.');
        if let Some(blocked) = self
            .blocked
            .iter()
            .find(|d| host == d.as_str() || host.ends_with(&format!(".{d}")))
        {
            return Err(format!("{field}: links to {blocked} are not allowed here."));
        }
        let on_own_host = self.own_host.as_deref() == Some(host)
            || called_as.is_some_and(|called| {
                let port = url.port_or_known_default().unwrap_or(80);
                called.eq_ignore_ascii_case(&format!("{host}:{port}"))
                    || (port == 80 && called.eq_ignore_ascii_case(host))
            });
        if on_own_host {
            return Err(format!(
                "{field} points at this link shortener; a link to a link would loop."
            ));
        }
        let normalized: String = url.into();
        if normalized.len() > self.max_bytes {
            return Err(format!(
                "{field} is {} bytes once normalized; at most {} are accepted.",
                normalized.len(),
                self.max_bytes
            ));
        }
        Ok(normalized)
    }
}

/// `target` with the visitor's query string added to its own (`?a=1` + `b=2` → `?a=1&b=2`),
/// before any fragment.
pub fn with_query(target: &str, query: &str) -> String {
    if query.is_empty() {
        return target.to_owned();
    }
    let (base, fragment) = match target.split_once('#') {
        Some((base, fragment)) => (base, Some(fragment)),
        None => (target, None),
    };
    let joiner = match base.find('?') {
        Some(at) if at + 1 == base.len() || base.ends_with('&') => "",
        Some(_) => "&",
        None => "?",
    };
    let mut merged = format!("{base}{joiner}{query}");
    if let Some(fragment) = fragment {
        merged.push('#');
        merged.push_str(fragment);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> TargetRules {
        TargetRules::new(200, &["evil.example".into()], "https://go.example.com")
    }

    #[test]
    fn good_urls_are_normalized() {
        let r = rules();
        assert_eq!(
            r.check("url", "HTTPS://Game.Example.com/invite?x=1", None),
            Ok("https://game.example.com/invite?x=1".into())
        );
        assert_eq!(
            r.check("url", "http://bücher.example/", None),
            Ok("http://xn--bcher-kva.example/".into())
        );
    }

    #[test]
    fn bad_urls_say_why() {
        let r = rules();
        let refused = |raw: &str| r.check("url", raw, Some("127.0.0.1:7352")).unwrap_err();
        assert!(refused("javascript:alert(1)").contains("only http and https"));
        assert!(refused("java\nscript:alert(1)").contains("only http and https"));
        assert!(refused("data:text/html,hi").contains("only http and https"));
        assert!(refused("/relative").contains("not a valid URL"));
        assert!(refused("https://user:pw@game.example.com/").contains("user name or password"));
        assert!(refused(&format!("https://a.example/{}", "x".repeat(300))).contains("at most 200"));
        assert!(refused("https://evil.example/").contains("not allowed"));
        assert!(refused("https://a.b.EVIL.example./x").contains("not allowed"));
        assert!(refused("https://go.example.com/abc").contains("loop"));
        assert!(refused("http://127.0.0.1:7352/abc").contains("loop"));
        assert!(r
            .check("url", "http://127.0.0.1:7350/", Some("127.0.0.1:7352"))
            .is_ok());
        assert!(r.check("url", "https://notevil.example/", None).is_ok());
    }

    #[test]
    fn random_input_never_panics() {
        use rand::{Rng, SeedableRng};
        let r = rules();
        let pieces = [
            "http://",
            "https://",
            "javascript:",
            "@",
            ":",
            "/",
            "?",
            "#",
            "&",
            "%",
            "%zz",
            "[",
            "]",
            "::1",
            "xn--",
            "ü",
            "\u{0}",
            "\n",
            " ",
            ".",
            "evil.example",
            "go.example.com",
            "127.0.0.1:7352",
            "a",
            "=",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(19);
        for _ in 0..20_000 {
            let text: String = (0..rng.random_range(0..12))
                .map(|_| pieces[rng.random_range(0..pieces.len())])
                .collect();
            if let Ok(normalized) = r.check("url", &text, Some("127.0.0.1:7352")) {
                assert!(normalized.starts_with("http"), "{text:?} -> {normalized:?}");
                let merged = with_query(&normalized, "a=1");
                assert!(merged.contains("a=1"), "{merged}");
            }
            let _ = with_query(&text, &text);
            let _ = crate::links::code::slug_problem(&text);
        }
    }

    #[test]
    fn visitor_query_is_passed_through() {
        assert_eq!(with_query("https://a.example/p", ""), "https://a.example/p");
        assert_eq!(
            with_query("https://a.example/p", "ref=1"),
            "https://a.example/p?ref=1"
        );
        assert_eq!(
            with_query("https://a.example/p?x=1#top", "ref=1&b=%20"),
            "https://a.example/p?x=1&ref=1&b=%20#top"
        );
        assert_eq!(
            with_query("https://a.example/p?", "ref=1"),
            "https://a.example/p?ref=1"
        );
    }
}
