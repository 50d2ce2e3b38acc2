//! The engine against a scripted CDP server: the terminate → detach sequence,
//! reattach, the dialog and navigation interruptions, and error mapping.

use cdp_mock::{Action, MockServer};
use cdp_transport::{ConnectOptions, Connection, TargetId};
use evaluate::{Budget, Engine, EngineConfig, Error, EvalRequest, TimeoutKind};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

fn context(id: i64) -> Value {
    json!({"context": {"id": id, "uniqueId": format!("u{id}"), "origin": "", "name": "",
        "auxData": {"isDefault": true, "frameId": "PAGE", "type": "default"}}})
}

fn ok_value(v: Value) -> Value {
    json!({"result": {"type": "object", "value": {"$tw": "ok", "value": v, "truncated": false}}})
}

/// `Runtime.enable` announces the main-world context `1` of frame `PAGE`.
fn announce_context_on_enable(mock: &MockServer) {
    mock.on_fn("Runtime.enable", |req| {
        Some(Action::EventsThenReply(
            vec![(
                "Runtime.executionContextCreated".into(),
                context(1),
                req.session_id.clone(),
            )],
            json!({}),
        ))
    });
}

/// A mock browser with one page target `PAGE`: attaches get `S1`, `S2`, …;
/// `Runtime.enable` announces the main-world context `1` of frame `PAGE`.
async fn setup(config: EngineConfig) -> (MockServer, Engine) {
    let (mock, engine, _conn) = setup_with_conn(config).await;
    (mock, engine)
}

/// The engine's idle probe (a trivial evaluate it sends while a script's
/// call is pending, to learn whether the page's main thread is free).
fn is_idle_probe(r: &cdp_mock::Request) -> bool {
    r.params["expression"]
        .as_str()
        .is_some_and(|e| e.contains("idle probe"))
}

/// The next evaluate never answers, and neither do idle probes: a renderer
/// busy in a synchronous loop (commands of a session run in order).
fn busy_script(mock: &MockServer) {
    mock.on_fn("Runtime.evaluate", |r| {
        is_idle_probe(r).then_some(Action::Never)
    });
    mock.once("Runtime.evaluate", Action::Never);
}

/// A first evaluate, so that the engine's session is attached and warm.
async fn warm(engine: &Engine) {
    let out = engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("warm");
    assert_eq!(out.value, json!(5));
}

fn budget(ms: u64) -> Budget {
    Budget::new(Duration::from_millis(ms))
}

fn position(mock: &MockServer, method: &str, session: Option<&str>) -> Option<usize> {
    mock.received().iter().position(|r| {
        r.method == method
            && (r.session_id.as_deref() == session
                || r.params.get("sessionId").and_then(Value::as_str) == session)
    })
}

#[tokio::test]
async fn a_termination_that_does_not_take_detaches_that_session_only_and_reattaches_at_once() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    warm(&engine).await;
    busy_script(&mock);

    let t0 = std::time::Instant::now();
    let err = engine
        .evaluate(EvalRequest::new("while (true) {}"), &budget(300))
        .await
        .expect_err("timeout");
    let took = t0.elapsed();
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Script,
                terminated: false,
                ..
            }
        ),
        "{err:?}"
    );
    // Deadline plus the 100 ms grace, and not much more.
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(700),
        "{took:?}"
    );
    mock.wait_for("Target.detachFromTarget", 1, T).await;
    // The replacement is attached in the background, before anyone asks.
    mock.wait_for("Target.attachToTarget", 2, T).await;

    let terminate = position(&mock, "Runtime.terminateExecution", Some("S1"))
        .expect("terminateExecution on S1");
    let detach =
        position(&mock, "Target.detachFromTarget", Some("S1")).expect("detachFromTarget of S1");
    assert!(terminate < detach, "terminate first, then detach");
    let detaches = mock.received_method("Target.detachFromTarget");
    assert_eq!(detaches.len(), 1);
    assert_eq!(
        detaches[0].session_id, None,
        "detach goes to the browser session"
    );

    // The next evaluate reattaches (S2) and runs there.
    assert_eq!(
        engine
            .evaluate(EvalRequest::new("2"), &budget(2000))
            .await
            .expect("after")
            .value,
        json!(5)
    );
    assert_eq!(mock.received_method("Target.attachToTarget").len(), 2);
    let last = mock
        .received_method("Runtime.evaluate")
        .pop()
        .expect("evaluate");
    assert_eq!(last.session_id.as_deref(), Some("S2"));
    assert_eq!(last.params["uniqueContextId"], "u1");
    let m = engine.metrics();
    assert_eq!(
        (
            m.evaluations,
            m.succeeded,
            m.timeouts,
            m.terminations,
            m.detaches
        ),
        (3, 2, 1, 1, 1),
        "{m:?}"
    );
}

#[tokio::test]
async fn chromium_timeout_parameter_is_set_past_the_deadline() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine
        .evaluate(EvalRequest::new("1"), &budget(1000))
        .await
        .expect("ok");
    let call = mock
        .received_method("Runtime.evaluate")
        .pop()
        .expect("evaluate");
    let timeout = call.params["timeout"].as_f64().expect("timeout param");
    assert!(timeout > 1000.0 && timeout <= 1250.0, "{timeout}");
    assert_eq!(call.params["awaitPromise"], true);
    assert_eq!(call.params["returnByValue"], true);
    // One round trip: no compile check on the success path.
    assert!(mock.received_method("Runtime.compileScript").is_empty());
    assert_eq!(mock.received_method("Runtime.evaluate").len(), 1);
}

#[tokio::test]
async fn cancel_before_the_script_is_sent_terminates_nothing() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    mock.on_action("Target.attachToTarget", Action::Never);
    let b = budget(5000);
    let task = {
        let (engine, b) = (engine.clone(), b.clone());
        tokio::spawn(async move { engine.evaluate(EvalRequest::new("1"), &b).await })
    };
    mock.wait_for("Target.attachToTarget", 1, T).await;
    b.cancel();
    let err = task.await.expect("join").expect_err("cancelled");
    assert!(
        matches!(
            err,
            Error::Cancelled {
                sent: false,
                terminated: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("never ran"), "{err}");
    assert!(mock
        .received_method("Runtime.terminateExecution")
        .is_empty());
    assert!(mock.received_method("Target.detachFromTarget").is_empty());
}

#[tokio::test]
async fn a_dialog_ends_the_evaluate_at_once_without_terminate() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .evaluate(EvalRequest::new("confirm('x')"), &budget(5000))
                .await
        })
    };
    mock.wait_for("Runtime.evaluate", 1, T).await;
    let t0 = std::time::Instant::now();
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"url": "http://a/", "message": "x", "type": "confirm", "hasBrowserHandler": false, "defaultPrompt": "", "frameId": "PAGE"}),
        Some("S1"),
    );
    let err = task.await.expect("join").expect_err("dialog");
    assert!(t0.elapsed() < Duration::from_millis(500));
    insta::assert_yaml_snapshot!("dialog_opened", (err.code(), err.dialog(), err.to_string()));
    assert!(mock
        .received_method("Runtime.terminateExecution")
        .is_empty());
    assert_eq!(engine.metrics().dialog_interruptions, 1);
}

/// Page facts that name one session for terminations of one target (and
/// none for any other), as a supervisor does.
struct TerminateOn(TargetId, cdp_transport::Session);

impl evaluate::PageFacts for TerminateOn {
    fn terminate_via(&self, t: &TargetId) -> Option<evaluate::TerminateVia> {
        Some(if *t == self.0 {
            evaluate::TerminateVia::Session(self.1.clone())
        } else {
            evaluate::TerminateVia::Hold
        })
    }
}

/// Page facts that carry a dialog record, as a supervisor does.
struct OwnerRecord(tokio::sync::watch::Sender<evaluate::DialogRecord>);

impl evaluate::PageFacts for OwnerRecord {
    fn dialogs(&self) -> Option<evaluate::DialogRecord> {
        Some(self.0.borrow().clone())
    }
    fn dialogs_changed(&self) -> evaluate::facts::Changed {
        let mut rx = self.0.subscribe();
        Box::pin(async move {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

fn owned_dialog(id: &str) -> evaluate::DialogInfo {
    evaluate::DialogInfo {
        dialog_type: "confirm".into(),
        message: "sure?".into(),
        default_prompt: None,
        frame_id: None,
        url: Some("http://a/".into()),
        id: Some(id.into()),
    }
}

/// With the owner's dialog record, a dialog it records ends the evaluate
/// at once, named by the owner's id; the page session's own
/// `Page.javascriptDialogOpening` no longer does.
#[tokio::test]
async fn a_dialog_in_the_owners_record_ends_the_evaluate_with_its_id() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    let (tx, _) = tokio::sync::watch::channel(evaluate::DialogRecord::default());
    let tx = Arc::new(OwnerRecord(tx));
    engine.set_facts(tx.clone());
    warm(&engine).await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .evaluate(EvalRequest::new("confirm('sure?')"), &budget(5000))
                .await
        })
    };
    mock.wait_for("Runtime.evaluate", 2, T).await;
    // The engine's own session sees the event, but the owner's record rules.
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"url": "http://a/", "message": "sure?", "type": "confirm", "hasBrowserHandler": false, "defaultPrompt": "", "frameId": "PAGE"}),
        Some("S1"),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !task.is_finished(),
        "the engine's own event ended the evaluate"
    );
    let t0 = std::time::Instant::now();
    tx.0.send_modify(|r| {
        r.opened += 1;
        r.open = Some(owned_dialog("d-7"));
        r.latest = Some(owned_dialog("d-7"));
    });
    let err = task.await.expect("join").expect_err("dialog");
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(err.code(), "dialog_opened", "{err}");
    assert_eq!(err.dialog().and_then(|d| d.id.as_deref()), Some("d-7"));
    // And the next evaluate is refused while the record says it is open.
    let err = engine
        .evaluate(EvalRequest::new("1"), &budget(1000))
        .await
        .expect_err("refused");
    assert_eq!(err.dialog().and_then(|d| d.id.as_deref()), Some("d-7"));
    assert!(mock.received().iter().all(|r| !is_dialog_check(r)));
}

/// An owner that answers every dialog itself (an auto policy): a dialog
/// that opens during the evaluate does not end it; the script's value
/// comes back once the owner has answered.
#[tokio::test]
async fn a_dialog_the_owner_answers_itself_lets_the_script_return_its_value() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    let (tx, _) = tokio::sync::watch::channel(evaluate::DialogRecord {
        answered_by_owner: true,
        ..Default::default()
    });
    let tx = Arc::new(OwnerRecord(tx));
    engine.set_facts(tx.clone());
    warm(&engine).await;
    // The script's reply comes 600 ms after it is sent: the dialog opens
    // and is answered meanwhile.
    mock.on_action(
        "Runtime.evaluate",
        Action::ReplyAfter(Duration::from_millis(600), ok_value(json!(true))),
    );
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .evaluate(EvalRequest::new("confirm('sure?')"), &budget(5000))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.0.send_modify(|r| {
        r.opened += 1;
        r.open = Some(owned_dialog("d-1"));
        r.latest = Some(owned_dialog("d-1"));
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.0.send_modify(|r| r.open = None);
    assert!(!task.is_finished(), "the dialog ended the evaluate");
    let out = task.await.expect("join").expect("value");
    assert_eq!(out.value, json!(true));
    assert_eq!(engine.metrics().dialog_interruptions, 0);
}

#[tokio::test]
async fn a_destroyed_context_after_send_is_navigated() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.evaluate(EvalRequest::new("1"), &budget(5000)).await })
    };
    mock.wait_for("Runtime.evaluate", 1, T).await;
    mock.event(
        "Runtime.executionContextDestroyed",
        json!({"executionContextId": 1, "executionContextUniqueId": "u1"}),
        Some("S1"),
    );
    let err = task.await.expect("join").expect_err("navigated");
    assert_eq!(err.code(), "navigated", "{err}");
}

#[tokio::test]
async fn a_stale_context_is_retried_once_in_the_new_one() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine.warm_up(&budget(2000)).await.expect("warm");
    mock.once(
        "Runtime.evaluate",
        Action::Error {
            code: -32602,
            message: "uniqueContextId not found".into(),
        },
    );
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.evaluate(EvalRequest::new("1"), &budget(5000)).await })
    };
    mock.wait_for("Runtime.evaluate", 1, T).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    mock.event("Runtime.executionContextCreated", context(2), Some("S1"));
    let out = task
        .await
        .expect("join")
        .expect("retried in the new context");
    assert_eq!(out.value, json!(5));
    let calls = mock.received_method("Runtime.evaluate");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (
            calls[0].params["uniqueContextId"].clone(),
            calls[1].params["uniqueContextId"].clone()
        ),
        (json!("u1"), json!("u2"))
    );
}

/// Every mapping from a browser answer to an error code, in one snapshot.
#[tokio::test]
async fn browser_answers_map_to_typed_errors() {
    let syntax_error = json!({"result": {"type": "object", "subtype": "error", "className": "SyntaxError"}, "exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 2, "columnNumber": 4, "exception": {"type": "object", "subtype": "error", "className": "SyntaxError", "description": "SyntaxError: Unexpected token '*'"}}});
    let cases: Vec<(&str, &str, Action)> = vec![
        (
            "navigated",
            "Runtime.evaluate",
            Action::Error {
                code: -32000,
                message: "Inspected target navigated or closed".into(),
            },
        ),
        (
            "context gone",
            "Runtime.evaluate",
            Action::Error {
                code: -32000,
                message: "Execution context was destroyed.".into(),
            },
        ),
        (
            "terminated by chromium's timeout",
            "Runtime.evaluate",
            Action::Reply(
                json!({"result": {"type": "object"}, "exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 0, "columnNumber": 0, "exception": {"type": "object", "description": "Execution was terminated"}}}),
            ),
        ),
        (
            "user exception",
            "Runtime.evaluate",
            Action::Reply(
                json!({"result": {"type": "object", "value": {"$tw": "exception", "name": "TypeError", "message": "x is not a function", "stack": "TypeError: x is not a function\n    at __tw_run (<anonymous>:2:1)\n    at <anonymous>:9:1"}}}),
            ),
        ),
        (
            "syntax error",
            // And `Runtime.evaluate` answers with the parser's SyntaxError (below).
            "Runtime.compileScript",
            Action::Reply(
                json!({"exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 2, "columnNumber": 4, "exception": {"type": "object", "subtype": "error", "className": "SyntaxError", "description": "SyntaxError: Unexpected token '*'"}}}),
            ),
        ),
        (
            "garbage",
            "Runtime.evaluate",
            // (A bare JSON primitive is a valid answer: plain values come back as themselves.)
            Action::Reply(json!({"result": {"type": "object", "value": {"unexpected": 1}}})),
        ),
        (
            "other protocol error",
            "Runtime.evaluate",
            Action::Error {
                code: -32603,
                message: "Internal error".into(),
            },
        ),
        (
            "promise timer fired in the page",
            "Runtime.evaluate",
            Action::Reply(
                json!({"result": {"type": "object", "value": {"$tw": "promise_timeout"}}}),
            ),
        ),
    ];
    let mut out = Vec::new();
    for (name, method, action) in cases {
        let (mock, engine) = setup(EngineConfig::default()).await;
        if name == "syntax error" {
            mock.on("Runtime.evaluate", syntax_error.clone());
        }
        mock.on_action(method, action);
        let err = engine
            .evaluate(EvalRequest::new("x()"), &budget(3000))
            .await
            .expect_err(name);
        let text = err.to_string();
        // Elapsed times vary run to run.
        let text = regex_lite_elapsed(&text);
        out.push(json!({"case": name, "code": err.code(), "message": text}));
    }
    let (_mock, off) = setup(EngineConfig::default().evaluate_enabled(false)).await;
    let err = off
        .evaluate(EvalRequest::new("1"), &budget(1000))
        .await
        .expect_err("gate");
    out.push(json!({"case": "gate off", "code": err.code(), "message": err.to_string()}));
    insta::assert_yaml_snapshot!("error_mapping", out);
}

/// Replaces `after 1.234ms` by `after [elapsed]`.
fn regex_lite_elapsed(s: &str) -> String {
    match s.find("after ") {
        Some(i) => {
            let rest = &s[i + 6..];
            let end = rest.find(' ').unwrap_or(rest.len());
            format!("{}after [elapsed]{}", &s[..i], &rest[end..])
        }
        None => s.to_string(),
    }
}

#[tokio::test]
async fn the_gate_refuses_before_touching_the_browser() {
    let (mock, engine) = setup(EngineConfig::default().evaluate_enabled(false)).await;
    let err = engine
        .evaluate(EvalRequest::new("1"), &budget(1000))
        .await
        .expect_err("gate");
    assert_eq!(err.code(), "evaluate_disabled");
    assert!(mock.received().is_empty(), "{:?}", mock.received());
    assert_eq!(
        (engine.metrics().evaluations, engine.metrics().refused),
        (1, 1)
    );
}

fn syntax_error_reply() -> Value {
    json!({"result": {"type": "object", "subtype": "error", "className": "SyntaxError"},
        "exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 1, "columnNumber": 2,
            "exception": {"type": "object", "subtype": "error", "className": "SyntaxError",
                "description": "SyntaxError: Unexpected identifier 'b'"}}})
}

fn compile_failure() -> Value {
    json!({"exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 1, "columnNumber": 2,
        "exception": {"type": "object", "subtype": "error", "className": "SyntaxError",
            "description": "SyntaxError: Unexpected identifier 'b'"}}})
}

#[tokio::test]
async fn warm_evaluates_are_one_round_trip_and_install_the_helper_once() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    for _ in 0..3 {
        let out = engine
            .evaluate(EvalRequest::new("1+1"), &budget(2000))
            .await
            .expect("ok");
        assert_eq!(out.form, evaluate::SourceForm::Expression);
    }
    let calls = mock.received_method("Runtime.evaluate");
    assert_eq!(calls.len(), 3, "one Runtime.evaluate per evaluate");
    assert!(mock.received_method("Runtime.compileScript").is_empty());
    let text = |i: usize| {
        calls[i].params["expression"]
            .as_str()
            .expect("expression")
            .to_string()
    };
    // The first call in an execution context installs the page-side helper;
    // later ones only look it up.
    assert!(text(0).contains("defineProperty"), "{}", text(0));
    for i in [1, 2] {
        assert!(!text(i).contains("defineProperty"), "{}", text(i));
        assert!(text(i).len() < 600, "{} bytes: {}", text(i).len(), text(i));
        assert!(text(i).contains("\n1+1\n"), "the source on its own line 2");
    }
}

#[tokio::test]
async fn a_missing_helper_is_installed_without_running_anything_twice() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("installs");
    // The page lost it (say, a frozen global object): the short wrapper says
    // so without running the source, and the engine sends the installing one.
    mock.once(
        "Runtime.evaluate",
        Action::Reply(json!({"result": {"type": "object", "value": {"$tw": "no_helper"}}})),
    );
    let out = engine
        .evaluate(EvalRequest::new("2"), &budget(2000))
        .await
        .expect("reinstalls");
    assert_eq!(out.value, json!(5));
    let calls = mock.received_method("Runtime.evaluate");
    assert_eq!(calls.len(), 3);
    assert!(!calls[1].params["expression"]
        .as_str()
        .unwrap_or_default()
        .contains("defineProperty"));
    assert!(calls[2].params["expression"]
        .as_str()
        .unwrap_or_default()
        .contains("defineProperty"));
}

#[tokio::test]
async fn obvious_statements_are_sent_as_statements_at_once() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    for src in [
        "const a = 2; return a * 21",
        "x = 1; return x",
        "return 5",
        "let y = 3\nreturn y",
    ] {
        let out = engine
            .evaluate(EvalRequest::new(src), &budget(2000))
            .await
            .expect(src);
        assert_eq!(out.form, evaluate::SourceForm::Statements, "{src}");
    }
    assert_eq!(mock.received_method("Runtime.evaluate").len(), 4);
    assert!(mock.received_method("Runtime.compileScript").is_empty());
}

#[tokio::test]
async fn a_source_that_is_no_expression_is_compile_checked_then_sent_as_statements() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine.warm_up(&budget(2000)).await.expect("warm");
    // `a\nb` is two statements (no `;`): the expression wrapper does not parse.
    mock.once("Runtime.evaluate", Action::Reply(syntax_error_reply()));
    mock.once("Runtime.compileScript", Action::Reply(compile_failure()));
    let out = engine
        .evaluate(EvalRequest::new("a\nb"), &budget(2000))
        .await
        .expect("statements");
    // Statements of a page evaluate go as a script first (the completion value).
    assert_eq!(out.form, evaluate::SourceForm::Script);
    let evals = mock.received_method("Runtime.evaluate");
    let compiles = mock.received_method("Runtime.compileScript");
    assert_eq!((evals.len(), compiles.len()), (2, 1));
    // The compile check is of exactly the text that failed, in the same execution context.
    assert_eq!(
        compiles[0].params["expression"],
        evals[0].params["expression"]
    );
    assert_eq!(compiles[0].params["executionContextId"], 1);
    assert!(evals[0].params["expression"]
        .as_str()
        .unwrap_or_default()
        .contains("return (\na\nb\n);"));
    assert!(!evals[1].params["expression"]
        .as_str()
        .unwrap_or_default()
        .contains("return (\na\nb"));
    // The script goes to a direct `eval` as a string, after the line that
    // says it started.
    assert!(
        evals[1].params["expression"]
            .as_str()
            .unwrap_or_default()
            .contains(r#"eval("void (__tw_script_started = true);\na\nb")"#),
        "{}",
        evals[1].params["expression"]
    );
}

/// Statements that do not parse as a script (the page's `eval` threw
/// before they started: `not_script`) ran nothing: the source alone is
/// compile-checked, and a complaint about a top-level `return` sends it as
/// a function body; any other is `invalid_source` at the source's own
/// position. Each form is sent once.
#[tokio::test]
async fn statements_that_are_no_script_go_as_a_function_body_or_are_invalid() {
    let not_script = json!({"result": {"type": "object", "value": {"$tw": "not_script", "message": "Illegal return statement"}}});
    let illegal_return = json!({"exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 1, "columnNumber": 0,
        "exception": {"type": "object", "subtype": "error", "className": "SyntaxError", "description": "SyntaxError: Illegal return statement"}}});
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine.warm_up(&budget(2000)).await.expect("warm");
    mock.once("Runtime.evaluate", Action::Reply(not_script.clone()));
    mock.once("Runtime.compileScript", Action::Reply(illegal_return));
    // `{ return 1 }` in braces: no top-level `return` for the guess.
    let src = "if (true) { return 1 }; 2";
    let out = engine
        .evaluate(EvalRequest::new(src), &budget(2000))
        .await
        .expect("function body");
    assert_eq!(out.form, evaluate::SourceForm::Statements);
    let evals = mock.received_method("Runtime.evaluate");
    let compiles = mock.received_method("Runtime.compileScript");
    assert_eq!((evals.len(), compiles.len()), (2, 1));
    assert_eq!(compiles[0].params["expression"], src, "the source alone");
    assert!(evals[0].params["expression"]
        .as_str()
        .unwrap_or_default()
        .contains("eval("));
    assert!(evals[1].params["expression"]
        .as_str()
        .unwrap_or_default()
        .contains(&format!("\n{src}\n")));

    // Any other complaint is the user's syntax error, with its position.
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine.warm_up(&budget(2000)).await.expect("warm");
    mock.once("Runtime.evaluate", Action::Reply(not_script));
    mock.once(
        "Runtime.compileScript",
        Action::Reply(json!({"exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 1, "columnNumber": 2,
            "exception": {"type": "object", "subtype": "error", "className": "SyntaxError", "description": "SyntaxError: Unexpected end of input"}}})),
    );
    let err = engine
        .evaluate(EvalRequest::new("var a = 1;\na +"), &budget(2000))
        .await
        .expect_err("invalid");
    assert_eq!(err.code(), "invalid_source");
    assert_eq!(
        err.to_string(),
        "invalid source: SyntaxError: Unexpected end of input (line 2, column 3)"
    );
    assert_eq!(mock.received_method("Runtime.evaluate").len(), 1);
}

#[tokio::test]
async fn a_syntax_error_thrown_at_run_time_is_a_js_exception_and_not_run_again() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    // The wrapper parsed (compileScript says so) and the script threw a
    // SyntaxError past it: that is the user's exception, never a reason to
    // send the source again.
    mock.once("Runtime.evaluate", Action::Reply(syntax_error_reply()));
    let err = engine
        .evaluate(EvalRequest::new("JSON.parse('{')"), &budget(2000))
        .await
        .expect_err("throws");
    assert_eq!(err.code(), "js_exception", "{err}");
    assert_eq!(mock.received_method("Runtime.evaluate").len(), 1);
    assert_eq!(mock.received_method("Runtime.compileScript").len(), 1);
}

#[tokio::test]
async fn cancel_during_the_error_path_compile_check_terminates_nothing() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine.warm_up(&budget(2000)).await.expect("warm");
    mock.once("Runtime.evaluate", Action::Reply(syntax_error_reply()));
    mock.on_action("Runtime.compileScript", Action::Never);
    let b = budget(5000);
    let task = {
        let (engine, b) = (engine.clone(), b.clone());
        tokio::spawn(async move { engine.evaluate(EvalRequest::new("a\nb"), &b).await })
    };
    mock.wait_for("Runtime.compileScript", 1, T).await;
    b.cancel();
    let err = task.await.expect("join").expect_err("cancelled");
    assert!(
        matches!(err, Error::Cancelled { sent: false, .. }),
        "{err:?}"
    );
    assert!(mock
        .received_method("Runtime.terminateExecution")
        .is_empty());
}

#[tokio::test]
async fn a_termination_that_takes_keeps_the_session_warm() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("warm");
    busy_script(&mock);
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .evaluate(EvalRequest::new("while (true) {}"), &budget(300))
                .await
        })
    };
    // The loop ends when terminateExecution arrives: its call answers
    // "Execution was terminated" (and the termination is acknowledged).
    let evals = mock.wait_for("Runtime.evaluate", 2, T).await;
    mock.wait_for("Runtime.terminateExecution", 1, T).await;
    mock.reply(
        evals[1].id,
        json!({"result": {"type": "object"}, "exceptionDetails": {"exceptionId": 2, "text": "Uncaught",
            "lineNumber": 0, "columnNumber": 0, "exception": {"type": "object", "description": "Execution was terminated"}}}),
        Some("S1"),
    );
    let err = task.await.expect("join").expect_err("timeout");
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Script,
                terminated: true,
                ..
            }
        ),
        "{err:?}"
    );
    // The next evaluate runs at once on the same session, after the health probe.
    let out = engine
        .evaluate(EvalRequest::new("2"), &budget(2000))
        .await
        .expect("next");
    assert_eq!(out.value, json!(5));
    let evals = mock.received_method("Runtime.evaluate");
    let probe = evals
        .iter()
        .position(|r| r.params["expression"] == "0")
        .expect("a health probe");
    let last = evals.last().expect("evaluate");
    assert!(probe < evals.len() - 1, "probe before the next evaluate");
    assert_eq!(last.session_id.as_deref(), Some("S1"));
    assert!(mock.received_method("Target.detachFromTarget").is_empty());
    assert_eq!(mock.received_method("Target.attachToTarget").len(), 1);
    let m = engine.metrics();
    assert_eq!((m.timeouts, m.terminations, m.detaches), (1, 1, 0), "{m:?}");
}

#[tokio::test]
async fn a_session_that_fails_its_health_probe_is_replaced() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("warm");
    busy_script(&mock);
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .evaluate(EvalRequest::new("while (true) {}"), &budget(300))
                .await
        })
    };
    let evals = mock.wait_for("Runtime.evaluate", 2, T).await;
    mock.wait_for("Runtime.terminateExecution", 1, T).await;
    // The probe after the termination is itself terminated (or throws): unhealthy.
    mock.on_fn("Runtime.evaluate", |r| {
        (r.params["expression"] == "0").then(|| {
            Action::Reply(json!({"result": {"type": "object"}, "exceptionDetails": {"exceptionId": 3, "text": "Uncaught",
                "exception": {"type": "object", "description": "Execution was terminated"}}}))
        })
    });
    mock.reply(
        evals[1].id,
        json!({"result": {"type": "object"}, "exceptionDetails": {"exceptionId": 2, "text": "Uncaught",
            "exception": {"type": "object", "description": "Execution was terminated"}}}),
        Some("S1"),
    );
    let err = task.await.expect("join").expect_err("timeout");
    assert!(err.is_timeout(), "{err:?}");
    mock.wait_for("Target.detachFromTarget", 1, T).await;
    let out = engine
        .evaluate(EvalRequest::new("2"), &budget(2000))
        .await
        .expect("next");
    assert_eq!(out.value, json!(5));
    let last = mock
        .received_method("Runtime.evaluate")
        .pop()
        .expect("evaluate");
    assert_eq!(last.session_id.as_deref(), Some("S2"));
    assert_eq!(engine.metrics().detaches, 1);
}

#[tokio::test]
async fn a_promise_pending_at_the_deadline_with_the_page_idle_is_a_promise_timeout_and_nothing_is_terminated(
) {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("warm");
    // The script's call never answers (its in-page settle timer is late, say
    // on a loaded machine) while the page answers everything sent after it:
    // its synchronous part returned a promise (C14).
    mock.once("Runtime.evaluate", Action::Never);
    let err = engine
        .evaluate(EvalRequest::new("new Promise(() => {})"), &budget(400))
        .await
        .expect_err("timeout");
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Promise,
                terminated: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("promise never settled"), "{err}");
    let probes: Vec<_> = mock
        .received_method("Runtime.evaluate")
        .into_iter()
        .filter(is_idle_probe)
        .collect();
    assert_eq!(probes.len(), 2, "half-way and at the deadline: {probes:?}");
    assert!(probes.iter().all(|p| p.session_id.as_deref() == Some("S1")));
    assert!(mock
        .received_method("Runtime.terminateExecution")
        .is_empty());
    // Nothing to settle: the next evaluate goes at once, on the same session.
    let out = engine
        .evaluate(EvalRequest::new("2"), &budget(2000))
        .await
        .expect("next");
    assert_eq!(out.value, json!(5));
    assert!(mock.received_method("Target.detachFromTarget").is_empty());
    let m = engine.metrics();
    assert_eq!(
        (m.timeouts, m.promise_timeouts, m.terminations, m.detaches),
        (1, 1, 0, 0),
        "{m:?}"
    );
}

#[tokio::test]
async fn a_promise_whose_continuation_still_runs_at_the_deadline_is_terminated() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("warm");
    // The half-way probe answers (the synchronous part returned a promise),
    // the one at the deadline does not (a continuation loops).
    let probes = Arc::new(AtomicU64::new(0));
    let seen = probes.clone();
    mock.on_fn("Runtime.evaluate", move |r| {
        if !is_idle_probe(r) {
            return None;
        }
        match seen.fetch_add(1, Ordering::SeqCst) {
            0 => Some(Action::Reply(
                json!({"result": {"type": "number", "value": 0}}),
            )),
            _ => Some(Action::Never),
        }
    });
    mock.once("Runtime.evaluate", Action::Never);
    let err = engine
        .evaluate(
            EvalRequest::new("(async () => { await null; for (;;) {} })()"),
            &budget(400),
        )
        .await
        .expect_err("timeout");
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Promise,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(probes.load(Ordering::SeqCst), 2);
    assert_eq!(mock.received_method("Runtime.terminateExecution").len(), 1);
    assert_eq!(engine.metrics().promise_timeouts, 1);
}

#[tokio::test]
async fn a_busy_script_sends_no_second_probe_and_is_terminated_at_the_deadline() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("warm");
    busy_script(&mock);
    let t0 = std::time::Instant::now();
    let err = engine
        .evaluate(EvalRequest::new("while (true) {}"), &budget(400))
        .await
        .expect_err("timeout");
    // The unanswered half-way probe says "busy": terminate at once, no wait
    // for a second probe (the grace after the termination is all it adds).
    assert!(
        t0.elapsed() < Duration::from_millis(400 + 100 + 80),
        "{:?}",
        t0.elapsed()
    );
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Script,
                ..
            }
        ),
        "{err:?}"
    );
    let probes = mock
        .received_method("Runtime.evaluate")
        .into_iter()
        .filter(is_idle_probe)
        .count();
    assert_eq!(probes, 1);
    assert_eq!(mock.received_method("Runtime.terminateExecution").len(), 1);
}

// ------------------------------------------------------------ a busy renderer

/// A renderer busy with its page's own script holds `Runtime.enable` of a
/// cold engine: half-way (at most 2 s) the engine sends
/// `Runtime.terminateExecution` once, on the session the terminate route
/// names for the page target; the held command then answers, the
/// termination is settled before the script is sent, and the value comes
/// back with a note saying what was stopped.
#[tokio::test]
async fn a_busy_renderer_during_setup_is_terminated_through_the_route_and_the_evaluate_runs() {
    let (mock, engine, conn) = setup_with_conn(EngineConfig::default()).await;
    mock.on_action("Runtime.enable", Action::Never);
    let route_session = conn.session(cdp_transport::SessionId::new("SUPERVISOR"));
    engine.set_facts(Arc::new(TerminateOn(TargetId::new("PAGE"), route_session)));
    let t0 = std::time::Instant::now();
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .evaluate(EvalRequest::new("document.title"), &budget(2000))
                .await
        })
    };
    let enable = mock.wait_for("Runtime.enable", 1, T).await[0].clone();
    let term = mock.wait_for("Runtime.terminateExecution", 1, T).await;
    let at = t0.elapsed();
    assert!(
        at >= Duration::from_millis(900) && at < Duration::from_millis(1600),
        "terminated after {at:?} (half the 2 s budget)"
    );
    assert_eq!(
        term[0].session_id.as_deref(),
        Some("SUPERVISOR"),
        "{term:?}"
    );
    // The script stopped: the held command answers.
    mock.event(
        "Runtime.executionContextCreated",
        context(1),
        enable.session_id.as_deref(),
    );
    mock.reply(enable.id, json!({}), enable.session_id.as_deref());
    let out = task.await.expect("join").expect("evaluate");
    assert_eq!(out.value, json!(5));
    assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
    assert!(
        out.notes[0].contains("page's own script kept the renderer busy")
            && out.notes[0].contains("Runtime.terminateExecution"),
        "{:?}",
        out.notes
    );
    assert_eq!(mock.received_method("Runtime.terminateExecution").len(), 1);
    // The user's script went after the termination was acknowledged.
    let evals = mock.received_method("Runtime.evaluate");
    assert_eq!(evals.len(), 1, "{evals:?}");
    assert!(t0.elapsed() < Duration::from_millis(2000));
}

/// The renderer still does not answer at the deadline: `page_busy`, which
/// says a running script was stopped only when the termination was
/// acknowledged; nothing of the script was sent.
#[tokio::test]
async fn a_renderer_that_stays_busy_is_page_busy_and_says_what_is_known() {
    for acknowledged in [true, false] {
        let (mock, engine, _conn) = setup_with_conn(EngineConfig::default()).await;
        mock.on_action("Runtime.enable", Action::Never);
        if !acknowledged {
            mock.on_action("Runtime.terminateExecution", Action::Never);
        }
        let t0 = std::time::Instant::now();
        let err = engine
            .evaluate(EvalRequest::new("1"), &budget(800))
            .await
            .expect_err("busy");
        let took = t0.elapsed();
        assert_eq!(err.code(), "page_busy", "{err}");
        assert!(
            matches!(&err, Error::PageBusy { stopped, method, .. } if *stopped == acknowledged && method == "Runtime.enable"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("the script never ran"), "{text}");
        assert_eq!(
            text.contains("it was stopped with Runtime.terminateExecution"),
            acknowledged,
            "{text}"
        );
        assert!(took < Duration::from_millis(1300), "{took:?}");
        // No user script, one termination (on the command's own session: no route).
        assert!(mock
            .received_method("Runtime.evaluate")
            .iter()
            .all(|r| r.params["expression"]
                .as_str()
                .is_some_and(|e| e.starts_with("0 //"))));
        let terms = mock.received_method("Runtime.terminateExecution");
        assert_eq!(terms.len(), 1, "{terms:?}");
        assert_eq!(terms[0].session_id.as_deref(), Some("S1"));
    }
}

fn is_dialog_check(r: &cdp_mock::Request) -> bool {
    r.params["expression"]
        .as_str()
        .is_some_and(|e| e.contains("dialog check"))
}

/// A dialog opening seen without a close (an injected or lost event, C23)
/// is trusted for 250 ms, then checked with a bounded probe evaluate: the
/// page answers, so nothing blocks it, the state is forgotten and the
/// evaluate runs. Once: the next evaluate sends no check.
#[tokio::test]
async fn a_dialog_believed_open_is_checked_and_forgotten_when_the_page_answers() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine.warm_up(&budget(2000)).await.expect("warm");
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"url": "http://a/", "message": "ghost", "type": "somethingNew", "hasBrowserHandler": false, "defaultPrompt": "", "frameId": "PAGE"}),
        Some("S1"),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect_err("trusted while fresh");
    assert_eq!(err.code(), "dialog_opened");
    assert!(!mock.received().iter().any(is_dialog_check));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = engine
        .evaluate(EvalRequest::new("1"), &budget(2000))
        .await
        .expect("no dialog blocks the page");
    assert_eq!(out.value, json!(5));
    let out = engine
        .evaluate(EvalRequest::new("2"), &budget(2000))
        .await
        .expect("forgotten");
    assert_eq!(out.value, json!(5));
    assert_eq!(
        mock.received()
            .iter()
            .filter(|r| is_dialog_check(r))
            .count(),
        1
    );
}

/// A dialog that really holds the page: the check gets no answer within
/// its bound (300 ms), and the evaluate is refused with the dialog.
#[tokio::test]
async fn a_dialog_that_still_blocks_is_refused_after_a_bounded_check() {
    let (mock, engine) = setup(EngineConfig::default()).await;
    engine.warm_up(&budget(2000)).await.expect("warm");
    mock.on_fn("Runtime.evaluate", |r| {
        is_dialog_check(r).then_some(Action::Never)
    });
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"url": "http://a/", "message": "real", "type": "alert", "hasBrowserHandler": false, "defaultPrompt": "", "frameId": "PAGE"}),
        Some("S1"),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = std::time::Instant::now();
    let err = engine
        .evaluate(EvalRequest::new("1"), &budget(5000))
        .await
        .expect_err("blocked");
    let took = t0.elapsed();
    assert_eq!(err.code(), "dialog_opened", "{err}");
    assert_eq!(err.dialog().map(|d| d.message.as_str()), Some("real"));
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(900),
        "{took:?}"
    );
    assert!(!mock
        .received_method("Runtime.evaluate")
        .iter()
        .any(|r| r.params["expression"]
            .as_str()
            .is_some_and(|e| e.contains("__tw_"))));
}

/// [`setup`], also returning the connection (for sessions of a terminate route).
async fn setup_with_conn(config: EngineConfig) -> (MockServer, Engine, Connection) {
    let mock = MockServer::start().await;
    let n = Arc::new(AtomicU64::new(0));
    mock.on_fn("Target.attachToTarget", move |_| {
        let k = n.fetch_add(1, Ordering::SeqCst) + 1;
        Some(Action::Reply(json!({"sessionId": format!("S{k}")})))
    });
    announce_context_on_enable(&mock);
    mock.on("Runtime.evaluate", ok_value(json!(5)));
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    let engine = Engine::new(conn.clone(), TargetId::new("PAGE"), config);
    (mock, engine, conn)
}

/// "Execution was terminated", as V8 answers a call it ended.
fn terminated_reply() -> Value {
    json!({"result": {"type": "object"}, "exceptionDetails": {"exceptionId": 9, "text": "Uncaught",
        "exception": {"type": "object", "description": "Execution was terminated"}}})
}

/// `Engine::terminate` (a clean-up termination sent for an action of the
/// caller's, on another session of the same page) against a renderer
/// modelled as V8 behaves: a termination that finds no script running is
/// not answered and ends the next script of the process, on any session.
/// The engine's next evaluate waits until a probe has taken it, so the
/// user's script is never the one terminated; the handle says nothing was
/// stopped.
#[tokio::test]
async fn a_termination_for_another_session_never_ends_the_next_evaluate() {
    let (mock, engine, conn) = setup_with_conn(EngineConfig::default()).await;
    // The renderer: one pending termination at most, taken by the next call.
    let pending = Arc::new(std::sync::atomic::AtomicBool::new(false));
    mock.on_fn("Runtime.terminateExecution", {
        let pending = pending.clone();
        move |_| {
            pending.store(true, Ordering::SeqCst);
            Some(Action::Never)
        }
    });
    mock.on_fn("Runtime.evaluate", {
        let pending = pending.clone();
        move |_| {
            Some(Action::Reply(if pending.swap(false, Ordering::SeqCst) {
                terminated_reply()
            } else {
                ok_value(json!(5))
            }))
        }
    });
    warm(&engine).await;
    // The page's own session (the supervisor's, in a full stack).
    let page = conn.session(cdp_transport::SessionId::new("PAGE-SESSION"));
    let term = engine.terminate(&page);
    let out = engine
        .evaluate(EvalRequest::new("2"), &budget(5000))
        .await
        .expect("the evaluate after the termination runs to its value");
    assert_eq!(out.value, json!(5));
    assert!(!term.acknowledged(Duration::ZERO).await);
    assert_eq!(
        term.settled(T).await,
        Some(false),
        "settled, nothing stopped"
    );
    // Order on the wire: the termination, the probe that took it (on the
    // session it went to), then the user's script on the engine's session.
    let evals = mock.received_method("Runtime.evaluate");
    let probe = evals
        .iter()
        .position(|r| r.session_id.as_deref() == Some("PAGE-SESSION"))
        .expect("a probe on the page session");
    let user = evals.len() - 1;
    assert!(probe < user, "{evals:#?}");
    assert_eq!(evals[user].session_id.as_deref(), Some("S1"));
    assert_eq!(engine.metrics().terminations, 1);
}
