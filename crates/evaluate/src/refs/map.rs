//! The ref map: resolving refs to live nodes, and the actions on them.

use super::snapshot::current_loader;
use crate::error::{Error, Result};
use cdp_transport::{BackendNodeId, Budget, FrameId, LoaderId, Session, SessionId};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// What a ref stores (seed 004 §3: `{role, name, nth, backendDOMNodeId?}`,
/// plus where the node lives).
#[derive(Debug, Clone, Serialize)]
pub struct RefEntry {
    /// `e1`, `e2`, ...
    #[serde(rename = "ref")]
    pub ref_id: String,
    /// AX role as Chromium reports it.
    pub role: String,
    /// Accessible name (empty when none).
    pub name: String,
    /// 0-based index among the snapshot's refs with the same `(role, name)`;
    /// `Some` for every member of a group of two or more (0 included),
    /// `None` for singletons.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nth: Option<u32>,
    /// `backendDOMNodeId` of the AX node; `None` when the AX node had none
    /// (resolved with `Accessibility.queryAXTree` then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_node_id: Option<BackendNodeId>,
    /// The frame the node is in.
    pub frame_id: FrameId,
    /// The session to act on (the page's, or the OOPIF's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The frame's `loaderId` at snapshot time; a different one now means the
    /// document was replaced and the ref is stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loader_id: Option<LoaderId>,
    #[serde(skip)]
    pub(crate) session: Session,
    #[serde(skip)]
    pub(crate) frame_root: Option<BackendNodeId>,
    #[serde(skip)]
    pub(crate) frame_nth: usize,
}

impl RefEntry {
    /// The session to act on for this ref.
    pub fn session(&self) -> &Session {
        &self.session
    }

    fn stale(&self, reason: impl Into<String>) -> Error {
        Error::StaleRef {
            ref_id: self.ref_id.clone(),
            role: self.role.clone(),
            name: self.name.clone(),
            reason: reason.into(),
        }
    }

    fn not_editable(&self, reason: impl Into<String>) -> Error {
        Error::NotEditable {
            ref_id: self.ref_id.clone(),
            role: self.role.clone(),
            name: self.name.clone(),
            reason: reason.into(),
        }
    }

    fn not_interactable(&self, reason: impl Into<String>) -> Error {
        Error::NotInteractable {
            ref_id: self.ref_id.clone(),
            role: self.role.clone(),
            name: self.name.clone(),
            reason: reason.into(),
        }
    }
}

/// A ref resolved to a live node.
#[derive(Debug, Clone)]
pub struct ResolvedRef {
    /// The ref's entry.
    pub entry: RefEntry,
    /// The node, connected, in the ref's document.
    pub backend_node_id: BackendNodeId,
    /// The session to act on.
    pub session: Session,
    /// True when found through `Accessibility.queryAXTree` (the ref had no backend id).
    pub by_query: bool,
}

/// Where a click landed, in CSS pixels of the viewport of the session it was
/// dispatched on (the OOPIF's own viewport for an OOPIF).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClickPoint {
    /// x, CSS px.
    pub x: f64,
    /// y, CSS px.
    pub y: f64,
}

/// Refs of one snapshot, by id. Cheap to clone.
#[derive(Clone)]
pub struct RefMap {
    page: Session,
    entries: Arc<Vec<RefEntry>>,
    index: Arc<HashMap<String, usize>>,
    /// Where a frame's current loader is known without a CDP call.
    facts: Option<Arc<dyn crate::PageFacts>>,
}

impl std::fmt::Debug for RefMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefMap")
            .field("page", &self.page)
            .field("entries", &self.entries)
            .field("facts", &self.facts.is_some())
            .finish_non_exhaustive()
    }
}

const OBJECT_GROUP: &str = "tabwarden-refs";

impl RefMap {
    pub(crate) fn new(page: Session, entries: Vec<RefEntry>) -> Self {
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.ref_id.clone(), i))
            .collect();
        Self {
            page,
            entries: Arc::new(entries),
            index: Arc::new(index),
            facts: None,
        }
    }

    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool) -> Self {
        let mut kept = Self::new(
            self.page.clone(),
            self.entries
                .iter()
                .filter(|e| keep(&e.ref_id))
                .cloned()
                .collect(),
        );
        kept.facts = self.facts.clone();
        kept
    }

    /// Uses `facts` for the loader check of [`RefMap::resolve`].
    pub(crate) fn set_facts(&mut self, facts: Option<Arc<dyn crate::PageFacts>>) {
        self.facts = facts;
    }

    /// The entry for `ref_id`, if this map has it.
    pub fn get(&self, ref_id: &str) -> Option<&RefEntry> {
        self.index.get(ref_id).and_then(|i| self.entries.get(*i))
    }
    /// Entries in document order.
    pub fn iter(&self) -> impl Iterator<Item = &RefEntry> {
        self.entries.iter()
    }
    /// Number of refs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True when there are no refs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The page session (for page-level actions such as [`RefMap::press_key`]).
    pub fn page_session(&self) -> &Session {
        &self.page
    }

    fn entry(&self, ref_id: &str) -> Result<&RefEntry> {
        self.get(ref_id).ok_or_else(|| Error::UnknownRef {
            ref_id: ref_id.to_string(),
        })
    }

    /// Resolves `ref_id` to a live node in the ref's current document.
    ///
    /// Checks, in order: the ref exists ([`Error::UnknownRef`]); its session
    /// is alive and its frame still has the snapshot's loader (from the
    /// [`crate::PageFacts`] the snapshotter was given, else
    /// `Page.getFrameTree`; else [`Error::StaleRef`]); the node resolves
    /// (`DOM.resolveNode`) and `isConnected` is true; `Accessibility.getPartialAXTree`
    /// of the node still gives the ref's role (else `StaleRef`; the name may
    /// change, e.g. a toggle's label after a click). A
    /// ref without a backend id is looked up with
    /// `Accessibility.queryAXTree{role, accessibleName}` in its frame's
    /// document and picked by its index among same-named nodes of that frame.
    ///
    /// # Errors
    /// `UnknownRef`, `StaleRef`, `NotInteractable` (found by query but the AX
    /// node has no DOM node), `Transport` (budget, connection).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads; a remote object it created is in the
    /// object group `tabwarden-refs`, released on the next resolve.
    pub async fn resolve(&self, ref_id: &str, budget: impl Into<Budget>) -> Result<ResolvedRef> {
        let budget = budget.into();
        let e = self.entry(ref_id)?;
        let s = &e.session;
        if let Some(reason) = s.closed_reason() {
            return Err(e.stale(format!(
                "the session of frame {} closed ({reason})",
                e.frame_id
            )));
        }
        let known = self.facts.as_ref().and_then(|f| f.loader_of(&e.frame_id));
        let now = match known {
            Some(l) => Some(l),
            None => match current_loader(s, &e.frame_id, &budget).await {
                Ok(l) => l,
                Err(err) => return Err(map_gone(e, err)),
            },
        };
        match (&now, &e.loader_id) {
            (None, _) => return Err(e.stale(format!("frame {} is gone", e.frame_id))),
            (Some(now), Some(then)) if now != then => {
                return Err(e.stale(format!(
                    "frame {} loaded a new document (loader {then} -> {now})",
                    e.frame_id
                )))
            }
            _ => {}
        }
        let (backend, by_query) = match e.backend_node_id {
            Some(b) => (b, false),
            None => (self.query(e, &budget).await?, true),
        };
        // Connected?
        let _ = s
            .call(
                "Runtime.releaseObjectGroup",
                json!({"objectGroup": OBJECT_GROUP}),
                budget.clone(),
            )
            .await;
        let obj = s
            .call(
                "DOM.resolveNode",
                json!({"backendNodeId": backend.0, "objectGroup": OBJECT_GROUP}),
                budget.clone(),
            )
            .await;
        let object_id = match obj {
            Ok(v) => v
                .pointer("/object/objectId")
                .and_then(Value::as_str)
                .map(str::to_string),
            Err(err) if err.protocol_message().is_some() => {
                return Err(e.stale(format!("node {} no longer exists", backend.0)));
            }
            Err(err) => return Err(Error::transport("DOM.resolveNode", err)),
        };
        let Some(object_id) = object_id else {
            return Err(e.stale(format!("node {} no longer exists", backend.0)));
        };
        let c = s
            .call(
                "Runtime.callFunctionOn",
                json!({"objectId": object_id, "functionDeclaration": "function(){return this.isConnected}", "returnByValue": true}),
                budget.clone(),
            )
            .await
            .map_err(|err| Error::transport("Runtime.callFunctionOn", err))?;
        if c.pointer("/result/value") != Some(&Value::Bool(true)) {
            return Err(e.stale(format!("node {} was removed from the document", backend.0)));
        }
        // Same role and name as in the snapshot?
        if !by_query {
            let p = s
                .call(
                    "Accessibility.getPartialAXTree",
                    json!({"backendNodeId": backend.0, "fetchRelatives": false}),
                    budget.clone(),
                )
                .await
                .map_err(|err| Error::transport("Accessibility.getPartialAXTree", err))?;
            // Only the role must match: names legitimately change under the
            // agent's own actions ("Follow" -> "Following").
            let node = p
                .get("nodes")
                .and_then(Value::as_array)
                .and_then(|a| a.first());
            let role = node.map(super::tree::role_of).unwrap_or("");
            if role != e.role {
                let name = node
                    .map(super::tree::name_of)
                    .map(normalize)
                    .unwrap_or_default();
                return Err(e.stale(format!("the node is now {role} {name:?}")));
            }
        }
        Ok(ResolvedRef {
            entry: e.clone(),
            backend_node_id: backend,
            session: s.clone(),
            by_query,
        })
    }

    async fn query(&self, e: &RefEntry, budget: &Budget) -> Result<BackendNodeId> {
        let Some(root) = e.frame_root else {
            return Err(e.stale(
                "the ref has no backend node and its frame has no document node to query from",
            ));
        };
        let mut params = json!({"backendNodeId": root.0, "role": e.role});
        if !e.name.is_empty() {
            params["accessibleName"] = json!(e.name);
        }
        let v = e
            .session
            .call("Accessibility.queryAXTree", params, budget.clone())
            .await
            .map_err(|err| Error::transport("Accessibility.queryAXTree", err))?;
        let matches: Vec<&Value> = v
            .get("nodes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|n| !n.get("ignored").and_then(Value::as_bool).unwrap_or(false))
                    .filter(|n| e.name.is_empty() || normalize(super::tree::name_of(n)) == e.name)
                    .collect()
            })
            .unwrap_or_default();
        let Some(n) = matches.get(e.frame_nth) else {
            return Err(e.stale(format!(
                "no {} {:?} at index {} in its frame ({} match now)",
                e.role,
                e.name,
                e.frame_nth,
                matches.len()
            )));
        };
        n.get("backendDOMNodeId")
            .and_then(Value::as_i64)
            .map(BackendNodeId)
            .ok_or_else(|| e.not_interactable("the accessibility node has no DOM node"))
    }

    /// Clicks the ref's element: `DOM.scrollIntoViewIfNeeded`, the centre of
    /// its first non-empty content quad (`DOM.getContentQuads`), then
    /// `Input.dispatchMouseEvent` `mouseMoved`, `mousePressed`, `mouseReleased`
    /// (left button, one click) on the ref's session. For an OOPIF that is
    /// the OOPIF's own session, whose coordinates are relative to its own
    /// viewport. Nothing is dispatched unless [`RefMap::resolve`] succeeds.
    ///
    /// # Errors
    /// As [`RefMap::resolve`]; `NotInteractable` when the element has no box.
    ///
    /// # Cancel safety
    /// Not cancel safe: a drop between press and release leaves the mouse
    /// button pressed in the page.
    pub async fn click(&self, ref_id: &str, budget: impl Into<Budget>) -> Result<ClickPoint> {
        let budget = budget.into();
        let r = self.resolve(ref_id, budget.clone()).await?;
        let s = &r.session;
        let b = r.backend_node_id.0;
        let _ = s
            .call(
                "DOM.scrollIntoViewIfNeeded",
                json!({"backendNodeId": b}),
                budget.clone(),
            )
            .await;
        let q = s
            .call(
                "DOM.getContentQuads",
                json!({"backendNodeId": b}),
                budget.clone(),
            )
            .await
            .map_err(|err| match err.protocol_message() {
                Some(m) => r.entry.not_interactable(format!("no box: {m}")),
                None => Error::transport("DOM.getContentQuads", err),
            })?;
        let point = q
            .get("quads")
            .and_then(Value::as_array)
            .and_then(|qs| qs.iter().find_map(quad_centre))
            .ok_or_else(|| {
                r.entry
                    .not_interactable("the element has no visible box (hidden or zero size)")
            })?;
        for (ty, extra) in [
            ("mouseMoved", json!({})),
            (
                "mousePressed",
                json!({"button": "left", "clickCount": 1, "buttons": 1}),
            ),
            (
                "mouseReleased",
                json!({"button": "left", "clickCount": 1, "buttons": 0}),
            ),
        ] {
            let mut p = json!({"type": ty, "x": point.x, "y": point.y});
            if let (Some(p), Some(x)) = (p.as_object_mut(), extra.as_object()) {
                p.extend(x.clone());
            }
            s.call("Input.dispatchMouseEvent", p, budget.clone())
                .await
                .map_err(|err| Error::transport("Input.dispatchMouseEvent", err))?;
        }
        Ok(point)
    }

    /// Types `text` into the ref's element, on the ref's session:
    ///
    /// 1. the element's kind is read (`Runtime.callFunctionOn`): an
    ///    `<input>` of a text kind (text, search, email, url, tel, password,
    ///    number, date/time kinds…), a `<textarea>` or a contenteditable
    ///    element takes text; a `<select>` takes a choice; anything else
    ///    (a button, a checkbox, a link, plain text), or a disabled or
    ///    read-only field, is [`Error::NotEditable`] naming it, and nothing
    ///    is sent;
    /// 2. text: `DOM.focus{backendNodeId}`, then a check that the element
    ///    is its document's (or shadow root's) `activeElement`, or contains
    ///    it (a contenteditable host); otherwise `NotEditable` ("did not
    ///    take the focus"), so the text never goes to whatever had the
    ///    focus before. Then `Input.insertText` and, when `submit`, Enter
    ///    (`Input.dispatchKeyEvent`);
    /// 3. a `<select>`: the option whose text (trimmed, whitespace
    ///    collapsed) equals `text` is selected — first exactly, then
    ///    ignoring case, then by its `value` — and `input` and `change` are
    ///    dispatched, as a user's choice would (a `<select multiple>` ends
    ///    with that option alone selected). No option matches:
    ///    `NotEditable` listing the options' texts (up to 20). With
    ///    `submit`, its form is submitted (`form.requestSubmit()`, which runs
    ///    the form's validation and submit handlers, as Enter in a text
    ///    field would).
    ///
    /// # Errors
    /// As [`RefMap::resolve`]; [`Error::NotEditable`] as above.
    ///
    /// # Cancel safety
    /// Not cancel safe: part of the text may have been inserted.
    pub async fn type_text(
        &self,
        ref_id: &str,
        text: &str,
        submit: bool,
        budget: impl Into<Budget>,
    ) -> Result<()> {
        let budget = budget.into();
        let r = self.resolve(ref_id, budget.clone()).await?;
        let s = &r.session;
        let object_id = object_of(&r, &budget).await?;
        let kind = call_on(s, &object_id, EDIT_KIND_JS, json!([]), &budget).await?;
        match kind["kind"].as_str() {
            Some("text") => {}
            Some("select") => {
                let chosen =
                    call_on(s, &object_id, SELECT_JS, json!([text, submit]), &budget).await?;
                if chosen["ok"] == Value::Bool(true) {
                    return Ok(());
                }
                let options: Vec<String> = chosen["options"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| o.as_str().map(|t| format!("{t:?}")))
                            .collect()
                    })
                    .unwrap_or_default();
                return Err(r.entry.not_editable(format!(
                    "it is a <select> and no option's text or value is {text:?} (options: {}{})",
                    options.join(", "),
                    if chosen["more"] == Value::Bool(true) {
                        ", …"
                    } else {
                        ""
                    }
                )));
            }
            _ => {
                let what = kind["what"]
                    .as_str()
                    .unwrap_or("an element that takes no text");
                return Err(r.entry.not_editable(format!(
                    "it is {what}; only text fields, text areas, contenteditable elements and selects take text"
                )));
            }
        }
        s.call(
            "DOM.focus",
            json!({"backendNodeId": r.backend_node_id.0}),
            budget.clone(),
        )
        .await
        .map_err(|err| match err.protocol_message() {
            Some(m) => r
                .entry
                .not_editable(format!("it cannot take the focus: {m}")),
            None => Error::transport("DOM.focus", err),
        })?;
        let focus = call_on(s, &object_id, HAS_FOCUS_JS, json!([]), &budget).await?;
        if focus["focused"] != Value::Bool(true) {
            let active = focus["active"].as_str().unwrap_or("nothing");
            return Err(r.entry.not_editable(format!(
                "it did not take the focus after DOM.focus (the focused element is {active}); nothing was typed"
            )));
        }
        s.call("Input.insertText", json!({"text": text}), budget.clone())
            .await
            .map_err(|err| Error::transport("Input.insertText", err))?;
        if submit {
            press_key_on(s, "Enter", &budget).await?;
        }
        Ok(())
    }

    /// Element evaluate by ref: resolves `ref_id` (so a stale ref never runs
    /// anything), then runs `function_source` with the element as its first
    /// argument and `this` through [`crate::Engine::evaluate_on_node`] on the
    /// engine's own session for the ref's target (the page, or the OOPIF),
    /// in the ref's frame.
    ///
    /// # Errors
    /// As [`RefMap::resolve`], then as [`crate::Engine::evaluate`].
    ///
    /// # Cancel safety
    /// As [`crate::Engine::evaluate`]: cancel the budget to terminate a running script.
    pub async fn evaluate(
        &self,
        engine: &crate::Engine,
        ref_id: &str,
        function_source: &str,
        budget: &Budget,
    ) -> Result<crate::EvalOutcome> {
        let r = self.resolve(ref_id, budget.clone()).await?;
        let e = &r.entry;
        let target = match r.session.target_id() {
            Some(t) if t != engine.page_target() => crate::EvalTarget::Oopif {
                target_id: t.clone(),
                frame_id: (t.as_str() != e.frame_id.as_str()).then(|| e.frame_id.clone()),
            },
            _ => crate::EvalTarget::Frame(e.frame_id.clone()),
        };
        engine
            .evaluate_on_node(target, r.backend_node_id, function_source, budget)
            .await
    }

    /// Presses and releases `key` on the page session (the focused element
    /// of the page gets it). `key` is a DOM key name (`Enter`, `Tab`,
    /// `Escape`, `Backspace`, `Delete`, `ArrowUp`/`Down`/`Left`/`Right`,
    /// `Home`, `End`, `PageUp`, `PageDown`, `Space`) or one character.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for an unknown key name (nothing is sent);
    /// `Transport` for a failed call.
    ///
    /// # Cancel safety
    /// Not cancel safe: a drop between keyDown and keyUp leaves the key down.
    pub async fn press_key(&self, key: &str, budget: impl Into<Budget>) -> Result<()> {
        press_key_on(&self.page, key, &budget.into()).await
    }
}

/// A remote object for the resolved ref's node (object group `tabwarden-refs`).
async fn object_of(r: &ResolvedRef, budget: &Budget) -> Result<String> {
    let v = r
        .session
        .call(
            "DOM.resolveNode",
            json!({"backendNodeId": r.backend_node_id.0, "objectGroup": OBJECT_GROUP}),
            budget.clone(),
        )
        .await
        .map_err(|err| match err.protocol_message() {
            Some(_) => r
                .entry
                .stale(format!("node {} no longer exists", r.backend_node_id.0)),
            None => Error::transport("DOM.resolveNode", err),
        })?;
    v.pointer("/object/objectId")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            r.entry
                .stale(format!("node {} no longer exists", r.backend_node_id.0))
        })
}

/// `Runtime.callFunctionOn` of `function` on `object_id` with `args` (JSON
/// values), by value. A thrown exception is `UnexpectedReply`.
async fn call_on(
    s: &Session,
    object_id: &str,
    function: &str,
    args: Value,
    budget: &Budget,
) -> Result<Value> {
    let arguments: Vec<Value> = args
        .as_array()
        .map(|a| a.iter().map(|v| json!({"value": v})).collect())
        .unwrap_or_default();
    let v = s
        .call(
            "Runtime.callFunctionOn",
            json!({"objectId": object_id, "functionDeclaration": function,
                   "arguments": arguments, "returnByValue": true}),
            budget.clone(),
        )
        .await
        .map_err(|err| Error::transport("Runtime.callFunctionOn", err))?;
    if let Some(d) = v.get("exceptionDetails") {
        return Err(Error::UnexpectedReply {
            method: "Runtime.callFunctionOn".into(),
            detail: d["exception"]["description"]
                .as_str()
                .or_else(|| d["text"].as_str())
                .unwrap_or("exception")
                .to_string(),
        });
    }
    Ok(v.pointer("/result/value").cloned().unwrap_or(Value::Null))
}

/// What typing into `this` would do: `{kind: 'text' | 'select' | 'none', what}`.
const EDIT_KIND_JS: &str = r#"function () {
  const el = this;
  const tag = String(el.localName || el.nodeName || '').toLowerCase();
  const desc = () => {
    let d = '<' + tag;
    if (tag === 'input') d += ' type=' + JSON.stringify(String(el.type || 'text'));
    return d + '>';
  };
  if (el.nodeType !== 1) return { kind: 'none', what: 'not an element (a ' + String(el.nodeName).toLowerCase() + ' node)' };
  if (tag === 'select') return el.disabled ? { kind: 'none', what: 'a disabled <select>' } : { kind: 'select' };
  if (tag === 'textarea' || tag === 'input') {
    const nonText = ['button', 'submit', 'reset', 'checkbox', 'radio', 'file', 'image', 'hidden', 'range', 'color'];
    if (tag === 'input' && nonText.includes(String(el.type).toLowerCase())) return { kind: 'none', what: 'an ' + desc() };
    if (el.disabled) return { kind: 'none', what: 'a disabled ' + desc() };
    if (el.readOnly) return { kind: 'none', what: 'a read-only ' + desc() };
    return { kind: 'text' };
  }
  if (el.isContentEditable) return { kind: 'text' };
  return { kind: 'none', what: 'a <' + tag + '> element that is not contenteditable' };
}"#;

/// Whether `this` has the focus after `DOM.focus`: `{focused, active}`.
const HAS_FOCUS_JS: &str = r#"function () {
  const el = this;
  const root = el.getRootNode ? el.getRootNode() : el.ownerDocument;
  const active = root && root.activeElement !== undefined ? root.activeElement : el.ownerDocument.activeElement;
  const focused = !!active && (active === el || (typeof el.contains === 'function' && el.contains(active)));
  const name = (a) => a ? '<' + String(a.localName || a.nodeName).toLowerCase() + (a.id ? ' id=' + JSON.stringify(a.id) : '') + '>' : 'nothing';
  return { focused, active: name(active) };
}"#;

/// Selects the option of the `<select>` `this` whose text is `text`
/// (exactly, then ignoring case, then by value); `{ok}` or `{ok:false, options, more}`.
const SELECT_JS: &str = r#"function (text, submit) {
  const el = this;
  const norm = (s) => String(s == null ? '' : s).replace(/\s+/g, ' ').trim();
  const opts = Array.from(el.options || []).filter((o) => !o.disabled);
  const want = norm(text);
  const pick = opts.find((o) => norm(o.text) === want)
    || opts.find((o) => norm(o.text).toLowerCase() === want.toLowerCase())
    || opts.find((o) => o.value === text);
  if (!pick) return { ok: false, options: opts.slice(0, 20).map((o) => norm(o.text)), more: opts.length > 20 };
  try { el.focus(); } catch (e) {}
  if (el.multiple) { for (const o of el.options) o.selected = (o === pick); } else { el.value = pick.value; pick.selected = true; }
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  if (submit && el.form) {
    if (typeof el.form.requestSubmit === 'function') el.form.requestSubmit(); else el.form.submit();
  }
  return { ok: true };
}"#;

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn map_gone(e: &RefEntry, err: Error) -> Error {
    match &err {
        Error::Transport { source, .. } if source.is_session_gone() => {
            e.stale(format!("the session of frame {} is gone", e.frame_id))
        }
        _ => err,
    }
}

fn quad_centre(q: &Value) -> Option<ClickPoint> {
    let a: Vec<f64> = q.as_array()?.iter().filter_map(Value::as_f64).collect();
    if a.len() != 8 {
        return None;
    }
    // Shoelace area; skip empty quads.
    let mut area = 0.0;
    for i in 0..4 {
        let (x1, y1, x2, y2) = (
            a[2 * i],
            a[2 * i + 1],
            a[(2 * i + 2) % 8],
            a[(2 * i + 3) % 8],
        );
        area += x1 * y2 - x2 * y1;
    }
    if (area / 2.0).abs() < 1.0 {
        return None;
    }
    Some(ClickPoint {
        x: (a[0] + a[2] + a[4] + a[6]) / 4.0,
        y: (a[1] + a[3] + a[5] + a[7]) / 4.0,
    })
}

/// `(key, code, windowsVirtualKeyCode, text)` for a key name.
fn key_def(key: &str) -> Option<(String, String, i64, Option<String>)> {
    let named = |k: &str, code: &str, vk: i64, text: Option<&str>| {
        Some((
            k.to_string(),
            code.to_string(),
            vk,
            text.map(str::to_string),
        ))
    };
    match key {
        "Enter" => named("Enter", "Enter", 13, Some("\r")),
        "Tab" => named("Tab", "Tab", 9, None),
        "Escape" => named("Escape", "Escape", 27, None),
        "Backspace" => named("Backspace", "Backspace", 8, None),
        "Delete" => named("Delete", "Delete", 46, None),
        "ArrowUp" => named("ArrowUp", "ArrowUp", 38, None),
        "ArrowDown" => named("ArrowDown", "ArrowDown", 40, None),
        "ArrowLeft" => named("ArrowLeft", "ArrowLeft", 37, None),
        "ArrowRight" => named("ArrowRight", "ArrowRight", 39, None),
        "Home" => named("Home", "Home", 36, None),
        "End" => named("End", "End", 35, None),
        "PageUp" => named("PageUp", "PageUp", 33, None),
        "PageDown" => named("PageDown", "PageDown", 34, None),
        "Space" | " " => named(" ", "Space", 32, Some(" ")),
        _ => {
            let mut cs = key.chars();
            let c = cs.next()?;
            if cs.next().is_some() {
                return None;
            }
            let up = c.to_ascii_uppercase();
            let (code, vk) = if c.is_ascii_alphabetic() {
                (format!("Key{up}"), i64::from(u32::from(up)))
            } else if c.is_ascii_digit() {
                (format!("Digit{c}"), i64::from(u32::from(c)))
            } else {
                (String::new(), 0)
            };
            Some((c.to_string(), code, vk, Some(c.to_string())))
        }
    }
}

pub(crate) async fn press_key_on(s: &Session, key: &str, budget: &Budget) -> Result<()> {
    let (k, code, vk, text) = key_def(key).ok_or_else(|| Error::InvalidKey {
        key: key.to_string(),
    })?;
    let mut down = json!({"type": if text.is_some() { "keyDown" } else { "rawKeyDown" }, "key": k, "code": code, "windowsVirtualKeyCode": vk});
    if let Some(t) = &text {
        down["text"] = json!(t);
        down["unmodifiedText"] = json!(t);
    }
    s.call("Input.dispatchKeyEvent", down, budget.clone())
        .await
        .map_err(|err| Error::transport("Input.dispatchKeyEvent", err))?;
    s.call(
        "Input.dispatchKeyEvent",
        json!({"type": "keyUp", "key": k, "code": code, "windowsVirtualKeyCode": vk}),
        budget.clone(),
    )
    .await
    .map_err(|err| Error::transport("Input.dispatchKeyEvent", err))?;
    Ok(())
}
