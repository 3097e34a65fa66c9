//! Placeholder replaced by the auth branch.
/// Placeholder.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `payments:create`
    PaymentsCreate,
    /// `payments:read`
    PaymentsRead,
    /// `payments:test`
    PaymentsTest,
}
