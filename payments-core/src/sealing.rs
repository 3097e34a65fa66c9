//! Encryption at rest for secrets the service must be able to read back: callback secrets sign
//! every delivery, so they cannot be stored hashed like tokens. The store keeps a *sealed*
//! string instead, `v1.<keyid>.<base64url(nonce || ciphertext)>`, made with XChaCha20-Poly1305
//! under a key the store never holds (the server keeps it in a key file beside or outside the
//! data dir). A copied database without the key reveals nothing.
//!
//! [`SealingKeys`] holds one *current* key, which seals, and any number of *previous* keys,
//! which still open: the key id in each sealed string picks the key, so keys rotate without a
//! flag day (add the new key as current and the old one as previous, re-seal, drop the old
//! key). The 24-byte nonce is random (from the [`RandomSource`] port), which XChaCha's nonce
//! length makes safe for any number of seals under one key. The additional data binds the
//! format version, the key id and a caller's *context* (the project id for a callback
//! secret), so a sealed value copied to another project does not open.
//!
//! Bytes (an appeal's receipt, up to a few MiB) are sealed as bytes instead
//! ([`SealingKeys::seal_bytes`]): the same header and payload, without the base64.
//!
//! ```
//! use payments_core::sealing::{SealingKey, SealingKeys};
//! # struct Counter(std::sync::atomic::AtomicU8);
//! # impl payments_core::RandomSource for Counter {
//! #     fn fill(&self, buf: &mut [u8]) {
//! #         buf.fill(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
//! #     }
//! # }
//! # let rng = Counter(Default::default());
//! let a = SealingKey::from_bytes([1; 32]);
//! let keys = SealingKeys::new(a.clone(), Vec::new());
//! let sealed = keys.seal("whsec_secret", "project-1", &rng).unwrap();
//! assert!(sealed.starts_with(&format!("v1.{}.", a.id())));
//! assert_eq!(keys.open(&sealed, "project-1").unwrap(), "whsec_secret");
//! assert!(keys.open(&sealed, "project-2").is_err(), "bound to its context");
//!
//! // Rotation: b seals, a still opens until everything is re-sealed.
//! let b = SealingKey::from_bytes([2; 32]);
//! let rotated = SealingKeys::new(b.clone(), vec![a]);
//! assert_eq!(rotated.open(&sealed, "project-1").unwrap(), "whsec_secret");
//! assert!(rotated.needs_reseal(&sealed));
//! let resealed = rotated.seal("whsec_secret", "project-1", &rng).unwrap();
//! assert!(!rotated.needs_reseal(&resealed));
//! assert!(SealingKeys::new(b, Vec::new()).open(&sealed, "project-1").is_err());
//! ```

use std::fmt;
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

use crate::RandomSource;

/// The prefix of every sealed string (format version 1).
pub const SEALED_PREFIX: &str = "v1.";

/// The length of a key in bytes.
pub const KEY_LEN: usize = 32;

const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// Hex characters of a key id (the first 4 bytes of a hash of the key).
const KEY_ID_LEN: usize = 8;

/// One 32-byte key and its id. `Debug` shows the id only.
#[derive(Clone)]
pub struct SealingKey {
    id: String,
    cipher: XChaCha20Poly1305,
    /// The key of [`SealingKey::digest`], derived from the bytes apart from the cipher's.
    digest_key: [u8; KEY_LEN],
}

impl SealingKey {
    /// The key of these 32 bytes. Its id is derived from the bytes (the first 4 bytes of a
    /// domain-separated SHA-256, in hex), so the same key file always has the same id and
    /// the id reveals nothing usable about the key.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> SealingKey {
        let digest = Sha256::new()
            .chain_update(b"payments sealing key id\0")
            .chain_update(bytes)
            .finalize();
        let digest_key = Sha256::new()
            .chain_update(b"payments requisite digest key\0")
            .chain_update(bytes)
            .finalize();
        SealingKey {
            id: hex::encode(&digest[..KEY_ID_LEN / 2]),
            cipher: XChaCha20Poly1305::new(&bytes.into()),
            digest_key: digest_key.into(),
        }
    }

    /// A new random key's bytes (what a key file holds).
    pub fn generate_bytes(rng: &dyn RandomSource) -> [u8; KEY_LEN] {
        crate::random::bytes(rng)
    }

    /// The key id written into every string this key seals (8 lowercase hex characters).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The keyed digest of `text` under this key: `<key id>.<base64url of HMAC-SHA256>`, with
    /// a key derived from this key's bytes apart from the one that seals. The same text always
    /// has the same digest under one key, so a store finds a value by it (a requisite's full
    /// number) without holding the value in clear; without the key file the digest does not
    /// tell which of the few billion card numbers of a bank it is.
    pub fn digest(&self, text: &str) -> String {
        use hmac::{Hmac, Mac};
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.digest_key)
            .expect("HMAC takes a key of any length");
        mac.update(text.as_bytes());
        format!(
            "{}.{}",
            self.id,
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        )
    }
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealingKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Why a value could not be sealed or opened. The messages name key ids, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// No current key is configured, so nothing can be sealed.
    #[error("no sealing key is configured")]
    NoKey,
    /// The value is not a `v1.` sealed string.
    #[error("not a sealed value")]
    NotSealed,
    /// The value was sealed with a key that is not configured (a database without its key
    /// file, or a previous key that was dropped before re-sealing).
    #[error("sealed with key {0}, which is not configured (is the key file the database's?)")]
    UnknownKey(String),
    /// The value does not open under its key: tampered with, truncated, or moved to another
    /// context.
    #[error("sealed value does not open under key {0}: altered or not this record's")]
    Corrupt(String),
}

/// A node's keys that are not the database's: the database records the id of the key its
/// values are sealed with ([`crate::settings::SEALING_KEY`]), and this node's current key is
/// another one, not even among its previous keys (two nodes that each created a key file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this node's sealing key is {current}, but the database's secrets and requisites are sealed \
     with key {recorded}, which this node does not have"
)]
pub struct KeyMismatch {
    /// The id recorded in the database.
    pub recorded: String,
    /// This node's current key id.
    pub current: String,
}

/// The keys of a service: one current key (seals) and previous keys (still open). The
/// default has no key at all: values are stored as given, which suits tests and in-memory
/// stores; a server over a database configures keys (see `payments-http`).
#[derive(Clone, Default)]
pub struct SealingKeys {
    current: Option<Arc<SealingKey>>,
    previous: Vec<Arc<SealingKey>>,
}

impl SealingKeys {
    /// No keys: [`SealingKeys::seal`] is refused and values are stored in plaintext by the
    /// service (the behaviour before sealing existed).
    pub fn none() -> SealingKeys {
        SealingKeys::default()
    }

    /// `current` seals and opens; each of `previous` only opens.
    pub fn new(current: SealingKey, previous: Vec<SealingKey>) -> SealingKeys {
        SealingKeys {
            current: Some(Arc::new(current)),
            previous: previous.into_iter().map(Arc::new).collect(),
        }
    }

    /// Whether a current key is configured.
    pub fn is_configured(&self) -> bool {
        self.current.is_some()
    }

    /// The current key's id.
    pub fn current_id(&self) -> Option<&str> {
        self.current.as_deref().map(SealingKey::id)
    }

    /// Whether the key with id `id` is among these keys (current or previous): what it sealed
    /// opens.
    pub fn opens_with(&self, id: &str) -> bool {
        self.current
            .iter()
            .chain(&self.previous)
            .any(|k| k.id() == id)
    }

    /// The [digest](SealingKey::digest) of `text` under the current key (what a write stores);
    /// `None` without one.
    pub fn digest(&self, text: &str) -> Option<String> {
        self.current.as_deref().map(|k| k.digest(text))
    }

    /// The [digests](SealingKey::digest) of `text` under every key, the current one first, and
    /// the ids of those keys (what a search compares: a value digested under a previous key is
    /// found until it is digested again under the current one). Empty without keys.
    pub fn digests(&self, text: &str) -> Vec<(String, String)> {
        self.current
            .iter()
            .chain(&self.previous)
            .map(|k| (k.id().to_string(), k.digest(text)))
            .collect()
    }

    /// Whether `stored` looks like a sealed string (it may still fail to open).
    pub fn is_sealed(stored: &str) -> bool {
        stored.starts_with(SEALED_PREFIX)
    }

    /// The id of the key that sealed `stored`; `None` for plaintext (or a malformed value).
    pub fn sealed_with(stored: &str) -> Option<&str> {
        split(stored).map(|(id, _)| id)
    }

    /// Whether `stored` is not sealed under the current key (plaintext, or a previous key),
    /// i.e. a re-seal would change it. Always `false` without a current key.
    pub fn needs_reseal(&self, stored: &str) -> bool {
        match self.current_id() {
            None => false,
            Some(id) => !matches!(split(stored), Some((k, _)) if k == id),
        }
    }

    /// `plaintext` sealed under the current key for `context`, with a fresh random nonce.
    pub fn seal(
        &self,
        plaintext: &str,
        context: &str,
        rng: &dyn RandomSource,
    ) -> Result<String, SealError> {
        let key = self.current.as_deref().ok_or(SealError::NoKey)?;
        let payload = encrypt(
            key,
            plaintext.as_bytes(),
            &additional_data(key.id(), context),
            rng,
        );
        Ok(format!(
            "{SEALED_PREFIX}{}.{}",
            key.id(),
            URL_SAFE_NO_PAD.encode(payload)
        ))
    }

    /// The plaintext of a sealed string made for `context`, under whichever configured key
    /// its id names. Anything that is not a well-formed sealed string, or that was altered
    /// in any byte, is an error.
    pub fn open(&self, stored: &str, context: &str) -> Result<String, SealError> {
        let (id, payload) = split(stored).ok_or(SealError::NotSealed)?;
        let key = self.key(id)?;
        let corrupt = || SealError::Corrupt(id.to_string());
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| corrupt())?;
        let plaintext = decrypt(key, &payload, &additional_data(id, context))?;
        String::from_utf8(plaintext).map_err(|_| corrupt())
    }

    /// `plaintext` bytes (a file, say) sealed under the current key for `context`, as bytes:
    /// `v1.<keyid>.` followed by the raw nonce and ciphertext, with no base64 (a sealed value
    /// is 52 bytes longer than its plaintext). The additional data is not that of
    /// [`SealingKeys::seal`]: a sealed string's payload copied into a sealed byte value does not
    /// open, nor the other way round.
    pub fn seal_bytes(
        &self,
        plaintext: &[u8],
        context: &str,
        rng: &dyn RandomSource,
    ) -> Result<Vec<u8>, SealError> {
        let key = self.current.as_deref().ok_or(SealError::NoKey)?;
        let aad = additional_data_bytes(key.id(), context);
        let payload = encrypt(key, plaintext, &aad, rng);
        let mut out = Vec::with_capacity(SEALED_PREFIX.len() + KEY_ID_LEN + 1 + payload.len());
        out.extend_from_slice(SEALED_PREFIX.as_bytes());
        out.extend_from_slice(key.id().as_bytes());
        out.push(b'.');
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// The plaintext of bytes sealed by [`SealingKeys::seal_bytes`] for `context`, under
    /// whichever configured key their id names; anything else, or anything altered, is an
    /// error.
    pub fn open_bytes(&self, stored: &[u8], context: &str) -> Result<Vec<u8>, SealError> {
        let (id, payload) = split_bytes(stored).ok_or(SealError::NotSealed)?;
        decrypt(self.key(id)?, payload, &additional_data_bytes(id, context))
    }

    /// Whether `stored` bytes start like a value of [`SealingKeys::seal_bytes`] (they may
    /// still fail to open). A receipt checked by its content (a PDF, PNG or JPEG) never does.
    pub fn is_sealed_bytes(stored: &[u8]) -> bool {
        split_bytes(stored).is_some()
    }

    /// The configured key (current or previous) with id `id`.
    fn key(&self, id: &str) -> Result<&SealingKey, SealError> {
        self.current
            .iter()
            .chain(&self.previous)
            .find(|k| k.id() == id)
            .map(|k| k.as_ref())
            .ok_or_else(|| SealError::UnknownKey(id.to_string()))
    }
}

/// The nonce (fresh from `rng`) followed by the ciphertext of `plaintext` under `key`.
fn encrypt(key: &SealingKey, plaintext: &[u8], aad: &[u8], rng: &dyn RandomSource) -> Vec<u8> {
    let nonce: [u8; NONCE_LEN] = crate::random::bytes(rng);
    let ciphertext = key
        .cipher
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .expect("XChaCha20-Poly1305 seals any message shorter than 256 GiB");
    let mut payload = Vec::with_capacity(NONCE_LEN + ciphertext.len());
    payload.extend_from_slice(&nonce);
    payload.extend_from_slice(&ciphertext);
    payload
}

/// The plaintext of a payload of [`encrypt`] under `key`; anything altered is
/// [`SealError::Corrupt`].
fn decrypt(key: &SealingKey, payload: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
    let corrupt = || SealError::Corrupt(key.id().to_string());
    if payload.len() < NONCE_LEN + TAG_LEN {
        return Err(corrupt());
    }
    let (nonce, ciphertext) = payload.split_at(NONCE_LEN);
    let nonce: [u8; NONCE_LEN] = nonce.try_into().expect("split at the nonce length");
    key.cipher
        .decrypt(
            &XNonce::from(nonce),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .map_err(|_| corrupt())
}

impl fmt::Debug for SealingKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealingKeys")
            .field("current", &self.current_id())
            .field(
                "previous",
                &self.previous.iter().map(|k| k.id()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// What a re-seal of the callback secrets did (`payments-directory`'s
/// `Directory::reseal_callback_secrets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResealReport {
    /// The id of the key everything is now sealed with.
    pub key_id: String,
    /// Secrets re-sealed (plaintext or under a previous key before).
    pub resealed: usize,
    /// Secrets already sealed with the current key.
    pub current: usize,
}

/// `(key id, payload)` of a well-formed `v1.<keyid>.<payload>`.
fn split(stored: &str) -> Option<(&str, &str)> {
    let rest = stored.strip_prefix(SEALED_PREFIX)?;
    let (id, payload) = rest.split_once('.')?;
    let well_formed_id =
        id.len() == KEY_ID_LEN && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    well_formed_id.then_some((id, payload))
}

/// `(key id, payload)` of well-formed bytes `v1.<keyid>.<payload>`.
fn split_bytes(stored: &[u8]) -> Option<(&str, &[u8])> {
    let rest = stored.strip_prefix(SEALED_PREFIX.as_bytes())?;
    if rest.len() <= KEY_ID_LEN || rest[KEY_ID_LEN] != b'.' {
        return None;
    }
    let (id, payload) = (&rest[..KEY_ID_LEN], &rest[KEY_ID_LEN + 1..]);
    if !id.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    Some((std::str::from_utf8(id).ok()?, payload))
}

/// The additional data of [`SealingKeys::seal_bytes`]: [`additional_data`]'s, under another
/// format name.
fn additional_data_bytes(key_id: &str, context: &str) -> Vec<u8> {
    let mut aad = b"bytes\0".to_vec();
    aad.extend(additional_data(key_id, context));
    aad
}

/// The additional data: the format, the key id and the context, each length-delimited.
fn additional_data(key_id: &str, context: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(32 + context.len());
    aad.extend_from_slice(b"payments sealed v1\0");
    aad.extend_from_slice(key_id.as_bytes());
    aad.push(0);
    aad.extend_from_slice(context.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A digest is the same for the same text under one key, another under another key or for
    /// another text, names its key, and is what the keys' current key makes; every key's
    /// digest is offered to a search, the current one first; no key, no digest.
    #[test]
    fn a_digest_is_keyed_stable_and_names_its_key() {
        let a = SealingKey::from_bytes([1; 32]);
        let b = SealingKey::from_bytes([2; 32]);
        let card = "2200123456784242";
        assert_eq!(a.digest(card), a.digest(card));
        assert_ne!(a.digest(card), b.digest(card));
        assert_ne!(a.digest(card), a.digest("2200123456784243"));
        let digest = a.digest(card);
        assert!(digest.starts_with(&format!("{}.", a.id())), "{digest}");
        assert_eq!(digest.len(), 8 + 1 + 43, "{digest}");
        let keys = SealingKeys::new(b.clone(), vec![a.clone()]);
        assert_eq!(keys.digest(card), Some(b.digest(card)));
        assert_eq!(
            keys.digests(card),
            vec![
                (b.id().to_string(), b.digest(card)),
                (a.id().to_string(), a.digest(card))
            ]
        );
        assert_eq!(SealingKeys::none().digest(card), None);
        assert!(SealingKeys::none().digests(card).is_empty());
    }
    use crate::random::Fixed;

    fn keys(n: u8) -> SealingKeys {
        SealingKeys::new(SealingKey::from_bytes([n; KEY_LEN]), Vec::new())
    }

    #[test]
    fn the_format_names_the_key_and_hides_the_value() {
        let keys = keys(7);
        let sealed = keys.seal("whsec_PLAIN", "ctx", &Fixed(3)).unwrap();
        let id = keys.current_id().unwrap();
        assert_eq!(id.len(), 8);
        assert!(sealed.starts_with(&format!("v1.{id}.")), "{sealed}");
        assert!(!sealed.contains("PLAIN"));
        // nonce (24) + plaintext (11) + tag (16) = 51 bytes = 68 base64 characters.
        assert_eq!(sealed.len(), "v1.".len() + 8 + 1 + 68);
        assert!(!format!("{keys:?}").contains("7, 7"), "{keys:?}");
        assert_eq!(
            format!("{keys:?}"),
            format!("SealingKeys {{ current: Some({id:?}), previous: [] }}")
        );
    }

    #[test]
    fn refusals() {
        let a = keys(1);
        assert_eq!(
            SealingKeys::none().seal("x", "c", &Fixed(0)),
            Err(SealError::NoKey)
        );
        assert_eq!(a.open("whsec_abc", "c"), Err(SealError::NotSealed));
        assert_eq!(a.open("v1.zz.abc", "c"), Err(SealError::NotSealed));
        let sealed = a.seal("whsec_abc", "c", &Fixed(0)).unwrap();
        let other = keys(2);
        assert_eq!(
            other.open(&sealed, "c"),
            Err(SealError::UnknownKey(a.current_id().unwrap().into()))
        );
        assert_eq!(
            SealingKeys::none().open(&sealed, "c").unwrap_err(),
            SealError::UnknownKey(a.current_id().unwrap().into())
        );
        assert!(matches!(a.open(&sealed, "d"), Err(SealError::Corrupt(_))));
        let truncated = &sealed[..sealed.len() - 4];
        assert!(matches!(a.open(truncated, "c"), Err(SealError::Corrupt(_))));
        assert!(!SealingKeys::none().needs_reseal("whsec_abc"));
        assert!(a.needs_reseal("whsec_abc"));
        assert!(!a.needs_reseal(&sealed));
        assert!(other.needs_reseal(&sealed));
    }

    #[test]
    fn fresh_nonces_make_each_seal_different() {
        struct Counter(std::sync::atomic::AtomicU8);
        impl RandomSource for Counter {
            fn fill(&self, buf: &mut [u8]) {
                buf.fill(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            }
        }
        let rng = Counter(Default::default());
        let k = keys(1);
        let (x, y) = (
            k.seal("s", "c", &rng).unwrap(),
            k.seal("s", "c", &rng).unwrap(),
        );
        assert_ne!(x, y);
        assert_eq!(k.open(&x, "c").unwrap(), k.open(&y, "c").unwrap());
    }

    #[test]
    fn bytes_seal_without_base64_and_open_only_in_their_context() {
        let (a, b) = (keys(1), keys(2));
        let receipt = b"%PDF-1.7 \x00\xff binary".to_vec();
        let sealed = a
            .seal_bytes(&receipt, "appeal:1:receipt:0", &Fixed(5))
            .unwrap();
        let id = a.current_id().unwrap();
        assert!(sealed.starts_with(format!("v1.{id}.").as_bytes()));
        // The header (12), the nonce (24) and the tag (16) around the ciphertext.
        assert_eq!(sealed.len(), receipt.len() + 12 + NONCE_LEN + TAG_LEN);
        assert!(
            !sealed.windows(4).any(|w| w == b"%PDF"),
            "the plaintext is hidden"
        );
        assert!(SealingKeys::is_sealed_bytes(&sealed));
        assert!(!SealingKeys::is_sealed_bytes(&receipt));
        assert!(!SealingKeys::is_sealed_bytes(b"v1.zz.abc"));
        assert_eq!(
            a.open_bytes(&sealed, "appeal:1:receipt:0").unwrap(),
            receipt
        );
        assert!(matches!(
            a.open_bytes(&sealed, "appeal:1:receipt:1"),
            Err(SealError::Corrupt(_))
        ));
        assert_eq!(
            b.open_bytes(&sealed, "appeal:1:receipt:0"),
            Err(SealError::UnknownKey(id.into()))
        );
        assert_eq!(a.open_bytes(&receipt, "c"), Err(SealError::NotSealed));
        assert_eq!(
            SealingKeys::none().seal_bytes(&receipt, "c", &Fixed(0)),
            Err(SealError::NoKey)
        );
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(a.open_bytes(&tampered, "appeal:1:receipt:0").is_err());
        assert!(a.open_bytes(&sealed[..30], "appeal:1:receipt:0").is_err());
        // A sealed string's payload is not a sealed byte value of the same context.
        let string = a.seal("%PDF-1.7", "ctx", &Fixed(5)).unwrap();
        let (_, payload) = split(&string).unwrap();
        let mut moved = format!("v1.{id}.").into_bytes();
        moved.extend(URL_SAFE_NO_PAD.decode(payload).unwrap());
        assert!(matches!(
            a.open_bytes(&moved, "ctx"),
            Err(SealError::Corrupt(_))
        ));
        // The empty value seals too.
        let empty = a.seal_bytes(&[], "c", &Fixed(1)).unwrap();
        assert_eq!(a.open_bytes(&empty, "c").unwrap(), Vec::<u8>::new());
    }

    proptest! {
        #[test]
        fn open_inverts_seal(
            value in ".{0,80}",
            context in "[a-z0-9-]{0,40}",
            key in any::<[u8; 32]>(),
            nonce in any::<u8>(),
        ) {
            let keys = SealingKeys::new(SealingKey::from_bytes(key), Vec::new());
            let sealed = keys.seal(&value, &context, &Fixed(nonce)).unwrap();
            prop_assert_eq!(keys.open(&sealed, &context).unwrap(), value);
        }

        /// Changing any one character of a sealed string (to any other printable ASCII
        /// character) makes it fail to open.
        #[test]
        fn tampering_with_any_byte_fails(
            value in "whsec_[A-Za-z0-9+/]{0,44}",
            key in any::<[u8; 32]>(),
            replacement in 0x21u8..0x7f,
        ) {
            let keys = SealingKeys::new(SealingKey::from_bytes(key), Vec::new());
            let sealed = keys.seal(&value, "ctx", &Fixed(9)).unwrap();
            for i in 0..sealed.len() {
                let mut bytes = sealed.clone().into_bytes();
                if bytes[i] == replacement {
                    continue;
                }
                bytes[i] = replacement;
                let tampered = String::from_utf8(bytes).unwrap();
                prop_assert!(keys.open(&tampered, "ctx").is_err(), "{} opened", tampered);
            }
        }
    }
}
