//! `docs/WEBHOOKS.md` shows the bodies exactly as the domain's `Event` produces them.

use shortlink_domain::{ClickInfo, Event, Timestamp};

use crate::helpers::link_view;

fn webhooks_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/WEBHOOKS.md");
    std::fs::read_to_string(path).unwrap()
}

pub fn examples() -> [Event; 2] {
    let click = ClickInfo {
        timestamp: Timestamp::from_unix_millis(1_795_648_000_456),
        country: Some("GB".into()),
        city: Some("London".into()),
        device: "desktop".into(),
        browser: Some("Firefox".into()),
        os: Some("Linux".into()),
        referrer: "news.example".into(),
        referrer_url: Some("https://news.example/story".into()),
        user_agent: Some(
            "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0".into(),
        ),
    };
    let mut clicked = link_view();
    clicked.clicks = 1;
    [
        Event::link_created(link_view()),
        Event::link_clicked(clicked, click),
    ]
}

#[test]
fn the_documented_bodies_are_the_real_ones() {
    let doc = webhooks_md();
    for event in examples() {
        let pretty = serde_json::to_string_pretty(&event).unwrap();
        assert!(
            doc.contains(&pretty),
            "docs/WEBHOOKS.md lacks the {} body:\n{pretty}",
            event.kind()
        );
        // The wire form is the same JSON, compact.
        let compact: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
        assert_eq!(
            compact,
            serde_json::from_str::<serde_json::Value>(&pretty).unwrap()
        );
    }
}

#[test]
fn the_documented_defaults_are_the_real_ones() {
    let doc = webhooks_md();
    assert!(doc.contains(shortlink_webhooks::DEFAULT_RETRY_SCHEDULE));
    let limit = format!("{} consecutive", shortlink_domain::MAX_CONSECUTIVE_FAILURES);
    assert!(doc.contains(&limit), "docs/WEBHOOKS.md lacks '{limit}'");
}

#[test]
fn the_documented_rust_receiver_is_the_tested_one() {
    let source = include_str!("receiver.rs");
    let begin = source
        .find("// The docs' example")
        .and_then(|i| source[i..].find('\n').map(|j| i + j + 1))
        .unwrap();
    let end = source.find("// End of the docs' example.").unwrap();
    let example = &source[begin..end];
    assert!(
        webhooks_md().contains(example),
        "docs/WEBHOOKS.md lacks the receiver of tests/delivery/receiver.rs:\n{example}"
    );
}

#[test]
#[ignore = "prints the example bodies for docs/WEBHOOKS.md"]
fn print_examples() {
    for event in examples() {
        println!("{}\n", serde_json::to_string_pretty(&event).unwrap());
    }
}
