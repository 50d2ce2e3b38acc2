//! One deadline end to end: [`Budget`].

use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Smallest `timeout_ms` accepted at a boundary.
pub const MIN_TIMEOUT_MS: u64 = 1;
/// Largest `timeout_ms` accepted at a boundary (two minutes).
pub const MAX_TIMEOUT_MS: u64 = 120_000;
/// `timeout_ms` used when the caller gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 20_000;

/// A deadline plus a cancellation token, created once at the outermost entry
/// (a tool call, a CLI command, a Rust API call) and passed down.
///
/// Every layer below takes [`Budget::remaining`]; none invents its own timer.
/// Cloning shares the deadline and the token. [`Budget::child`] makes a
/// budget that ends no later than its parent and is cancelled with it.
///
/// Source: seed 004 ("one deadline end to end").
#[derive(Clone, Debug)]
pub struct Budget {
    start: Instant,
    deadline: Instant,
    total: Duration,
    cancel: CancellationToken,
}

/// `timeout_ms` outside `MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timeout_ms {value} is out of range: use {min} to {max} ms (default {default})")]
pub struct BudgetRangeError {
    /// The value the caller gave.
    pub value: u64,
    /// Smallest accepted value, ms.
    pub min: u64,
    /// Largest accepted value, ms.
    pub max: u64,
    /// Value used when none is given, ms.
    pub default: u64,
}

impl Budget {
    /// A budget of `total` from now, with a fresh cancellation token.
    pub fn new(total: Duration) -> Self {
        let start = Instant::now();
        Self {
            start,
            deadline: start + total,
            total,
            cancel: CancellationToken::new(),
        }
    }

    /// Validates a user-supplied `timeout_ms` (`None` → [`DEFAULT_TIMEOUT_MS`]).
    ///
    /// # Errors
    /// [`BudgetRangeError`] when the value is outside 1..=120 000 ms; it echoes the value.
    pub fn from_timeout_ms(timeout_ms: Option<u64>) -> Result<Self, BudgetRangeError> {
        let v = timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&v) {
            return Err(BudgetRangeError {
                value: v,
                min: MIN_TIMEOUT_MS,
                max: MAX_TIMEOUT_MS,
                default: DEFAULT_TIMEOUT_MS,
            });
        }
        Ok(Self::new(Duration::from_millis(v)))
    }

    /// Ties this budget to a parent cancellation: cancelling `parent` cancels this budget.
    pub fn with_parent(mut self, parent: &CancellationToken) -> Self {
        self.cancel = parent.child_token();
        self
    }

    /// A budget that ends at `min(self.deadline, now + max)` and is cancelled with `self`.
    pub fn child(&self, max: Duration) -> Self {
        let now = Instant::now();
        let deadline = self.deadline.min(now + max);
        Self {
            start: now,
            deadline,
            total: deadline.saturating_duration_since(now),
            cancel: self.cancel.child_token(),
        }
    }

    /// Time left; zero once the deadline has passed.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
    /// Absolute deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
    /// The whole budget as created (for error messages).
    pub fn total(&self) -> Duration {
        self.total
    }
    /// Time since the budget was created.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
    /// True once the deadline passed.
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.deadline
    }
    /// The cancellation token; cancel it to end every wait under this budget.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }
    /// Cancels every wait under this budget (and its children).
    pub fn cancel(&self) {
        self.cancel.cancel()
    }
    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

impl From<Duration> for Budget {
    fn from(d: Duration) -> Self {
        Budget::new(d)
    }
}

impl From<&Budget> for Budget {
    fn from(b: &Budget) -> Self {
        b.clone()
    }
}
