//! What a payment appeal's receipt may be: the evidence of a bank transfer that a merchant or
//! payer uploads, as a PDF document, a PNG image or a JPEG image.
//!
//! The kind is read from the content (its first bytes), never from a file name; a declared
//! content type must agree with it. Each kind is then checked as far as it can be without
//! decoding: a PDF ends with `%%EOF`, a PNG's chunks are whole with correct CRCs up to `IEND`,
//! a JPEG has a frame header. An image's declared size is bounded ([`MAX_RECEIPT_PIXELS`],
//! [`MAX_RECEIPT_SIDE`]), so that a few kilobytes declaring 100,000 x 100,000 pixels (a
//! decompression bomb) never reach a decoder. A receipt is at most [`MAX_RECEIPT_BYTES`], and
//! that is checked before anything else. Nothing here renders, decodes or re-encodes a file:
//! a receipt that passes is well formed as far as its structure goes, and kept byte for byte.
//!
//! ```
//! use payments_core::receipt::{Receipt, ReceiptError, ReceiptKind};
//!
//! let pdf = b"%PDF-1.7\n1 0 obj\n<< >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n".to_vec();
//! let receipt = Receipt::check(Some(ReceiptKind::Pdf), pdf)?;
//! assert_eq!(receipt.kind().content_type(), "application/pdf");
//!
//! let html = b"<!doctype html><p>paid</p>".to_vec();
//! assert_eq!(
//!     Receipt::check(Some(ReceiptKind::Png), html),
//!     Err(ReceiptError::UnknownContent)
//! );
//! # Ok::<(), ReceiptError>(())
//! ```

use std::fmt;

use sha2::{Digest, Sha256};

/// The largest receipt, in bytes (2 MiB).
pub const MAX_RECEIPT_BYTES: usize = 2 * 1024 * 1024;

/// The most pixels an image receipt may declare (width x height): 40 million.
pub const MAX_RECEIPT_PIXELS: u64 = 40_000_000;

/// The longest side, in pixels, an image receipt may declare: 20,000.
pub const MAX_RECEIPT_SIDE: u32 = 20_000;

/// The most receipts one appeal carries.
pub const MAX_RECEIPTS: usize = 2;

/// How far from its end a PDF's `%%EOF` may be, in bytes.
const PDF_EOF_WINDOW: usize = 1024;

/// The eight bytes every PNG file starts with.
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// A JPEG's start-of-image marker and the first byte of the marker after it.
const JPEG_START: [u8; 3] = [0xFF, 0xD8, 0xFF];

/// The kinds of receipt accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptKind {
    /// A PDF document (`application/pdf`).
    Pdf,
    /// A PNG image (`image/png`).
    Png,
    /// A JPEG image (`image/jpeg`).
    Jpeg,
}

impl ReceiptKind {
    /// The media type a receipt of this kind is served with: `application/pdf`, `image/png`
    /// or `image/jpeg`.
    pub fn content_type(self) -> &'static str {
        match self {
            ReceiptKind::Pdf => "application/pdf",
            ReceiptKind::Png => "image/png",
            ReceiptKind::Jpeg => "image/jpeg",
        }
    }

    /// The kind a declared content type names: one of [`ReceiptKind::content_type`]'s, or the
    /// common misspelling `image/jpg`, compared without regard to case; nothing else (no
    /// parameters, no spaces).
    pub fn from_content_type(s: &str) -> Option<ReceiptKind> {
        [
            ("application/pdf", ReceiptKind::Pdf),
            ("image/png", ReceiptKind::Png),
            ("image/jpeg", ReceiptKind::Jpeg),
            ("image/jpg", ReceiptKind::Jpeg),
        ]
        .into_iter()
        .find(|(name, _)| s.eq_ignore_ascii_case(name))
        .map(|(_, kind)| kind)
    }

    /// The kind's name, as in JSON and in storage: `pdf`, `png` or `jpeg`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptKind::Pdf => "pdf",
            ReceiptKind::Png => "png",
            ReceiptKind::Jpeg => "jpeg",
        }
    }

    /// The kind named `s` by [`ReceiptKind::as_str`] (exactly, in lower case).
    pub fn parse(s: &str) -> Option<ReceiptKind> {
        match s {
            "pdf" => Some(ReceiptKind::Pdf),
            "png" => Some(ReceiptKind::Png),
            "jpeg" => Some(ReceiptKind::Jpeg),
            _ => None,
        }
    }

    /// The kind `bytes` are by their first bytes, if any.
    fn sniff(bytes: &[u8]) -> Option<ReceiptKind> {
        if bytes.starts_with(b"%PDF-1.") || bytes.starts_with(b"%PDF-2.") {
            Some(ReceiptKind::Pdf)
        } else if bytes.starts_with(&PNG_SIGNATURE) {
            Some(ReceiptKind::Png)
        } else if bytes.starts_with(&JPEG_START) {
            Some(ReceiptKind::Jpeg)
        } else {
            None
        }
    }

    /// The kind as an error message names it.
    fn label(self) -> &'static str {
        match self {
            ReceiptKind::Pdf => "PDF",
            ReceiptKind::Png => "PNG",
            ReceiptKind::Jpeg => "JPEG",
        }
    }
}

/// A checked receipt: its kind (found in its content) and its bytes.
///
/// Only [`Receipt::check`] makes one from untrusted bytes; [`Receipt::from_stored`] is for
/// the bytes a store kept of a receipt checked before. `Debug` shows the kind and the length,
/// never the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Receipt {
    kind: ReceiptKind,
    bytes: Vec<u8>,
}

impl Receipt {
    /// Checks `bytes` against what the sender declared (`declared`: the content type, or None
    /// to take the kind found).
    ///
    /// In this order: not empty, at most [`MAX_RECEIPT_BYTES`] (before any byte is read), a
    /// PDF, PNG or JPEG by its first bytes, the kind declared if one was, then the kind's own
    /// structure and, for an image, its declared size.
    pub fn check(declared: Option<ReceiptKind>, bytes: Vec<u8>) -> Result<Receipt, ReceiptError> {
        if bytes.is_empty() {
            return Err(ReceiptError::Empty);
        }
        if bytes.len() > MAX_RECEIPT_BYTES {
            return Err(ReceiptError::TooLarge { size: bytes.len() });
        }
        let found = ReceiptKind::sniff(&bytes).ok_or(ReceiptError::UnknownContent)?;
        if let Some(declared) = declared {
            if declared != found {
                return Err(ReceiptError::Mismatch { declared, found });
            }
        }
        match found {
            ReceiptKind::Pdf => check_pdf(&bytes)?,
            ReceiptKind::Png => check_png(&bytes)?,
            ReceiptKind::Jpeg => check_jpeg(&bytes)?,
        }
        debug_assert!(!bytes.is_empty() && bytes.len() <= MAX_RECEIPT_BYTES);
        debug_assert_eq!(ReceiptKind::sniff(&bytes), Some(found));
        Ok(Receipt { kind: found, bytes })
    }

    /// A receipt read back from storage, already checked when it was stored (no check
    /// repeated; used by stores).
    pub fn from_stored(kind: ReceiptKind, bytes: Vec<u8>) -> Receipt {
        Receipt { kind, bytes }
    }

    /// The receipt's kind, as found in its content.
    pub fn kind(&self) -> ReceiptKind {
        self.kind
    }

    /// The receipt's bytes, as uploaded.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The receipt's length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the receipt has no bytes: never for a checked one ([`ReceiptError::Empty`]).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The SHA-256 digest of the receipt's bytes.
    pub fn sha256(&self) -> [u8; 32] {
        Sha256::digest(&self.bytes).into()
    }

    /// The receipt's bytes, taken.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receipt")
            .field("kind", &self.kind)
            .field("len", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

/// Why a receipt is refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// No bytes at all.
    #[error("the receipt is empty")]
    Empty,
    /// Over [`MAX_RECEIPT_BYTES`].
    #[error("the receipt is {size} bytes, over the limit of {max} bytes (2 MiB)", max = MAX_RECEIPT_BYTES)]
    TooLarge {
        /// The receipt's length in bytes.
        size: usize,
    },
    /// Neither a PDF, a PNG nor a JPEG by its first bytes (an HTML page, say), whatever its
    /// name or declared type.
    #[error(
        "the receipt is neither a PDF, a PNG nor a JPEG file: its first bytes are none of theirs"
    )]
    UnknownContent,
    /// The content is of another kind than the one declared.
    #[error("the receipt was declared as {} but its content is {}", .declared.label(), .found.label())]
    Mismatch {
        /// The kind the sender declared.
        declared: ReceiptKind,
        /// The kind the content is.
        found: ReceiptKind,
    },
    /// Of a known kind by its first bytes, but not well formed: truncated, a missing part, a
    /// corrupt checksum.
    #[error("the receipt is not a well-formed {}: {why}", .kind.label())]
    Malformed {
        /// The kind the content is.
        kind: ReceiptKind,
        /// What is wrong, for a person.
        why: &'static str,
    },
    /// An image declaring more than [`MAX_RECEIPT_PIXELS`] pixels, or a side longer than
    /// [`MAX_RECEIPT_SIDE`].
    #[error(
        "the receipt's image declares {width} x {height} pixels: at most {pixels} pixels and \
         {side} on a side are accepted",
        pixels = MAX_RECEIPT_PIXELS,
        side = MAX_RECEIPT_SIDE
    )]
    TooManyPixels {
        /// The width the image declares.
        width: u32,
        /// The height the image declares.
        height: u32,
    },
}

/// A PDF has `%%EOF` within its last [`PDF_EOF_WINDOW`] bytes (a truncated upload has not).
fn check_pdf(bytes: &[u8]) -> Result<(), ReceiptError> {
    let tail = &bytes[bytes.len().saturating_sub(PDF_EOF_WINDOW)..];
    if tail.windows(5).any(|w| w == b"%%EOF") {
        Ok(())
    } else {
        Err(ReceiptError::Malformed {
            kind: ReceiptKind::Pdf,
            why: "no %%EOF in its last 1,024 bytes (cut short?)",
        })
    }
}

/// Whether an image of `width` x `height` pixels is within the bounds.
fn check_pixels(width: u32, height: u32) -> Result<(), ReceiptError> {
    let pixels = u64::from(width) * u64::from(height);
    if width > MAX_RECEIPT_SIDE || height > MAX_RECEIPT_SIDE || pixels > MAX_RECEIPT_PIXELS {
        Err(ReceiptError::TooManyPixels { width, height })
    } else {
        Ok(())
    }
}

fn png_malformed(why: &'static str) -> ReceiptError {
    ReceiptError::Malformed {
        kind: ReceiptKind::Png,
        why,
    }
}

/// A PNG after its signature: `IHDR` first (13 bytes, a size within the bounds), then whole
/// chunks with correct CRCs up to `IEND`, with image data (`IDAT`) before it. Bytes after
/// `IEND` are left alone, as decoders leave them.
fn check_png(bytes: &[u8]) -> Result<(), ReceiptError> {
    if bytes.len() == PNG_SIGNATURE.len() {
        return Err(png_malformed(
            "the file ends after the signature, without an IHDR chunk",
        ));
    }
    let header = png_chunk(bytes, PNG_SIGNATURE.len())?;
    if &header.kind != b"IHDR" || header.data.len() != 13 {
        return Err(png_malformed("the first chunk is not a 13-byte IHDR"));
    }
    let (width, height) = match (be_u32(header.data, 0), be_u32(header.data, 4)) {
        (Some(w), Some(h)) if w > 0 && h > 0 => (w, h),
        _ => return Err(png_malformed("IHDR declares a zero width or height")),
    };
    check_pixels(width, height)?;
    let mut at = header.next;
    let mut image_data = false;
    loop {
        if at == bytes.len() {
            return Err(png_malformed(
                "the file ends without an IEND chunk (cut short?)",
            ));
        }
        let chunk = png_chunk(bytes, at)?;
        match &chunk.kind {
            b"IEND" if !chunk.data.is_empty() => {
                return Err(png_malformed("the IEND chunk is not empty"))
            }
            b"IEND" if !image_data => return Err(png_malformed("no image data (IDAT chunk)")),
            b"IEND" => return Ok(()),
            b"IDAT" => image_data = true,
            b"IHDR" => return Err(png_malformed("a second IHDR chunk")),
            _ => {}
        }
        debug_assert!(chunk.next > at, "each chunk is at least 12 bytes");
        at = chunk.next;
    }
}

/// One PNG chunk, its CRC checked.
struct PngChunk<'a> {
    kind: [u8; 4],
    data: &'a [u8],
    /// Where the next chunk starts.
    next: usize,
}

/// The chunk at `at`: length (4 bytes, big-endian, at most 2^31 - 1), type (4 ASCII letters),
/// data, and the CRC-32 of type and data (4 bytes).
fn png_chunk(bytes: &[u8], at: usize) -> Result<PngChunk<'_>, ReceiptError> {
    let (Some(length), Some(kind)) = (be_u32(bytes, at), be_u32(bytes, at + 4)) else {
        return Err(png_malformed(
            "the file ends inside a chunk's length or type",
        ));
    };
    if length > 0x7FFF_FFFF {
        return Err(png_malformed("a chunk's length is over 2^31 - 1"));
    }
    let kind = kind.to_be_bytes();
    if !kind.iter().all(u8::is_ascii_alphabetic) {
        return Err(png_malformed("a chunk's type is not four ASCII letters"));
    }
    let data_start = at + 8;
    let crc_at = usize::try_from(length)
        .ok()
        .and_then(|length| data_start.checked_add(length));
    let (Some(crc_at), Some(crc)) = (crc_at, crc_at.and_then(|crc_at| be_u32(bytes, crc_at)))
    else {
        return Err(png_malformed(
            "a chunk runs past the end of the file (cut short?)",
        ));
    };
    let (Some(data), Some(typed)) = (bytes.get(data_start..crc_at), bytes.get(at + 4..crc_at))
    else {
        return Err(png_malformed(
            "a chunk runs past the end of the file (cut short?)",
        ));
    };
    if crc32(typed) != crc {
        return Err(png_malformed(
            "a chunk's CRC does not match its contents (corrupt file?)",
        ));
    }
    Ok(PngChunk {
        kind,
        data,
        next: crc_at + 4,
    })
}

fn jpeg_malformed(why: &'static str) -> ReceiptError {
    ReceiptError::Malformed {
        kind: ReceiptKind::Jpeg,
        why,
    }
}

/// A JPEG: a frame header (SOFn) found by walking the segments after the start of image, its
/// size non-zero and within the bounds. The scans after it are not read.
fn check_jpeg(bytes: &[u8]) -> Result<(), ReceiptError> {
    let (width, height) = jpeg_frame_size(bytes)?;
    if width == 0 || height == 0 {
        return Err(jpeg_malformed(
            "the frame header declares a zero width or height (a height set later by a DNL \
             marker is not accepted)",
        ));
    }
    check_pixels(width, height)
}

/// Whether `marker` starts a frame header: SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC).
fn is_frame_header(marker: u8) -> bool {
    matches!(marker, 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF)
}

/// The width and height of the first frame header, walking the segments from after SOI: each
/// is a marker (0xFF, any 0xFF fill bytes, a code) and, but for the standalone markers, a
/// length that counts itself.
fn jpeg_frame_size(bytes: &[u8]) -> Result<(u32, u32), ReceiptError> {
    let mut at = 2;
    loop {
        match bytes.get(at) {
            None => {
                return Err(jpeg_malformed(
                    "no frame header (SOFn) before the end of the file",
                ))
            }
            Some(0xFF) => {}
            Some(_) => return Err(jpeg_malformed("a segment is not followed by a marker")),
        }
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let Some(&marker) = bytes.get(at) else {
            return Err(jpeg_malformed(
                "no frame header (SOFn) before the end of the file",
            ));
        };
        at += 1;
        match marker {
            0x01 | 0xD0..=0xD7 => continue,
            0x00 => return Err(jpeg_malformed("a stuffed 0xFF 0x00 where a marker belongs")),
            0xD8 => return Err(jpeg_malformed("a second start-of-image marker")),
            0xD9 => {
                return Err(jpeg_malformed(
                    "the image ends before a frame header (SOFn)",
                ))
            }
            0xDA => return Err(jpeg_malformed("a scan starts before a frame header (SOFn)")),
            _ => {}
        }
        let Some(length) = be_u16(bytes, at) else {
            return Err(jpeg_malformed("the file ends inside a segment's length"));
        };
        if length < 2 {
            return Err(jpeg_malformed("a segment's length is under 2"));
        }
        let end = at + usize::from(length);
        let Some(segment) = bytes.get(at + 2..end) else {
            return Err(jpeg_malformed(
                "a segment runs past the end of the file (cut short?)",
            ));
        };
        if is_frame_header(marker) {
            return jpeg_frame_dimensions(segment);
        }
        at = end;
    }
}

/// A frame header's width and height: after the length, precision (1 byte), height and width
/// (2 bytes each), the number of components (1 byte) and 3 bytes for each component.
fn jpeg_frame_dimensions(segment: &[u8]) -> Result<(u32, u32), ReceiptError> {
    let (Some(height), Some(width), Some(&components)) =
        (be_u16(segment, 1), be_u16(segment, 3), segment.get(5))
    else {
        return Err(jpeg_malformed("a frame header shorter than 8 bytes"));
    };
    if components == 0 || segment.len() != 6 + 3 * usize::from(components) {
        return Err(jpeg_malformed(
            "a frame header's length does not match its number of components",
        ));
    }
    Ok((u32::from(width), u32::from(height)))
}

/// The big-endian `u16` at `at`, if the bytes are there.
fn be_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// The big-endian `u32` at `at`, if the bytes are there.
fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

// CRC-32 (ISO 3309, the one PNG uses: reflected, polynomial 0xEDB88320, initial and final
// XOR 0xFFFFFFFF), table-driven. Written here rather than a dependency: no CRC crate
// (`crc32fast`) is in Cargo.lock, and it is these fifteen lines.
const CRC_TABLE: [u32; 256] = crc_table();

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
}

fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |c, &b| {
        CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8)
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const KINDS: [ReceiptKind; 3] = [ReceiptKind::Pdf, ReceiptKind::Png, ReceiptKind::Jpeg];

    /// A PNG file: the signature, then each `(type, data)` as a chunk with its length and CRC.
    fn png_of(chunks: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
        let mut out = PNG_SIGNATURE.to_vec();
        for (kind, data) in chunks {
            out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
            let typed_at = out.len();
            out.extend_from_slice(*kind);
            out.extend_from_slice(data);
            let crc = crc32(&out[typed_at..]);
            out.extend_from_slice(&crc.to_be_bytes());
        }
        out
    }

    /// IHDR data: `width` x `height`, 8-bit greyscale, deflate, no interlace.
    fn ihdr(width: u32, height: u32) -> Vec<u8> {
        let mut data = width.to_be_bytes().to_vec();
        data.extend_from_slice(&height.to_be_bytes());
        data.extend_from_slice(&[8, 0, 0, 0, 0]);
        data
    }

    /// The zlib stream of one 1x1 greyscale row: filter 0, one black pixel (a stored block).
    const IDAT_1X1: [u8; 13] = [
        0x78, 0x01, 0x01, 0x02, 0x00, 0xFD, 0xFF, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01,
    ];

    fn png_sized(width: u32, height: u32) -> Vec<u8> {
        png_of(&[
            (b"IHDR", &ihdr(width, height)),
            (b"IDAT", &IDAT_1X1),
            (b"IEND", &[]),
        ])
    }

    fn tiny_png() -> Vec<u8> {
        png_sized(1, 1)
    }

    /// A JPEG up to its first scan: SOI, APP0 (JFIF), a DHT whose bytes would read as a huge
    /// size were it taken for a frame header, SOF (`sof`, 3 components), SOS and EOI.
    fn jpeg_with(sof: u8, width: u16, height: u16) -> Vec<u8> {
        let mut out = vec![0xFF, 0xD8];
        out.extend_from_slice(&[0xFF, 0xE0, 0x00, 0x10]);
        out.extend_from_slice(b"JFIF\0\x01\x01\x00\x00\x01\x00\x01\x00\x00");
        out.extend_from_slice(&[0xFF, 0xC4, 0x00, 0x0B, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
        out.extend_from_slice(&[0x01, 0x11, 0x00]);
        out.extend_from_slice(&[0xFF, sof, 0x00, 0x11, 0x08]);
        out.extend_from_slice(&height.to_be_bytes());
        out.extend_from_slice(&width.to_be_bytes());
        out.extend_from_slice(&[0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01]);
        out.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00]);
        out.extend_from_slice(&[0x12, 0x34, 0xFF, 0x00, 0x56, 0xFF, 0xD9]);
        out
    }

    fn tiny_jpeg() -> Vec<u8> {
        jpeg_with(0xC0, 640, 480)
    }

    fn tiny_pdf() -> Vec<u8> {
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
            .to_vec()
    }

    fn malformed(kind: ReceiptKind, bytes: Vec<u8>) -> &'static str {
        match Receipt::check(Some(kind), bytes) {
            Err(ReceiptError::Malformed { kind: k, why }) if k == kind => why,
            other => panic!("expected a malformed {kind:?}, got {other:?}"),
        }
    }

    #[test]
    fn kind_names_and_content_types_round_trip() {
        for kind in KINDS {
            assert_eq!(ReceiptKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                ReceiptKind::from_content_type(kind.content_type()),
                Some(kind)
            );
            let upper = kind.content_type().to_ascii_uppercase();
            assert_eq!(ReceiptKind::from_content_type(&upper), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<ReceiptKind>(&json).unwrap(), kind);
        }
        assert_eq!(
            ReceiptKind::from_content_type("image/jpg"),
            Some(ReceiptKind::Jpeg)
        );
        assert_eq!(
            ReceiptKind::from_content_type("Image/JPG"),
            Some(ReceiptKind::Jpeg)
        );
        for refused in [
            "",
            "image/png ",
            "image/png; q=1",
            "text/html",
            "image/gif",
            "png",
        ] {
            assert_eq!(ReceiptKind::from_content_type(refused), None, "{refused:?}");
        }
        for refused in ["", "PNG", "jpg", "image/png", "pdf "] {
            assert_eq!(ReceiptKind::parse(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn crc32_has_the_standard_values() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        // Every PNG ends with the same IEND chunk: its CRC is AE 42 60 82.
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
        assert!(tiny_png().ends_with(&[0xAE, 0x42, 0x60, 0x82]));
    }

    #[test]
    fn a_tiny_png_is_accepted_with_or_without_a_declared_kind() {
        for declared in [None, Some(ReceiptKind::Png)] {
            let receipt = Receipt::check(declared, tiny_png()).unwrap();
            assert_eq!(receipt.kind(), ReceiptKind::Png);
            assert_eq!(receipt.bytes(), &tiny_png()[..]);
            assert_eq!(receipt.len(), tiny_png().len());
            assert!(!receipt.is_empty());
            assert_eq!(
                receipt.sha256(),
                <[u8; 32]>::from(Sha256::digest(tiny_png()))
            );
            assert_eq!(receipt.into_bytes(), tiny_png());
        }
        // Chunks other than IHDR, IDAT and IEND are walked over, and bytes after IEND left.
        let mut png = png_of(&[
            (b"IHDR", &ihdr(3, 2)),
            (b"tEXt", b"Comment\0bank receipt"),
            (b"IDAT", &IDAT_1X1[..6]),
            (b"IDAT", &IDAT_1X1[6..]),
            (b"IEND", &[]),
        ]);
        png.extend_from_slice(b"trailing");
        assert_eq!(Receipt::check(None, png).unwrap().kind(), ReceiptKind::Png);
    }

    #[test]
    fn a_minimal_jpeg_is_accepted_whatever_its_frame_header() {
        let receipt = Receipt::check(Some(ReceiptKind::Jpeg), tiny_jpeg()).unwrap();
        assert_eq!(
            (receipt.kind(), receipt.len()),
            (ReceiptKind::Jpeg, tiny_jpeg().len())
        );
        assert_eq!(
            Receipt::check(None, tiny_jpeg()).unwrap().kind(),
            ReceiptKind::Jpeg
        );
        for sof in [
            0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF,
        ] {
            assert!(
                Receipt::check(None, jpeg_with(sof, 1, 1)).is_ok(),
                "SOF {sof:02X}"
            );
        }
        // Fill bytes before a marker, a restart marker between segments.
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xFF, 0xFF, 0xD0];
        jpeg.extend_from_slice(&tiny_jpeg()[2..]);
        assert!(Receipt::check(None, jpeg).is_ok());
    }

    #[test]
    fn a_minimal_pdf_is_accepted() {
        let receipt = Receipt::check(Some(ReceiptKind::Pdf), tiny_pdf()).unwrap();
        assert_eq!(receipt.kind(), ReceiptKind::Pdf);
        let pdf2 = b"%PDF-2.0\n%\xE2\xE3\xCF\xD3\ntrailer\n<<>>\n%%EOF".to_vec();
        assert_eq!(Receipt::check(None, pdf2).unwrap().kind(), ReceiptKind::Pdf);
    }

    #[test]
    fn empty_is_refused_whatever_is_declared() {
        assert_eq!(Receipt::check(None, Vec::new()), Err(ReceiptError::Empty));
        for kind in KINDS {
            assert_eq!(
                Receipt::check(Some(kind), Vec::new()),
                Err(ReceiptError::Empty)
            );
        }
    }

    #[test]
    fn an_html_page_declared_as_png_is_unknown_content() {
        let html = b"<!doctype html><html><body><img src=x onerror=alert(1)></body></html>";
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Png), html.to_vec()),
            Err(ReceiptError::UnknownContent)
        );
        assert_eq!(
            Receipt::check(None, html.to_vec()),
            Err(ReceiptError::UnknownContent)
        );
        // Near misses of each signature.
        for near in [
            &b"%PDF-3.0\n%%EOF"[..],
            b"%pdf-1.4 %%EOF",
            &PNG_SIGNATURE[..7],
            b"\xFF\xD8",
        ] {
            assert_eq!(
                Receipt::check(None, near.to_vec()),
                Err(ReceiptError::UnknownContent)
            );
        }
    }

    #[test]
    fn fifty_megabytes_are_too_large_before_anything_is_read() {
        // A valid PNG's first bytes and a wrong declared kind: the size is refused first.
        let mut big = tiny_png();
        big.resize(50 * 1024 * 1024, 0);
        let size = big.len();
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Pdf), big),
            Err(ReceiptError::TooLarge { size })
        );
        // The limit itself is accepted, one byte over it is not.
        let mut pdf = b"%PDF-1.4\n".to_vec();
        pdf.resize(MAX_RECEIPT_BYTES - 6, b' ');
        pdf.extend_from_slice(b"%%EOF\n");
        assert_eq!(pdf.len(), MAX_RECEIPT_BYTES);
        assert!(Receipt::check(Some(ReceiptKind::Pdf), pdf.clone()).is_ok());
        pdf.push(b'\n');
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Pdf), pdf),
            Err(ReceiptError::TooLarge {
                size: MAX_RECEIPT_BYTES + 1
            })
        );
    }

    #[test]
    fn a_png_declaring_too_many_pixels_is_refused() {
        let bomb = png_sized(100_000, 100_000);
        assert!(bomb.len() < 100, "a few bytes declare ten billion pixels");
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Png), bomb),
            Err(ReceiptError::TooManyPixels {
                width: 100_000,
                height: 100_000
            })
        );
        for (width, height) in [
            (20_001, 1),
            (1, 20_001),
            (8_000, 5_001),
            (u32::MAX, u32::MAX),
        ] {
            assert_eq!(
                Receipt::check(None, png_sized(width, height)),
                Err(ReceiptError::TooManyPixels { width, height }),
                "{width} x {height}"
            );
        }
        for (width, height) in [(8_000, 5_000), (20_000, 2_000), (20_000, 1)] {
            assert!(
                Receipt::check(None, png_sized(width, height)).is_ok(),
                "{width} x {height}"
            );
        }
    }

    #[test]
    fn a_png_with_a_bad_crc_is_refused() {
        let good = tiny_png();
        let idat_data = PNG_SIGNATURE.len() + 25 + 8;
        assert_eq!(&good[idat_data - 4..idat_data], b"IDAT");
        let mut data_flipped = good.clone();
        data_flipped[idat_data + 3] ^= 0x01;
        let mut crc_flipped = good.clone();
        crc_flipped[idat_data + IDAT_1X1.len()] ^= 0x80;
        let mut header_flipped = good.clone();
        header_flipped[PNG_SIGNATURE.len() + 8] ^= 0x01; // IHDR's width
        for bad in [data_flipped, crc_flipped, header_flipped] {
            assert_eq!(
                malformed(ReceiptKind::Png, bad),
                "a chunk's CRC does not match its contents (corrupt file?)"
            );
        }
    }

    #[test]
    fn a_truncated_png_is_refused() {
        let good = tiny_png();
        assert_eq!(
            malformed(ReceiptKind::Png, good[..good.len() - 12].to_vec()),
            "the file ends without an IEND chunk (cut short?)"
        );
        for cut in [
            good.len() - 1,
            good.len() - 13,
            30,
            PNG_SIGNATURE.len() + 20,
        ] {
            assert_eq!(
                malformed(ReceiptKind::Png, good[..cut].to_vec()),
                "a chunk runs past the end of the file (cut short?)",
                "cut at {cut}"
            );
        }
        assert_eq!(
            malformed(ReceiptKind::Png, good[..PNG_SIGNATURE.len() + 5].to_vec()),
            "the file ends inside a chunk's length or type"
        );
        assert_eq!(
            malformed(ReceiptKind::Png, PNG_SIGNATURE.to_vec()),
            "the file ends after the signature, without an IHDR chunk"
        );
        // A length that runs far past the end (and would overflow if added carelessly).
        let mut huge = good.clone();
        huge[33..37].copy_from_slice(&0x7FFF_FFFFu32.to_be_bytes());
        assert_eq!(
            malformed(ReceiptKind::Png, huge.clone()),
            "a chunk runs past the end of the file (cut short?)"
        );
        huge[33..37].copy_from_slice(&0x8000_0000u32.to_be_bytes());
        assert_eq!(
            malformed(ReceiptKind::Png, huge),
            "a chunk's length is over 2^31 - 1"
        );
    }

    #[test]
    fn a_png_without_its_required_chunks_is_refused() {
        let idat = (b"IDAT", &IDAT_1X1[..]);
        let iend = (b"IEND", &[][..]);
        let cases: [(Vec<u8>, &str); 6] = [
            (
                png_of(&[idat, (b"IHDR", &ihdr(1, 1)), iend]),
                "the first chunk is not a 13-byte IHDR",
            ),
            (
                png_of(&[(b"IHDR", &ihdr(1, 1)[..12]), idat, iend]),
                "the first chunk is not a 13-byte IHDR",
            ),
            (png_sized(0, 5), "IHDR declares a zero width or height"),
            (
                png_of(&[(b"IHDR", &ihdr(1, 1)), iend]),
                "no image data (IDAT chunk)",
            ),
            (
                png_of(&[(b"IHDR", &ihdr(1, 1)), idat, (b"IEND", &b"x"[..])]),
                "the IEND chunk is not empty",
            ),
            (
                png_of(&[(b"IHDR", &ihdr(1, 1)), (b"ID1T", &b""[..]), idat, iend]),
                "a chunk's type is not four ASCII letters",
            ),
        ];
        for (png, why) in cases {
            assert_eq!(malformed(ReceiptKind::Png, png), why);
        }
    }

    #[test]
    fn a_png_declared_as_pdf_is_a_mismatch() {
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Pdf), tiny_png()),
            Err(ReceiptError::Mismatch {
                declared: ReceiptKind::Pdf,
                found: ReceiptKind::Png
            })
        );
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Png), tiny_jpeg()),
            Err(ReceiptError::Mismatch {
                declared: ReceiptKind::Png,
                found: ReceiptKind::Jpeg
            })
        );
        // The mismatch is found before the structure is read: a broken PDF declared as JPEG.
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Jpeg), b"%PDF-1.4 cut".to_vec()),
            Err(ReceiptError::Mismatch {
                declared: ReceiptKind::Jpeg,
                found: ReceiptKind::Pdf
            })
        );
    }

    #[test]
    fn a_jpeg_declaring_too_many_pixels_is_refused() {
        assert_eq!(
            Receipt::check(Some(ReceiptKind::Jpeg), jpeg_with(0xC0, 30_000, 30_000)),
            Err(ReceiptError::TooManyPixels {
                width: 30_000,
                height: 30_000
            })
        );
        // Width and height are read in the frame header's order (height first).
        assert_eq!(
            Receipt::check(None, jpeg_with(0xC2, 20_001, 100)),
            Err(ReceiptError::TooManyPixels {
                width: 20_001,
                height: 100
            })
        );
        assert!(Receipt::check(None, jpeg_with(0xC2, 20_000, 2_000)).is_ok());
    }

    #[test]
    fn a_jpeg_without_a_whole_frame_header_is_refused() {
        let good = tiny_jpeg();
        let sof = good.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        let cases: [(Vec<u8>, &str); 7] = [
            (
                vec![0xFF, 0xD8, 0xFF],
                "no frame header (SOFn) before the end of the file",
            ),
            (
                good[..sof].to_vec(),
                "no frame header (SOFn) before the end of the file",
            ),
            (
                good[..sof + 10].to_vec(),
                "a segment runs past the end of the file (cut short?)",
            ),
            (
                good[..sof + 3].to_vec(),
                "the file ends inside a segment's length",
            ),
            (
                [&good[..sof], &[0xFF, 0xD9]].concat(),
                "the image ends before a frame header (SOFn)",
            ),
            (
                [&good[..sof], &[0xFF, 0xDA, 0x00, 0x02]].concat(),
                "a scan starts before a frame header (SOFn)",
            ),
            (
                [&good[..sof], &[0x00, 0xFF, 0xC0]].concat(),
                "a segment is not followed by a marker",
            ),
        ];
        for (jpeg, why) in cases {
            assert_eq!(malformed(ReceiptKind::Jpeg, jpeg), why);
        }
        assert_eq!(
            malformed(ReceiptKind::Jpeg, jpeg_with(0xC0, 0, 480)),
            "the frame header declares a zero width or height (a height set later by a DNL \
             marker is not accepted)"
        );
        let mut short_frame = good.clone();
        short_frame[sof + 3] = 0x0E; // a length of 14 for 3 components (17 needed)
        assert_eq!(
            malformed(ReceiptKind::Jpeg, short_frame),
            "a frame header's length does not match its number of components"
        );
    }

    #[test]
    fn a_pdf_without_its_end_marker_near_the_end_is_refused() {
        let pdf = tiny_pdf();
        let why = "no %%EOF in its last 1,024 bytes (cut short?)";
        assert_eq!(
            malformed(ReceiptKind::Pdf, pdf[..pdf.len() - 3].to_vec()),
            why
        );
        let mut far = pdf.clone();
        // "%%EOF\n" and 1,018 spaces: the marker starts exactly 1,024 bytes from the end.
        far.extend_from_slice(&[b' '; 1024 - 6]);
        assert!(
            Receipt::check(None, far.clone()).is_ok(),
            "%%EOF ends the window"
        );
        far.push(b' ');
        assert_eq!(malformed(ReceiptKind::Pdf, far), why);
    }

    #[test]
    fn debug_shows_kind_and_length_never_the_bytes() {
        let receipt = Receipt::check(None, tiny_pdf()).unwrap();
        let debug = format!("{receipt:?}");
        assert_eq!(
            debug,
            format!("Receipt {{ kind: Pdf, len: {}, .. }}", tiny_pdf().len())
        );
        assert!(!debug.contains('['), "{debug}");
    }

    #[test]
    fn a_stored_receipt_is_taken_as_it_is() {
        let receipt = Receipt::from_stored(ReceiptKind::Jpeg, tiny_jpeg());
        assert_eq!(receipt, Receipt::check(None, tiny_jpeg()).unwrap());
    }

    #[test]
    fn the_messages_say_what_is_wrong() {
        let cases = [
            (ReceiptError::Empty, "the receipt is empty"),
            (
                ReceiptError::TooLarge { size: 3_000_000 },
                "the receipt is 3000000 bytes, over the limit of 2097152 bytes (2 MiB)",
            ),
            (
                ReceiptError::UnknownContent,
                "the receipt is neither a PDF, a PNG nor a JPEG file: its first bytes are none \
                 of theirs",
            ),
            (
                ReceiptError::Mismatch {
                    declared: ReceiptKind::Pdf,
                    found: ReceiptKind::Png,
                },
                "the receipt was declared as PDF but its content is PNG",
            ),
            (
                ReceiptError::Malformed {
                    kind: ReceiptKind::Jpeg,
                    why: "a second start-of-image marker",
                },
                "the receipt is not a well-formed JPEG: a second start-of-image marker",
            ),
            (
                ReceiptError::TooManyPixels {
                    width: 30_000,
                    height: 30_000,
                },
                "the receipt's image declares 30000 x 30000 pixels: at most 40000000 pixels and \
                 20000 on a side are accepted",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }

    fn any_declared() -> impl Strategy<Value = Option<ReceiptKind>> {
        prop_oneof![
            Just(None),
            Just(Some(ReceiptKind::Pdf)),
            Just(Some(ReceiptKind::Png)),
            Just(Some(ReceiptKind::Jpeg)),
        ]
    }

    /// A start that gets random bytes past the first check: a kind's first bytes, or a whole
    /// valid file's head.
    fn any_start() -> impl Strategy<Value = Vec<u8>> {
        let png_head = tiny_png()[..33].to_vec();
        let jpeg_head = tiny_jpeg()[..40].to_vec();
        prop_oneof![
            Just(Vec::new()),
            Just(b"%PDF-1.".to_vec()),
            Just(PNG_SIGNATURE.to_vec()),
            Just(png_head),
            Just(JPEG_START.to_vec()),
            Just(jpeg_head),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn check_never_panics_on_arbitrary_bytes(
            declared in any_declared(),
            start in any_start(),
            tail in proptest::collection::vec(any::<u8>(), 0..=4096),
        ) {
            let mut bytes = start;
            bytes.extend_from_slice(&tail);
            bytes.truncate(4096);
            let sniffed = ReceiptKind::sniff(&bytes);
            match Receipt::check(declared, bytes.clone()) {
                Ok(receipt) => {
                    prop_assert_eq!(Some(receipt.kind()), sniffed);
                    prop_assert!(declared.is_none() || declared == sniffed);
                    prop_assert_eq!(receipt.bytes(), &bytes[..]);
                }
                Err(ReceiptError::Empty) => prop_assert!(bytes.is_empty()),
                Err(ReceiptError::UnknownContent) => prop_assert_eq!(sniffed, None),
                Err(_) => prop_assert!(sniffed.is_some()),
            }
        }

        #[test]
        fn check_never_panics_on_damaged_receipts(
            declared in any_declared(),
            which in 0usize..3,
            cut in any::<prop::sample::Index>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        ) {
            let mut bytes = [tiny_pdf(), tiny_png(), tiny_jpeg()][which].clone();
            for (at, xor) in flips {
                let at = at.index(bytes.len());
                bytes[at] ^= xor;
            }
            bytes.truncate(cut.index(bytes.len() + 1));
            let _ = Receipt::check(declared, bytes);
        }
    }
}
