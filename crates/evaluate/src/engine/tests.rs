//! Unit tests of the engine's pure parts: the source-form lexer, the
//! settle timer, stack positions.

use super::form::{certainly_statements, first_form, looks_like_function};
use super::reply::first_frame;
use super::run::settle_ms;
use super::SourceForm;
use std::time::Duration;

#[test]
fn function_literals_are_recognised() {
    for s in [
        "() => 1",
        "x => x",
        "async () => 1",
        "async x => x",
        "function f() {}",
        " async function () {}",
        "(a, (b)) => a",
    ] {
        assert!(looks_like_function(s), "{s}");
    }
    for s in [
        "1 + 2",
        "document.title",
        "(1 + 2)",
        "functional()",
        "asyncThing",
        "x",
        "(x)",
        "{a: 1}",
    ] {
        assert!(!looks_like_function(s), "{s}");
    }
}

#[test]
fn statements_are_recognised_only_when_certain() {
    for s in [
        "const a = 2; return a * 21",
        "let x = 1",
        "let {a} = o",
        "var x",
        "if (a) b()",
        "for (;;) {}",
        "while (true) {}",
        "return 5",
        "throw new Error('x')",
        "try { a() } catch {}",
        "// note\nreturn 1",
        "/* c */ do {} while (0)",
        "a = 1; return a",
        "f(); g()",
        "1+1;",
        "x = 'a;b'; y",
        "({a: 1}); 2",
    ] {
        assert!(certainly_statements(s), "{s}");
        assert_eq!(first_form(s, true), SourceForm::Statements, "{s}");
    }
    // Valid expressions (and whatever the lexer cannot be sure of) are not.
    for s in [
        "1+1",
        "document.title",
        "(function () { return 1; })()",
        "() => { a(); b(); }",
        "x => x",
        "'a;b'",
        "\"a;b\"",
        "`a;${b}`",
        "/;/.test(s)",
        "a / b; c",
        "x <!-- ; y",
        "a\n--> ; b",
        "let in o",
        "let instanceof X",
        "let[0]",
        "letter + 1",
        "format(x)",
        "returned",
        "class A {}",
        "{a: 1}",
        "import('x')",
        "a\nb",
        "(a; b",
        ")); x;",
        "'unterminated; x",
        "/* unterminated ; x",
    ] {
        assert!(!certainly_statements(s), "{s}");
    }
    assert_eq!(first_form("async () => 1", false), SourceForm::Function);
    assert_eq!(first_form("a\nb", false), SourceForm::Expression);
    // Page statements go as a script (completion value) unless they
    // `return` at the top level or use `await`.
    for (src, form) in [
        ("var x = 1; x", SourceForm::Script),
        ("document.title; document.title.length", SourceForm::Script),
        ("const f = () => { return 1 }; f()", SourceForm::Script),
        ("if (a) { return 1 }; 2", SourceForm::Script),
        ("x.return = 1; x", SourceForm::Script),
        ("const a = 2; return a * 21", SourceForm::Statements),
        ("if (a) return 1; 2", SourceForm::Statements),
        ("const r = await f(); r", SourceForm::Statements),
        ("'use strict'; var s = 1; s", SourceForm::Statements),
        ("// note\n\"use strict\"; 1; 2", SourceForm::Statements),
    ] {
        assert_eq!(first_form(src, false), form, "{src}");
        assert_eq!(first_form(src, true), SourceForm::Statements, "{src}");
    }
}

#[test]
fn settle_timer_is_rounded_down_before_the_deadline() {
    let ms = Duration::from_millis;
    assert_eq!(settle_ms(ms(5000) - Duration::from_micros(30)), 4740);
    assert_eq!(settle_ms(ms(5000) - Duration::from_micros(900)), 4740);
    assert_eq!(settle_ms(ms(500)), 470);
    assert_eq!(settle_ms(ms(20_000)), 19_750);
    assert_eq!(settle_ms(ms(5)), 1);
    for r in [1u64, 37, 499, 1001, 7_777, 120_000] {
        let s = settle_ms(ms(r));
        assert!(s < r || r <= 20, "{r} → {s}");
        assert_eq!(s % 10, if s == 1 { 1 } else { 0 });
    }
}

#[test]
fn first_frame_maps_wrapper_lines_back() {
    let e = SourceForm::Expression;
    let two = "a\nb()";
    let stack = "Error: boom\n    at __tw_run (<anonymous>:3:7)\n    at async x (<anonymous>:9:1)";
    assert_eq!(
        first_frame(stack, e, two).as_deref(),
        Some("line 2, column 7")
    );
    // Past the source's last line, or on the wrapper's first: no position.
    assert_eq!(first_frame(stack, e, "one line"), None);
    assert_eq!(first_frame("E\n    at <anonymous>:1:30", e, two), None);
    assert_eq!(first_frame("Error: x", e, two), None);
    assert_eq!(
        first_frame("E\n    at f (http://a/b.js:10:2)", e, two).as_deref(),
        Some("f (http://a/b.js:10:2)")
    );
    // Builtins are skipped; a user-named function keeps its name.
    assert_eq!(
        first_frame(
            "SyntaxError: x\n    at JSON.parse (<anonymous>)\n    at parse (<anonymous>:2:12)",
            SourceForm::Statements,
            two
        )
        .as_deref(),
        Some("parse (line 1, column 12)")
    );
    // A script's statements run in an eval whose line 2 is the source's line 1.
    let s = SourceForm::Script;
    let stack = "TypeError: t\n    at eval (eval at __tw_run (<anonymous>:1:95), <anonymous>:2:8)\n    at __tw_run (<anonymous>:1:95)";
    assert_eq!(
        first_frame(stack, s, two).as_deref(),
        Some("line 1, column 8")
    );
    let stack = "Error: f\n    at f (eval at __tw_run (<anonymous>:1:95), <anonymous>:3:20)";
    assert_eq!(
        first_frame(stack, s, two).as_deref(),
        Some("f (line 2, column 20)")
    );
    // The wrapper's own frame is no position of the source's.
    assert_eq!(
        first_frame("E\n    at __tw_run (<anonymous>:1:95)", s, two),
        None
    );
}
