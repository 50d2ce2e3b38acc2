//! One deadline end to end: [`Budget`].

use std::time::Duration;
use tokio::time::Instant;
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
/// Time is [`tokio::time::Instant`]: outside a runtime, or in one whose
/// clock is not paused, the same as `std::time::Instant`; under a paused
/// test clock (`tokio::time::pause`) a budget runs out when the test clock
/// says so, so timing logic can be tested without waiting.
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
    /// Absolute deadline (`tokio::time::sleep_until` takes it as it is).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Under a paused clock a budget's time is the test clock's: no test
    /// waits for real to see a deadline pass.
    #[tokio::test(start_paused = true)]
    async fn a_budget_runs_on_the_paused_test_clock() {
        let b = Budget::new(Duration::from_secs(30));
        let child = b.child(Duration::from_secs(5));
        assert_eq!(b.remaining(), Duration::from_secs(30));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(child.remaining(), Duration::from_secs(1));
        assert!(!child.is_expired());
        // `sleep_until(deadline)` fires when the test clock reaches it.
        tokio::time::sleep_until(child.deadline()).await;
        assert!(child.is_expired() && !b.is_expired());
        assert_eq!(b.elapsed(), Duration::from_secs(5));
        assert_eq!(b.remaining(), Duration::from_secs(25));
        // A child never outlives its parent.
        let late = b.child(Duration::from_secs(60));
        assert_eq!(late.deadline(), b.deadline());
    }

    #[test]
    fn a_budget_works_outside_a_runtime() {
        let b = Budget::new(Duration::from_millis(50));
        assert!(b.remaining() <= Duration::from_millis(50));
        assert!(!b.is_expired());
        assert_eq!(
            Budget::from_timeout_ms(Some(0)).map(|b| b.total()),
            Err(BudgetRangeError {
                value: 0,
                min: MIN_TIMEOUT_MS,
                max: MAX_TIMEOUT_MS,
                default: DEFAULT_TIMEOUT_MS
            })
        );
    }
}
