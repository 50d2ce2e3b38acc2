//! tool-surface (filled by its issue).
