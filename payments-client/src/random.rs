//! The operating system's random generator, for nonces and request ids.

use payments_core::RandomSource;

/// The operating system's CSPRNG.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OsRandom;

impl RandomSource for OsRandom {
    fn fill(&self, buf: &mut [u8]) {
        // Without a working OS generator a nonce could repeat: stop rather than sign with it.
        getrandom::getrandom(buf).expect("the OS random generator is available");
    }
}
