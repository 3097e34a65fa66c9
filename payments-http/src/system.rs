//! The real clock and random source the server runs on.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use payments_core::clock::Sleep;
use payments_core::provider::{RateSource, RequisiteProvider};
use payments_core::service::Ports;
use payments_core::store::Store;
use payments_core::{Clock, RandomSource, Timestamp};

/// The service's ports over `store`, `provider` and `rates` with the [`SystemClock`] and the
/// [`OsRandom`] source: what a running service uses (tests give a manual clock and seeded
/// randomness to [`Ports::new`] instead).
pub fn system_ports(
    store: Arc<dyn Store>,
    provider: Arc<dyn RequisiteProvider>,
    rates: Arc<dyn RateSource>,
) -> Ports {
    Ports::new(
        store,
        provider,
        rates,
        Arc::new(SystemClock),
        Arc::new(OsRandom),
    )
}

/// The system clock, with tokio timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Timestamp::from_unix_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The operating system's CSPRNG.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsRandom;

impl RandomSource for OsRandom {
    fn fill(&self, buf: &mut [u8]) {
        // A machine without a working OS generator cannot issue tokens or ids safely: stop.
        getrandom::getrandom(buf).expect("the OS random generator is available");
    }
}
