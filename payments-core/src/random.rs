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

/// A version 7 UUID (RFC 9562 section 5.7): the Unix milliseconds of `at` (times before 1970
/// count as 0), then random bits from `rng`.
pub fn uuid_v7(at: crate::Timestamp, rng: &dyn RandomSource) -> Uuid {
    let mut bytes = [0u8; 10];
    rng.fill(&mut bytes);
    let millis = u64::try_from(at.unix_millis()).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(millis, &bytes).into_uuid()
}

/// `N` random bytes from `rng`.
pub fn bytes<const N: usize>(rng: &dyn RandomSource) -> [u8; N] {
    let mut bytes = [0u8; N];
    rng.fill(&mut bytes);
    bytes
}

/// A "generator" filling every buffer with one byte value, for unit tests that pin outputs.
#[cfg(test)]
pub(crate) struct Fixed(pub(crate) u8);

#[cfg(test)]
impl RandomSource for Fixed {
    fn fill(&self, buf: &mut [u8]) {
        buf.fill(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    #[test]
    fn v7_carries_the_millisecond_and_sorts_by_it() {
        // RFC 9562 appendix A.6's timestamp: 2022-02-22T19:22:22Z = 0x017F22E279B0 ms.
        let at = Timestamp::from_unix_millis(0x017F_22E2_79B0);
        let id = uuid_v7(at, &Fixed(0xff));
        assert_eq!(id.get_version_num(), 7);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        assert!(id
            .hyphenated()
            .to_string()
            .starts_with("017f22e2-79b0-7fff-bfff-"));
        // A later millisecond sorts after, whatever the random bits.
        let later = uuid_v7(at + std::time::Duration::from_millis(1), &Fixed(0));
        assert!(later > id);
        // Before the epoch counts as the epoch.
        let early = uuid_v7(Timestamp::from_unix_millis(-5), &Fixed(0));
        assert!(early
            .hyphenated()
            .to_string()
            .starts_with("00000000-0000-7"));
    }
}
