//! Names that become part of ids and NATS subjects (a node's name, a subject prefix).

/// Whether `c` may appear in a name that becomes part of an id or a NATS subject (a node's
/// name, a subject prefix): ASCII letters, digits, `-` and `_`.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// A non-empty name of [`is_name_char`]s.
pub fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(is_name_char)
}
