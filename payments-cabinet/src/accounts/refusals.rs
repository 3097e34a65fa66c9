//! The count of anonymous refusals per source that keeps a flood of junk sign-ins to a
//! handful of audit rows.

use std::time::Duration;

use payments_core::Timestamp;

/// Refused sign-ins per (source, kind) in this process: when each one's window began and how
/// many it has counted since. The audit log gets a row for the first of a window and at each
/// doubling (1, 2, 4, 8, ...), with the count: a flood of junk sign-ins from one source adds
/// a handful of rows, not one each.
#[derive(Debug, Default)]
pub(super) struct Refusals(std::collections::HashMap<String, (Timestamp, u64)>);

/// The most sources [`Refusals`] tracks; beyond it, ended windows are dropped first, then all.
const MAX_TRACKED_SOURCES: usize = 10_000;

impl Refusals {
    /// Counts one refusal of `key` at `now` in windows of `window`: `Some(count)` when this
    /// one gets an audit row.
    pub(super) fn count(&mut self, key: String, now: Timestamp, window: Duration) -> Option<u64> {
        if self.0.len() >= MAX_TRACKED_SOURCES && !self.0.contains_key(&key) {
            self.0.retain(|_, (start, _)| *start + window > now);
            if self.0.len() >= MAX_TRACKED_SOURCES {
                self.0.clear();
            }
        }
        let entry = self.0.entry(key).or_insert((now, 0));
        if entry.0 + window <= now {
            *entry = (now, 0);
        }
        entry.1 += 1;
        entry.1.is_power_of_two().then_some(entry.1)
    }
}
