//! supervisor (filled by its issue).
