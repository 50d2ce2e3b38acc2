//! Text and JSON rendering of a snapshot tree, with the render options.

use super::tree::{is_interactive_role, SnapshotNode, IFRAME_ROLE, TEXT_ROLE};
use serde::Serialize;
use std::fmt::Write as _;

/// How to render a snapshot. `Default` renders everything: all nodes, no
/// character cap, no depth limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// Only interactive nodes (the roles that always get a ref) and iframes;
    /// depth counts only the kept ancestors. Default `false`.
    pub interactive_only: bool,
    /// Cap on the text's length in bytes, the truncation marker included.
    /// Lines that do not fit are cut whole and their refs leave the ref map.
    /// `None` (default): no cap.
    pub max_chars: Option<usize>,
    /// Deepest line kept (0 = top-level lines only). Deeper lines and their
    /// refs are left out. `None` (default): no limit.
    pub max_depth: Option<usize>,
}

/// Longest name, text or value shown on a text line, in characters; longer
/// strings are cut at a character boundary and end with `…` (the ref map and
/// the JSON form keep them whole).
pub(crate) const MAX_TEXT_CHARS: usize = 70;

/// One rendered line: a node at an indentation depth.
#[derive(Debug, Clone)]
pub(crate) struct Line<'a> {
    pub depth: usize,
    pub node: &'a SnapshotNode,
    /// The name only repeats the parent line's name and is not shown.
    pub same_name_as_parent: bool,
}

/// The text form of one line (no indentation, no trailing newline), e.g.
/// `- button "Delete" [disabled] [ref=e3] [nth=1]`.
pub(crate) fn line_text(l: &Line<'_>) -> String {
    let n = l.node;
    let mut s = String::with_capacity(32 + n.name.len().min(MAX_TEXT_CHARS + 8));
    s.push_str("- ");
    // A text run is just its quoted text: `- "Some words"`.
    let text_run = n.role == TEXT_ROLE && !n.name.is_empty();
    // A heading of level 1 to 6 is `h1`…`h6` (no `[level=N]`).
    let h_level = n
        .states
        .level
        .filter(|l| n.role == "heading" && (1..=6).contains(l));
    if let Some(l) = h_level {
        let _ = write!(s, "h{l}");
    } else if !text_run {
        s.push_str(&n.role);
    }
    if !n.name.is_empty() && !l.same_name_as_parent {
        if !text_run {
            s.push(' ');
        }
        s.push_str(&json_quote(&n.name));
    }
    let st = &n.states;
    match st.checked.as_deref() {
        Some("mixed") => s.push_str(" [checked=mixed]"),
        Some(_) => s.push_str(" [checked]"),
        None => {}
    }
    if st.disabled {
        s.push_str(" [disabled]");
    }
    if st.expanded {
        s.push_str(" [expanded]");
    }
    if st.selected {
        s.push_str(" [selected]");
    }
    if let Some(l) = st.level.filter(|_| h_level.is_none()) {
        let _ = write!(s, " [level={l}]");
    }
    if let Some(v) = &st.value {
        let _ = write!(s, " [value={}]", json_quote(v));
    }
    if let Some(r) = &n.ref_id {
        let _ = write!(s, " [ref={r}]");
    }
    if let Some(k) = n.nth.filter(|k| *k > 0) {
        let _ = write!(s, " [nth={k}]");
    }
    if let Some(t) = &n.text {
        s.push_str(": ");
        s.push_str(&json_quote(t));
    }
    s
}

/// `s` JSON-quoted, cut to [`MAX_TEXT_CHARS`] characters with `…`.
fn json_quote(s: &str) -> String {
    let s = match s.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", s[..cut].trim_end()),
        None => s.to_string(),
    };
    serde_json::to_string(&s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

/// Lines in document order after `interactive_only` and `max_depth`.
pub(crate) fn lines<'a>(nodes: &'a [SnapshotNode], opts: &RenderOptions) -> Vec<Line<'a>> {
    fn visit<'a>(
        nodes: &'a [SnapshotNode],
        depth: usize,
        parent_name: &str,
        opts: &RenderOptions,
        out: &mut Vec<Line<'a>>,
    ) {
        for n in nodes {
            let keep =
                !opts.interactive_only || is_interactive_role(&n.role) || n.role == IFRAME_ROLE;
            if keep {
                if opts.max_depth.is_some_and(|m| depth > m) {
                    continue;
                }
                // `link "BBC"` > `image "BBC"` shows as `link "BBC"` > `image`;
                // a name that `nth` counts under stays visible.
                let same_name_as_parent =
                    !n.name.is_empty() && n.name == parent_name && n.nth.is_none();
                out.push(Line {
                    depth,
                    node: n,
                    same_name_as_parent,
                });
                visit(&n.children, depth + 1, &n.name, opts, out);
            } else {
                visit(&n.children, depth, parent_name, opts, out);
            }
        }
    }
    let mut out = Vec::new();
    visit(nodes, 0, "", opts, &mut out);
    out
}

/// The text of `lines` under the cap: `(text, lines kept, truncated)`.
pub(crate) fn text_of(lines: &[Line<'_>], max_chars: Option<usize>) -> (String, usize, bool) {
    let bodies: Vec<String> = lines.iter().map(line_text).collect();
    let full: usize = lines
        .iter()
        .zip(&bodies)
        .map(|(l, b)| l.depth * 2 + b.len() + 1)
        .sum();
    let max_chars = max_chars.filter(|cap| full > *cap);
    let mut text = String::with_capacity(full.min(max_chars.unwrap_or(full)));
    for (i, (l, body)) in lines.iter().zip(&bodies).enumerate() {
        let len = l.depth * 2 + body.len() + 1;
        if let Some(cap) = max_chars {
            let marker = truncation_marker(lines.len() - i);
            let reserve = if i + 1 < lines.len() { marker.len() } else { 0 };
            if text.len() + len + reserve > cap {
                if text.len() + marker.len() <= cap {
                    text.push_str(&marker);
                }
                return (text, i, true);
            }
        }
        for _ in 0..l.depth {
            text.push_str("  ");
        }
        text.push_str(body);
        text.push('\n');
    }
    (text, lines.len(), false)
}

/// The line that replaces cut lines.
pub(crate) fn truncation_marker(cut: usize) -> String {
    format!("- (truncated: {cut} more lines)\n")
}

/// A node of the JSON form: the same content as a text line, nested.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonNode {
    /// The node, without its children (see [`SnapshotNode`] for the fields).
    #[serde(flatten)]
    pub node: SnapshotNodeFields,
    /// Kept children.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<JsonNode>,
}

/// [`SnapshotNode`] without children, as serialized in [`JsonNode`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapshotNodeFields {
    /// AX role.
    pub role: String,
    /// Accessible name; absent when empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Text content folded into the line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// States.
    #[serde(flatten)]
    pub states: super::tree::States,
    /// The ref.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_id: Option<String>,
    /// `nth` when above 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nth: Option<u32>,
}

/// Rebuilds the nested JSON form from kept lines (depths from [`lines`]).
pub(crate) fn json_of(lines: &[Line<'_>]) -> Vec<JsonNode> {
    fn take(lines: &[Line<'_>], i: &mut usize, depth: usize) -> Vec<JsonNode> {
        let mut out = Vec::new();
        while let Some(l) = lines.get(*i) {
            if l.depth < depth {
                break;
            }
            *i += 1;
            let n = l.node;
            let children = take(lines, i, l.depth + 1);
            out.push(JsonNode {
                node: SnapshotNodeFields {
                    role: n.role.clone(),
                    name: n.name.clone(),
                    text: n.text.clone(),
                    states: n.states.clone(),
                    ref_id: n.ref_id.clone(),
                    nth: n.nth.filter(|k| *k > 0),
                },
                children,
            });
        }
        out
    }
    let mut i = 0;
    take(lines, &mut i, 0)
}
