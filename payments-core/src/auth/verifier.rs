//! The port through which [`Gate::authenticate`](crate::service::Gate::authenticate) verifies
//! a request's Ed25519 signature: [`SignatureVerifier`]. The rule (`verify_strict`'s answer,
//! [`verify_alone`]) is the core's; how a verifier schedules the work is the adapter's:
//! [`AloneVerifier`] verifies each signature at once, `payments-http`'s `SignatureBatcher`
//! verifies concurrent requests' signatures together with the same answers.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use ed25519_dalek::Signature;

use super::batch::{verify_alone, CachedKey, Check, KeyCache};
use crate::clock::Clock;

/// Counters of a verifier, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Batches verified (a signature verified alone counts as a batch of one).
    pub batches: u64,
    /// Signatures verified in them.
    pub signatures: u64,
    /// Batches of more than one signature that held a refused one (refused by the checks
    /// before the batch equation, or found when the equation failed and each signature was
    /// verified alone).
    pub fallbacks: u64,
    /// Batches that stopped waiting at their time bound.
    pub timeouts: u64,
}

/// Verifies signatures with `verify_strict`'s answer. A request announces its signature
/// ([`announce`]) before it reads its credentials, so that a verifier that batches can wait
/// for it, then hands the announcement to [`verify`](SignatureVerifier::verify) (or drops it
/// when the request ends first).
#[async_trait]
pub trait SignatureVerifier: Send + Sync {
    /// A ticket for a signature about to be verified (see [`announce`]); `0` when the
    /// verifier does not wait for announced signatures.
    fn open_ticket(&self) -> u64 {
        0
    }

    /// The ticket's request ended before its signature was verified.
    fn withdraw(&self, _ticket: u64) {}

    /// The decompressed key of `bytes`, from a cache when seen before; `None` when the bytes
    /// are not a point on the curve.
    fn key(&self, bytes: &[u8; 32]) -> Option<CachedKey>;

    /// Whether `signature` of `message` verifies with `key` (`verify_strict`'s answer). The
    /// ticket is the announcement's ([`Announcement::redeem`]); `clock` bounds any wait.
    async fn verify(
        &self,
        ticket: u64,
        key: CachedKey,
        message: &[u8],
        signature: &Signature,
        clock: &dyn Clock,
    ) -> bool;

    /// The counters so far.
    fn stats(&self) -> BatchStats;
}

/// A signature announced to `verifier`: hand it to [`SignatureVerifier::verify`] through
/// [`redeem`](Self::redeem), or drop it when the request ends before its signature is
/// verified (the verifier stops waiting for it).
#[must_use = "an announcement that is neither verified nor dropped may hold up a batch until its bound"]
pub struct Announcement<'a> {
    verifier: &'a dyn SignatureVerifier,
    ticket: u64,
    live: bool,
}

impl std::fmt::Debug for Announcement<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcement")
            .field("ticket", &self.ticket)
            .field("live", &self.live)
            .finish()
    }
}

/// Announces a signature that the request is about to verify with `verifier`.
pub fn announce(verifier: &dyn SignatureVerifier) -> Announcement<'_> {
    Announcement {
        ticket: verifier.open_ticket(),
        verifier,
        live: true,
    }
}

impl Announcement<'_> {
    /// The ticket, for [`SignatureVerifier::verify`]; the announcement is then spent.
    pub fn redeem(mut self) -> u64 {
        self.live = false;
        self.ticket
    }
}

impl Drop for Announcement<'_> {
    fn drop(&mut self) {
        if self.live {
            self.verifier.withdraw(self.ticket);
        }
    }
}

/// Verifies each signature at once, alone, with a cache of decompressed keys: the verifier of
/// a service whose ports name none.
#[derive(Debug)]
pub struct AloneVerifier {
    keys: KeyCache,
    signatures: AtomicU64,
}

impl Default for AloneVerifier {
    fn default() -> Self {
        AloneVerifier {
            keys: KeyCache::new(4096),
            signatures: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl SignatureVerifier for AloneVerifier {
    fn key(&self, bytes: &[u8; 32]) -> Option<CachedKey> {
        self.keys.get(bytes)
    }

    async fn verify(
        &self,
        _ticket: u64,
        key: CachedKey,
        message: &[u8],
        signature: &Signature,
        _clock: &dyn Clock,
    ) -> bool {
        self.signatures.fetch_add(1, Ordering::Relaxed);
        verify_alone(&Check {
            key: &key,
            message,
            signature,
        })
    }

    fn stats(&self) -> BatchStats {
        let n = self.signatures.load(Ordering::Relaxed);
        BatchStats {
            batches: n,
            signatures: n,
            fallbacks: 0,
            timeouts: 0,
        }
    }
}
