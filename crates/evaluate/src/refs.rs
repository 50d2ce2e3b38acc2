//! The AX snapshot with refs, and the actions on refs (issue 6, seed 004 §3).
//!
//! ## What it does
//!
//! [`AxSnapshotter::snapshot`] merges one `Accessibility.getFullAXTree` per
//! frame into one tree: the page session covers the main frame only (its
//! `Iframe` nodes are empty leaves, field case C21), so every iframe is
//! mapped to its frame (`DOM.describeNode` → `frameId`) and queried on the
//! page session with `frameId` when the frame is in that session's
//! `Page.getFrameTree`, or on the OOPIF's own session otherwise (the target
//! whose `targetId` equals the frame id). Each child tree is spliced under
//! its `Iframe` node. The frames are walked one iframe level at a time and
//! every call of a level runs concurrently under the one budget (the main
//! frame's tree together with its `Page.getFrameTree`; all `describeNode`s;
//! all OOPIF attaches; all child trees).
//!
//! Transparent nodes (their children are hoisted, field case C18): ignored
//! nodes, `none`/`presentation`, unnamed `generic` (and unnamed
//! `LabelText`/`group`), the document roots and line breaks.
//! `InlineTextBox` and list markers are dropped. Text: `StaticText` that
//! only repeats the name of its nearest named ancestor is merged into that
//! line, and a run that repeats the name of the line just before or after it
//! (a label) is dropped, as are runs with no letter or digit (`•`, `|`);
//! adjacent runs become one `text` line, and a node with no name
//! whose only content is one text run carries it as `: "text"`. Wrappers
//! (unnamed `list`, `listitem`, `paragraph`, `group`, `strong`, `figure`…
//! with no text, state or ref) are replaced by their child when they have
//! one, and by their children when they are their parent's only child.
//!
//! Refs `e1, e2, …` are given in document (AX) order to interactive roles
//! (named or not), to named content roles (headings, cells, list items,
//! landmarks, images…) and to iframes. `nth` counts `(role, name)` duplicates
//! over exactly that set, 0-based, kept for every member of a group and
//! absent for singletons (field case C19). Each ref stores role, name, nth,
//! backend node id, frame id, the session to act on and the frame's loader id.
//!
//! ## Text form
//!
//! ```text
//! - main [ref=e1]
//!   - button "Delete" [ref=e2] [nth=1]
//!   - checkbox "Agree" [checked] [ref=e3]
//!   - h2 "News" [ref=e4]
//!     - link [ref=e5]
//!   - "Some words"
//!   - paragraph: "Some text cut at seventy characters…"
//! ```
//!
//! One line per node, two spaces per depth, names JSON-quoted, states in
//! brackets (`checked`, `checked=mixed`, `disabled`, `expanded`, `selected`,
//! `level=N`, `value="…"`), then `[ref=eN]` and `[nth=N]` when N > 0. Made
//! for an agent's token budget: a text run is its quoted text alone; a
//! heading of level 1–6 is `h1`…`h6`; a name equal to the parent line's
//! name is not repeated (unless the line has an `nth`); names, text and
//! values longer than 70 characters are cut with `…` (the [`RefMap`] and the
//! JSON form keep them whole).
//! [`RenderOptions`] selects interactive-only, a character cap (a marker line
//! replaces cut lines; their refs leave the returned [`RefMap`]) and a depth
//! limit. [`RenderedSnapshot::json`] is the same lines as nested JSON, with
//! the roles, states and whole strings of the tree.
//!
//! ## Acting on refs
//!
//! [`RefMap::resolve`] never acts on a stale ref: the frame's loader must be
//! the snapshot's, the node must still be connected and have the same role;
//! otherwise [`crate::Error::StaleRef`]. An unknown ref is
//! [`crate::Error::UnknownRef`]. [`RefMap::click`], [`RefMap::type_text`] and
//! [`RefMap::press_key`] run under the caller's [`crate::Budget`];
//! [`RefMap::evaluate`] is element evaluate through [`crate::Engine`].

mod map;
mod render;
mod snapshot;
mod tree;

pub use map::{ClickPoint, RefEntry, RefMap, ResolvedRef};
pub use render::{JsonNode, RenderOptions, SnapshotNodeFields};
pub use snapshot::{AxSnapshotter, FrameInfo, RenderedSnapshot, Snapshot, SnapshotOptions};
pub use tree::{is_content_role, is_interactive_role, SnapshotNode, States};

#[cfg(test)]
mod tests;

/// The client-side share of a snapshot, for the benchmark's breakdown and
/// the profiles (`docs/profiles/`): builds the tree of one frame from a
/// decoded `Accessibility.getFullAXTree` reply (`{"nodes": [...]}`, taken
/// by value as the snapshot takes it) and renders the full text; returns
/// the text's length in bytes (0 when the reply has no `nodes`). Not a
/// stable API.
#[doc(hidden)]
pub fn bench_build_and_render(reply: serde_json::Value) -> usize {
    let nodes = match reply {
        serde_json::Value::Object(mut m) => match m.remove("nodes") {
            Some(serde_json::Value::Array(a)) => a,
            _ => return 0,
        },
        _ => return 0,
    };
    let frames = [tree::FrameAx {
        nodes,
        iframes: Default::default(),
    }];
    let (nodes, _refs) = tree::build(&frames);
    let lines = render::lines(&nodes, &RenderOptions::default());
    render::text_of(&lines, None).0.len()
}
