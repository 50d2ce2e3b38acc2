//! The supervisor's state as the JSON views of [`crate::types`] (supervisor,
//! console errors, frame tree), and where `browser_evaluate {frame_id}` runs.

use super::Tab;
use crate::error::{map_supervisor, ToolError};
use crate::types::{ConsoleEntry, FrameNode, FrameTreeView, SupervisorView};
use cdp_transport::{FrameId, TargetId};
use evaluate::EvalTarget;
use supervisor::FrameView;

impl Tab {
    /// `{active, reason?}` for the agent. A crash the transport already
    /// saw on the page session (`Inspector.targetCrashed`) but the
    /// supervisor's event loop has not applied yet shows as
    /// `{active: false, reason: "target crashed"}`, as the calls report it.
    pub fn supervisor_view(&self) -> SupervisorView {
        let v = self.sup.snapshot();
        if v.active && self.sup.page_session().is_crashed() {
            return SupervisorView {
                active: false,
                reason: Some("target crashed".into()),
            };
        }
        SupervisorView {
            active: v.active,
            reason: v.reason.clone(),
        }
    }

    /// Console errors seen since the tab was supervised (the ring keeps the last 50).
    pub fn console_total(&self) -> usize {
        usize::try_from(self.sup.snapshot().console_errors_total).unwrap_or(usize::MAX)
    }

    /// The console-error ring (newest last).
    pub fn console(&self) -> Vec<ConsoleEntry> {
        self.sup
            .snapshot()
            .console_errors
            .iter()
            .map(|c| ConsoleEntry {
                kind: c.kind.clone(),
                text: c.text.clone(),
                url: c.url.clone(),
            })
            .collect()
    }

    pub fn main_url(&self) -> String {
        self.sup
            .snapshot()
            .frame_tree
            .top
            .as_ref()
            .map(|t| t.url.clone())
            .unwrap_or_default()
    }

    /// The supervisor's flat frame list, nested for the agent.
    pub fn frame_tree(&self) -> FrameTreeView {
        let v = self.sup.snapshot();
        let ft = &v.frame_tree;
        fn node(f: &FrameView, all: &[FrameView], depth: usize) -> FrameNode {
            let children = if depth > all.len() {
                Vec::new()
            } else {
                all.iter()
                    .filter(|c| c.parent_frame_id.as_ref() == Some(&f.frame_id))
                    .map(|c| node(c, all, depth + 1))
                    .collect()
            };
            FrameNode {
                frame_id: f.frame_id.as_str().to_string(),
                url: f.url.clone(),
                name: f.name.clone().filter(|n| !n.is_empty()),
                oopif: f.is_oopif,
                children,
            }
        }
        let top = match &ft.top {
            Some(t) => node(t, &ft.children, 0),
            None => FrameNode {
                frame_id: self.target_id.as_str().to_string(),
                url: String::new(),
                name: None,
                oopif: false,
                children: Vec::new(),
            },
        };
        FrameTreeView {
            top,
            truncated: ft.truncated,
        }
    }

    /// Where `browser_evaluate {frame_id}` runs, from the supervisor's routing:
    /// the top frame → the main frame; an OOPIF → its own target; a
    /// same-process frame → that frame in the target that owns it.
    pub fn eval_target(&self, frame_id: &str) -> Result<EvalTarget, ToolError> {
        let fid = FrameId::new(frame_id);
        match self.sup.route(&fid) {
            Ok(r) if r.is_oopif => Ok(EvalTarget::Oopif {
                target_id: r
                    .session
                    .target_id()
                    .cloned()
                    .unwrap_or_else(|| TargetId::new(frame_id)),
                frame_id: None,
            }),
            Ok(_) => Ok(EvalTarget::MainFrame),
            Err(supervisor::Error::SameProcessFrame { .. }) => {
                let ctx = self
                    .sup
                    .frame_context(&fid)
                    .map_err(|e| map_supervisor(&e, "browser_evaluate"))?;
                match ctx.session.target_id() {
                    Some(t) if t != &self.target_id => Ok(EvalTarget::Oopif {
                        target_id: t.clone(),
                        frame_id: Some(fid),
                    }),
                    _ => Ok(EvalTarget::Frame(fid)),
                }
            }
            Err(e) => Err(map_supervisor(&e, "browser_evaluate")),
        }
    }
}
