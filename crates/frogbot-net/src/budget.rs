//! A cap on downloads per turn (or per message).

use std::sync::atomic::{AtomicUsize, Ordering};

/// A counter of downloads allowed in one turn (or one message): the first `max` calls to
/// [`try_take`](Self::try_take) succeed, the rest are refused.
#[derive(Debug)]
pub struct FetchBudget {
    max: usize,
    used: AtomicUsize,
}

/// A download past the budget.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{attempted} downloads were asked for; the limit is {max}")]
pub struct BudgetExceeded {
    /// How many were asked for, this one included.
    pub attempted: usize,
    /// The budget.
    pub max: usize,
}

impl FetchBudget {
    /// A budget of `max` downloads.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            used: AtomicUsize::new(0),
        }
    }

    /// Takes one download: its number (from 1), or refused past the budget (a refused call
    /// counts as asked for).
    pub fn try_take(&self) -> Result<usize, BudgetExceeded> {
        let attempted = self.used.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if attempted > self.max {
            return Err(BudgetExceeded {
                attempted,
                max: self.max,
            });
        }
        Ok(attempted)
    }

    /// How many were asked for so far.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The budget.
    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_past_its_max() {
        let b = FetchBudget::new(2);
        assert_eq!(b.try_take(), Ok(1));
        assert_eq!(b.try_take(), Ok(2));
        assert_eq!(
            b.try_take(),
            Err(BudgetExceeded {
                attempted: 3,
                max: 2
            })
        );
        assert_eq!(b.used(), 3);
        assert!(FetchBudget::new(0).try_take().is_err());
    }
}
