//! evaluate (filled by its issue).
