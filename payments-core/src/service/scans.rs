//! The per-project budget of list reads: no project's scans stall the others.
//!
//! A list read (the payment list and search, the events list and every re-read of its long
//! poll, the cabinet's list pages and export) may read much of its project when its filter
//! has no index (a merchant payment id prefix that matches many old payments and few new
//! ones). Each one takes one of its project's places ([`ScanBudget::per_project`]) for as
//! long as it reads; one more waits up to [`ScanBudget::wait`] for a place and is then refused
//! `429 rate_limited` with `Retry-After`. So one project holds at most that many of the
//! store's read connections, and the others' reads find theirs. The short reads (the token
//! check, a payment by id) take no place: they read a handful of rows through an index.
//!
//! Places are counted per project in this process, and a project is kept only while it has a
//! list read under way: memory grows with the reads in flight, never with the projects that
//! ever listed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::error::{ApiError, ErrorCode};
use crate::ids::ProjectId;

/// How many list reads of one project run at once, and how long another waits for a place
/// ([`ServiceConfig::scans`](super::ServiceConfig::scans)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanBudget {
    /// List reads one project runs at once in this process (at least 1 is used). 2 by
    /// default: of the SQLite store's 4 list connections, a project takes at most half.
    pub per_project: usize,
    /// How long a list read waits for a place before it is refused. 1 s by default: a page
    /// through an index takes milliseconds, so a merchant that pages in a few parallel
    /// requests waits, it is not refused.
    pub wait: Duration,
}

impl Default for ScanBudget {
    fn default() -> Self {
        ScanBudget {
            per_project: 2,
            wait: Duration::from_secs(1),
        }
    }
}

/// How often a waiting list read looks for a free place.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// The places taken, by project (shared by every clone of a service).
#[derive(Debug, Default)]
pub(crate) struct ScanPlaces {
    taken: Mutex<HashMap<ProjectId, usize>>,
}

/// One list read's place in its project's budget, given back when dropped.
#[derive(Debug)]
#[must_use = "the place is given back when dropped: hold it while the read runs"]
pub struct ScanPlace {
    places: Arc<ScanPlaces>,
    project: ProjectId,
}

impl ScanPlaces {
    /// A place for `project` when it holds fewer than `limit`.
    pub(crate) fn try_take(
        self: &Arc<Self>,
        project: ProjectId,
        limit: usize,
    ) -> Option<ScanPlace> {
        let mut taken = self.lock();
        let n = taken.entry(project).or_insert(0);
        if *n >= limit.max(1) {
            return None;
        }
        *n += 1;
        Some(ScanPlace {
            places: Arc::clone(self),
            project,
        })
    }

    /// The projects with a list read under way (what the table holds).
    pub(crate) fn projects(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ProjectId, usize>> {
        self.taken.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for ScanPlace {
    fn drop(&mut self) {
        let mut taken = self.places.lock();
        let emptied = match taken.get_mut(&self.project) {
            Some(n) => {
                debug_assert!(*n > 0, "a place given back was taken");
                *n = n.saturating_sub(1);
                *n == 0
            }
            None => {
                debug_assert!(false, "a place given back belongs to a counted project");
                false
            }
        };
        // An idle project is forgotten: the table holds only projects with reads under way.
        if emptied {
            taken.remove(&self.project);
        }
    }
}

/// `429 rate_limited`: the project already runs as many list reads as its budget allows.
pub fn scans_refused() -> ApiError {
    ApiError::new(
        ErrorCode::RateLimited,
        "too many list requests of this project at once: wait for the ones under way \
         (narrow their filters to make them quicker) and ask again",
    )
    .with_retry_after(1)
}

impl super::ServiceState {
    /// A place for one list read of `project`: at once when the project runs fewer than
    /// [`ScanBudget::per_project`], else after waiting up to [`ScanBudget::wait`] for one
    /// (looking every 20 ms on the service's clock); [`scans_refused`] when none came.
    pub async fn scan_place(&self, project: ProjectId) -> Result<ScanPlace, ApiError> {
        let budget = self.config.scans;
        let looks = budget.wait.as_millis() / LOOK_EVERY.as_millis();
        for look in 0..=looks {
            if let Some(place) = self.scan_places.try_take(project, budget.per_project) {
                return Ok(place);
            }
            if look < looks {
                self.ports.clock.sleep(LOOK_EVERY).await;
            }
        }
        Err(scans_refused())
    }

    /// A place for one list read of `project` only if one is free now (a long poll's
    /// re-read, which simply looks again at its next turn).
    pub fn scan_place_now(&self, project: ProjectId) -> Option<ScanPlace> {
        self.scan_places
            .try_take(project, self.config.scans.per_project)
    }

    /// How many projects have a list read under way in this process (the size of the
    /// budget's table; for tests and metrics).
    pub fn scanning_projects(&self) -> usize {
        self.scan_places.projects()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(n: u8) -> ProjectId {
        format!("0192f3a4-5b6c-7d8e-9f00-1122334455{n:02x}")
            .parse()
            .expect("a project id")
    }

    #[test]
    fn a_project_holds_at_most_its_places_and_others_are_not_counted_against_it() {
        let places = Arc::new(ScanPlaces::default());
        let a1 = places.try_take(project(1), 2).expect("a first place");
        let a2 = places.try_take(project(1), 2).expect("a second place");
        assert!(
            places.try_take(project(1), 2).is_none(),
            "a third is refused"
        );
        let b = places
            .try_take(project(2), 2)
            .expect("another project has its own");
        drop(a1);
        let a3 = places
            .try_take(project(1), 2)
            .expect("a place given back is free again");
        assert!(places.try_take(project(1), 2).is_none());
        drop((a2, a3, b));
        assert_eq!(places.projects(), 0, "idle projects are forgotten");
    }

    #[test]
    fn a_limit_of_zero_still_lets_one_read_run() {
        let places = Arc::new(ScanPlaces::default());
        let one = places.try_take(project(3), 0).expect("at least one place");
        assert!(places.try_take(project(3), 0).is_none());
        drop(one);
    }

    #[test]
    fn the_table_holds_only_projects_with_reads_under_way() {
        let places = Arc::new(ScanPlaces::default());
        for round in 0..3 {
            let held: Vec<_> = (0..200u8)
                .map(|n| places.try_take(project(n), 2).expect("a place"))
                .collect();
            assert_eq!(places.projects(), 200, "round {round}");
            drop(held);
            assert_eq!(places.projects(), 0, "round {round}");
        }
    }

    #[test]
    fn a_refusal_is_429_with_retry_after() {
        let e = scans_refused();
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert_eq!(e.retry_after, Some(1));
    }
}
