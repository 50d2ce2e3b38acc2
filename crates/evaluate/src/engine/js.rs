//! The page-side JavaScript of the engine.
//!
//! Two pieces:
//! - the **helper** (`function (run, cfg)`): runs the user's code once,
//!   races its promise against an in-page timer (field case C14), catches
//!   its exception, and serializes the value into tagged JSON (field case
//!   C15). It is installed once per execution context as a non-enumerable,
//!   non-writable, non-configurable property of the global object named
//!   [`helper_global`] (the helper's content hash in the name), so that
//!   later evaluates in that execution context send a few hundred bytes
//!   instead of the whole serializer. Its inner functions are made once, at
//!   install, not per call;
//! - the **per-call wrapper**: the user's source in one form (expression,
//!   function, statements) inside `const __tw_run = () => { … }`, then a
//!   call of the helper; or, for statements run as a script
//!   ([`script_wrapper_expression`]), the source as a string literal given
//!   to a direct `eval` in `__tw_run`, so the helper gets its completion value. The short wrapper ([`Helper::Use`]) answers
//!   `{$tw: 'no_helper'}` without running anything when the helper is missing;
//!   the installing wrapper ([`Helper::Install`]) defines it first.
//!
//! The page wrapper is an arrow called with the helper (a plain global
//! property read, which V8 caches; `Symbol.for` and a keyed read of the
//! global object cost a measurable share of a small evaluate, see
//! `docs/profiles/evaluate.md`), and the settings go as an array literal
//! `[settleMs, maxChars, maxDepth, maxItems, textMax]`.
//!
//! The user's source always starts on line 2 of the wrapper (or of the
//! script's `eval` text), column 1, so stack and syntax error locations map
//! back by subtracting one line. The
//! page wrapper carries no `//# sourceURL` (V8 then names its frames
//! `<anonymous>`): the comment cost a few microseconds per evaluate
//! (`docs/profiles/evaluate.md`).

use super::SourceForm;
use std::sync::OnceLock;

/// Which helper lookup a wrapper carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Helper {
    /// Use the installed helper; answer `{$tw: 'no_helper'}` (nothing run) when it is missing.
    Use,
    /// Install the helper when it is missing, then use it.
    Install,
}

/// The global property holding the helper: `__tabwarden_eval_` and the
/// helper's own content hash, so a changed helper never meets an old one
/// left in a long-lived page.
pub(crate) fn helper_global() -> &'static str {
    static KEY: OnceLock<String> = OnceLock::new();
    KEY.get_or_init(|| format!("__tabwarden_eval_{:016x}", fnv1a(HELPER)))
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// An expression whose value is the helper ([`Helper::Install`]: installing
/// it when missing) or, for [`Helper::Use`], `undefined` when it is missing.
fn lookup(helper: Helper) -> &'static str {
    static USE: OnceLock<String> = OnceLock::new();
    static INSTALL: OnceLock<String> = OnceLock::new();
    let key = helper_global();
    match helper {
        Helper::Use => USE.get_or_init(|| format!("globalThis.{key}")),
        Helper::Install => INSTALL.get_or_init(|| format!(
            "(globalThis.{key} || (() => {{ const __tw_h = {HELPER}; try {{ Object.defineProperty(globalThis, '{key}', {{ value: __tw_h }}); }} catch (e) {{}} return __tw_h; }})())"
        )),
    }
}

/// The body of `__tw_run` around `src`: (head, tail), the source in between on its own lines.
fn run_body(form: SourceForm, element: bool) -> (&'static str, &'static str) {
    match form {
        SourceForm::Expression => ("return (", "\n);"),
        SourceForm::Function if element => (
            "const __tw_f = (",
            "\n);\nreturn typeof __tw_f === 'function' ? __tw_f.apply(__tw_el === undefined ? globalThis : __tw_el, __tw_el === undefined ? [] : [__tw_el]) : __tw_f;",
        ),
        SourceForm::Function => (
            "const __tw_f = (",
            "\n);\nreturn typeof __tw_f === 'function' ? __tw_f.call(globalThis) : __tw_f;",
        ),
        // `Script` is sent by `script_wrapper_expression`; in a function
        // (element evaluate) it is never chosen, and reads as statements.
        SourceForm::Statements | SourceForm::Script => ("", "\n"),
    }
}

/// `async ` when the source mentions `await` (anywhere, even in a string:
/// then it is async, which is always right), else nothing, so that a value
/// that is no promise is serialized and returned in the same task, without
/// a promise, a timer or a microtask turn. Both parse the same source the
/// same way.
fn run_kind(src: &str) -> &'static str {
    if src.contains("await") {
        "async "
    } else {
        ""
    }
}

/// The function declaration `function (__tw_el, __tw_cfg)` for
/// `Runtime.callFunctionOn` (element evaluate: the element is `__tw_el` and
/// `this`; `__tw_cfg` the settings array) that runs `src` once in the given
/// form through the helper and returns (or, when the script's value is a
/// promise or thenable, resolves to) one of:
/// - the value itself when it is a plain JSON primitive: a boolean, `null`,
///   a finite number other than `-0`, a string within the size cap;
/// - `{$tw:'ok', value, truncated}` with the tagged serialization otherwise;
/// - `{$tw:'exception', name, message, stack}`;
/// - `{$tw:'promise_timeout'}`;
/// - `{$tw:'no_helper'}`: the helper is missing, nothing ran.
pub(crate) fn wrapper_function(src: &str, form: SourceForm, helper: Helper) -> String {
    let (head, tail) = run_body(form, true);
    let kind = run_kind(src);
    format!(
        "function (__tw_el, __tw_cfg) {{ const __tw_run = {kind}() => {{ {head}\n{src}{tail} }};\nconst __tw_h = {};\nreturn typeof __tw_h === 'function' ? __tw_h(__tw_run, __tw_cfg) : {{ $tw: 'no_helper' }}; }}",
        lookup(helper)
    )
}

/// The expression sent with `Runtime.evaluate` for a page evaluate: an arrow
/// called with the helper, answering as [`wrapper_function`] does.
/// `cfg_array` is the settings array literal (`[settleMs, maxChars, maxDepth,
/// maxItems, textMax]`).
pub(crate) fn wrapper_expression(
    src: &str,
    form: SourceForm,
    helper: Helper,
    cfg_array: &str,
) -> String {
    let (head, tail) = run_body(form, false);
    let kind = run_kind(src);
    let look = lookup(helper);
    let mut s = String::with_capacity(src.len() + look.len() + tail.len() + 200);
    s.push_str("(__tw_h => { const __tw_run = ");
    s.push_str(kind);
    s.push_str("() => { ");
    s.push_str(head);
    // The user's source stays on line 2.
    s.push('\n');
    s.push_str(src);
    s.push_str(tail);
    s.push_str(" };\nreturn typeof __tw_h === 'function' ? __tw_h(__tw_run, ");
    s.push_str(cfg_array);
    s.push_str(") : { $tw: 'no_helper' }; })(");
    s.push_str(look);
    s.push(')');
    s
}

/// The name of the wrapper's flag that the statements of a
/// [`SourceForm::Script`] set first: still false after the wrapper's
/// `eval` threw means the source did not parse (or could not be run as a
/// script), and nothing of it ran.
const STARTED: &str = "__tw_script_started";

/// The first line of a [`SourceForm::Script`] text: sets the flag and has
/// the value `undefined`, so a source whose statements give no value
/// (declarations only) still completes with `undefined`.
const SCRIPT_PREFIX: &str = "void (__tw_script_started = true);\n";

/// The expression sent with `Runtime.evaluate` for a page evaluate of
/// statements as a script ([`SourceForm::Script`]): the source goes as a
/// string literal to a direct `eval` in the wrapper, whose value is the
/// completion value of the statements (the value of the last expression
/// statement, as in the DevTools console), handed to the helper like any
/// other value (a promise is raced against the in-page timer). Runtime.evaluate
/// lets that `eval` run under a page's Content-Security-Policy.
///
/// The text evaluated is [`SCRIPT_PREFIX`] and the source, so positions in
/// it are one line past the user's. When the `eval` throws before the flag
/// is set (a `SyntaxError`: top-level `return` or `await`, or no valid
/// statements; or `eval` is not the browser's own), the helper answers
/// `{$tw:'not_script', message}` and nothing of the source ran.
/// `var` and function declarations stay inside the wrapper (as in a
/// function body); `let`/`const`/`class` inside the `eval`.
pub(crate) fn script_wrapper_expression(src: &str, helper: Helper, cfg_array: &str) -> String {
    let text = format!("{SCRIPT_PREFIX}{src}");
    let literal = serde_json::to_string(&text).unwrap_or_else(|_| "''".into());
    let look = lookup(helper);
    let mut s = String::with_capacity(literal.len() + look.len() + 300);
    s.push_str("(__tw_h => { let ");
    s.push_str(STARTED);
    s.push_str(" = false; const __tw_run = () => { if (eval !== __tw_h.ev) throw 0; return eval(");
    s.push_str(&literal);
    s.push_str("); };\nreturn typeof __tw_h === 'function' ? __tw_h(__tw_run, ");
    s.push_str(cfg_array);
    s.push_str(", () => ");
    s.push_str(STARTED);
    s.push_str(") : { $tw: 'no_helper' }; })(");
    s.push_str(look);
    s.push(')');
    s
}

/// The text `Runtime.compileScript` checks for a `Runtime.callFunctionOn`
/// declaration (V8 compiles it the same way: in parentheses).
pub(crate) fn function_compile_text(declaration: &str) -> String {
    format!("({declaration})")
}

/// The helper: an expression (run once, at install) whose value is
/// `function (__tw_run, __tw_cfg, __tw_started)` that runs the script,
/// returns at once for a value that is no thenable, else awaits it against
/// the in-page timer; captures exceptions; serializes. `__tw_cfg` is the
/// settings array `[settleMs, maxChars, maxDepth, maxItems, textMax]`;
/// `__tw_started`, for a [`SourceForm::Script`], tells whether the
/// statements started (an exception before they did is `not_script`). Its
/// property `ev` is the browser's own `eval` as found at install (`null`
/// when the page had replaced it: then scripts go as function bodies).
const HELPER: &str = include_str!("../../assets/helper.js");
