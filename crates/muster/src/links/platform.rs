//! Which platform a visitor is on, from the `User-Agent`, to pick the link's fallback for when
//! the app is not installed (when it is, iOS and Android open the app without asking us), and
//! whether the visitor is a person at all.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

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

/// True when the `User-Agent` is a link-preview fetcher or crawler (a chat app unfurling a pasted
/// link, a search engine): its visit is not a person's, so it is not counted as a click and does
/// not use up a link with a visit limit (a one-time invite pasted in a chat would otherwise be
/// spent by the chat's preview before the friend taps it).
pub fn is_preview_agent(user_agent: &str) -> bool {
    // One pass over the header, whatever its case, for every name at once: this runs on every
    // redirect.
    static AGENTS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(PREVIEW_AGENTS)
            .expect("static patterns build")
    });
    AGENTS.is_match(user_agent)
}

/// What link previews and crawlers say in their `User-Agent`, in any case.
const PREVIEW_AGENTS: &[&str] = &[
    "bot/",
    "bot ",
    "crawler",
    "spider",
    "facebookexternalhit",
    "facebot",
    "slackbot",
    "slack-imgproxy",
    "whatsapp",
    "telegrambot",
    "discordbot",
    "twitterbot",
    "linkedinbot",
    "skypeuripreview",
    "embedly",
    "preview",
];

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
        assert!(!is_preview_agent(iphone) && !is_preview_agent(android) && !is_preview_agent(mac));
    }

    #[test]
    fn link_previews() {
        for agent in [
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "facebookexternalhit/1.1 Facebot Twitterbot/1.0",
            "WhatsApp/2.23.20.0",
            "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
            "TelegramBot (like TwitterBot)",
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        ] {
            assert!(is_preview_agent(agent), "{agent}");
        }
    }
}
