//! The payer page's "I paid" (`POST /pay/{token}/appeal`) through the cabinet's router, over
//! the in-memory store and a manual clock: a receipt accepted and the appeal stored from the
//! payer, then shown on the page as received; an HTML file named `.png`, a decompression bomb
//! (in Russian), a file over 2 MiB and a third file refused with nothing stored; a payment still `processing` refused; the fourth
//! appeal refused (and an appeal under way, the payer's or the merchant's); an unknown link
//! the page's `404` with its body never read; the per-source limit answering `429`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use payments_cabinet::testing::MemoryCabinetStore;
use payments_cabinet::{Cabinet, CabinetConfig, CabinetState};
use payments_core::appeal::{
    AppealQuery, AppealSource, AppealState, AppealTrigger, MAX_APPEALS_PER_SOURCE,
};
use payments_core::auth::Environment;
use payments_core::history::ChangeSource;
use payments_core::payer::PageLanguage;
use payments_core::payment::{Currency, Payment, PaymentStatus};
use payments_core::project::{Contract, Merchant, MethodTerms, Project, RateLimit};
use payments_core::provider::{
    IssuedRequisites, ProviderOutcome, RateSource, RequisiteProvider, RequisiteRequest,
};
use payments_core::receipt::{ReceiptKind, MAX_RECEIPT_BYTES};
use payments_core::service::{Actor, AppealRequest, AuthConfig, PaymentService, Ports};
use payments_core::settlement::FeePercent;
use payments_core::store::{AppealStore, MerchantStore, PaymentStore};
use payments_core::testing::{ManualClock, MemoryStore, SeededRandom, TestCaller};
use payments_core::transition::Trigger;
use payments_core::{Clock, MerchantId, ProjectId, Timestamp};
use tower::ServiceExt;

/// A provider that issues a card number to every payment.
#[derive(Default)]
struct Issuer(AtomicU64);

#[async_trait]
impl RequisiteProvider for Issuer {
    async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        ProviderOutcome::Issued(IssuedRequisites::new(format!("2200{n:012}"), "TEST HOLDER"))
    }
}

/// RUB at 100.
struct Rates;

#[async_trait]
impl RateSource for Rates {
    async fn course(&self, _: Currency) -> Option<rust_decimal::Decimal> {
        Some(rust_decimal::Decimal::from(100))
    }
}

struct World {
    store: Arc<MemoryStore>,
    clock: ManualClock,
    service: PaymentService,
    project: Project,
    caller: TestCaller,
    router: Router,
}

const PDF: &[u8] = b"%PDF-1.7\n1 0 obj\n<< >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n";

async fn world() -> World {
    let store = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(Timestamp::from_unix_secs(1_790_856_000));
    let service = PaymentService::new(
        Ports::new(
            store.clone(),
            Arc::new(Issuer::default()),
            Arc::new(Rates),
            Arc::new(clock.clone()),
            Arc::new(SeededRandom::new(7)),
        ),
        Default::default(),
        AuthConfig::for_environment(Environment::Sandbox),
    );
    let merchant = Merchant {
        id: MerchantId::from_uuid(uuid::Uuid::from_u128(1)),
        name: "merchant".into(),
        paused: false,
        callback_url: None,
        created_at: clock.now(),
    };
    let project = Project {
        id: ProjectId::from_uuid(uuid::Uuid::from_u128(2)),
        merchant_id: merchant.id,
        name: "Tea shop".into(),
        active: true,
        test_mode: false,
        lifetime: Duration::from_secs(15 * 60),
        contract: Contract {
            currencies: vec![Currency::RUB],
            methods: vec![MethodTerms {
                method: payments_core::payment::PaymentMethod::CardTransfer,
                min_amount: None,
                max_amount: None,
                fee_percent: FeePercent::new(rust_decimal::Decimal::from(2)).expect("a fee"),
            }],
        },
        callback_url: None,
        ip_allow_list: Vec::new(),
        signature_required: false,
        paused: false,
        rate_limit: RateLimit::default(),
        payer_page: true,
        payer_language: PageLanguage::En,
        return_url: None,
        created_at: clock.now(),
    };
    store.upsert_merchant(&merchant).await.expect("a merchant");
    store.upsert_project(&project).await.expect("a project");
    let caller = TestCaller::provision(&service, project.id, 1).await;
    let cabinet = Cabinet::new(
        service.clone(),
        Arc::new(MemoryCabinetStore::new()),
        CabinetConfig::default(),
    );
    let router = payments_cabinet::router(CabinetState::new(cabinet, false));
    World {
        store,
        clock,
        service,
        project,
        caller,
        router,
    }
}

impl World {
    /// A `processing` payment with its requisite, and its page's token.
    async fn payment(&self, order: &str) -> (Payment, String) {
        let body = format!(
            r#"{{"merchant_payment_id":"{order}","amount":"1500","payment_method":"card_transfer"}}"#
        );
        let created = self
            .caller
            .create(&self.service, body.as_bytes())
            .await
            .expect("a create");
        assert_eq!(created.payment.status, PaymentStatus::Processing);
        let token = self
            .service
            .payments()
            .payment_page_token(&self.project, &created.payment)
            .await
            .expect("a read")
            .expect("the page is on");
        (created.payment, token.as_str().to_string())
    }

    /// A payment canceled before its deadline, and its page's token.
    async fn canceled(&self, order: &str) -> (Payment, String) {
        let (payment, token) = self.payment(order).await;
        self.service
            .payments()
            .operate(payment.id, Trigger::Cancel, &Actor("test".into()))
            .await
            .expect("canceled");
        let canceled = self
            .store
            .payment(payment.id)
            .await
            .expect("a read")
            .expect("the payment");
        assert_eq!(canceled.status, PaymentStatus::Canceled);
        (canceled, token)
    }

    /// The project's page language.
    async fn language(&self, language: PageLanguage) {
        let project = Project {
            payer_language: language,
            ..self.project.clone()
        };
        self.store
            .upsert_project(&project)
            .await
            .expect("a project");
    }

    async fn appeals(&self) -> Vec<payments_core::appeal::Appeal> {
        self.store
            .find_appeals(&AppealQuery::newest(100))
            .await
            .expect("a read")
    }

    async fn send(&self, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
        let response = self.router.clone().oneshot(request).await.expect("served");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    async fn get(&self, path: &str) -> (StatusCode, String) {
        let request = Request::get(path).body(Body::empty()).expect("a request");
        let (status, _, body) = self.send(request).await;
        (status, body)
    }

    async fn post(&self, token: &str, form: &Form) -> (StatusCode, axum::http::HeaderMap, String) {
        self.send(form.request(&format!("/pay/{token}/appeal"), None))
            .await
    }
}

const BOUNDARY: &str = "----payer-appeal-test";

/// A part's file name and content type, for a file.
type FileOf = Option<(String, String)>;

/// A multipart form, built by hand.
#[derive(Default, Clone)]
struct Form {
    parts: Vec<(String, FileOf, Vec<u8>)>,
}

impl Form {
    fn text(mut self, name: &str, value: &str) -> Form {
        self.parts
            .push((name.into(), None, value.as_bytes().to_vec()));
        self
    }

    fn file(mut self, file_name: &str, content_type: &str, bytes: &[u8]) -> Form {
        self.parts.push((
            "receipt".into(),
            Some((file_name.into(), content_type.into())),
            bytes.to_vec(),
        ));
        self
    }

    fn body(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, file, bytes) in &self.parts {
            out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
            match file {
                Some((file_name, content_type)) => out.extend_from_slice(
                    format!(
                        "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\nContent-Type: {content_type}\r\n\r\n"
                    )
                    .as_bytes(),
                ),
                None => out.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
                ),
            }
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
        out
    }

    /// The form's `POST` from the page's own origin, from `peer` when given; its body a
    /// stream that sets `read` when first polled, when given.
    fn request_with(
        &self,
        path: &str,
        peer: Option<SocketAddr>,
        read: Option<Arc<AtomicBool>>,
    ) -> Request<Body> {
        let bytes = self.body();
        let body = match read {
            None => Body::from(bytes),
            Some(flag) => Body::from_stream(futures_util::stream::once(async move {
                flag.store(true, Ordering::SeqCst);
                Ok::<_, std::io::Error>(bytes)
            })),
        };
        let mut request = Request::post(path)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .header("sec-fetch-site", "same-origin")
            .body(body)
            .expect("a request");
        if let Some(peer) = peer {
            request.extensions_mut().insert(ConnectInfo(peer));
        }
        request
    }

    fn request(&self, path: &str, peer: Option<SocketAddr>) -> Request<Body> {
        self.request_with(path, peer, None)
    }
}

/// A PNG of a few dozen bytes whose header declares 100,000 x 100,000 pixels.
fn png_bomb() -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let mut ihdr = 100_000u32.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    let idat = [
        0x78, 0x01, 0x01, 0x02, 0x00, 0xFD, 0xFF, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01,
    ];
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [
        (b"IHDR", &ihdr[..]),
        (b"IDAT", &idat[..]),
        (b"IEND", &[][..]),
    ] {
        out.extend_from_slice(&u32::try_from(data.len()).expect("small").to_be_bytes());
        let typed_at = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[typed_at..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    out
}

fn canceled_with_pdf() -> Form {
    Form::default()
        .text("reason", "paid_but_canceled")
        .text("claimed_amount", "1 500,00")
        .text("paid_at", "2026-10-01T12:05")
        .text("payer_bank", "Sberbank")
        .file("receipt.pdf", "application/pdf", PDF)
        // The second file input, left empty: no file.
        .file("", "application/octet-stream", b"")
}

#[tokio::test]
async fn a_receipt_is_accepted_and_the_appeal_stored_from_the_payer() {
    let w = world().await;
    let (payment, token) = w.canceled("order-1").await;
    let (status, page) = w.get(&format!("/pay/{token}")).await;
    assert_eq!(status, StatusCode::OK);
    // The form: a multipart post to the page's own path, the reasons of a cancellation only.
    assert!(
        page.contains(&format!(
            "<form id=\"appeal-form\" method=\"post\" action=\"/pay/{token}/appeal\" enctype=\"multipart/form-data\">"
        )),
        "{page}"
    );
    assert!(page.contains("value=\"paid_but_canceled\""));
    assert!(page.contains("value=\"paid_other_amount\""));
    assert!(
        !page.contains("value=\"paid_twice\""),
        "not for a canceled payment"
    );
    assert!(page.contains("accept=\"application/pdf,image/png,image/jpeg\""));

    let (status, headers, body) = w.post(&token, &canceled_with_pdf()).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(headers["location"], format!("/pay/{token}#appeal").as_str());
    let csp = headers["content-security-policy"].to_str().expect("text");
    assert!(csp.contains("form-action 'self'"), "{csp}");

    let appeals = w.appeals().await;
    assert_eq!(appeals.len(), 1);
    let a = &appeals[0];
    assert_eq!(a.source, AppealSource::Payer);
    assert_eq!(a.payment_id, payment.id);
    assert_eq!(a.state, AppealState::Open);
    assert_eq!(a.idempotency_key, None);
    assert_eq!(a.reason.as_str(), "paid_but_canceled");
    assert_eq!(
        a.claimed_amount
            .map(|x| x.as_decimal().to_string())
            .as_deref(),
        Some("1500.00")
    );
    assert_eq!(
        a.paid_at.map(Timestamp::to_rfc3339).as_deref(),
        Some("2026-10-01T12:05:00.000Z"),
        "datetime-local is read as UTC"
    );
    assert_eq!(a.payer_bank.as_deref(), Some("Sberbank"));
    assert_eq!(a.receipts.len(), 1, "the empty second input is no file");
    assert_eq!(a.receipts[0].kind, ReceiptKind::Pdf);
    let stored = w
        .store
        .appeal_receipt(a.id, 0)
        .await
        .expect("a read")
        .expect("the receipt");
    assert_eq!(stored.bytes(), PDF);

    // The page says it was received and where it is; no form while it waits, no receipt back.
    let (status, page) = w.get(&format!("/pay/{token}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("Your appeal was received: <strong>waiting to be checked</strong>"),
        "{page}"
    );
    assert!(!page.contains("appeal-form"), "{page}");
    assert!(!page.contains(&a.receipts[0].sha256));
    assert!(!page.contains("%PDF"));
}

#[tokio::test]
async fn an_html_file_named_png_is_refused_and_nothing_stored() {
    let w = world().await;
    let (_, token) = w.canceled("order-2").await;
    let html = b"<!doctype html><script>alert(1)</script><p>paid</p>";
    let form =
        Form::default()
            .text("reason", "paid_but_canceled")
            .file("receipt.png", "image/png", html);
    let (status, headers, body) = w.post(&token, &form).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body.contains("Receipt 1: the file is not a PDF, PNG or JPEG, whatever its name says."),
        "{body}"
    );
    assert!(body.contains("role=\"alert\""));
    assert!(
        !body.contains("<script>alert"),
        "the file is never shown back"
    );
    assert!(headers["content-security-policy"]
        .to_str()
        .expect("text")
        .contains("form-action 'self'"));
    // What was typed comes back; the reason stays chosen.
    assert!(
        body.contains("value=\"paid_but_canceled\" required checked"),
        "{body}"
    );

    // A decompression bomb: a PNG of a few bytes declaring 100,000 x 100,000 pixels, in Russian.
    let (_, ru_token) = w.canceled("order-2-ru").await;
    w.language(PageLanguage::Ru).await;
    let form = Form::default().text("reason", "paid_but_canceled").file(
        "receipt.png",
        "image/png",
        &png_bomb(),
    );
    let (status, _, body) = w.post(&ru_token, &form).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body.contains("Квитанция 1: изображение слишком большое"),
        "{body}"
    );
    w.language(PageLanguage::En).await;

    // Over 2 MiB, and a third file: refused as they arrive.
    let big = [PDF, &vec![b' '; MAX_RECEIPT_BYTES]].concat();
    let form = Form::default().text("reason", "paid_but_canceled").file(
        "big.pdf",
        "application/pdf",
        &big,
    );
    let (status, _, body) = w.post(&token, &form).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(
        body.contains("Receipt 1: the file is larger than 2 MiB."),
        "{body}"
    );
    let form = Form::default()
        .text("reason", "paid_but_canceled")
        .file("a.pdf", "application/pdf", PDF)
        .file("b.pdf", "application/pdf", PDF)
        .file("c.pdf", "application/pdf", PDF);
    let (status, _, body) = w.post(&token, &form).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(body.contains("Attach at most 2 files."), "{body}");
    // No receipt at all.
    let form = Form::default().text("reason", "paid_but_canceled");
    let (status, _, body) = w.post(&token, &form).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("Attach your bank"), "{body}");
    assert!(w.appeals().await.is_empty(), "nothing stored");
}

#[tokio::test]
async fn a_payment_still_processing_is_refused() {
    let w = world().await;
    let (_, token) = w.payment("order-3").await;
    let (_, page) = w.get(&format!("/pay/{token}")).await;
    assert!(!page.contains("appeal-form"), "an open page offers no form");
    let (status, _, body) = w.post(&token, &canceled_with_pdf()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("This payment is still open: an appeal can be sent once it is closed."),
        "{body}"
    );
    assert!(w.appeals().await.is_empty());
}

#[tokio::test]
async fn a_fourth_appeal_is_refused() {
    let w = world().await;
    let (payment, token) = w.canceled("order-4").await;
    for n in 0..MAX_APPEALS_PER_SOURCE {
        let (status, _, body) = w.post(&token, &canceled_with_pdf()).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "appeal {n}: {body}");
        // While it waits, another is refused: one appeal under way at a time.
        let (status, _, body) = w.post(&token, &canceled_with_pdf()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(
            body.contains("An appeal about this payment is being checked already."),
            "{body}"
        );
        let newest = w.appeals().await.remove(0);
        w.service
            .appeals()
            .decide_appeal(
                newest.id,
                AppealTrigger::Reject {
                    by: "support".into(),
                    note: None,
                },
                "support",
                ChangeSource::Support,
            )
            .await
            .expect("rejected");
    }
    let (_, page) = w.get(&format!("/pay/{token}")).await;
    assert!(
        page.contains(
            "Your appeal was received: <strong>rejected: the transfer was not found</strong>"
        ),
        "{page}"
    );
    assert!(page.contains("No more appeals about this payment can be sent from this page."));
    assert!(!page.contains("appeal-form"));
    let (status, _, body) = w.post(&token, &canceled_with_pdf()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("This payment takes no more appeals from this page."),
        "{body}"
    );
    assert_eq!(w.appeals().await.len(), MAX_APPEALS_PER_SOURCE as usize);

    // The merchant's appeal under way: the store refuses the payer's, and the page says so
    // without a word of the merchant's appeal.
    let (other, token) = w.canceled("order-5").await;
    let request = AppealRequest::new(
        Some("merchant-key".into()),
        "paid_but_canceled",
        None,
        None,
        Some("MERCHANT-SECRET-BANK".into()),
        Vec::new(),
    )
    .expect("a request");
    w.service
        .appeals()
        .open_appeal_for(&other, AppealSource::Merchant, request)
        .await
        .expect("the merchant's appeal");
    let (_, page) = w.get(&format!("/pay/{token}")).await;
    assert!(!page.contains("MERCHANT-SECRET-BANK"));
    assert!(!page.contains("appeal was received"), "{page}");
    let (status, _, body) = w.post(&token, &canceled_with_pdf()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("An appeal about this payment is being checked already."));
    assert!(!body.contains("MERCHANT-SECRET-BANK"));
    let payer = w
        .appeals()
        .await
        .into_iter()
        .filter(|a| a.payment_id == other.id && a.source == AppealSource::Payer)
        .count();
    assert_eq!(payer, 0);
    let _ = payment;
}

#[tokio::test]
async fn an_unknown_token_stores_nothing_and_its_body_is_never_read() {
    let w = world().await;
    let (_, page_404) = w.get("/pay/AAAAAAAAAAAAAAAAAAAAAA").await;
    for wrong in [
        "AAAAAAAAAAAAAAAAAAAAAA",
        "short",
        "0190f5a1-7c3e-7000-8000-000000000000",
    ] {
        let read = Arc::new(AtomicBool::new(false));
        let request = canceled_with_pdf().request_with(
            &format!("/pay/{wrong}/appeal"),
            None,
            Some(read.clone()),
        );
        let (status, headers, body) = w.send(request).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{wrong}");
        assert_eq!(body, page_404, "the page's own 404: {wrong}");
        assert_eq!(headers["cache-control"], "no-store");
        assert!(
            !read.load(Ordering::SeqCst),
            "the upload was read for {wrong}"
        );
    }
    assert!(w.appeals().await.is_empty());
}

#[tokio::test]
async fn the_per_source_limit_answers_429() {
    let w = world().await;
    let (_, token) = w.canceled("order-6").await;
    let peer: SocketAddr = "203.0.113.9:40000".parse().expect("an address");
    // Counted before the link is looked up: four wrong links and one real appeal pass...
    for _ in 0..4 {
        let request = canceled_with_pdf().request("/pay/AAAAAAAAAAAAAAAAAAAAAA/appeal", Some(peer));
        assert_eq!(w.send(request).await.0, StatusCode::NOT_FOUND);
    }
    let request = canceled_with_pdf().request(&format!("/pay/{token}/appeal"), Some(peer));
    assert_eq!(w.send(request).await.0, StatusCode::SEE_OTHER);
    // ... and the sixth from the same source is refused, on any link, storing nothing.
    let before = w.appeals().await.len();
    let request = canceled_with_pdf().request(&format!("/pay/{token}/appeal"), Some(peer));
    let (status, headers, body) = w.send(request).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let wait: u64 = headers["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    assert!((1..=12 * 60).contains(&wait), "{wait}");
    assert!(body.contains("Too many appeals"), "{body}");
    assert!(body.contains("Слишком много обращений"), "{body}");
    assert_eq!(w.appeals().await.len(), before);
    // Another source is not refused; this one passes again after 12 minutes.
    let other: SocketAddr = "198.51.100.7:40000".parse().expect("an address");
    let request = canceled_with_pdf().request("/pay/AAAAAAAAAAAAAAAAAAAAAA/appeal", Some(other));
    assert_eq!(w.send(request).await.0, StatusCode::NOT_FOUND);
    w.clock.advance(Duration::from_secs(12 * 60));
    let request = canceled_with_pdf().request("/pay/AAAAAAAAAAAAAAAAAAAAAA/appeal", Some(peer));
    assert_eq!(w.send(request).await.0, StatusCode::NOT_FOUND);
}
