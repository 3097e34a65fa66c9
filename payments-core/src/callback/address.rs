//! Placeholder replaced by the callback branch.
/// Placeholder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Placeholder.
    pub allow_local: bool,
}
