//! Console users' roles and the rules for a new user.

use serde::Serialize;

use super::ConsoleError;
use crate::console::config::{is_console_username, MAX_CONSOLE_USERNAME};

/// Longest password accepted, in bytes (hashing a longer one is work an attacker chooses).
pub const MAX_PASSWORD: usize = 256;
/// Shortest password accepted for a new user.
pub const MIN_PASSWORD: usize = 8;

/// What a console user may do. Each role allows what the ones below it allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Sees every page; changes nothing.
    Readonly,
    /// Also changes players' data, storage, leaderboards, matches and calls RPCs.
    Developer,
    /// Also manages console users and reads the configuration.
    Admin,
}

impl Role {
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "readonly" => Some(Role::Readonly),
            "developer" => Some(Role::Developer),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Readonly => "readonly",
            Role::Developer => "developer",
            Role::Admin => "admin",
        }
    }

    /// Whether this role may do what `needed` may.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

/// Refuses a bad name or password for a new console user.
pub fn check_new(username: &str, password: &str) -> Result<(), ConsoleError> {
    if !is_console_username(username) {
        return Err(ConsoleError::Invalid(format!(
            "A username is 1 to {MAX_CONSOLE_USERNAME} letters, digits, '.', '-' or '_'."
        )));
    }
    if password.len() < MIN_PASSWORD || password.len() > MAX_PASSWORD {
        return Err(ConsoleError::Invalid(format!(
            "A password is {MIN_PASSWORD} to {MAX_PASSWORD} bytes."
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_allow_what_lower_roles_allow() {
        assert!(Role::Admin.allows(Role::Developer));
        assert!(Role::Developer.allows(Role::Readonly));
        assert!(!Role::Readonly.allows(Role::Developer));
        assert!(!Role::Developer.allows(Role::Admin));
        for role in [Role::Readonly, Role::Developer, Role::Admin] {
            assert_eq!(Role::parse(role.name()), Some(role));
        }
        assert_eq!(Role::parse("root"), None);
    }

    #[test]
    fn new_users_need_a_plain_name_and_a_fair_password() {
        assert!(check_new("ops-1", "long enough").is_ok());
        assert!(check_new("<script>", "long enough").is_err());
        assert!(check_new("", "long enough").is_err());
        assert!(check_new("ops", "short").is_err());
        assert!(check_new("ops", &"x".repeat(MAX_PASSWORD + 1)).is_err());
    }
}
