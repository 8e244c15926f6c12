//! Link codes: generated ones and the custom slugs a creator may ask for.
//!
//! Generated codes are random base62, not a counter encoded compactly: sequential codes let
//! anyone walk every link (and read how many there are). At the default 7 characters there are
//! 3.5 × 10¹² codes; a collision is refused by the store and the code drawn again.

use rand::Rng;

const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Shortest and longest custom slug.
pub const SLUG_CHARS: std::ops::RangeInclusive<usize> = 3..=64;

/// First path segments the links service answers itself, so no slug may take them.
const RESERVED: &[&str] = &[
    "api",
    "apple-app-site-association",
    "favicon.ico",
    "healthcheck",
    "index.html",
    "metrics",
    "qr",
    "robots.txt",
    "static",
];

/// A fresh random code of `length` base62 characters (from the thread's CSPRNG).
pub fn generate(length: usize) -> String {
    let mut rng = rand::rng();
    (0..length)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn is_code_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// True when `text` could be a code or slug at all: what `GET /{code}` looks up (anything else
/// is 404 without a database read).
pub fn is_code_shaped(text: &str) -> bool {
    (1..=*SLUG_CHARS.end()).contains(&text.len()) && text.chars().all(is_code_char)
}

/// Why a custom slug is refused, if it is.
pub fn slug_problem(slug: &str) -> Option<String> {
    if !SLUG_CHARS.contains(&slug.chars().count()) {
        return Some(format!(
            "A custom slug has {} to {} characters.",
            SLUG_CHARS.start(),
            SLUG_CHARS.end()
        ));
    }
    if !slug.chars().all(is_code_char) {
        return Some("A custom slug may use only letters, digits, '-' and '_'.".into());
    }
    if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(slug)) {
        return Some(format!("The slug {slug:?} is reserved."));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_codes_are_base62_of_the_asked_length_and_differ() {
        let a = generate(7);
        let b = generate(7);
        assert_eq!(a.len(), 7);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()), "{a}");
        assert_ne!(a, b);
        assert!(is_code_shaped(&a));
    }

    #[test]
    fn slugs_are_checked() {
        assert_eq!(slug_problem("summer-event_2026"), None);
        assert!(slug_problem("ab").is_some());
        assert!(slug_problem(&"a".repeat(65)).is_some());
        assert!(slug_problem("a/b").is_some());
        assert!(slug_problem("emoji🙂").is_some());
        assert!(slug_problem("API").is_some(), "reserved, in any case");
        assert!(!is_code_shaped("x.y"));
        assert!(!is_code_shaped(""));
    }
}
