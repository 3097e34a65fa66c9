//! What a payment appeal's receipt may be: PDF, PNG or JPEG, found by its content.
//! (Interim: the full checks land with the receipt module's own commit.)

use sha2::{Digest, Sha256};

/// The kinds of receipt accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptKind {
    /// `application/pdf`.
    Pdf,
    /// `image/png`.
    Png,
    /// `image/jpeg`.
    Jpeg,
}

impl ReceiptKind {
    /// The media type.
    pub fn content_type(self) -> &'static str {
        match self {
            ReceiptKind::Pdf => "application/pdf",
            ReceiptKind::Png => "image/png",
            ReceiptKind::Jpeg => "image/jpeg",
        }
    }

    /// The kind of a media type.
    pub fn from_content_type(s: &str) -> Option<ReceiptKind> {
        match s.to_ascii_lowercase().as_str() {
            "application/pdf" => Some(ReceiptKind::Pdf),
            "image/png" => Some(ReceiptKind::Png),
            "image/jpeg" | "image/jpg" => Some(ReceiptKind::Jpeg),
            _ => None,
        }
    }

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptKind::Pdf => "pdf",
            ReceiptKind::Png => "png",
            ReceiptKind::Jpeg => "jpeg",
        }
    }

    /// The inverse of [`as_str`](Self::as_str).
    pub fn parse(s: &str) -> Option<ReceiptKind> {
        [ReceiptKind::Pdf, ReceiptKind::Png, ReceiptKind::Jpeg]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// The largest receipt, in bytes (2 MiB).
pub const MAX_RECEIPT_BYTES: usize = 2 * 1024 * 1024;
/// The most pixels an image receipt may declare.
pub const MAX_RECEIPT_PIXELS: u64 = 40_000_000;
/// The most receipts one appeal carries.
pub const MAX_RECEIPTS: usize = 2;

/// A checked receipt: its kind (found in its content) and its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Receipt {
    kind: ReceiptKind,
    bytes: Vec<u8>,
}

impl std::fmt::Debug for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receipt")
            .field("kind", &self.kind)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// Why a receipt is refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// No bytes.
    #[error("the receipt is empty")]
    Empty,
    /// Over [`MAX_RECEIPT_BYTES`].
    #[error("the receipt has {size} bytes; at most 2 MiB is accepted")]
    TooLarge {
        /// Its size.
        size: usize,
    },
    /// Not a PDF, PNG or JPEG by its content.
    #[error("the receipt is not a PDF, PNG or JPEG file")]
    UnknownContent,
    /// The content is another kind than declared.
    #[error("the receipt was declared {declared:?} but its content is {found:?}")]
    Mismatch {
        /// Declared.
        declared: ReceiptKind,
        /// Found.
        found: ReceiptKind,
    },
}

impl Receipt {
    /// Checks `bytes` against what the sender declared.
    pub fn check(declared: Option<ReceiptKind>, bytes: Vec<u8>) -> Result<Receipt, ReceiptError> {
        if bytes.is_empty() {
            return Err(ReceiptError::Empty);
        }
        if bytes.len() > MAX_RECEIPT_BYTES {
            return Err(ReceiptError::TooLarge { size: bytes.len() });
        }
        let found = if bytes.starts_with(b"%PDF-") {
            ReceiptKind::Pdf
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            ReceiptKind::Png
        } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
            ReceiptKind::Jpeg
        } else {
            return Err(ReceiptError::UnknownContent);
        };
        match declared {
            Some(d) if d != found => Err(ReceiptError::Mismatch { declared: d, found }),
            _ => Ok(Receipt { kind: found, bytes }),
        }
    }

    /// A receipt read back from storage, checked when it was stored.
    pub fn from_stored(kind: ReceiptKind, bytes: Vec<u8>) -> Receipt {
        Receipt { kind, bytes }
    }

    /// Its kind.
    pub fn kind(&self) -> ReceiptKind {
        self.kind
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it has no bytes (never, once checked).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The SHA-256 of its bytes.
    pub fn sha256(&self) -> [u8; 32] {
        Sha256::digest(&self.bytes).into()
    }

    /// Its bytes, taken.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}
