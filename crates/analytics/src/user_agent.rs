//! Device, browser and OS families of a User-Agent, parsed by `woothee` (its rule set is
//! maintained across languages; no pattern here is hand-written), with a bounded cache: traffic
//! repeats a limited set of agents.

use quick_cache::sync::Cache;

/// What kind of device a click came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// A desktop or laptop browser.
    Desktop,
    /// A phone.
    Mobile,
    /// A tablet.
    Tablet,
    /// Anything else (consoles, TVs, tools, unknown).
    Other,
}

impl Device {
    /// Every kind, in the API's order.
    pub const ALL: [Device; 4] = [
        Device::Desktop,
        Device::Mobile,
        Device::Tablet,
        Device::Other,
    ];

    /// The kind named `name` in the API.
    pub fn parse(name: &str) -> Option<Device> {
        Self::ALL.into_iter().find(|d| d.as_str() == name)
    }

    /// Its name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Desktop => "desktop",
            Device::Mobile => "mobile",
            Device::Tablet => "tablet",
            Device::Other => "other",
        }
    }
}

/// The families of one User-Agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The kind of device.
    pub device: Device,
    /// The browser family (`Chrome`, `Firefox`, `Safari`, `Edge`, …); `None` when unknown.
    pub browser: Option<&'static str>,
    /// The OS family (`Windows`, `macOS`, `iOS`, `Android`, `Linux`, …); `None` when unknown.
    pub os: Option<&'static str>,
}

impl Agent {
    const UNKNOWN: Agent = Agent {
        device: Device::Other,
        browser: None,
        os: None,
    };
}

/// Agents longer than this are parsed every time rather than remembered.
const MAX_REMEMBERED: usize = 512;

/// A User-Agent parser with a cache of recent answers.
pub struct UserAgents {
    parser: woothee::parser::Parser,
    seen: Cache<Box<str>, Agent>,
}

impl Default for UserAgents {
    fn default() -> Self {
        Self {
            parser: woothee::parser::Parser::new(),
            seen: Cache::new(10_000),
        }
    }
}

impl std::fmt::Debug for UserAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserAgents").finish_non_exhaustive()
    }
}

impl UserAgents {
    /// The families of `agent` (a missing header is unknown on every count).
    pub fn parse(&self, agent: Option<&str>) -> Agent {
        let Some(agent) = agent.filter(|a| !a.trim().is_empty()) else {
            return Agent::UNKNOWN;
        };
        if agent.len() > MAX_REMEMBERED {
            return self.parse_now(agent);
        }
        if let Some(known) = self.seen.get(agent) {
            return known;
        }
        let parsed = self.parse_now(agent);
        self.seen.insert(agent.into(), parsed.clone());
        parsed
    }

    fn parse_now(&self, agent: &str) -> Agent {
        let Some(result) = self.parser.parse(agent) else {
            return Agent::UNKNOWN;
        };
        let os = os_family(result.os);
        let device = match result.category {
            "pc" => Device::Desktop,
            "smartphone" | "mobilephone" if tablet(os, result.os, agent) => Device::Tablet,
            "smartphone" | "mobilephone" => Device::Mobile,
            _ => Device::Other,
        };
        Agent {
            device,
            browser: browser_family(result.name),
            os,
        }
    }
}

/// Tablets share their browsers' "smartphone" category: an iPad says so in its OS, and an Android
/// tablet is an Android agent without `Mobile` (Google's documented convention for its UA).
fn tablet(os: Option<&str>, woothee_os: &str, agent: &str) -> bool {
    woothee_os == "iPad" || (os == Some("Android") && !agent.contains("Mobile"))
}

/// woothee's OS names, grouped into families.
fn os_family(os: &str) -> Option<&'static str> {
    Some(match os {
        os if os.starts_with("Windows") => "Windows",
        "Mac OSX" | "Mac OS Classic" => "macOS",
        "iPhone" | "iPad" | "iPod" => "iOS",
        "Android" => "Android",
        "Linux" => "Linux",
        "ChromeOS" => "ChromeOS",
        "FreeBSD" | "NetBSD" | "OpenBSD" => "BSD",
        _ => return None,
    })
}

/// woothee's browser names that are a family; the rest is unknown.
fn browser_family(name: &str) -> Option<&'static str> {
    Some(match name {
        "Chrome" => "Chrome",
        "Firefox" => "Firefox",
        "Safari" => "Safari",
        "Edge" => "Edge",
        "Opera" => "Opera",
        "Internet Explorer" => "Internet Explorer",
        "Vivaldi" => "Vivaldi",
        "Yandex Browser" => "Yandex Browser",
        "Samsung Internet Browser" | "SamsungBrowser" => "Samsung Internet",
        "Webview" => "WebView",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHROME_WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
    const SAFARI_IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const SAFARI_IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const FIREFOX_MAC: &str =
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.5; rv:127.0) Gecko/20100101 Firefox/127.0";
    const CHROME_ANDROID_PHONE: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";
    const CHROME_ANDROID_TABLET: &str = "Mozilla/5.0 (Linux; Android 14; SM-X910) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
    const EDGE_WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0";
    const FIREFOX_LINUX: &str =
        "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0";

    fn agent(device: Device, browser: &'static str, os: &'static str) -> Agent {
        Agent {
            device,
            browser: Some(browser),
            os: Some(os),
        }
    }

    #[test]
    fn common_agents_fall_into_their_families() {
        let agents = UserAgents::default();
        let cases = [
            (CHROME_WINDOWS, agent(Device::Desktop, "Chrome", "Windows")),
            (SAFARI_IPHONE, agent(Device::Mobile, "Safari", "iOS")),
            (SAFARI_IPAD, agent(Device::Tablet, "Safari", "iOS")),
            (FIREFOX_MAC, agent(Device::Desktop, "Firefox", "macOS")),
            (
                CHROME_ANDROID_PHONE,
                agent(Device::Mobile, "Chrome", "Android"),
            ),
            (
                CHROME_ANDROID_TABLET,
                agent(Device::Tablet, "Chrome", "Android"),
            ),
            (EDGE_WINDOWS, agent(Device::Desktop, "Edge", "Windows")),
            (FIREFOX_LINUX, agent(Device::Desktop, "Firefox", "Linux")),
        ];
        for (ua, expected) in cases {
            assert_eq!(agents.parse(Some(ua)), expected, "{ua}");
            // The cached answer is the same.
            assert_eq!(agents.parse(Some(ua)), expected, "{ua} (cached)");
        }
        assert_eq!(agents.parse(None), Agent::UNKNOWN);
        assert_eq!(agents.parse(Some("curl/8.5.0")).device, Device::Other);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let agents = UserAgents::default();
            let text = String::from_utf8_lossy(&bytes);
            let _ = agents.parse(Some(&text));
        }
    }
}
