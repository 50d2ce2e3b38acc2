//! bridge-script (filled by its issue).
