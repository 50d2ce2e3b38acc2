//! Pure part of the snapshot: per-frame `Accessibility.getFullAXTree` node
//! lists in, one spliced tree of [`SnapshotNode`]s with refs out. No I/O.

use super::render::MAX_TEXT_CHARS;
use cdp_transport::BackendNodeId;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Deepest AX nesting the walk follows (a guard against pathological pages;
/// real pages stay far below it).
const MAX_WALK_DEPTH: usize = 400;

/// Roles that always get a ref, named or not.
const INTERACTIVE_ROLES: &[&str] = &[
    "button",
    "link",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "treeitem",
    "MenuListOption",
    "MenuListPopup",
    "DisclosureTriangle",
    "PopUpButton",
    "ToggleButton",
];

/// Roles that get a ref when they have a name.
const CONTENT_ROLES: &[&str] = &[
    "heading",
    "cell",
    "gridcell",
    "columnheader",
    "rowheader",
    "listitem",
    "main",
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "region",
    "form",
    "search",
    "image",
    "img",
    "dialog",
    "alertdialog",
    "article",
    "figure",
    "table",
    "tabpanel",
];

/// The role of a merged run of `StaticText`.
pub(crate) const TEXT_ROLE: &str = "text";

/// Chromium's role for an `<iframe>` element.
pub(crate) const IFRAME_ROLE: &str = "Iframe";

/// Roles whose nodes are transparent when unnamed (their children are hoisted).
const TRANSPARENT_WHEN_UNNAMED: &[&str] =
    &["generic", "LabelText", "group", "Section", "Abbr", "Pre"];

/// Roles that are always transparent (children hoisted).
/// `LayoutTable*` are Chromium's roles for tables used for layout (no headers):
/// their cells carry no table semantics.
const ALWAYS_TRANSPARENT: &[&str] = &[
    "none",
    "presentation",
    "RootWebArea",
    "WebArea",
    "LineBreak",
    "LayoutTable",
    "LayoutTableRow",
    "LayoutTableCell",
];

/// Roles dropped together with their subtree.
const DROPPED: &[&str] = &["InlineTextBox", "ListMarker"];

/// Structural and inline-formatting roles that are replaced by their child
/// when they have no name, no text, no state, no ref and exactly one child
/// line: `- listitem` over `- link "News"` is just `- link "News"`.
const WRAPPERS: &[&str] = &[
    "list",
    "listitem",
    "paragraph",
    "group",
    "superscript",
    "subscript",
    "strong",
    "emphasis",
    "mark",
    "code",
    "Abbr",
    "blockquote",
    "figure",
    "Figcaption",
    "note",
    "article",
    "insertion",
    "deletion",
    "term",
    "definition",
    "DescriptionList",
    "DescriptionListTerm",
    "DescriptionListDetail",
];

/// True for roles that always get a ref.
pub fn is_interactive_role(role: &str) -> bool {
    INTERACTIVE_ROLES.contains(&role)
}

/// True for roles that get a ref when named.
pub fn is_content_role(role: &str) -> bool {
    CONTENT_ROLES.contains(&role)
}

/// The states shown on a line. Absent (`None`/`false`) states are not rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct States {
    /// `"true"` or `"mixed"` (CDP tristate; `"false"` is not kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked: Option<String>,
    /// The control is disabled.
    #[serde(skip_serializing_if = "is_false")]
    pub disabled: bool,
    /// The control is expanded (`aria-expanded=true`, open `<details>`...).
    #[serde(skip_serializing_if = "is_false")]
    pub expanded: bool,
    /// The option, tab or row is selected.
    #[serde(skip_serializing_if = "is_false")]
    pub selected: bool,
    /// Heading or tree level (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<u32>,
    /// The control's value (text fields, sliders, comboboxes), when not empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One line of the snapshot: a non-transparent AX node and its children.
///
/// `role` is as Chromium reports it (ARIA roles lowercase, Chromium's own
/// roles such as `Iframe` or `StaticText` capitalised), except that merged
/// runs of `StaticText` are `text`. `name` is the accessible name (empty when
/// there is none). `text` is the node's only text content folded into its line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapshotNode {
    /// AX role.
    pub role: String,
    /// Accessible name; empty when the node has none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Text content folded into this line (a node with no name whose only
    /// child was text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// States shown on the line.
    #[serde(flatten)]
    pub states: States,
    /// The ref (`e1`, `e2`, ...) when the node has one.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_id: Option<String>,
    /// 0-based index among the refs with the same `(role, name)`; present for
    /// every member of a group of two or more, absent for singletons.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nth: Option<u32>,
    /// Child lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<SnapshotNode>,
    /// `backendDOMNodeId` of the AX node, when it has one.
    #[serde(skip)]
    pub(crate) backend: Option<BackendNodeId>,
    /// Index of the frame (in [`FrameAx`] order) this node belongs to.
    #[serde(skip)]
    pub(crate) frame: usize,
}

/// One frame's AX tree as fetched, and where its iframes' trees are.
#[derive(Debug, Clone, Default)]
pub struct FrameAx {
    /// `nodes` of `Accessibility.getFullAXTree` (raw, decoded tolerantly).
    pub nodes: Vec<Value>,
    /// For an `Iframe` node's `backendDOMNodeId` in this frame: the index of
    /// the child frame whose tree goes under it.
    pub iframes: HashMap<i64, usize>,
}

/// A ref as the pure builder sees it; the async layer adds sessions and loaders.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RefDraft {
    pub ref_id: String,
    pub role: String,
    pub name: String,
    pub nth: Option<u32>,
    pub backend: Option<BackendNodeId>,
    pub frame: usize,
    /// 0-based index among refs with the same `(role, name)` in the same frame
    /// (what `Accessibility.queryAXTree` order gives when resolving without a backend id).
    pub frame_nth: usize,
}

struct Ax<'a> {
    by_id: HashMap<&'a str, &'a Value>,
    root: Option<&'a Value>,
}

impl<'a> Ax<'a> {
    fn new(nodes: &'a [Value]) -> Self {
        let mut by_id = HashMap::with_capacity(nodes.len());
        for n in nodes {
            if let Some(id) = n.get("nodeId").and_then(Value::as_str) {
                by_id.insert(id, n);
            }
        }
        // The root is the node without a parent (the first such node).
        let root = nodes
            .iter()
            .find(|n| n.get("parentId").is_none_or(Value::is_null));
        Self { by_id, root }
    }
}

fn str_field<'v>(n: &'v Value, key: &str) -> &'v str {
    n.get(key)
        .and_then(|v| v.get("value"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `role.value` of an AX node (empty when absent).
pub(crate) fn role_of(n: &Value) -> &str {
    str_field(n, "role")
}

/// `name.value` of an AX node (empty when absent).
pub(crate) fn name_of(n: &Value) -> &str {
    str_field(n, "name")
}

fn backend_of(n: &Value) -> Option<BackendNodeId> {
    n.get("backendDOMNodeId")
        .and_then(Value::as_i64)
        .map(BackendNodeId)
}

fn states_of(n: &Value, role: &str) -> States {
    let mut s = States::default();
    if let Some(props) = n.get("properties").and_then(Value::as_array) {
        for p in props {
            let v = p.get("value").and_then(|v| v.get("value"));
            match p.get("name").and_then(Value::as_str).unwrap_or("") {
                "checked" | "pressed" => {
                    let t = match v {
                        Some(Value::String(t)) => t.clone(),
                        Some(Value::Bool(b)) => b.to_string(),
                        _ => String::new(),
                    };
                    if t == "true" || t == "mixed" {
                        s.checked = Some(t);
                    }
                }
                "disabled" => s.disabled = v.and_then(Value::as_bool).unwrap_or(false),
                "expanded" => s.expanded = v.and_then(Value::as_bool).unwrap_or(false),
                "selected" => s.selected = v.and_then(Value::as_bool).unwrap_or(false),
                // Levels of list items and rows are noise; headings and tree items need theirs.
                "level" if role == "heading" || role == "treeitem" => {
                    s.level = v
                        .and_then(Value::as_u64)
                        .and_then(|l| u32::try_from(l).ok());
                }
                _ => {}
            }
        }
    }
    // Values of containers (documents, links' URLs) are noise; keep them for controls.
    let value = str_field(n, "value");
    if !value.is_empty()
        && (is_interactive_role(role) || role == "progressbar" || role == "meter")
        && role != "link"
    {
        s.value = Some(value.to_string());
    }
    s
}

/// The part of a name the text line shows (see [`MAX_TEXT_CHARS`]): text
/// merged into a name must stay visible.
fn shown(name: &str) -> &str {
    match name.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => name.get(..cut).unwrap_or(name),
        None => name,
    }
}

fn normalize_ws(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

struct Walker<'a> {
    frames: Vec<Ax<'a>>,
    iframes: Vec<&'a HashMap<i64, usize>>,
    visited: Vec<HashSet<&'a str>>,
    frames_entered: HashSet<usize>,
}

impl<'a> Walker<'a> {
    /// Walks the AX node `n` of frame `f`, appending the lines it yields to `out`.
    /// `parent_name` is the name of the nearest emitted ancestor.
    fn walk(
        &mut self,
        f: usize,
        n: &'a Value,
        out: &mut Vec<SnapshotNode>,
        parent_name: &str,
        depth: usize,
    ) {
        if depth > MAX_WALK_DEPTH {
            return;
        }
        let Some(id) = n.get("nodeId").and_then(Value::as_str) else {
            return;
        };
        let Some(visited) = self.visited.get_mut(f) else {
            return;
        };
        if !visited.insert(id) {
            return;
        }
        let role = role_of(n);
        if DROPPED.contains(&role) {
            return;
        }
        let ignored = n.get("ignored").and_then(Value::as_bool).unwrap_or(false);
        let name = normalize_ws(name_of(n));
        let transparent = ignored
            || ALWAYS_TRANSPARENT.contains(&role)
            || (name.is_empty() && TRANSPARENT_WHEN_UNNAMED.contains(&role));
        if transparent {
            self.walk_children(f, n, out, parent_name, depth);
            return;
        }
        if role == "StaticText" {
            // Text that repeats a named ancestor's name, and separators
            // (`•`, `|`, `,`) with no letter or digit, carry nothing new.
            if name.is_empty()
                || shown(parent_name).contains(name.as_str())
                || !name.chars().any(char::is_alphanumeric)
            {
                return;
            }
            // Runs of text next to each other become one `text` line; a run
            // that only repeats the line before it (a label) is dropped.
            if let Some(last) = out.last_mut() {
                if last.name == name {
                    return;
                }
                if last.role == TEXT_ROLE && last.children.is_empty() {
                    last.name.push(' ');
                    last.name.push_str(&name);
                    return;
                }
            }
            out.push(SnapshotNode {
                role: TEXT_ROLE.into(),
                name,
                text: None,
                states: States::default(),
                ref_id: None,
                nth: None,
                children: Vec::new(),
                backend: backend_of(n),
                frame: f,
            });
            return;
        }
        let mut node = SnapshotNode {
            role: role.to_string(),
            states: states_of(n, role),
            name,
            text: None,
            ref_id: None,
            nth: None,
            children: Vec::new(),
            backend: backend_of(n),
            frame: f,
        };
        let mut children = Vec::new();
        // An unnamed line passes its nearest named ancestor's name down, so
        // `heading "X"` > `emphasis` > text "X" does not repeat "X".
        let inherited = if node.name.is_empty() {
            parent_name
        } else {
            node.name.as_str()
        };
        self.walk_children(f, n, &mut children, inherited, depth);
        if role == IFRAME_ROLE {
            let child = node
                .backend
                .and_then(|b| self.iframes.get(f).and_then(|m| m.get(&b.0)).copied());
            if let Some(cf) = child {
                // A frame is spliced once (a cycle in the frame map cannot loop).
                if self.frames_entered.insert(cf) {
                    if let Some(root) = self.frames.get(cf).and_then(|a| a.root) {
                        self.walk(cf, root, &mut children, "", depth + 1);
                    }
                }
            }
        }
        // A node with no name whose only content is one text run carries it on its own line.
        if node.name.is_empty()
            && children.len() == 1
            && children[0].role == TEXT_ROLE
            && node.role != IFRAME_ROLE
        {
            node.text = children.pop().map(|t| t.name);
        }
        // A text run that only repeats this line's name (its label) goes.
        if out
            .last()
            .is_some_and(|l| l.role == TEXT_ROLE && l.children.is_empty() && l.name == node.name)
        {
            out.pop();
        }
        // A wrapper that is this line's only child adds nothing to the
        // grouping this line already gives: its children take its place.
        if children.len() == 1 && children[0].is_bare_wrapper() {
            children = children.pop().map(|c| c.children).unwrap_or_default();
        }
        node.children = children;
        if node.is_bare() && node.children.is_empty() {
            // An unnamed leaf that gets no ref and shows nothing carries no information.
            return;
        }
        // A wrapper with one child line is that line.
        if node.children.len() == 1 && node.is_bare_wrapper() {
            out.append(&mut node.children);
            return;
        }
        out.push(node);
    }

    fn walk_children(
        &mut self,
        f: usize,
        n: &'a Value,
        out: &mut Vec<SnapshotNode>,
        parent_name: &str,
        depth: usize,
    ) {
        let Some(ids) = n.get("childIds").and_then(Value::as_array) else {
            return;
        };
        for cid in ids {
            let Some(cid) = cid.as_str() else { continue };
            let Some(c) = self.frames.get(f).and_then(|a| a.by_id.get(cid)).copied() else {
                continue;
            };
            self.walk(f, c, out, parent_name, depth + 1);
        }
    }
}

/// Builds the spliced snapshot tree from per-frame AX trees (frame 0 is the
/// page's main frame) and assigns refs and `nth` in document order.
pub(crate) fn build(frames: &[FrameAx]) -> (Vec<SnapshotNode>, Vec<RefDraft>) {
    let mut w = Walker {
        frames: frames.iter().map(|f| Ax::new(&f.nodes)).collect(),
        iframes: frames.iter().map(|f| &f.iframes).collect(),
        visited: vec![HashSet::new(); frames.len()],
        frames_entered: HashSet::from([0]),
    };
    let mut out = Vec::new();
    if let Some(root) = w.frames.first().and_then(|a| a.root) {
        w.walk(0, root, &mut out, "", 0);
    }
    let drafts = assign_refs(&mut out);
    (out, drafts)
}

impl SnapshotNode {
    /// No name, no text, no state and no ref: the line shows only its role.
    fn is_bare(&self) -> bool {
        self.name.is_empty()
            && self.text.is_none()
            && self.states == States::default()
            && !wants_ref(self)
    }

    /// A bare line whose role only groups or styles its content.
    fn is_bare_wrapper(&self) -> bool {
        self.is_bare() && WRAPPERS.contains(&self.role.as_str())
    }
}

fn wants_ref(n: &SnapshotNode) -> bool {
    n.role == IFRAME_ROLE
        || is_interactive_role(&n.role)
        || (!n.name.is_empty() && is_content_role(&n.role))
}

/// Gives refs `e1, e2, ...` in pre-order and fills `nth` for duplicate `(role, name)` groups.
fn assign_refs(nodes: &mut [SnapshotNode]) -> Vec<RefDraft> {
    fn visit(nodes: &mut [SnapshotNode], drafts: &mut Vec<RefDraft>) {
        for n in nodes {
            if wants_ref(n) {
                let ref_id = format!("e{}", drafts.len() + 1);
                n.ref_id = Some(ref_id.clone());
                drafts.push(RefDraft {
                    ref_id,
                    role: n.role.clone(),
                    name: n.name.clone(),
                    nth: None,
                    backend: n.backend,
                    frame: n.frame,
                    frame_nth: 0,
                });
            }
            visit(&mut n.children, drafts);
        }
    }
    let mut drafts = Vec::new();
    visit(nodes, &mut drafts);
    let mut count: HashMap<(&str, &str), u32> = HashMap::new();
    for d in &drafts {
        *count.entry((d.role.as_str(), d.name.as_str())).or_default() += 1;
    }
    let mut seen: HashMap<(String, String), u32> = HashMap::new();
    let mut seen_frame: HashMap<(String, String, usize), usize> = HashMap::new();
    let mut nth_by_ref: HashMap<String, u32> = HashMap::new();
    let mut updates = Vec::with_capacity(drafts.len());
    for d in &drafts {
        let total = count
            .get(&(d.role.as_str(), d.name.as_str()))
            .copied()
            .unwrap_or(1);
        let i = seen.entry((d.role.clone(), d.name.clone())).or_default();
        let nth = (total > 1).then_some(*i);
        *i += 1;
        let fi = seen_frame
            .entry((d.role.clone(), d.name.clone(), d.frame))
            .or_default();
        updates.push((nth, *fi));
        *fi += 1;
        if let Some(k) = nth {
            nth_by_ref.insert(d.ref_id.clone(), k);
        }
    }
    for (d, (nth, fnth)) in drafts.iter_mut().zip(updates) {
        d.nth = nth;
        d.frame_nth = fnth;
    }
    fn set_nth(nodes: &mut [SnapshotNode], m: &HashMap<String, u32>) {
        for n in nodes {
            if let Some(r) = &n.ref_id {
                n.nth = m.get(r).copied();
            }
            set_nth(&mut n.children, m);
        }
    }
    set_nth(nodes, &nth_by_ref);
    drafts
}
