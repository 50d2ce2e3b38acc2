//! Dialogs: native ones (`Page.javascriptDialogOpening` / `Closed`) and
//! bridge ones (a paused `Fetch.requestPaused` of the bridge script), the
//! policy's answer or watchdog, and the `bridge: auto` switch.

use super::{str_of, Dialog, Effect, Kind, Now, SessionInfo, State};
use crate::config::{BridgeMode, DialogPolicy};
use crate::error::Error;
use crate::view::*;
use bridge_script::{DialogRequest, Paused, MAX_PENDING_DIALOGS};
use cdp_transport::{FrameId, Session, SessionId};
use serde_json::{json, Value};
use tracing::{debug, info, warn};

/// `Page.handleJavaScriptDialog`.
pub const HANDLE_DIALOG: &str = "Page.handleJavaScriptDialog";

/// An answer under way, as [`State::begin_answer`] took it from the dialog:
/// the caller sends [`Answer::method`] with [`Answer::params`] on
/// [`Answer::session`] and reports the reply with [`State::answer_replied`]
/// or [`State::answer_failed`].
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub id: String,
    pub by: ClosedBy,
    pub accept: bool,
    /// The session the answer is sent on (see [`Dialog::session`]).
    pub session: Session,
    pub method: &'static str,
    pub params: Value,
    /// What `prompt()` returns: the text given, or the default, on accept.
    user_input: Option<String>,
    /// A native answer is followed by a close event; a fulfilled bridge request is not.
    native: bool,
}

impl State {
    /// The id of the dialog opening now (`d-N`, N counting from 1).
    fn take_dialog_id(&mut self) -> String {
        let id = crate::view::dialog_id(self.next_dialog);
        self.next_dialog += 1;
        id
    }

    pub(super) fn on_dialog_opening(
        &mut self,
        p: &Value,
        i: &SessionInfo,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let Some(root) = self.sessions.get(&i.root).cloned() else {
            return;
        };
        let id = self.take_dialog_id();
        let kind = dialog_type(p);
        let default_prompt = if kind == "prompt" {
            Some(str_of(p, "defaultPrompt"))
        } else {
            None
        };
        let frame_id = p
            .get("frameId")
            .and_then(Value::as_str)
            .map(FrameId::new)
            .or_else(|| {
                self.frames
                    .iter()
                    .find(|(_, f)| f.root == i.root && f.parent.is_none())
                    .map(|(k, _)| k.clone())
            });
        let view = PendingDialog {
            id: id.clone(),
            kind,
            message: str_of(p, "message"),
            default_prompt: default_prompt.clone(),
            url: str_of(p, "url"),
            frame_id,
            target_id: root.target_id.clone(),
            session_id: root.session.id().cloned(),
            opened_at_ms: now.wall_ms,
            bridge_request_id: None,
            opened_via: DialogPath::Native,
        };
        self.pending.push(Dialog {
            view,
            session: root.session.clone(),
            root: i.root.clone(),
            answering: None,
            opened: now.instant,
            bridge_request: None,
        });
        self.policy_effect(id, default_prompt, fx);
    }

    /// `Page.javascriptDialogClosed`: retires the native dialog of that tree
    /// (the one being answered first), credited to whoever was answering it
    /// or `remote`; the close of a dialog already retired on our answer's
    /// reply is swallowed. A `remote` close at once switches `bridge: auto` on.
    pub(super) fn on_dialog_closed(
        &mut self,
        p: &Value,
        i: &SessionInfo,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let root = i.root.clone();
        if let Some(n) = self.swallow_close.get_mut(&root).filter(|n| **n > 0) {
            // The close event of a dialog we already retired when our answer was acknowledged.
            *n -= 1;
            return;
        }
        // Bridge dialogs never get a native close event.
        let native = |d: &Dialog| d.root == root && d.bridge_request.is_none();
        let pos = self
            .pending
            .iter()
            .position(|d| native(d) && d.answering.is_some());
        let pos = pos.or_else(|| self.pending.iter().position(native));
        if let Some(pos) = pos {
            let d = self.pending.remove(pos);
            let by = d.answering.unwrap_or(ClosedBy::Remote);
            let after = now.instant.saturating_duration_since(d.opened);
            if by == ClosedBy::Remote
                && self.bridge_mode == BridgeMode::Auto
                && !self.bridge_on
                && after < self.auto_bridge_window
            {
                info!(
                    dialog_id = %d.view.id,
                    ?after,
                    "a native dialog was closed by someone else at once (a dismissing proxy?): bridge auto switches on"
                );
                self.bridge_on = true;
                let sessions = self
                    .sessions
                    .values()
                    .filter(|s| matches!(s.kind, Kind::Page | Kind::Popup | Kind::Iframe))
                    .map(|s| s.session.clone())
                    .collect();
                fx.push(Effect::InstallBridge { sessions });
            }
            let accepted = p.get("result").and_then(Value::as_bool);
            let input = p
                .get("userInput")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from);
            self.push_recent(d.view, by, accepted, input, now);
        }
    }

    /// The effect the dialog policy asks for on a new pending dialog.
    fn policy_effect(&self, id: String, default_prompt: Option<String>, fx: &mut Vec<Effect>) {
        match self.policy {
            DialogPolicy::MustRespond => fx.push(Effect::Watchdog {
                dialog_id: id,
                after: self.dialog_timeout,
            }),
            DialogPolicy::AutoDismiss => fx.push(Effect::Answer {
                dialog_id: id,
                accept: false,
                prompt: None,
                by: ClosedBy::AutoPolicy,
            }),
            DialogPolicy::AutoAccept => fx.push(Effect::Answer {
                dialog_id: id,
                accept: true,
                prompt: default_prompt,
                by: ClosedBy::AutoPolicy,
            }),
        }
    }

    /// `Fetch.requestPaused` on one of our sessions: Fetch is enabled only
    /// with the bridge patterns, so this is the bridge (or a forgery of it).
    pub(super) fn on_request_paused(
        &mut self,
        p: &Value,
        i: &SessionInfo,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let send = |method, params| Effect::Send {
            session: i.session.clone(),
            method,
            params,
        };
        match self.bridge.parse_paused(p) {
            Err(e) => {
                // Without a request id nothing can be answered; with one, let it go on.
                warn!(session = ?i.session.id(), error = %e, "malformed Fetch.requestPaused");
                if let Some(rid) = p.get("requestId").and_then(Value::as_str) {
                    fx.push(send(
                        bridge_script::CONTINUE_METHOD,
                        bridge_script::continue_params(rid),
                    ));
                }
            }
            Ok(Paused::Dialog(d)) => self.on_bridge_dialog(d, i, now, fx),
            Ok(Paused::Preflight { request_id }) => fx.push(send(
                bridge_script::FULFILL_METHOD,
                self.bridge.fulfill_preflight(&request_id),
            )),
            Ok(Paused::Forged { request_id }) => {
                self.bridge_refused += 1;
                debug!(session = ?i.session.id(), "bridge request without our token: 403, no dialog");
                fx.push(send(
                    bridge_script::FULFILL_METHOD,
                    self.bridge.fulfill_forbidden(&request_id),
                ));
            }
            Ok(other) => fx.push(send(
                bridge_script::CONTINUE_METHOD,
                bridge_script::continue_params(other.request_id()),
            )),
        }
    }

    fn on_bridge_dialog(
        &mut self,
        d: DialogRequest,
        i: &SessionInfo,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let Some(root) = self.sessions.get(&i.root).cloned() else {
            return;
        };
        let id = self.take_dialog_id();
        let frame_id = d.frame_id.as_deref().map(FrameId::new);
        let url = frame_id
            .as_ref()
            .and_then(|f| self.frames.get(f))
            .map(|f| f.url.clone())
            .unwrap_or_else(|| i.url.clone());
        let view = PendingDialog {
            id: id.clone(),
            kind: d.kind.as_str().to_string(),
            message: d.message,
            default_prompt: d.default_prompt.clone(),
            url,
            frame_id,
            target_id: root.target_id.clone(),
            session_id: i.session.id().cloned(),
            opened_at_ms: now.wall_ms,
            bridge_request_id: Some(d.request_id.clone()),
            opened_via: DialogPath::Bridge,
        };
        let bridged = self
            .pending
            .iter()
            .filter(|p| p.bridge_request.is_some())
            .count();
        if bridged >= MAX_PENDING_DIALOGS {
            warn!(
                dialog_id = %id,
                cap = MAX_PENDING_DIALOGS,
                "too many pending bridge dialogs: dismissed at once"
            );
            fx.push(Effect::Send {
                session: i.session.clone(),
                method: bridge_script::FULFILL_METHOD,
                params: self.bridge.fulfill_answer(&d.request_id, false, None),
            });
            self.push_recent(view, ClosedBy::AutoPolicy, Some(false), None, now);
            return;
        }
        self.pending.push(Dialog {
            view,
            session: i.session.clone(),
            root: i.root.clone(),
            answering: None,
            opened: now.instant,
            bridge_request: Some(d.request_id),
        });
        self.policy_effect(id, d.default_prompt, fx);
    }

    /// Retires bridge dialogs paused on `sid` (its session is gone, so is the request).
    pub(super) fn retire_paused_on(&mut self, sid: &SessionId, now: Now) {
        let (gone, keep): (Vec<Dialog>, Vec<Dialog>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|d| d.bridge_request.is_some() && d.session.id() == Some(sid));
        self.pending = keep;
        for d in gone {
            self.push_recent(d.view, ClosedBy::Remote, None, None, now);
        }
    }
}

impl State {
    /// The dialog an answer is for: `dialog_id` when it is pending, else the
    /// only pending one.
    ///
    /// # Errors
    /// [`Error::UnknownDialog`] (not pending; names how it was closed and the
    /// pending ids), [`Error::NoDialog`] (none pending, no id),
    /// [`Error::AmbiguousDialog`] (several pending, no id).
    pub fn pick_dialog(&self, dialog_id: Option<&str>) -> Result<String, Error> {
        let pending: Vec<String> = self.pending.iter().map(|d| d.view.id.clone()).collect();
        match dialog_id {
            Some(id) if pending.iter().any(|p| p == id) => Ok(id.to_string()),
            Some(id) => Err(Error::UnknownDialog {
                id: id.into(),
                closed_by: self.closed_by(id),
                pending,
            }),
            None => match pending.len() {
                0 => Err(Error::NoDialog {
                    recent: self.recent.iter().map(|r| r.dialog.id.clone()).collect(),
                }),
                1 => Ok(pending[0].clone()),
                _ => Err(Error::AmbiguousDialog {
                    candidates: pending,
                }),
            },
        }
    }

    fn closed_by(&self, id: &str) -> Option<ClosedBy> {
        self.recent
            .iter()
            .rev()
            .find(|r| r.dialog.id == id)
            .map(|r| r.closed_by)
    }

    /// Starts answering pending dialog `id` on behalf of `by`: a close event
    /// from now on is credited to `by`. `prompt` is what `prompt()` returns
    /// on accept (its default when `None`).
    ///
    /// # Errors
    /// [`Error::UnknownDialog`] when `id` is not pending.
    pub fn begin_answer(
        &mut self,
        id: &str,
        by: ClosedBy,
        accept: bool,
        prompt: Option<String>,
    ) -> Result<Answer, Error> {
        let pending: Vec<String> = self.pending.iter().map(|d| d.view.id.clone()).collect();
        let closed_by = self.closed_by(id);
        let Some(d) = self.pending.iter_mut().find(|d| d.view.id == id) else {
            return Err(Error::UnknownDialog {
                id: id.into(),
                closed_by,
                pending,
            });
        };
        d.answering = Some(by);
        let (method, params) = match &d.bridge_request {
            // A bridge dialog: fulfil the paused request on the session that paused it.
            Some(rid) => (
                bridge_script::FULFILL_METHOD,
                self.bridge.fulfill_answer(rid, accept, prompt.as_deref()),
            ),
            None => {
                let mut params = json!({"accept": accept});
                if let Some(t) = &prompt {
                    params["promptText"] = Value::String(t.clone());
                }
                (HANDLE_DIALOG, params)
            }
        };
        let user_input = if accept && d.view.kind == "prompt" {
            prompt.or_else(|| d.view.default_prompt.clone())
        } else {
            None
        };
        Ok(Answer {
            id: id.to_string(),
            by,
            accept,
            session: d.session.clone(),
            method,
            params,
            user_input,
            native: d.bridge_request.is_none(),
        })
    }

    /// The answer's call succeeded: the dialog is closed by the answerer
    /// (unless its close event came first). Returns its record.
    pub fn answer_replied(&mut self, a: &Answer, now: Now) -> Option<ClosedDialog> {
        match self.close_dialog(&a.id, a.by, Some(a.accept), a.user_input.clone(), now) {
            Some(rec) => {
                if let (true, Some(sid)) = (a.native, a.session.id()) {
                    *self.swallow_close.entry(sid.clone()).or_default() += 1;
                }
                Some(rec)
            }
            None => self
                .recent
                .iter()
                .rev()
                .find(|r| r.dialog.id == a.id)
                .cloned(),
        }
    }

    /// The answer's call failed: the dialog is no longer being answered; a
    /// close event already credited to us was someone else's. A protocol
    /// error (no dialog showing, an unknown interception) retires it as
    /// `remote`.
    pub fn answer_failed(&mut self, a: &Answer, protocol_error: bool, now: Now) {
        if let Some(d) = self.pending.iter_mut().find(|d| d.view.id == a.id) {
            d.answering = None;
        } else if let Some(r) = self.recent.iter_mut().rev().find(|r| r.dialog.id == a.id) {
            // The close event was credited to us, but our call failed: someone else closed it.
            r.closed_by = ClosedBy::Remote;
        }
        if protocol_error {
            self.close_dialog(&a.id, ClosedBy::Remote, None, None, now);
        }
    }

    /// Whether dialog `id` is pending with nobody answering it (the watchdog's test).
    pub fn unanswered(&self, id: &str) -> bool {
        self.pending
            .iter()
            .any(|d| d.view.id == id && d.answering.is_none())
    }
}

/// `type` of a `Page.javascriptDialogOpening`: one of CDP's
/// `Page.DialogType` values, or `unknown` when it is missing or not one we
/// know (a malformed or newer event). The dialog is recorded either way and
/// answered like any other (`Page.handleJavaScriptDialog`).
fn dialog_type(p: &Value) -> String {
    match p.get("type").and_then(Value::as_str) {
        Some(t @ ("alert" | "confirm" | "prompt" | "beforeunload")) => t.to_string(),
        other => {
            warn!(
                given = ?other,
                "dialog event with a missing or unknown type: recorded as unknown"
            );
            "unknown".to_string()
        }
    }
}
