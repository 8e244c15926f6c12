//! The URL an origin receives for a field: its path template with each `{argument}` filled in,
//! so that an argument fills its own place and never changes which resource is asked for.
//!
//! Percent-encoding every argument is not enough on its own: URL parsing (the url crate, as
//! browsers do) reads `%2E` as `.` and removes dot segments, so `..` encoded still climbs out of
//! `/items/{category}` to `/`, `.` turns it into `/items/`. So two checks, either enough alone:
//!
//! 1. an argument that is empty or holds a `.` or `..` segment, however percent-encoded (`%2e`,
//!    `.%2E`, `%252e%252e`, `a/..`, `a%2f..`), is refused before anything else;
//! 2. the URL is parsed (and so normalised) as it will be sent, and must keep the template's
//!    scheme, host and port, its number of path segments, and every fixed segment in its place.

use percent_encoding::{percent_decode_str, utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::Url;

/// Why arguments were refused; the message names the argument and says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginUrlError {
    #[error("argument {0} must not be empty: it would change the origin's path")]
    Empty(String),
    #[error(
        "argument {0} must not be \".\" or \"..\" (however encoded) nor hold such a path \
         segment: it would change the origin's path"
    )]
    DotSegment(String),
    #[error("the arguments would change the origin's path")]
    Shape,
}

/// A field's URL template, checked once at start; [`OriginUrl::fill`] makes each request's URL.
#[derive(Debug, Clone)]
pub struct OriginUrl {
    /// The origin's base URL (without a trailing `/`) and the field's path, placeholders in it.
    template: String,
    /// The field's arguments in order, and whether each fills a placeholder of the path.
    arguments: Vec<(String, bool)>,
    /// What every URL must keep: scheme, host, port.
    scheme: String,
    host: Option<String>,
    port: Option<u16>,
    /// The path segments of every URL: `Some` for a fixed one (it must come out exactly so once
    /// normalised), `None` for one an argument fills.
    segments: Vec<Option<String>>,
}

impl OriginUrl {
    /// The template for `path` (with `{argument}` placeholders) under `base_url`; an error names
    /// what is wrong with them.
    pub fn new(base_url: &str, path: &str, arguments: &[String]) -> Result<OriginUrl, String> {
        let fixed_path = path.split(['?', '#']).next().unwrap_or_default();
        if fixed_path
            .split('/')
            .any(|segment| !segment.contains('{') && holds_dot_segment(segment))
        {
            return Err(format!("path {path:?} must not hold '.' or '..' segments"));
        }
        let mut origin_url = OriginUrl {
            template: format!("{}{path}", base_url.trim_end_matches('/')),
            arguments: arguments
                .iter()
                .map(|name| (name.clone(), path.contains(&format!("{{{name}}}"))))
                .collect(),
            scheme: String::new(),
            host: None,
            port: None,
            segments: Vec::new(),
        };
        // Filled twice with different values: the segments that differ are the arguments'; the
        // others are fixed, as the url crate normalises them.
        let parse = |value: &str| {
            let url = origin_url.render(arguments.iter().map(|_| value));
            Url::parse(&url).map_err(|e| format!("{url:?} is not a URL: {e}"))
        };
        let (a, b) = (parse("a")?, parse("b")?);
        let (a_segments, b_segments) = (segments(&a), segments(&b));
        if a_segments.len() != b_segments.len() {
            return Err(format!(
                "path {path:?}: its segments depend on its arguments"
            ));
        }
        origin_url.segments = a_segments
            .iter()
            .zip(&b_segments)
            .map(|(a, b)| (a == b).then(|| (*a).to_owned()))
            .collect();
        origin_url.scheme = a.scheme().to_owned();
        origin_url.host = a.host_str().map(str::to_owned);
        origin_url.port = a.port_or_known_default();
        Ok(origin_url)
    }

    /// The URL for `values` (the field's arguments, in order), or why they are refused.
    pub fn fill(&self, values: &[String]) -> Result<Url, OriginUrlError> {
        for ((name, in_path), value) in self.arguments.iter().zip(values) {
            if !in_path {
                continue;
            }
            if value.is_empty() {
                return Err(OriginUrlError::Empty(name.clone()));
            }
            if holds_dot_segment(value) {
                return Err(OriginUrlError::DotSegment(name.clone()));
            }
        }
        let url = Url::parse(&self.render(values.iter().map(String::as_str)))
            .map_err(|_| OriginUrlError::Shape)?;
        self.check_shape(&url)?;
        Ok(url)
    }

    /// The template with each placeholder replaced by its value, percent-encoded (every byte but
    /// letters and digits, so no value can add a `/`, `?` or `#`, nor another `{placeholder}`).
    fn render<'v>(&self, values: impl Iterator<Item = &'v str>) -> String {
        let mut url = self.template.clone();
        for ((name, in_path), value) in self.arguments.iter().zip(values) {
            if *in_path {
                let encoded = utf8_percent_encode(value, NON_ALPHANUMERIC).to_string();
                url = url.replace(&format!("{{{name}}}"), &encoded);
            }
        }
        url
    }

    /// Whether `url`, as it will be sent, still asks for the template's resource: same scheme,
    /// host and port, as many path segments, the fixed ones unchanged in their places.
    fn check_shape(&self, url: &Url) -> Result<(), OriginUrlError> {
        let got = segments(url);
        let same_place = url.scheme() == self.scheme
            && url.host_str() == self.host.as_deref()
            && url.port_or_known_default() == self.port;
        let same_path = got.len() == self.segments.len()
            && self
                .segments
                .iter()
                .zip(&got)
                .all(|(fixed, got)| fixed.as_deref().is_none_or(|fixed| fixed == *got));
        match same_place && same_path {
            true => Ok(()),
            false => Err(OriginUrlError::Shape),
        }
    }
}

fn segments(url: &Url) -> Vec<&str> {
    url.path_segments()
        .map(Iterator::collect)
        .unwrap_or_default()
}

/// Whether `value`, percent-decoded as many times as it decodes, has a `.` or `..` segment
/// between `/` or `\` (which the url crate reads as `/` in http URLs). Decoding repeatedly also
/// catches what an origin that decodes once more than it should would see.
fn holds_dot_segment(value: &str) -> bool {
    let mut decoded = value.to_owned();
    // Each pass that changes the text turns at least one `%XX` into a shorter or `%`-free
    // sequence, so this ends within as many passes as the value has `%`.
    loop {
        let next = percent_decode_str(&decoded)
            .decode_utf8_lossy()
            .into_owned();
        if next == decoded {
            break;
        }
        decoded = next;
    }
    decoded
        .split(['/', '\\'])
        .any(|segment| segment == "." || segment == "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items() -> OriginUrl {
        OriginUrl::new(
            "http://origin.test:8080/api/v1/",
            "/items/{category}/top",
            &["category".into()],
        )
        .expect("template")
    }

    #[test]
    fn an_argument_fills_its_own_segment() {
        let url = items().fill(&["swords".into()]).expect("url");
        assert_eq!(
            url.as_str(),
            "http://origin.test:8080/api/v1/items/swords/top"
        );
        let url = items().fill(&["a/b?c=1#d".into()]).expect("url");
        assert_eq!(
            url.as_str(),
            "http://origin.test:8080/api/v1/items/a%2Fb%3Fc%3D1%23d/top"
        );
        // Dots that are not a dot segment are a name like any other.
        let url = items().fill(&["...".into()]).expect("url");
        assert_eq!(url.path(), "/api/v1/items/%2E%2E%2E/top");
    }

    #[test]
    fn dot_segments_are_refused_however_encoded() {
        for value in [
            ".",
            "..",
            "%2e",
            "%2E",
            "%2e%2e",
            "%2E%2e",
            ".%2E",
            "%2e.",
            "%252e%252e",
            "a/..",
            "a%2f..",
            "a%2F%2e%2e",
            "../admin",
            "..%2fadmin",
            "..\\",
            "a\\..\\b",
            "./x",
        ] {
            assert_eq!(
                items().fill(&[value.into()]),
                Err(OriginUrlError::DotSegment("category".into())),
                "{value:?}"
            );
        }
        assert_eq!(
            items().fill(&[String::new()]),
            Err(OriginUrlError::Empty("category".into()))
        );
    }

    #[test]
    fn a_url_that_lost_its_shape_is_refused() {
        let template = items();
        for url in [
            "http://origin.test:8080/api/v1/items/x/top",
            "http://origin.test:8080/api/v1/items/%2E%2E%2F/top",
        ] {
            let url = Url::parse(url).expect("url");
            assert_eq!(template.check_shape(&url), Ok(()), "{url}");
        }
        for url in [
            // What `..` percent-encoded became before this check: the url crate removes it.
            "http://origin.test:8080/api/v1/items/%2E%2E/top",
            "http://origin.test:8080/api/v1/items/top",
            "http://origin.test:8080/api/v1/things/x/top",
            "http://origin.test:8080/api/v1/items/x/top/more",
            "http://elsewhere.test:8080/api/v1/items/x/top",
            "http://origin.test:9090/api/v1/items/x/top",
            "https://origin.test:8080/api/v1/items/x/top",
        ] {
            let url = Url::parse(url).expect("url");
            assert_eq!(
                template.check_shape(&url),
                Err(OriginUrlError::Shape),
                "{url}"
            );
        }
    }

    #[test]
    fn a_template_with_dot_segments_is_refused() {
        let arguments = ["c".to_owned()];
        for path in ["/items/../{c}", "/./{c}", "/items/%2e%2e/{c}"] {
            let error = OriginUrl::new("http://origin.test", path, &arguments).expect_err(path);
            assert!(error.contains("'.' or '..'"), "{error}");
        }
        assert!(OriginUrl::new("http://origin.test", "/items/{c}.json", &arguments).is_ok());
    }
}
