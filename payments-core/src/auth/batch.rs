//! Ed25519 verification of many signatures at once, with exactly the outcome per signature
//! that [`VerifyingKey::verify_strict`] gives it alone, and a cache of decompressed keys.
//!
//! [`verify_each`] first applies, one signature at a time, the checks of `verify_strict` that a
//! batch equation does not make: the scalar `S` is canonical (below the group order), the point
//! `R` is canonically encoded and neither `R` nor the key `A` has small order. The signatures
//! that pass go through one batch equation ([`ed25519_dalek::verify_batch`], random linear
//! combination, about 40 % of the cost of verifying them one by one at 64 signatures). When
//! the batch fails, every one of them is verified alone ([`verify_alone`]: `verify_strict`'s
//! answer without decompressing `R`), so one bad signature never rejects another's request: it
//! only costs the batch a second pass.
//!
//! One difference stays, and it is documented rather than paid for: `verify_strict` is
//! cofactorless, and so is the batch equation, but the batch weights each signature with a
//! random 128-bit scalar `z`. A signature that fails `verify_strict` only by a small-order
//! component of `R` or `A` (a point of mixed order: not small, so it passes the checks above,
//! but with a torsion part) makes the batch's sum miss zero only when `z` is not a multiple of
//! that component's order, so such a signature passes a batch with probability up to 1/8.
//! Producing one needs the private key of `A` (the equation must hold up to the torsion
//! part), so only the holder of a key can make its own request pass this way, which it can do
//! anyway by signing properly: no request can be forged or taken over, and the nonce (a signed
//! header) still makes each request one-time.
//! Keys with a torsion part are not verified in batches at all ([`CachedKey`] checks it once
//! per key), so the difference is limited to the signature's `R`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use curve25519_dalek::constants::EIGHT_TORSION;
use curve25519_dalek::Scalar;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};

/// A public key decompressed once, with the checks that do not depend on the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedKey {
    key: VerifyingKey,
    /// The point has small order: `verify_strict` rejects every signature by it.
    weak: bool,
    /// The point is in the prime-order subgroup: its signatures may be batched.
    torsion_free: bool,
}

impl CachedKey {
    /// Decompresses `bytes`; `None` when they are not a point on the curve (the error
    /// [`VerifyingKey::from_bytes`] gives).
    pub fn from_bytes(bytes: &[u8; 32]) -> Option<CachedKey> {
        let key = VerifyingKey::from_bytes(bytes).ok()?;
        let point = key.to_edwards();
        Some(CachedKey {
            key,
            weak: key.is_weak(),
            torsion_free: point.is_torsion_free(),
        })
    }

    /// The key.
    pub fn key(&self) -> &VerifyingKey {
        &self.key
    }
}

/// Decompressed public keys by their bytes, at most `capacity` of them (emptied when full).
/// Decompression is a pure function of the bytes, so the cache holds no authorisation: whether
/// a key is active is read from the store on every request, as before.
#[derive(Debug)]
pub struct KeyCache {
    keys: Mutex<HashMap<[u8; 32], Option<CachedKey>>>,
    capacity: usize,
}

impl KeyCache {
    /// A cache of at most `capacity` keys.
    pub fn new(capacity: usize) -> KeyCache {
        KeyCache {
            keys: Mutex::default(),
            capacity: capacity.max(1),
        }
    }

    /// The decompressed key of `bytes` (see [`CachedKey::from_bytes`]), from the cache when it
    /// was decompressed before.
    pub fn get(&self, bytes: &[u8; 32]) -> Option<CachedKey> {
        if let Some(found) = self.lock().get(bytes) {
            return *found;
        }
        let key = CachedKey::from_bytes(bytes);
        let mut keys = self.lock();
        if keys.len() >= self.capacity {
            keys.clear();
        }
        keys.insert(*bytes, key);
        key
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Option<CachedKey>>> {
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One signature to check: by `key`, of `message`.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The signer's key.
    pub key: &'a CachedKey,
    /// The signed bytes.
    pub message: &'a [u8],
    /// The signature.
    pub signature: &'a Signature,
}

/// Whether the 32 bytes encode the y coordinate canonically: y below p = 2^255 - 19 once the
/// sign bit is cleared. A non-canonical y (p to 2^255 - 1) decompresses like y - p, so the
/// batch equation alone would accept it where `verify_strict`, which compares the encodings,
/// does not.
pub fn is_canonical_encoding(bytes: &[u8; 32]) -> bool {
    // y >= p only if bytes 1..31 are all 0xff, the top byte (sign bit cleared) is 0x7f and the
    // lowest byte is at least 0xed (p's lowest byte).
    !(bytes[0] >= 0xed && bytes[1..31].iter().all(|b| *b == 0xff) && bytes[31] & 0x7f == 0x7f)
}

/// Whether `bytes`, canonically encoded ([`is_canonical_encoding`]), name a point of small
/// order when they decompress: their y (sign bit cleared) is that of one of the eight points of
/// order dividing 8 (five values of y). Decided on the bytes, without the field exponentiation
/// of a decompression (the batch decompresses `R` itself; bytes that are no point make the
/// batch fail, and the signature is then refused alone by `verify_strict`).
pub fn is_small_order_encoding(bytes: &[u8; 32]) -> bool {
    static SMALL_ORDER_Y: OnceLock<Vec<[u8; 32]>> = OnceLock::new();
    let ys = SMALL_ORDER_Y.get_or_init(|| {
        let mut ys: Vec<[u8; 32]> = EIGHT_TORSION
            .iter()
            .map(|p| {
                let mut y = p.compress().to_bytes();
                y[31] &= 0x7f;
                y
            })
            .collect();
        ys.sort_unstable();
        ys.dedup();
        ys
    });
    let mut y = *bytes;
    y[31] &= 0x7f;
    ys.contains(&y)
}

/// The checks of `verify_strict` a batch equation does not make, for one signature: `S`
/// canonical, `R` canonical and not of small order, `A` not of small order. (`R` that is no
/// point at all fails the batch equation, see [`is_small_order_encoding`].)
pub fn passes_strict_checks(check: &Check<'_>) -> bool {
    if check.key.weak {
        return false;
    }
    if Scalar::from_canonical_bytes(*check.signature.s_bytes())
        .is_none()
        .into()
    {
        return false;
    }
    let r = check.signature.r_bytes();
    is_canonical_encoding(r) && !is_small_order_encoding(r)
}

/// Verifies every signature of `checks` and answers, in order, whether each one is valid: the
/// same answer as [`VerifyingKey::verify_strict`] gives it alone (see the module for the one
/// documented difference). Signatures that fail the per-signature checks are rejected
/// without entering the batch; a key with a torsion part is verified alone; the rest go through
/// one batch equation, and when that fails, each is verified alone.
pub fn verify_each(checks: &[Check<'_>]) -> Vec<bool> {
    let mut valid = vec![false; checks.len()];
    let mut batch = Vec::with_capacity(checks.len());
    for (i, check) in checks.iter().enumerate() {
        if !passes_strict_checks(check) {
            continue;
        }
        if check.key.torsion_free {
            batch.push(i);
        } else {
            valid[i] = verify_alone(check);
        }
    }
    match batch.len() {
        0 => {}
        1 => valid[batch[0]] = verify_alone(&checks[batch[0]]),
        _ => {
            let messages: Vec<&[u8]> = batch.iter().map(|&i| checks[i].message).collect();
            let signatures: Vec<Signature> = batch.iter().map(|&i| *checks[i].signature).collect();
            let keys: Vec<VerifyingKey> = batch.iter().map(|&i| checks[i].key.key).collect();
            if ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok() {
                for &i in &batch {
                    valid[i] = true;
                }
            } else {
                for &i in &batch {
                    valid[i] = verify_alone(&checks[i]);
                }
            }
        }
    }
    valid
}

/// `verify_strict`'s answer for one signature, without decompressing `R`: the checks of
/// [`passes_strict_checks`], then the equation of `verify`, which compares the encoding of
/// `[S]B - [k]A` with `R`'s bytes. `verify_strict` decompresses `R` only to refuse one that is
/// no point or has small order; bytes equal to a computed point's encoding are that point's
/// canonical encoding, so when the equation holds, `R` is a point and the small-order check
/// made on its bytes is the one decompression would make. The same answer for about one field
/// exponentiation less (a tenth of a verification).
pub fn verify_alone(check: &Check<'_>) -> bool {
    passes_strict_checks(check) && check.key.key.verify(check.message, check.signature).is_ok()
}

#[cfg(test)]
mod tests {
    use curve25519_dalek::edwards::CompressedEdwardsY;
    use ed25519_dalek::{Signer, SigningKey};
    use proptest::prelude::*;

    use super::*;

    fn signer(seed: u8) -> (SigningKey, CachedKey) {
        let sk = SigningKey::from_bytes(&[seed; 32]);
        let key = CachedKey::from_bytes(sk.verifying_key().as_bytes()).expect("a valid key");
        (sk, key)
    }

    /// `s + l` (the group order) in 32 little-endian bytes: the same scalar as `s`, not
    /// canonically encoded (no overflow for any `s < l`).
    fn plus_group_order(s: &[u8; 32]) -> [u8; 32] {
        let l: [u8; 32] = [
            0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9,
            0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ];
        let mut out = [0u8; 32];
        let mut carry = 0u16;
        for i in 0..32 {
            let sum = u16::from(s[i]) + u16::from(l[i]) + carry;
            out[i] = sum as u8;
            carry = sum >> 8;
        }
        out
    }

    fn messages(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("\"@method\": POST\nmessage {i}").into_bytes())
            .collect()
    }

    #[test]
    fn a_batch_with_one_forged_signature_rejects_only_that_one() {
        let msgs = messages(16);
        let signers: Vec<_> = (0..16u8).map(|i| signer(i + 1)).collect();
        let mut sigs: Vec<Signature> = signers
            .iter()
            .zip(&msgs)
            .map(|((sk, _), m)| sk.sign(m))
            .collect();
        // Request 5's signature is made with another key than the one it names.
        sigs[5] = signers[6].0.sign(&msgs[5]);
        let checks: Vec<Check<'_>> = (0..16)
            .map(|i| Check {
                key: &signers[i].1,
                message: &msgs[i],
                signature: &sigs[i],
            })
            .collect();
        let valid = verify_each(&checks);
        for (i, ok) in valid.iter().enumerate() {
            assert_eq!(*ok, i != 5, "signature {i}");
        }
    }

    #[test]
    fn all_valid_pass_and_a_tampered_message_fails() {
        let msgs = messages(8);
        let (sk, key) = signer(9);
        let sigs: Vec<Signature> = msgs.iter().map(|m| sk.sign(m)).collect();
        let tampered = b"something else".to_vec();
        let checks: Vec<Check<'_>> = (0..8)
            .map(|i| Check {
                key: &key,
                message: if i == 3 { &tampered } else { &msgs[i] },
                signature: &sigs[i],
            })
            .collect();
        assert_eq!(
            verify_each(&checks),
            vec![true, true, true, false, true, true, true, true]
        );
    }

    #[test]
    fn non_canonical_s_is_rejected_like_verify_strict() {
        let (sk, key) = signer(3);
        let msg = b"m".to_vec();
        let sig = sk.sign(&msg);
        // S + l encodes the same scalar non-canonically.
        let s = plus_group_order(sig.s_bytes());
        let mut bytes = sig.to_bytes();
        bytes[32..].copy_from_slice(&s);
        let bad = Signature::from_bytes(&bytes);
        let good_other = sk.sign(b"other");
        let checks = [
            Check {
                key: &key,
                message: &msg,
                signature: &bad,
            },
            Check {
                key: &key,
                message: b"other",
                signature: &good_other,
            },
        ];
        assert!(key.key().verify_strict(&msg, &bad).is_err());
        assert_eq!(verify_each(&checks), vec![false, true]);
    }

    #[test]
    fn small_order_r_and_small_order_keys_are_rejected() {
        // The identity point (y = 1) has small order.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let weak = CachedKey::from_bytes(&identity).expect("the identity is a point");
        assert!(weak.weak);
        let (sk, key) = signer(4);
        let sig = sk.sign(b"m");
        let mut r_small = sig.to_bytes();
        r_small[..32].copy_from_slice(&identity);
        let r_small = Signature::from_bytes(&r_small);
        let checks = [
            Check {
                key: &weak,
                message: b"m",
                signature: &sig,
            },
            Check {
                key: &key,
                message: b"m",
                signature: &r_small,
            },
            Check {
                key: &key,
                message: b"m",
                signature: &sig,
            },
        ];
        assert_eq!(verify_each(&checks), vec![false, false, true]);
    }

    #[test]
    fn the_key_cache_answers_like_decompression() {
        let cache = KeyCache::new(2);
        let (_, key) = signer(5);
        let bytes = *key.key().as_bytes();
        assert_eq!(cache.get(&bytes), Some(key));
        assert_eq!(cache.get(&bytes), Some(key));
        // Not a point: y = 2 has no x on the curve.
        let mut not_a_point = [0u8; 32];
        not_a_point[0] = 2;
        assert_eq!(cache.get(&not_a_point), CachedKey::from_bytes(&not_a_point));
        assert!(VerifyingKey::from_bytes(&not_a_point).is_err());
        // Past its capacity the cache starts over and still answers.
        let (_, other) = signer(6);
        assert_eq!(cache.get(other.key().as_bytes()), Some(other));
        assert_eq!(cache.get(&bytes), Some(key));
    }

    #[test]
    fn the_small_order_encodings_are_the_eight_torsion_points() {
        let ys: std::collections::BTreeSet<[u8; 32]> = EIGHT_TORSION
            .iter()
            .map(|p| {
                let mut y = p.compress().to_bytes();
                y[31] &= 0x7f;
                y
            })
            .collect();
        assert_eq!(ys.len(), 5, "y = 1, -1, 0 and the two of order 8");
        for p in EIGHT_TORSION {
            let mut bytes = p.compress().to_bytes();
            assert!(is_small_order_encoding(&bytes));
            bytes[31] ^= 0x80;
            assert!(is_small_order_encoding(&bytes));
        }
        let (sk, _) = signer(1);
        assert!(!is_small_order_encoding(sk.verifying_key().as_bytes()));
    }

    proptest! {
        #[test]
        fn small_order_encoding_matches_decompression(bytes in any::<[u8; 32]>(), torsion in 0usize..9) {
            // A share of the cases on the torsion points themselves.
            let bytes = match EIGHT_TORSION.get(torsion) {
                Some(p) if torsion % 2 == 0 => p.compress().to_bytes(),
                _ => bytes,
            };
            if is_canonical_encoding(&bytes) {
                if let Some(point) = CompressedEdwardsY(bytes).decompress() {
                    prop_assert_eq!(is_small_order_encoding(&bytes), point.is_small_order());
                }
            }
        }

        #[test]
        fn canonical_encoding_matches_decompress_then_compress(mut bytes in any::<[u8; 32]>(), top in 0u8..4) {
            // Push a share of the cases into the narrow non-canonical range.
            if top == 0 {
                bytes[1..31].fill(0xff);
                bytes[31] |= 0x7f;
            }
            if let Some(point) = CompressedEdwardsY(bytes).decompress() {
                let compressed = point.compress().to_bytes();
                let round_trip = compressed == bytes;
                // A point with x = 0 sent with the sign bit set (-0) is the other case that
                // does not round-trip with a canonical y; both such points have small order,
                // which the order check rejects.
                let mut flipped = bytes;
                flipped[31] ^= 0x80;
                let negative_zero = compressed == flipped;
                if negative_zero {
                    prop_assert!(point.is_small_order());
                }
                prop_assert_eq!(is_canonical_encoding(&bytes), round_trip || negative_zero);
            }
        }

        #[test]
        fn verify_each_agrees_with_verify_strict(
            flips in proptest::collection::vec(proptest::option::of((0usize..64, 0u8..8)), 1..12),
        ) {
            let msgs = messages(flips.len());
            let signers: Vec<_> = (0..flips.len()).map(|i| signer(i as u8 + 20)).collect();
            let sigs: Vec<Signature> = signers
                .iter()
                .zip(&msgs)
                .zip(&flips)
                .map(|(((sk, _), m), flip)| {
                    let mut b = sk.sign(m).to_bytes();
                    if let Some((byte, bit)) = flip {
                        b[*byte] ^= 1 << bit;
                    }
                    Signature::from_bytes(&b)
                })
                .collect();
            let checks: Vec<Check<'_>> = (0..flips.len())
                .map(|i| Check { key: &signers[i].1, message: &msgs[i], signature: &sigs[i] })
                .collect();
            let alone: Vec<bool> = checks.iter().map(verify_alone).collect();
            let strict: Vec<bool> = checks
                .iter()
                .map(|c| c.key.key().verify_strict(c.message, c.signature).is_ok())
                .collect();
            prop_assert_eq!(verify_each(&checks), strict.clone());
            prop_assert_eq!(alone, strict);
        }

        /// `verify_alone` against `verify_strict` where they could part: `R` replaced by a
        /// point of small order (either sign), `R` plus a small-order point (mixed order),
        /// `S` plus the group order (the same residue, not canonical), a key of small order.
        #[test]
        fn verify_alone_agrees_with_verify_strict(
            seed in 1u8..255,
            case in 0usize..6,
            torsion in 0usize..8,
            sign in any::<bool>(),
        ) {
            let (sk, key) = signer(seed);
            let msg = b"\"@method\": POST";
            let good = sk.sign(msg);
            let mut bytes = good.to_bytes();
            let t = EIGHT_TORSION[torsion];
            let mut key = key;
            match case {
                0 => {}
                1 => {
                    let mut r = t.compress().to_bytes();
                    if sign {
                        r[31] ^= 0x80;
                    }
                    bytes[..32].copy_from_slice(&r);
                }
                2 => {
                    let r = CompressedEdwardsY(good.r_bytes().to_owned())
                        .decompress()
                        .expect("R of a real signature is a point");
                    bytes[..32].copy_from_slice(&(r + t).compress().to_bytes());
                }
                3 => {
                    let s = plus_group_order(good.s_bytes());
                    bytes[32..].copy_from_slice(&s);
                }
                4 => {
                    key = CachedKey::from_bytes(&t.compress().to_bytes())
                        .expect("a torsion point is a point");
                }
                _ => {
                    // R the identity (small order) and S = k a: the equation holds, only the
                    // small-order check refuses it.
                    use sha2::{Digest, Sha512};
                    let mut r = [0u8; 32];
                    r[0] = 1;
                    let k = Scalar::from_hash(
                        Sha512::new()
                            .chain_update(r)
                            .chain_update(sk.verifying_key().as_bytes())
                            .chain_update(msg),
                    );
                    bytes[..32].copy_from_slice(&r);
                    bytes[32..].copy_from_slice(&(k * sk.to_scalar()).to_bytes());
                    let forged = Signature::from_bytes(&bytes);
                    prop_assert!(key.key().verify(msg, &forged).is_ok(), "the equation holds");
                }
            }
            let signature = Signature::from_bytes(&bytes);
            let check = Check { key: &key, message: msg, signature: &signature };
            let strict = key.key().verify_strict(msg, &signature).is_ok();
            prop_assert_eq!(verify_alone(&check), strict);
            prop_assert_eq!(strict, case == 0 || (case == 2 && torsion == 0));
        }
    }
}
