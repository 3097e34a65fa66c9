//! Randomness as a port: the core never reads the OS generator itself.

use uuid::Uuid;

/// A source of cryptographically secure random bytes, injected by the adapter (the OS
/// generator in production, a seeded generator in simulations).
pub trait RandomSource: Send + Sync {
    /// Fills `buf` with random bytes.
    fn fill(&self, buf: &mut [u8]);
}

/// A random version 4 UUID from `rng`.
pub fn uuid_v4(rng: &dyn RandomSource) -> Uuid {
    let mut bytes = [0u8; 16];
    rng.fill(&mut bytes);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// `N` random bytes from `rng`.
pub fn bytes<const N: usize>(rng: &dyn RandomSource) -> [u8; N] {
    let mut bytes = [0u8; N];
    rng.fill(&mut bytes);
    bytes
}
