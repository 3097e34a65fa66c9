//! The hosted payer page: the rules of what a payer may see about a payment, and the page's
//! unguessable link. Adapters render [`PayerView`]; they decide nothing shown on it.
//!
//! The display rules (API spec, "Payer display rules"):
//! - requisites only while the payment is `processing`, has a requisite and its lifetime has
//!   not ended ([`payer_state`]); after that, the outcome instead, never a stale requisite;
//! - exactly `amount` as stored (its text, never re-rounded), `holder_name` and the bank;
//! - a card number in groups of four, copied as digits only ([`card_display`]);
//! - an `sbp` phone number shown formatted and copied in E.164 ([`phone_e164`]);
//! - the deadline `created_at` + the project lifetime (the payment's `expires_at`);
//! - a payment closed by the end of its lifetime reads differently from one canceled before
//!   it ([`payer_state`]: `Expired` against `Canceled`);
//! - the shop is named: the project's `name`.
//!
//! The link's token ([`PageToken`]) is 128 random bits from the [`RandomSource`] port, not
//! derived from the time-ordered payment id. The store keeps it with its SHA-256, and a
//! page is looked up by the hash only ([`PaymentPageRecord`]).
//!
//! "I paid" (the payer's appeal, [`crate::appeal`]) is offered by a closed page; which
//! reasons, and what the payer sees of their appeal, are the service's payer page rules
//! ([`crate::service::appeal_offer`], [`crate::service::PayerAppeal`]). Its bounds are here.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::ids::PaymentId;
use crate::payment::{Payment, PaymentMethod, PaymentStatus};
pub use crate::project::{
    PageLanguage, ReturnUrl, ReturnUrlError, UnknownLanguage, RETURN_URL_MAX,
};
use crate::project::{Project, RateLimit};
use crate::secret::SecretString;
use crate::RandomSource;

/// How often one page's status may be asked (`GET /pay/{token}/status`): 1 a second, 10 at
/// once. The page's script asks at most every 2 s while the payment is open (slower while it
/// does not change), and at once when the page comes back into view: far below it, even with
/// the page open in a few tabs.
pub const STATUS_PER_LINK: RateLimit = RateLimit {
    per_second: 1,
    burst: 10,
};
/// How often one source (an IPv4 address, an IPv6 /64) may ask for statuses, of any links: 20
/// a second, 100 at once, room for the payers behind one carrier-grade NAT (a page asks about
/// every 8 s once its payment stops changing) and far below a scan for links.
pub const STATUS_PER_SOURCE: RateLimit = RateLimit {
    per_second: 20,
    burst: 100,
};
/// The most links and the most sources the status limits hold at once, each.
pub const STATUS_LIMIT_KEYS: usize = 65_536;

/// How many "I paid" forms (`POST /pay/{token}/appeal`) one source (as [`STATUS_PER_SOURCE`]
/// groups addresses) may send at once, of any links, counted before the link is looked up;
/// after that, one every [`APPEAL_FORMS_INTERVAL`]. A payer sends one, or a few after a
/// refused file. What one payment stores is bounded by the store (three appeals from the
/// payer, one active at a time); this bounds the uploads of up to two receipts one address
/// can make, whatever the links.
pub const APPEAL_FORMS_BURST: u32 = 5;
/// The sustained spacing of one source's "I paid" forms: 12 minutes (5 an hour).
pub const APPEAL_FORMS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(12 * 60);
/// The most sources the "I paid" limit holds at once.
pub const APPEAL_LIMIT_KEYS: usize = 16_384;
/// The fewest receipts a payer's appeal carries (at most
/// [`MAX_RECEIPTS`](crate::receipt::MAX_RECEIPTS)): the page asks for the bank's receipt.
pub const PAYER_MIN_RECEIPTS: usize = 1;

/// Random bytes in a page token (128 bits).
pub const TOKEN_BYTES: usize = 16;
/// Characters of a page token: base64url of [`TOKEN_BYTES`] without padding.
pub const TOKEN_LEN: usize = 22;

/// The secret part of a payer page link: 22 base64url characters. `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct PageToken(String);

impl PageToken {
    /// A fresh token from `rng`.
    pub fn generate(rng: &dyn RandomSource) -> PageToken {
        let bytes: [u8; TOKEN_BYTES] = crate::random::bytes(rng);
        PageToken(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// A token as found in a link; `None` unless it is exactly what [`generate`](Self::generate)
    /// writes (22 base64url characters decoding canonically to 16 bytes), so a malformed link
    /// is refused before any store lookup.
    pub fn parse(s: &str) -> Option<PageToken> {
        if s.len() != TOKEN_LEN {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
        (bytes.len() == TOKEN_BYTES && URL_SAFE_NO_PAD.encode(&bytes) == s)
            .then(|| PageToken(s.to_string()))
    }

    /// The SHA-256 of the token's text: the key the store looks a page up by.
    pub fn hash(&self) -> [u8; 32] {
        Sha256::digest(self.0.as_bytes()).into()
    }

    /// The token's text (for the link).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PageToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PageToken(..)")
    }
}

/// A payment's payer page link, as stored: one per payment, never changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentPageRecord {
    /// The payment.
    pub payment_id: PaymentId,
    /// SHA-256 of the token ([`PageToken::hash`]): what a page request is looked up by.
    pub token_hash: [u8; 32],
    /// The token itself, so that the payment's GET can carry the link again. It opens a
    /// read-only view of data the same store holds beside it in clear (amount, requisite),
    /// so it is not sealed.
    pub token: SecretString,
    /// When the link was made.
    pub created_at: Timestamp,
}

impl PaymentPageRecord {
    /// The record of a fresh token for `payment`.
    pub fn new(payment: PaymentId, token: &PageToken, at: Timestamp) -> PaymentPageRecord {
        PaymentPageRecord {
            payment_id: payment,
            token_hash: token.hash(),
            token: SecretString::from(token.as_str()),
            created_at: at,
        }
    }

    /// The stored token, when it is well formed and matches its hash.
    pub fn page_token(&self) -> Option<PageToken> {
        PageToken::parse(self.token.expose()).filter(|t| t.hash() == self.token_hash)
    }
}

/// A requisite as the payer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownRequisite {
    /// The method (card number or phone number).
    pub method: PaymentMethod,
    /// As displayed: a card number in groups of four, a phone number formatted.
    pub display: String,
    /// What the copy button copies: the card's digits, the phone in E.164.
    pub copy: String,
    /// Recipient name as the payer's bank shows it.
    pub holder_name: String,
    /// The requisite's bank, when known.
    pub bank: Option<String>,
    /// What the QR code encodes (the requisite's QR code link), when it has one.
    pub qr_payload: Option<String>,
    /// The open-bank-app link, when the requisite has one with a scheme a page may link to.
    pub deeplink: Option<String>,
}

/// What the page shows in place of, or as, the requisite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayerState {
    /// `created`: requisites are being picked (the page reloads itself).
    Preparing,
    /// `processing` with a requisite, before the deadline: pay to this.
    Pay(ShownRequisite),
    /// `completed`: paid.
    Completed,
    /// `canceled` before the deadline: the merchant (or an operator) canceled it.
    Canceled,
    /// The deadline has passed unpaid: `processing` past it (the sweeper has not closed it
    /// yet), or `canceled` at or after it (see [`payer_state`]).
    Expired,
    /// `error`: no requisites could be issued.
    Failed,
    /// `appeal`: being re-checked.
    Checking,
}

impl PayerState {
    /// A stable name (for templates and logs).
    pub const fn as_str(&self) -> &'static str {
        match self {
            PayerState::Preparing => "preparing",
            PayerState::Pay(_) => "pay",
            PayerState::Completed => "completed",
            PayerState::Canceled => "canceled",
            PayerState::Expired => "expired",
            PayerState::Failed => "failed",
            PayerState::Checking => "checking",
        }
    }

    /// Whether the page's outcome is final: paid, canceled, out of time or failed. Only an
    /// operator's re-check changes such a payment again, so an open page stops watching it.
    pub const fn is_final(&self) -> bool {
        matches!(
            self,
            PayerState::Completed | PayerState::Canceled | PayerState::Expired | PayerState::Failed
        )
    }

    /// The requisite, only in [`PayerState::Pay`].
    pub fn requisite(&self) -> Option<&ShownRequisite> {
        match self {
            PayerState::Pay(r) => Some(r),
            _ => None,
        }
    }
}

/// Everything the payer page shows about a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayerView {
    /// The page's language (the project's setting).
    pub language: PageLanguage,
    /// The shop: the project's name, as the merchant named it (text, not markup).
    pub shop: String,
    /// What to show now.
    pub state: PayerState,
    /// The amount to transfer, exactly as stored (its decimal text).
    pub amount: String,
    /// The currency code.
    pub currency: String,
    /// The merchant's order id (the payer's reference).
    pub merchant_payment_id: String,
    /// `created_at` + the project lifetime.
    pub deadline: Timestamp,
    /// When the view was made (the countdown's start without JavaScript).
    pub now: Timestamp,
    /// A sandbox test payment (no money moves).
    pub is_test: bool,
    /// Where "Back to the shop" leads: the project's return URL, when it has one.
    pub return_url: Option<String>,
}

impl PayerView {
    /// The view of `payment` of `project` at `now`, in the project's language.
    pub fn of(payment: &Payment, project: &Project, now: Timestamp) -> PayerView {
        PayerView {
            language: project.payer_language,
            shop: project.name.clone(),
            state: payer_state(payment, now),
            amount: payment.amount.as_decimal().to_string(),
            currency: payment.currency.as_str().to_string(),
            merchant_payment_id: payment.merchant_payment_id.as_str().to_string(),
            deadline: payment.expires_at,
            now,
            is_test: payment.is_test(),
            return_url: project.return_url.as_ref().map(|u| u.as_str().to_string()),
        }
    }

    /// Whole seconds left until the deadline (0 once it has passed).
    pub fn seconds_left(&self) -> u64 {
        if self.now >= self.deadline {
            0
        } else {
            self.deadline.duration_since(self.now).as_secs()
        }
    }
}

/// What the payer may see of `payment` at `now` (see the module's rules).
///
/// A `canceled` payment reads as [`PayerState::Expired`] when it was canceled at or after its
/// deadline (`updated_at >= expires_at`: a canceled payment's `updated_at` is the time of the
/// change that canceled it, as nothing else changes it), and as [`PayerState::Canceled`] when
/// before. The payment does not record which trigger closed it, so the time tells: the
/// sweeper's expiry ([`Trigger::Expire`](crate::transition::Trigger::Expire)) is only allowed
/// at or after the deadline, so it always reads `Expired`, and a cancellation before the
/// deadline always reads `Canceled`. A cancellation after the deadline reads `Expired` too:
/// the page already told the payer the time had run out. So does a re-check (of a payment
/// already closed) that ends `canceled` after the deadline: the one case where the rule names
/// the time rather than the trigger.
pub fn payer_state(payment: &Payment, now: Timestamp) -> PayerState {
    match payment.status {
        PaymentStatus::Created => PayerState::Preparing,
        PaymentStatus::Processing => match &payment.requisites {
            _ if now >= payment.expires_at => PayerState::Expired,
            Some(r) => PayerState::Pay(show_requisite(payment.payment_method, payment, r)),
            None => PayerState::Preparing,
        },
        PaymentStatus::Completed => PayerState::Completed,
        PaymentStatus::Canceled if payment.updated_at >= payment.expires_at => PayerState::Expired,
        PaymentStatus::Canceled => PayerState::Canceled,
        PaymentStatus::Error => PayerState::Failed,
        PaymentStatus::Appeal => PayerState::Checking,
    }
}

fn show_requisite(
    method: PaymentMethod,
    payment: &Payment,
    r: &crate::payment::Requisites,
) -> ShownRequisite {
    let (display, copy) = match method {
        PaymentMethod::CardTransfer => card_display(&r.requisite),
        PaymentMethod::Sbp => match phone_e164(&r.requisite, payment.geo_code.as_str()) {
            Some(e164) => (phone_display(&e164), e164),
            None => (r.requisite.clone(), r.requisite.clone()),
        },
    };
    ShownRequisite {
        method,
        display,
        copy,
        holder_name: r.holder_name.clone(),
        bank: r.bank.clone(),
        qr_payload: r.qrcode_link.clone().filter(|l| !l.trim().is_empty()),
        deeplink: r
            .deeplink_url
            .as_deref()
            .filter(|l| linkable(l))
            .map(str::to_string),
    }
}

/// A card number as shown and as copied: its digits in groups of four (the last group may be
/// shorter), and the digits alone. Anything but digits in the stored value is dropped.
pub fn card_display(requisite: &str) -> (String, String) {
    let digits: String = requisite.chars().filter(char::is_ascii_digit).collect();
    let groups: Vec<&str> = digits
        .as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).expect("ASCII digits"))
        .collect();
    (groups.join(" "), digits)
}

/// A phone number in E.164 (`+79001234567`), read from a requisite as providers send it (with
/// or without `+`, spaces, dashes or brackets). For the countries of the former Soviet
/// numbering plan (`geo_code` RU or KZ) a national `8XXXXXXXXXX` or ten-digit number gets the
/// country code 7. `None` when the digits cannot be a number (E.164: at most 15 digits, the
/// first not 0; fewer than 8 is taken as not a full number).
pub fn phone_e164(requisite: &str, geo_code: &str) -> Option<String> {
    let trimmed = requisite.trim();
    let allowed = |c: char| c.is_ascii_digit() || matches!(c, ' ' | '-' | '(' | ')' | '.');
    let (plus, rest) = match trimmed.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, trimmed),
    };
    if rest.is_empty() || !rest.chars().all(allowed) {
        return None;
    }
    let mut digits: String = rest.chars().filter(char::is_ascii_digit).collect();
    if !plus && matches!(geo_code, "RU" | "KZ") {
        if digits.len() == 11 && digits.starts_with('8') {
            digits.replace_range(0..1, "7");
        } else if digits.len() == 10 {
            digits.insert(0, '7');
        }
    }
    let ok = (8..=15).contains(&digits.len()) && !digits.starts_with('0');
    ok.then(|| format!("+{digits}"))
}

/// An E.164 number as people read it: `+7 900 123-45-67` for country code 7, otherwise the
/// country code's first digit group apart and the rest in groups of three or four.
pub fn phone_display(e164: &str) -> String {
    let digits = e164.trim_start_matches('+');
    if digits.len() == 11 && digits.starts_with('7') {
        return format!(
            "+7 {} {}-{}-{}",
            &digits[1..4],
            &digits[4..7],
            &digits[7..9],
            &digits[9..11]
        );
    }
    // Without a numbering-plan table, split the national part in threes.
    let groups: Vec<&str> = digits
        .as_bytes()
        .chunks(3)
        .map(|c| std::str::from_utf8(c).expect("ASCII digits"))
        .collect();
    format!("+{}", groups.join(" "))
}

/// Whether a page may link to `url`: an absolute URL whose scheme is not one that runs code or
/// reads local data in the browser (`javascript:`, `data:`, `vbscript:`, `file:`, `blob:`).
/// Bank-app schemes (`bank100000000111://...`) and `https` pass.
pub fn linkable(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url.trim()) else {
        return false;
    };
    !matches!(
        parsed.scheme(),
        "javascript" | "data" | "vbscript" | "file" | "blob" | "about" | "filesystem"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn card_numbers_in_groups_of_four_copied_as_digits() {
        assert_eq!(
            card_display("2200123456789012"),
            ("2200 1234 5678 9012".into(), "2200123456789012".into())
        );
        // 18 and 19 digits: the last group is shorter.
        assert_eq!(
            card_display("2200123456789012345").0,
            "2200 1234 5678 9012 345"
        );
        // Spaces or dashes from a provider are not copied.
        assert_eq!(card_display("2200 1234-5678 9012").1, "2200123456789012");
    }

    #[test]
    fn phones_in_e164() {
        assert_eq!(
            phone_e164("79001234567", "RU").as_deref(),
            Some("+79001234567")
        );
        assert_eq!(
            phone_e164("89001234567", "RU").as_deref(),
            Some("+79001234567")
        );
        assert_eq!(
            phone_e164("9001234567", "RU").as_deref(),
            Some("+79001234567")
        );
        assert_eq!(
            phone_e164("+7 (900) 123-45-67", "RU").as_deref(),
            Some("+79001234567")
        );
        // Elsewhere the digits are taken as given (already international).
        assert_eq!(
            phone_e164("994501234567", "AZ").as_deref(),
            Some("+994501234567")
        );
        assert_eq!(phone_e164("+0123456789", "RU"), None);
        assert_eq!(phone_e164("1234567890123456", "DE"), None, "16 digits");
        assert_eq!(phone_e164("12345", "DE"), None);
        assert_eq!(phone_e164("call 900", "RU"), None);
        assert_eq!(phone_display("+79001234567"), "+7 900 123-45-67");
        assert_eq!(phone_display("+994501234567"), "+994 501 234 567");
    }

    #[test]
    fn links_a_page_may_follow() {
        assert!(linkable("https://qr.nspk.ru/AS1000?type=01"));
        assert!(linkable("bank100000000111://sbp/pay?x=1"));
        assert!(!linkable("javascript:alert(1)"));
        assert!(!linkable(" JavaScript:alert(1)"));
        assert!(!linkable("data:text/html,<b>x</b>"));
        assert!(!linkable("/relative"));
    }

    #[test]
    fn tokens_parse_only_as_generated() {
        struct Counter(std::sync::atomic::AtomicU8);
        impl RandomSource for Counter {
            fn fill(&self, buf: &mut [u8]) {
                for b in buf {
                    *b = self.0.fetch_add(37, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        let rng = Counter(Default::default());
        let a = PageToken::generate(&rng);
        let b = PageToken::generate(&rng);
        assert_eq!(a.as_str().len(), TOKEN_LEN);
        assert_ne!(a, b);
        assert_ne!(a.hash(), b.hash());
        assert_eq!(PageToken::parse(a.as_str()), Some(a.clone()));
        assert_eq!(format!("{a:?}"), "PageToken(..)");
        for bad in [
            "",
            "short",
            "AAAAAAAAAAAAAAAAAAAAAAA", // 23
            "AAAAAAAAAAAAAAAAAAAAA+",  // not base64url
            "AAAAAAAAAAAAAAAAAAAAAB",  // non-canonical last character
            "0190f5a1-7c3e-7000-8000-000000000000",
        ] {
            assert_eq!(PageToken::parse(bad), None, "{bad}");
        }
        let record = PaymentPageRecord::new(
            PaymentId::from_uuid(uuid::Uuid::from_u128(1)),
            &a,
            Timestamp::from_unix_secs(0),
        );
        assert_eq!(record.page_token(), Some(a));
        let forged = PaymentPageRecord {
            token_hash: b.hash(),
            ..record
        };
        assert_eq!(forged.page_token(), None, "a token must match its hash");
    }

    #[test]
    fn languages() {
        for l in PageLanguage::ALL {
            assert_eq!(l.as_str().parse::<PageLanguage>().unwrap(), l);
        }
        assert!("de".parse::<PageLanguage>().is_err());
        assert_eq!(PageLanguage::default(), PageLanguage::Ru);
    }

    proptest! {
        #[test]
        fn card_groups_hold_every_digit(digits in "[0-9]{12,19}") {
            let (display, copy) = card_display(&digits);
            prop_assert_eq!(&copy, &digits);
            prop_assert_eq!(display.replace(' ', ""), digits);
            let groups: Vec<&str> = display.split(' ').collect();
            let (last, full) = groups.split_last().unwrap();
            prop_assert!(full.iter().all(|g| g.len() == 4));
            prop_assert!((1..=4).contains(&last.len()));
        }

        #[test]
        fn e164_is_plus_and_8_to_15_digits(raw in "\\+?[0-9 ()-]{0,20}", geo in "RU|KZ|AZ|DE") {
            if let Some(e) = phone_e164(&raw, &geo) {
                let digits = &e[1..];
                prop_assert!(e.starts_with('+'));
                prop_assert!((8..=15).contains(&digits.len()));
                prop_assert!(digits.bytes().all(|b| b.is_ascii_digit()));
                prop_assert!(!digits.starts_with('0'));
                // The displayed form has the same digits.
                let shown: String = phone_display(&e).chars().filter(char::is_ascii_digit).collect();
                prop_assert_eq!(shown, digits);
            }
        }

        #[test]
        fn tokens_round_trip(bytes in proptest::array::uniform16(any::<u8>())) {
            struct Fixed([u8; 16]);
            impl RandomSource for Fixed {
                fn fill(&self, buf: &mut [u8]) {
                    buf.copy_from_slice(&self.0[..buf.len()]);
                }
            }
            let t = PageToken::generate(&Fixed(bytes));
            prop_assert_eq!(PageToken::parse(t.as_str()), Some(t.clone()));
        }
    }

    #[test]
    fn a_return_url_is_https_with_a_host_and_no_credentials() {
        for good in [
            "https://shop.example",
            " https://shop.example/orders?id=1#done ",
            "https://магазин.рф/",
            "https://shop.example:8443/back",
        ] {
            assert!(ReturnUrl::parse(good).is_ok(), "{good}");
        }
        for (bad, word) in [
            ("http://shop.example/", "https://"),
            ("shop.example", "absolute"),
            ("", "absolute"),
            ("javascript:alert(1)", "https://"),
            ("data:text/html,x", "https://"),
            ("https://user:pass@shop.example/", "user name"),
            ("https://user@shop.example/", "user name"),
            ("https://", "absolute"),
        ] {
            let e = ReturnUrl::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(word), "{bad}: {e}");
        }
        let long = format!("https://shop.example/{}", "a".repeat(RETURN_URL_MAX));
        assert!(ReturnUrl::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("at most"));
    }
}
