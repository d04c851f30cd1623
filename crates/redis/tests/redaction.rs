//! Property tests: a password of any characters never comes out of the
//! redactor, nor out of the URL parser's error and display paths.

use proptest::prelude::*;
use ranktune_redis::{redact_text, RedisUrl};

proptest! {
    #[test]
    fn password_never_shown(
        user in "[a-z]{0,6}",
        pass in "[a-zA-Z0-9/?#@:%&= ]{0,8}[A-Z]{12}[a-zA-Z0-9/?#@:%&= ]{0,8}",
        tail in "(h|h:6379|h:99999|h/0|h:1/0\\?prefix=t|h/x#y|)",
    ) {
        for scheme in ["redis", "rediss"] {
            let text = format!("{scheme}://{user}:{pass}@{tail}");
            let shown = redact_text(&text);
            prop_assert!(!shown.contains(&pass), "{} -> {}", text, shown);
            match RedisUrl::parse(&text) {
                Ok(url) => {
                    let shown = url.to_string();
                    let debug = format!("{:?}", url);
                    prop_assert!(!shown.contains(&pass), "{}", shown);
                    prop_assert!(!debug.contains(&pass), "{}", debug);
                }
                Err(e) => {
                    let shown = e.to_string();
                    let debug = format!("{:?}", e);
                    prop_assert!(!shown.contains(&pass), "{}", shown);
                    prop_assert!(!debug.contains(&pass), "{}", debug);
                }
            }
        }
    }
}
