//! Appeals in the web cabinet, through its router over the in-memory stores and a manual
//! clock: a merchant's user opens an appeal with a receipt from the payment card (once, however
//! often the form is sent), a file that is not a receipt is refused with nothing stored, the
//! queue and other merchants' appeals are support's and their own, and support accepts (the
//! payment is completed with the amount) or rejects (nothing moves) from the queue.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use payments_cabinet::accounts::{Cabinet, CabinetConfig, Client};
use payments_cabinet::store::{AuditQuery, CabinetAuditLog, Role};
use payments_cabinet::testing::MemoryCabinetStore;
use payments_cabinet::web::{router, CabinetState};
use payments_core::amount::Amount;
use payments_core::appeal::{Appeal, AppealQuery, AppealState};
use payments_core::payment::{Flow, Payment, PaymentMethod, PaymentStatus, Requisites};
use payments_core::sealing::{SealingKey, SealingKeys};
use payments_core::service::Actor;
use payments_core::settlement::{Course, FeePercent, Pricing};
use payments_core::store::{AppealStore, PaymentStore, Store};
use payments_core::testing::{fixtures, ManualClock, MemoryStore};
use payments_core::{Clock, MerchantId, PaymentId, ProjectId, Timestamp};
use payments_directory::DirectoryAccess;
use tower::ServiceExt;

mod common;

const PASSWORD: &str = "correct horse battery staple";

/// A small PDF, as a payer's bank app exports one.
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n";

/// An HTML page: what a file named `receipt.png` may really be.
const HTML: &[u8] = b"<!doctype html><script>alert(1)</script>";

struct World {
    store: Arc<MemoryStore>,
    accounts: Arc<MemoryCabinetStore>,
    clock: ManualClock,
    cabinet: Cabinet,
    app: Router,
}

fn world() -> World {
    let store = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(Timestamp::from_unix_secs(1_790_856_000));
    let sealing = SealingKeys::new(SealingKey::from_bytes([9; 32]), vec![]);
    let service = common::service(store.clone(), &clock, sealing, 7);
    let accounts = Arc::new(MemoryCabinetStore::new());
    let cabinet = Cabinet::new(service, accounts.clone(), CabinetConfig::default());
    let app = router(CabinetState::new(cabinet.clone(), false));
    World {
        store,
        accounts,
        clock,
        cabinet,
        app,
    }
}

/// What a page answered.
struct Answer {
    status: StatusCode,
    location: Option<String>,
    headers: axum::http::HeaderMap,
    bytes: Vec<u8>,
}

impl Answer {
    fn body(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// A signed-in user's browser: its session cookie, and requests from the cabinet's own pages.
struct Browser {
    cookie: String,
}

impl World {
    /// A merchant with one live project.
    async fn merchant(&self, name: &str) -> (MerchantId, ProjectId) {
        let actor = Actor("test".into());
        let directory = self.cabinet.service().directory();
        let m = directory
            .create_merchant(name, None, &actor)
            .await
            .expect("a merchant");
        let p = directory
            .create_project(m.id, &format!("{name} site"), Default::default(), &actor)
            .await
            .expect("a project");
        (m.id, p.id)
    }

    /// A live payment of `project` that had requisites and was canceled: what a payer appeals.
    async fn canceled_payment(&self, project: ProjectId, mpid: &str) -> Payment {
        let n = mpid.bytes().fold(1u128, |n, b| n * 131 + u128::from(b));
        let mut p = fixtures::payment(
            PaymentId::from_uuid(uuid::Uuid::from_u128(n)),
            project,
            &fixtures::request(mpid, "100", PaymentMethod::Sbp),
            Flow::RuntimeLive,
            self.clock.now(),
            Duration::from_secs(15 * 60),
        );
        p.status = PaymentStatus::Canceled;
        p.requisites = Some(Requisites {
            requisite: "79001234567".into(),
            holder_name: "IVAN I.".into(),
            bank: Some("Сбербанк".into()),
            qrcode_link: None,
            deeplink_url: None,
        });
        p.pricing = Some(Pricing {
            course: Course::new(rust_decimal::Decimal::from(100)).expect("a course"),
            fee_percent: FeePercent::new(rust_decimal::Decimal::from(11)).expect("a fee"),
        });
        self.store.insert_payment(&p).await.expect("stored");
        p
    }

    async fn payment(&self, id: PaymentId) -> Payment {
        self.store
            .payment(id)
            .await
            .expect("store")
            .expect("the payment")
    }

    async fn appeals(&self, payment: PaymentId) -> Vec<Appeal> {
        self.store
            .find_appeals(&AppealQuery {
                payment: Some(payment),
                ..AppealQuery::newest(100)
            })
            .await
            .expect("appeals")
    }

    /// The cabinet's audit records.
    async fn audit(&self) -> Vec<payments_cabinet::store::CabinetAuditRecord> {
        let query = AuditQuery {
            limit: 100,
            ..Default::default()
        };
        let page = self.accounts.find_cabinet_audit(&query).await;
        page.expect("the audit log").records
    }

    /// The merchant "Shop" with a canceled payment `mpid` and its owner signed in.
    async fn shop(&self, mpid: &str) -> (MerchantId, Payment, Browser) {
        let (merchant, project) = self.merchant("Shop").await;
        let payment = self.canceled_payment(project, mpid).await;
        let owner = self
            .signed_in("owner@shop.example", Role::Merchant(merchant))
            .await;
        (merchant, payment, owner)
    }

    /// A user with a password, signed in with its first code: the browser of its session.
    async fn signed_in(&self, email: &str, role: Role) -> Browser {
        let client = Client::default();
        let invite = self
            .cabinet
            .users()
            .create(email, role, &Actor("test".into()))
            .await
            .expect("a user");
        self.cabinet
            .users()
            .set_password(invite.token.expose(), PASSWORD, &client)
            .await
            .expect("a password");
        let (full, _, _) =
            common::enrolled(&self.cabinet, &self.clock, email, PASSWORD, &client).await;
        Browser {
            cookie: format!("cabinet={full}"),
        }
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        let response = self.app.clone().oneshot(request).await.expect("an answer");
        let status = response.status();
        let headers = response.headers().clone();
        let location = headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes()
            .to_vec();
        Answer {
            status,
            location,
            headers,
            bytes,
        }
    }

    async fn get(&self, b: &Browser, path: &str) -> Answer {
        let request = Request::get(path)
            .header(header::COOKIE, &b.cookie)
            .body(Body::empty())
            .expect("a request");
        self.send(request).await
    }

    async fn post(&self, b: &Browser, path: &str, form: &[(&str, &str)]) -> Answer {
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let request = Request::post(path)
            .header(header::COOKIE, &b.cookie)
            .header("sec-fetch-site", "same-origin")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .expect("a request");
        self.send(request).await
    }

    /// The "Open an appeal" form sent with `fields` and `files` (name, content type, bytes).
    async fn upload(
        &self,
        b: &Browser,
        path: &str,
        fields: &[(&str, &str)],
        files: &[(&str, &str, &[u8])],
    ) -> Answer {
        let boundary = "----cabinet-test-boundary-7MA4YWxkTrZu0gW";
        let mut body = Vec::new();
        for (name, value) in fields {
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
                )
                .as_bytes(),
            );
        }
        for (file_name, content_type, bytes) in files {
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"receipt\"; filename=\"{file_name}\"\r\nContent-Type: {content_type}\r\n\r\n"
                )
                .as_bytes(),
            );
            body.extend_from_slice(bytes);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        let request = Request::post(path)
            .header(header::COOKIE, &b.cookie)
            .header("sec-fetch-site", "same-origin")
            .header(
                header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(Body::from(body))
            .expect("a request");
        self.send(request).await
    }

    /// The card's "Open an appeal" form of `payment` sent with `key` and the PDF receipt.
    async fn send_pdf(&self, b: &Browser, payment: &Payment, key: &str) -> Answer {
        let path = format!("/payments/{}/appeals", payment.id);
        let file = ("receipt.pdf", "application/pdf", PDF);
        self.upload(b, &path, &appeal_fields(key), &[file]).await
    }

    /// Follows a `303`.
    async fn follow(&self, b: &Browser, answer: &Answer) -> Answer {
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body());
        let to = answer.location.as_deref().expect("a location");
        let to = to.split('#').next().unwrap_or(to);
        self.get(b, to).await
    }
}

impl World {
    /// `owner` opens an appeal about `payment` from its card with a PDF receipt; the appeal.
    async fn opened(&self, owner: &Browser, payment: &Payment) -> Appeal {
        let path = format!("/payments/{}", payment.id);
        let key = form_key(&self.get(owner, &path).await.body());
        let sent = self.send_pdf(owner, payment, &key).await;
        assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body());
        self.appeals(payment.id).await.remove(0)
    }
}

/// The idempotency key the card's form carries (a hidden field, new at every render).
fn form_key(card: &str) -> String {
    let at = card
        .find("name=\"idempotency_key\" value=\"")
        .expect("the card has the appeal form");
    let rest = &card[at + "name=\"idempotency_key\" value=\"".len()..];
    rest[..rest.find('"').expect("the value ends")].to_string()
}

fn appeal_fields(key: &str) -> Vec<(&str, &str)> {
    vec![
        ("idempotency_key", key),
        ("reason", "paid_other_amount"),
        ("claimed_amount", "95.50"),
        ("paid_at", "2026-10-01T10:00"),
        ("payer_bank", "Т-Банк"),
    ]
}

/// A merchant's user opens an appeal with a PDF receipt from the card; the card lists it with
/// its state, amount, deadline and receipt, which downloads as a sandboxed attachment.
#[tokio::test]
async fn a_merchant_opens_an_appeal_with_a_pdf_receipt_from_the_card_and_sees_it() {
    let w = world();
    let (merchant, payment, owner) = w.shop("ap-1").await;
    let path = format!("/payments/{}", payment.id);

    let card = w.get(&owner, &path).await;
    assert_eq!(card.status, StatusCode::OK, "{}", card.body());
    assert!(card.body().contains("Open an appeal"), "{}", card.body());
    let key = form_key(&card.body());
    let sent = w.send_pdf(&owner, &payment, &key).await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body());
    assert_eq!(
        sent.location.as_deref(),
        Some(format!("{path}?done=appealed#appeals").as_str())
    );
    let stored = w.appeals(payment.id).await;
    assert_eq!(stored.len(), 1);
    let appeal = &stored[0];
    assert_eq!(appeal.state, AppealState::Open);
    assert_eq!(appeal.claimed_amount, Some(Amount::parse("95.50").unwrap()));
    assert_eq!(appeal.payer_bank.as_deref(), Some("Т-Банк"));
    assert_eq!(
        appeal.paid_at,
        Timestamp::parse_rfc3339("2026-10-01T10:00:00Z"),
        "the local time reads as UTC"
    );
    assert_eq!(appeal.receipts.len(), 1);

    let card = w.follow(&owner, &sent).await;
    let html = card.body();
    assert_eq!(card.status, StatusCode::OK, "{html}");
    assert!(html.contains("The appeal was received"), "{html}");
    assert!(
        html.contains(&format!("data-appeal=\"{}\"", appeal.id)),
        "{html}"
    );
    for shown in [
        "a-open",
        "95.50 RUB",
        "Paid another amount",
        "Т-Банк",
        "waiting for a decision",
    ] {
        assert!(html.contains(shown), "the card lacks {shown:?}: {html}");
    }
    let receipt = format!("/appeals/{}/receipts/0", appeal.id);
    assert!(html.contains(&receipt), "a link to the receipt: {html}");

    let download = w.get(&owner, &receipt).await;
    assert_eq!(download.status, StatusCode::OK);
    assert_eq!(download.bytes, PDF, "the receipt's bytes as sent");
    let h = &download.headers;
    assert_eq!(h[header::CONTENT_TYPE], "application/pdf");
    assert!(h[header::CONTENT_DISPOSITION]
        .to_str()
        .unwrap()
        .starts_with("attachment; filename=\"appeal-"));
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(h[header::CONTENT_SECURITY_POLICY], "sandbox");
    assert_eq!(
        w.get(&owner, &format!("/appeals/{}/receipts/1", appeal.id))
            .await
            .status,
        StatusCode::NOT_FOUND,
        "there is one receipt"
    );

    let audit = w.audit().await;
    assert!(
        audit.iter().any(|r| r.action == "appeal.open"
            && r.target == appeal.id.to_string()
            && r.merchant_id == Some(merchant)),
        "{audit:?}"
    );
}

/// The form sent twice (a double click, a resend after a lost answer) opens one appeal: the
/// second answer is the first appeal's.
#[tokio::test]
async fn a_double_submit_opens_one_appeal() {
    let w = world();
    let (_, payment, owner) = w.shop("ap-2").await;
    let path = format!("/payments/{}", payment.id);
    let key = form_key(&w.get(&owner, &path).await.body());
    for _ in 0..2 {
        let sent = w.send_pdf(&owner, &payment, &key).await;
        assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body());
        assert_eq!(
            sent.location.as_deref(),
            Some(format!("{path}?done=appealed#appeals").as_str()),
            "both answered as received"
        );
    }
    assert_eq!(w.appeals(payment.id).await.len(), 1, "one appeal");
    // A new render has a new key: the card's form is not the one sent.
    assert_ne!(form_key(&w.get(&owner, &path).await.body()), key);
}

/// An HTML page named `receipt.png` is refused by its content, beside the receipt's field,
/// with what was typed kept; nothing is stored.
#[tokio::test]
async fn an_html_file_named_png_is_refused_and_nothing_is_stored() {
    let w = world();
    let (_, payment, owner) = w.shop("ap-3").await;
    let path = format!("/payments/{}", payment.id);
    let key = form_key(&w.get(&owner, &path).await.body());
    let sent = w
        .upload(
            &owner,
            &format!("{path}/appeals"),
            &appeal_fields(&key),
            &[("receipt.png", "image/png", HTML)],
        )
        .await;
    let card = w.follow(&owner, &sent).await;
    let html = card.body();
    assert_eq!(card.status, StatusCode::UNPROCESSABLE_ENTITY, "{html}");
    assert!(
        html.contains("id=\"appeal-receipt-1-error\"")
            && html.contains("not a PDF, PNG or JPEG file"),
        "{html}"
    );
    assert!(html.contains("value=\"95.50\""), "what was typed is kept");
    assert!(!html.contains("alert(1)"), "the file never comes back");
    assert!(w.appeals(payment.id).await.is_empty(), "nothing stored");
    assert_eq!(
        w.get(&owner, &path).await.status,
        StatusCode::OK,
        "shown once"
    );
}

/// The queue is support's, and a merchant's user sees neither another merchant's appeal nor
/// its receipts, nor can decide or open one there: all "not found".
#[tokio::test]
async fn a_merchant_user_cannot_see_the_queue_nor_another_merchants_appeal() {
    let w = world();
    let (merchant, project) = w.merchant("Shop").await;
    let (other, _) = w.merchant("Other").await;
    let payment = w.canceled_payment(project, "ap-4").await;
    let owner = w
        .signed_in("owner@shop.example", Role::Merchant(merchant))
        .await;
    let stranger = w
        .signed_in("clerk@other.example", Role::Merchant(other))
        .await;
    let path = format!("/payments/{}", payment.id);
    let appeal = w.opened(&owner, &payment).await;

    for b in [&owner, &stranger] {
        let queue = w.get(b, "/appeals").await;
        assert_eq!(
            queue.status,
            StatusCode::NOT_FOUND,
            "the queue is support's"
        );
        assert!(!queue.body().contains("ap-4"));
        let page = w.get(b, &format!("/appeals/{}/accept", appeal.id)).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND);
        let decided = w
            .post(
                b,
                &format!("/appeals/{}/accept", appeal.id),
                &[("amount", "100")],
            )
            .await;
        assert_eq!(decided.status, StatusCode::NOT_FOUND);
    }
    let card = w.get(&owner, &path).await.body();
    assert!(
        !card.contains("id=\"nav-appeals\""),
        "no queue in the navigation"
    );
    for path in [
        format!("/appeals/{}/receipts/0", appeal.id),
        format!("/payments/{}", payment.id),
    ] {
        let page = w.get(&stranger, &path).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert_ne!(page.bytes, PDF);
    }
    let key = form_key(&card);
    let opened = w.send_pdf(&stranger, &payment, &key).await;
    assert_eq!(opened.status, StatusCode::NOT_FOUND);
    let appeal_now = w.appeals(payment.id).await;
    assert_eq!(appeal_now, vec![appeal], "nothing changed");
}

/// Support opens the queue, accepts with the amount the Accept form offers (the claimed one)
/// after its confirmation, and sees the result: the payment is `completed` with the amount.
#[tokio::test]
async fn support_accepts_from_the_queue_and_the_payment_is_completed_with_the_amount() {
    let w = world();
    let (_, payment, owner) = w.shop("ap-5").await;
    let appeal = w.opened(&owner, &payment).await;
    // A day later (the appeal is past its deadline, not expired yet: no sweep runs here).
    w.clock.advance(Duration::from_secs(25 * 3600));
    let support = w.signed_in("help@support.example", Role::Support).await;

    let queue = w.get(&support, "/appeals").await;
    let html = queue.body();
    assert_eq!(queue.status, StatusCode::OK, "{html}");
    assert!(
        html.contains("id=\"nav-appeals\""),
        "in support's navigation"
    );
    assert!(
        html.contains(&format!("data-appeal=\"{}\"", appeal.id)),
        "{html}"
    );
    assert!(
        html.contains("Shop site") && html.contains("ap-5"),
        "{html}"
    );
    assert!(
        html.contains("overdue"),
        "past its 24-hour deadline: {html}"
    );
    assert!(
        html.contains(&format!("id=\"accept-{}\" name=\"amount\"", appeal.id))
            && html.contains("value=\"95.50\""),
        "Accept offers the claimed amount: {html}"
    );
    let confirm = w
        .get(
            &support,
            &format!("/appeals/{}/accept?amount=95.50", appeal.id),
        )
        .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body());
    assert!(confirm.body().contains("Accept and complete the payment"));

    let done = w
        .post(
            &support,
            &format!("/appeals/{}/accept", appeal.id),
            &[("amount", "95.50"), ("note", "found in the bank statement")],
        )
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body());
    let after = w.payment(payment.id).await;
    assert_eq!(after.status, PaymentStatus::Completed);
    assert_eq!(after.amount, Amount::parse("95.50").unwrap());
    let decided = w.appeals(payment.id).await.remove(0);
    assert_eq!(decided.state, AppealState::Accepted);
    assert_eq!(
        decided.decided_by.as_deref(),
        Some("cabinet:help@support.example")
    );
    let result = w.follow(&support, &done).await.body();
    assert!(
        result.contains("Appeal accepted: payment ap-5 is completed with 95.50 RUB."),
        "{result}"
    );
    assert!(
        !result.contains(&format!("data-appeal=\"{}\"", appeal.id)),
        "left the queue"
    );
    // Decided once: a second accept changes nothing and says why.
    let again = w
        .post(
            &support,
            &format!("/appeals/{}/accept", appeal.id),
            &[("amount", "100")],
        )
        .await;
    let refused = w.follow(&support, &again).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body());
    assert!(refused.body().contains("already decided"));
    assert_eq!(w.payment(payment.id).await, after);
    let audit = w.audit().await;
    assert!(audit
        .iter()
        .any(|r| r.action == "appeal.accept" && r.email == "help@support.example"));
}

/// Support rejects with a note: the appeal is rejected and the payment stays as it was.
#[tokio::test]
async fn support_rejects_and_nothing_moves() {
    let w = world();
    let (_, payment, owner) = w.shop("ap-6").await;
    let support = w.signed_in("help@support.example", Role::Support).await;
    let appeal = w.opened(&owner, &payment).await;
    let before = w.payment(payment.id).await;

    let review = w
        .post(&support, &format!("/appeals/{}/review", appeal.id), &[])
        .await;
    assert_eq!(review.status, StatusCode::SEE_OTHER, "{}", review.body());
    let page = w
        .get(&support, &format!("/appeals/{}/reject", appeal.id))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body().contains("id=\"decide-note\""));
    let done = w
        .post(
            &support,
            &format!("/appeals/{}/reject", appeal.id),
            &[("note", "no such transfer")],
        )
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body());
    assert_eq!(w.payment(payment.id).await, before, "nothing moved");
    let decided = w.appeals(payment.id).await.remove(0);
    assert_eq!(decided.state, AppealState::Rejected);
    assert_eq!(decided.note.as_deref(), Some("no such transfer"));
    let result = w.follow(&support, &done).await.body();
    assert!(
        result.contains("Appeal rejected: nothing moved; payment ap-6 stays canceled."),
        "{result}"
    );
    let card = w
        .get(&owner, &format!("/payments/{}", payment.id))
        .await
        .body();
    assert!(
        card.contains("Rejected: the transfer was not found") && card.contains("no such transfer"),
        "the merchant sees the outcome: {card}"
    );
}

/// The card's form takes two receipts of up to 2 MiB each (above the cabinet's 64 KiB form
/// limit: the route has its own); a larger file is refused beside its field, nothing stored.
#[tokio::test]
async fn receipts_up_to_two_mib_go_through_and_a_larger_one_is_refused() {
    let w = world();
    let (merchant, project) = w.merchant("Shop").await;
    let owner = w
        .signed_in("owner@shop.example", Role::Merchant(merchant))
        .await;
    // A PDF of `len` bytes: the small one with a comment before its end, `%%EOF` kept last.
    let pdf = |len: usize| {
        let end = b"%%EOF\n";
        let mut bytes = PDF[..PDF.len() - end.len()].to_vec();
        bytes.push(b'%');
        bytes.resize(len - end.len(), b'x');
        bytes.extend_from_slice(end);
        bytes
    };
    let max = payments_core::receipt::MAX_RECEIPT_BYTES;
    let big = w.canceled_payment(project, "ap-7").await;
    let path = format!("/payments/{}", big.id);
    let key = form_key(&w.get(&owner, &path).await.body());
    let (first, second) = (pdf(max), pdf(max - 1));
    let sent = w
        .upload(
            &owner,
            &format!("{path}/appeals"),
            &appeal_fields(&key),
            &[
                ("a.pdf", "application/pdf", first.as_slice()),
                ("b.pdf", "application/pdf", second.as_slice()),
            ],
        )
        .await;
    assert_eq!(
        sent.location.as_deref(),
        Some(format!("{path}?done=appealed#appeals").as_str()),
        "{}",
        sent.body()
    );
    assert_eq!(w.appeals(big.id).await[0].receipts.len(), 2);

    let over = w.canceled_payment(project, "ap-8").await;
    let path = format!("/payments/{}", over.id);
    let key = form_key(&w.get(&owner, &path).await.body());
    let too_big = pdf(max + 1);
    let sent = w
        .upload(
            &owner,
            &format!("{path}/appeals"),
            &appeal_fields(&key),
            &[("a.pdf", "application/pdf", too_big.as_slice())],
        )
        .await;
    let card = w.follow(&owner, &sent).await;
    assert_eq!(
        card.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        card.body()
    );
    assert!(card.body().contains("id=\"appeal-receipt-1-error\""));
    assert!(w.appeals(over.id).await.is_empty(), "nothing stored");
}
