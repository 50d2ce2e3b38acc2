//! Tests of the URL checks.

use super::{check_url, maybe_same_site, scheme_of};
use crate::ErrorCode;

#[test]
fn urls_are_checked_as_navigate_checks_them() {
    let bad = |url: &str, eval: bool| {
        let Err(e) = check_url(url, eval, "browser_tabs new") else {
            panic!("{url} was accepted");
        };
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{url}");
        assert_eq!(e.field.as_deref(), Some("url"), "{url}");
        assert!(e.next_step.is_some(), "{url}");
        e.message
    };
    assert!(bad("javascript:1", true).contains("javascript:"));
    assert!(bad("notaurl", true).contains("absolute"));
    assert!(bad("", true).contains("absolute"));
    assert!(bad("http://a b/", true).contains("absolute"));
    for authored in [
        "data:text/html,<script>1</script>",
        "DATA:text/html,x",
        "Blob:http://a/uuid",
        "filesystem:http://a/temporary/x.html",
    ] {
        assert!(
            bad(authored, false).contains("evaluate is disabled"),
            "{authored}"
        );
        assert!(
            check_url(authored, true, "browser_navigate").is_ok(),
            "{authored}"
        );
    }
    for ok in ["http://a/", "file:///tmp/x.html", "about:blank"] {
        assert!(check_url(ok, false, "browser_navigate").is_ok(), "{ok}");
    }
    assert!(check_url("data:text/html,a b", true, "browser_navigate").is_ok());
}

#[test]
fn schemes_are_read_as_browsers_read_them() {
    assert_eq!(scheme_of(" Data:x").as_deref(), Some("data"));
    assert_eq!(scheme_of("bl\nob:x").as_deref(), Some("blob"));
    assert_eq!(scheme_of("/path:x"), None);
    assert_eq!(scheme_of("no-colon"), None);
    assert_eq!(scheme_of(":x"), None);
}

#[test]
fn sites_are_told_apart_only_when_certainly_different() {
    let same = [
        ("http://localhost:1/a", "http://localhost:2/b"),
        ("http://127.0.0.1:9/a", "http://127.0.0.1:9/b?x#y"),
        ("https://a.example.com/", "https://b.example.com/x"),
        ("https://user:pw@Example.COM./", "https://example.com:443/"),
        ("http://[::1]:8/", "http://[::1]:9/"),
        ("about:blank", "http://a.test/"),
        ("data:text/html,x", "http://a.test/"),
    ];
    for (a, b) in same {
        assert!(maybe_same_site(a, b), "{a} / {b}");
    }
    let different = [
        ("http://localhost:1/", "http://127.0.0.1:1/"),
        ("http://a.test/", "https://a.test/"),
        ("https://example.com/", "https://example.org/"),
        ("http://[::1]/", "http://[::2]/"),
    ];
    for (a, b) in different {
        assert!(!maybe_same_site(a, b), "{a} / {b}");
    }
}
