//! Which platform a visitor is on, from the `User-Agent`, to pick the link's fallback for when
//! the app is not installed (when it is, iOS and Android open the app without asking us).

/// A visitor's platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Ios,
    Android,
    Desktop,
}

impl Platform {
    pub fn from_user_agent(user_agent: &str) -> Platform {
        // iPadOS 13+ in desktop mode says "Macintosh" and cannot be told from a Mac here.
        if ["iPhone", "iPad", "iPod"]
            .iter()
            .any(|device| user_agent.contains(device))
        {
            Platform::Ios
        } else if user_agent.contains("Android") {
            Platform::Android
        } else {
            Platform::Desktop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_user_agents() {
        let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
        let android = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";
        let mac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";
        assert_eq!(Platform::from_user_agent(iphone), Platform::Ios);
        assert_eq!(Platform::from_user_agent(android), Platform::Android);
        assert_eq!(Platform::from_user_agent(mac), Platform::Desktop);
        assert_eq!(Platform::from_user_agent(""), Platform::Desktop);
    }
}
