//! The source-form lexer: which [`SourceForm`] a source is sent in first.
//! It answers only what it can tell for sure without a grammar (a keyword
//! that begins statements only, a `;` outside brackets, strings and
//! comments, a function literal); whatever it cannot lex for sure is left to
//! the browser's parser, whose refusal runs nothing.

use super::SourceForm;

/// The form to send first. Statements when the source certainly is no
/// expression (see [`statements_form`]), a function for a function
/// literal, an expression otherwise. A wrong guess costs a parse failure
/// (nothing runs), never a second run.
pub(super) fn first_form(src: &str, element: bool) -> SourceForm {
    if certainly_statements(src) {
        statements_form(src, element)
    } else if looks_like_function(src) {
        SourceForm::Function
    } else {
        SourceForm::Expression
    }
}

/// How statements go: as a script ([`SourceForm::Script`], the completion
/// value) for a page evaluate, unless they use `await` (anywhere: top-level
/// `await` does not parse in a script), `return` at the top level, or open
/// with a `"use strict"` directive (the script's first line is the
/// engine's, so the directive would not apply); then, and for element
/// evaluates, as a function body ([`SourceForm::Statements`]).
pub(super) fn statements_form(src: &str, element: bool) -> SourceForm {
    let strict = skip_trivia(src)
        .is_some_and(|s| s.starts_with("'use strict'") || s.starts_with("\"use strict\""));
    if element || strict || src.contains("await") || top_level_return(src) {
        SourceForm::Statements
    } else {
        SourceForm::Script
    }
}

/// A `return` keyword outside every bracket, string and comment. Answers
/// false when unsure (a `/` that is no comment, a template literal): the
/// script form is tried then, and a `return` it cannot parse sends the
/// source as a function body (nothing ran).
pub(super) fn top_level_return(src: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut depth = 0i32;
    let mut prev = ' ';
    let mut it = src.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        match c {
            '\'' | '"' => loop {
                match it.next() {
                    Some((_, '\\')) => {
                        it.next();
                    }
                    Some((_, q)) if q == c => break,
                    Some((_, '\n' | '\r')) | None => return false,
                    Some(_) => {}
                }
            },
            '/' => match it.peek().map(|x| x.1) {
                Some('/') => {
                    for (_, x) in it.by_ref() {
                        if x == '\n' {
                            break;
                        }
                    }
                }
                Some('*') => {
                    it.next();
                    let mut last = ' ';
                    loop {
                        match it.next() {
                            Some((_, '/')) if last == '*' => break,
                            Some((_, x)) => last = x,
                            None => return false,
                        }
                    }
                }
                _ => return false,
            },
            '`' => return false,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            'r' if depth == 0 && !is_ident(prev) && prev != '.' => {
                let rest = &src[i..];
                if rest.starts_with("return") && !rest["return".len()..].starts_with(is_ident) {
                    return true;
                }
            }
            _ => {}
        }
        prev = c;
    }
    false
}

/// True only when `src` cannot parse as an expression: it starts with a
/// keyword that begins statements only (`const`, `let x`, `var`, `if`,
/// `for`, `return`, …), or has a `;` outside every bracket, string and
/// comment. Whatever it cannot lex for sure (a `/` that is no comment, a
/// template literal, HTML-like comments) makes it answer false, and the
/// browser's parser decides.
pub(super) fn certainly_statements(src: &str) -> bool {
    const STATEMENT_ONLY: [&str; 14] = [
        "var", "const", "if", "for", "while", "do", "return", "throw", "try", "switch", "break",
        "continue", "debugger", "with",
    ];
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let word_at = |s: &str| -> usize { s.find(|c: char| !is_ident(c)).unwrap_or(s.len()) };
    let Some(body) = skip_trivia(src) else {
        return false;
    };
    let n = word_at(body);
    let word = &body[..n];
    if STATEMENT_ONLY.contains(&word) {
        return true;
    }
    if word == "let" {
        if let Some(rest) = skip_trivia(&body[n..]) {
            let next = &rest[..word_at(rest)];
            let starts_ident = rest
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$');
            if (starts_ident && next != "in" && next != "instanceof") || rest.starts_with('{') {
                return true;
            }
        }
    }
    top_level_semicolon(src)
}

/// Whitespace and comments skipped; `None` for an unterminated block comment.
fn skip_trivia(s: &str) -> Option<&str> {
    let mut s = s.trim_start();
    loop {
        if let Some(rest) = s.strip_prefix("//") {
            s = rest.find('\n').map_or("", |i| &rest[i..]).trim_start();
        } else if let Some(rest) = s.strip_prefix("/*") {
            s = rest[rest.find("*/")? + 2..].trim_start();
        } else {
            return Some(s);
        }
    }
}

/// A `;` outside brackets, strings and comments, found before anything
/// ambiguous to a lexer without a grammar (see [`certainly_statements`]).
fn top_level_semicolon(src: &str) -> bool {
    let mut depth = 0i32;
    let mut it = src.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\'' | '"' => loop {
                match it.next() {
                    Some('\\') => {
                        it.next();
                    }
                    Some(q) if q == c => break,
                    Some('\n' | '\r') | None => return false,
                    Some(_) => {}
                }
            },
            '/' => match it.peek() {
                Some('/') => {
                    for x in it.by_ref() {
                        if x == '\n' {
                            break;
                        }
                    }
                }
                Some('*') => {
                    it.next();
                    let mut prev = ' ';
                    loop {
                        match it.next() {
                            Some('/') if prev == '*' => break,
                            Some(x) => prev = x,
                            None => return false,
                        }
                    }
                }
                _ => return false,
            },
            '`' => return false,
            '<' if it.clone().take(3).eq("!--".chars()) => return false,
            '-' if it.clone().take(2).eq("->".chars()) => return false,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            ';' if depth == 0 => return true,
            _ => {}
        }
    }
    false
}

/// True when `src` is a function literal: `function …`, `async …`, `x => …`, `(…) => …`.
pub(super) fn looks_like_function(src: &str) -> bool {
    let mut s = src.trim_start();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let keyword = |s: &str, kw: &str| s.starts_with(kw) && !s[kw.len()..].starts_with(is_ident);
    if keyword(s, "async") {
        s = s["async".len()..].trim_start();
    }
    if keyword(s, "function") {
        return true;
    }
    let rest = if let Some(inner) = s.strip_prefix('(') {
        let mut depth = 1usize;
        let mut end = None;
        for (i, c) in inner.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(e) => &inner[e..],
            None => return false,
        }
    } else {
        let n = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
        if n == 0 {
            return false;
        }
        &s[n..]
    };
    rest.trim_start().starts_with("=>")
}
