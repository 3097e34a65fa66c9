//! The balance tab and the CSV exports over the real server: a live payment completed through
//! the operator API credits its `amount_usdt_rate`, the operator's payout and adjustment
//! follow two days later (the server's clock moved), and the tab's statements, the entries
//! export and the payments export say so exactly; a test payment never shows; another
//! merchant's user is refused as for the payments list.

use std::time::Duration;

use payments_cabinet::store::Role;
use payments_core::ledger::{EntryKind, Usdt};
use payments_core::store::EntryQuery;
use payments_core::Timestamp;
use serde_json::{json, Value};

use crate::support::{between, Cabinet};
use crate::visitor::{Page, Visitor};

/// A TRON address (the USDT contract's, a valid checksum).
const TRON: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

/// A formula a spreadsheet would run.
const FORMULA: &str = "=HYPERLINK(\"https://evil.example/x\",\"open\")";

/// `POST` to the operator API.
async fn operator(c: &Cabinet, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}{path}", c.server.operator_url))
        .bearer_auth(c.server.operator_token.expose())
        .json(&body)
        .send()
        .await
        .expect("the operator API answers");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A live payment of the demo project; its id.
async fn create(c: &Cabinet, body: Value) -> String {
    let r = c.create_payment(&body).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    r.json["id"].as_str().expect("id").to_string()
}

/// The UTC day of `t`, `YYYY-MM-DD`.
fn day(t: Timestamp) -> String {
    t.to_rfc3339()[..10].to_string()
}

/// The UTC day `days` after `t`'s.
fn day_after(t: Timestamp, days: u64) -> String {
    day(t + Duration::from_secs(86_400 * days))
}

/// The text of the element with `id` (up to its first `<`).
fn by_id<'a>(html: &'a str, id: &str) -> &'a str {
    between(html, &format!("id=\"{id}\""), "<")
        .and_then(|rest| rest.split_once('>'))
        .map(|(_, text)| text)
        .unwrap_or_else(|| panic!("no #{id} in {html}"))
}

/// The statement's figures: opening, (count, sum) of each kind in `EntryKind::ALL` order,
/// closing.
fn statement(page: &Page) -> (String, Vec<(String, String)>, String) {
    assert_eq!(page.status, 200, "{}", page.body);
    let lines = EntryKind::ALL
        .iter()
        .map(|k| {
            (
                by_id(&page.body, &format!("count-{k}")).to_string(),
                by_id(&page.body, &format!("sum-{k}")).to_string(),
            )
        })
        .collect();
    (
        by_id(&page.body, "opening").to_string(),
        lines,
        by_id(&page.body, "closing").to_string(),
    )
}

/// A CSV answer read back: its header and rows, after the headers of a download are checked.
fn csv_of(page: &Page, filename: &str) -> (Vec<String>, Vec<Vec<String>>) {
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.headers["content-type"], "text/csv; charset=utf-8");
    assert_eq!(
        page.headers["content-disposition"],
        format!("attachment; filename=\"{filename}\"").as_str()
    );
    let mut r = csv::Reader::from_reader(page.body.as_bytes());
    let header = r
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_string)
        .collect();
    let rows = r
        .records()
        .map(|r| r.expect("a row").iter().map(str::to_string).collect())
        .collect();
    (header, rows)
}

/// No cell of `rows` outside the `numeric` columns starts as a formula would.
fn no_formulas(header: &[String], rows: &[Vec<String>], numeric: &[&str]) {
    for row in rows {
        for (name, cell) in header.iter().zip(row) {
            if numeric.contains(&name.as_str()) {
                continue;
            }
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "{name}: {cell:?} starts as a formula"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_balance_tab_statements_and_exports_follow_the_ledger() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    let (other, _) = c.other_merchant("Other").await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    c.user("other@other.example", Role::Merchant(other)).await;
    let project = c.server.project();

    // A live payment with metadata, completed by the operator: a credit of its
    // amount_usdt_rate. A second one is left to expire (no entry).
    let paid = create(
        &c,
        json!({"merchant_payment_id": "-cmd1", "amount": "3400", "payment_method": "sbp",
               "metadata": {"note": FORMULA, "order": "A-1"}}),
    )
    .await;
    let open = create(
        &c,
        json!({"merchant_payment_id": "open-1", "amount": "1500", "payment_method": "sbp"}),
    )
    .await;
    let (status, body) = operator(
        &c,
        &format!("/operator/v1/payments/{paid}/confirm"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let read = c.server.client().get_payment(&paid).await.expect("a read");
    let rate = read.json["merchant_information"]["amount_usdt_rate"]
        .as_str()
        .expect("amount_usdt_rate as a string")
        .to_string();
    let credit = Usdt::parse(&rate).expect("4 decimals");
    assert!(credit.units() > 20_000, "a credit above the payout: {rate}");
    let store = c.server.state.service.store().clone();
    let entries = store
        .find_entries(&EntryQuery::new(project, 10))
        .await
        .expect("entries");
    assert_eq!(entries.len(), 1, "{entries:?}");
    let t0 = entries[0].posting.at;

    // A test payment, completed through the test helpers: no entry (checked below).
    c.server
        .patch_project(payments_directory::ProjectPatch {
            test_mode: Some(true),
            ..Default::default()
        })
        .await;
    let test = create(
        &c,
        json!({"merchant_payment_id": "test-1", "amount": "5000", "payment_method": "sbp"}),
    )
    .await;
    let done = c
        .server
        .client()
        .post(&format!("/api/v1/test/payments/{test}/complete"), b"{}")
        .await
        .expect("the test helper answers");
    assert_eq!(done.status.as_u16(), 200, "{}", done.json);
    let read_test = c.server.client().get_payment(&test).await.expect("a read");
    assert_eq!(
        (
            read_test.json["status"].clone(),
            read_test.json["is_test"].clone()
        ),
        (json!("completed"), json!(true))
    );

    // Two days later: a payout and an adjustment with a formula for a reason.
    c.clock.advance(Duration::from_secs(2 * 86_400));
    let reference = "ab".repeat(32);
    let (status, body) = operator(
        &c,
        &format!("/operator/v1/projects/{project}/payouts"),
        json!({"amount": "1.5", "destination": TRON, "reference": reference}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = operator(
        &c,
        &format!("/operator/v1/projects/{project}/adjustments"),
        json!({"amount": "-1.25", "reason": FORMULA}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let payout = Usdt::parse("-1.5").expect("an amount");
    let adjustment = Usdt::parse("-1.25").expect("an amount");
    let after_payout = credit.checked_add(payout).expect("in range");
    let now = after_payout.checked_add(adjustment).expect("in range");

    let (mut owner, _) = crate::enrolled(&c, "owner@shop.example").await;
    let tab = owner.get(&format!("/projects/{project}/balance")).await;
    assert_eq!(tab.status, 200, "{}", tab.body);
    assert_eq!(by_id(&tab.body, "balance"), now.to_string());
    assert_eq!(by_id(&tab.body, "total-credit"), credit.to_string());
    assert_eq!(by_id(&tab.body, "total-payout"), "-1.5000");
    assert_eq!(by_id(&tab.body, "total-operator_adjustment"), "-1.2500");
    assert!(
        tab.body
            .contains("id=\"total-payout\" class=\"amount neg\">-1.5000<"),
        "a negative total is marked: {}",
        tab.body
    );
    assert!(tab.body.contains(&format!(
        "href=\"/projects/{project}/balance\" aria-current=\"page\""
    )));
    // The current month so far ends now: its closing is the balance.
    let (_, _, closing) = statement(&tab);
    assert_eq!(closing, now.to_string());
    assert!(
        tab.body.contains("id=\"entries-csv\""),
        "the export's button"
    );

    // The whole ledger: the entries with their links, destination, hash and reason.
    let all = format!(
        "/projects/{project}/balance?from=2000-01-01&to={}",
        day_after(t0, 3)
    );
    let page = owner.get(&all).await;
    let (opening, lines, closing) = statement(&page);
    assert_eq!(
        (opening.as_str(), closing.as_str()),
        ("0.0000", now.to_string().as_str())
    );
    assert_eq!(lines[0], ("1".to_string(), credit.to_string()));
    assert!(page.body.contains(&format!("href=\"/payments/{paid}\"")));
    // The entry names its payment by the merchant's order number, not by its id.
    assert!(
        page.body
            .contains("Payment <span class=\"id\">-cmd1</span>"),
        "{}",
        page.body
    );
    assert!(page.body.contains(TRON) && page.body.contains(&reference));
    assert!(page.body.contains("Reason: =HYPERLINK("), "{}", page.body);
    assert!(!page.body.contains(&open), "a payment without an entry");
    let newest = page.body.find("id=\"entry-3\"").expect("entry 3");
    let oldest = page.body.find("id=\"entry-1\"").expect("entry 1");
    assert!(newest < oldest, "newest first");

    // Statements: before the credit, its day, the days between, and after everything.
    let period =
        |from: String, to: String| format!("/projects/{project}/balance?from={from}&to={to}");
    let zero = ("0".to_string(), "0.0000".to_string());
    let eve = day(t0.saturating_sub(Duration::from_secs(86_400)));
    let before = statement(&owner.get(&period("2000-01-01".into(), eve)).await);
    assert_eq!(
        before,
        ("0.0000".into(), vec![zero.clone(); 5], "0.0000".into())
    );
    let on = statement(&owner.get(&period(day(t0), day(t0))).await);
    assert_eq!(on.0, "0.0000");
    assert_eq!(on.1[0], ("1".to_string(), credit.to_string()));
    assert_eq!(on.2, credit.to_string());
    let later = statement(&owner.get(&period(day_after(t0, 1), day_after(t0, 2))).await);
    assert_eq!(later.0, credit.to_string(), "opening: after the credit");
    assert_eq!(later.1[0], zero);
    assert_eq!(later.1[3], ("1".to_string(), "-1.5000".to_string()));
    assert_eq!(later.1[4], ("1".to_string(), "-1.2500".to_string()));
    assert_eq!(later.2, now.to_string());
    let after = statement(
        &owner
            .get(&period(day_after(t0, 3), day_after(t0, 40)))
            .await,
    );
    assert_eq!(
        after,
        (now.to_string(), vec![zero.clone(); 5], now.to_string())
    );

    // Bad periods: a message on the page, not an error of the server.
    let bad = owner
        .get(&format!("/projects/{project}/balance?from=2026-02-30"))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("is not a date") && bad.body.contains("aria-invalid=\"true\""));
    assert_eq!(
        by_id(&bad.body, "balance"),
        now.to_string(),
        "the balance is still shown"
    );
    let reversed = owner.get(&period(day_after(t0, 2), day(t0))).await;
    assert_eq!(reversed.status, 400, "{}", reversed.body);
    assert!(
        reversed.body.contains("is after its last day"),
        "{}",
        reversed.body
    );
    let bad_csv = owner
        .get(&format!(
            "/projects/{project}/balance/entries.csv?to=31.12.2026"
        ))
        .await;
    assert_eq!(bad_csv.status, 400, "{}", bad_csv.body);

    // The entries export: oldest first, exact amounts and balances, the formula quoted.
    let (from, to) = ("2000-01-01".to_string(), day_after(t0, 3));
    let export = owner
        .get(&format!(
            "/projects/{project}/balance/entries.csv?from={from}&to={to}"
        ))
        .await;
    let (header, rows) = csv_of(&export, &format!("balance-{project}-{from}-{to}.csv"));
    assert_eq!(
        header,
        [
            "seq",
            "id",
            "created_at",
            "kind",
            "amount",
            "balance_after",
            "currency",
            "payment_id",
            "payment_version",
            "destination",
            "reference",
            "reason"
        ]
    );
    assert_eq!(rows.len(), 3, "{rows:?}");
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let kinds: Vec<&str> = rows.iter().map(|r| r[col("kind")].as_str()).collect();
    assert_eq!(kinds, ["credit", "payout", "operator_adjustment"]);
    let amounts: Vec<&str> = rows.iter().map(|r| r[col("amount")].as_str()).collect();
    assert_eq!(
        amounts,
        [credit.to_string(), "-1.5000".into(), "-1.2500".into()]
    );
    let balances: Vec<&str> = rows
        .iter()
        .map(|r| r[col("balance_after")].as_str())
        .collect();
    assert_eq!(
        balances,
        [
            credit.to_string(),
            after_payout.to_string(),
            now.to_string()
        ]
    );
    assert_eq!(rows[0][col("payment_id")], paid);
    assert!(rows[0][col("payment_version")].parse::<u64>().is_ok());
    assert_eq!(rows[1][col("destination")], TRON);
    assert_eq!(rows[1][col("reference")], reference);
    assert_eq!(rows[2][col("reason")], format!("'{FORMULA}"));
    assert_eq!(rows[2][col("currency")], "USDT");
    assert!(rows.iter().all(|r| r[col("seq")].parse::<u64>().is_ok()));
    no_formulas(
        &header,
        &rows,
        &["seq", "amount", "balance_after", "payment_version"],
    );
    // A period without the credit.
    let export = owner
        .get(&format!(
            "/projects/{project}/balance/entries.csv?from={}&to={}",
            day_after(t0, 1),
            day_after(t0, 2)
        ))
        .await;
    let (_, rows) = csv_of(
        &export,
        &format!(
            "balance-{project}-{}-{}.csv",
            day_after(t0, 1),
            day_after(t0, 2)
        ),
    );
    assert_eq!(rows.len(), 2);

    // The payments export: every payment, the metadata as a JSON object, the settlement.
    let export = owner
        .get(&format!("/projects/{project}/payments.csv"))
        .await;
    let (header, rows) = csv_of(&export, &format!("payments-{project}.csv"));
    assert_eq!(
        header,
        [
            "id",
            "merchant_payment_id",
            "status",
            "flow",
            "amount",
            "initial_amount",
            "currency",
            "payment_method",
            "course",
            "rate",
            "amount_usdt",
            "amount_usdt_rate",
            "created_at",
            "updated_at",
            "metadata"
        ]
    );
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let row = |id: &str| {
        rows.iter()
            .find(|r| r[col("id")] == id)
            .unwrap_or_else(|| panic!("{id} in {rows:?}"))
            .clone()
    };
    let p = row(&paid);
    assert_eq!(p[col("merchant_payment_id")], "'-cmd1", "quoted");
    assert_eq!(p[col("status")], "completed");
    assert_eq!(p[col("flow")], "runtime_live");
    assert_eq!(p[col("amount_usdt_rate")], rate);
    assert_eq!(
        p[col("amount_usdt")],
        read.json["merchant_information"]["amount_usdt"]
            .as_str()
            .expect("amount_usdt")
    );
    assert!(p[col("metadata")].starts_with('{'));
    let metadata: Value = serde_json::from_str(&p[col("metadata")]).expect("JSON");
    assert_eq!(metadata, json!({"note": FORMULA, "order": "A-1"}));
    assert_eq!(row(&open)[col("metadata")], "", "no metadata: empty");
    assert_eq!(row(&open)[col("status")], "canceled", "expired meanwhile");
    no_formulas(
        &header,
        &rows,
        &[
            "amount",
            "initial_amount",
            "course",
            "rate",
            "amount_usdt",
            "amount_usdt_rate",
        ],
    );
    // The list's filters.
    let export = owner
        .get(&format!("/projects/{project}/payments.csv?status=canceled"))
        .await;
    let (_, rows) = csv_of(&export, &format!("payments-{project}.csv"));
    let ids: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(ids, [open.as_str()]);
    let list = owner
        .get(&format!(
            "/projects/{project}/payments?status=canceled&merchant_payment_id=open-1"
        ))
        .await;
    assert!(
        list.body.contains(&format!(
            "href=\"/projects/{project}/payments.csv?status=canceled&#38;from=&#38;to=&#38;merchant_payment_id=open-1\""
        )) || list.body.contains(&format!(
            "href=\"/projects/{project}/payments.csv?status=canceled&amp;from=&amp;to=&amp;merchant_payment_id=open-1\""
        )),
        "the export's button carries the filters: {}",
        list.body
    );

    // The test payment, completed, never reached the balance.
    let tab = owner.get(&all).await;
    assert_eq!(by_id(&tab.body, "balance"), now.to_string());
    assert!(
        !tab.body.contains(&test),
        "the test payment is not an entry"
    );
    let export = owner
        .get(&format!(
            "/projects/{project}/balance/entries.csv?from={from}&to={to}"
        ))
        .await;
    let (_, rows) = csv_of(&export, &format!("balance-{project}-{from}-{to}.csv"));
    assert_eq!(rows.len(), 3);
    assert!(!export.body.contains(&test));

    // Another merchant's user: the payments list's refusal, for the tab and both exports.
    let (mut stranger, _) = crate::enrolled(&c, "other@other.example").await;
    let list = stranger.get(&format!("/projects/{project}/payments")).await;
    assert_eq!(list.status, 404);
    for path in [
        format!("/projects/{project}/balance"),
        all.clone(),
        format!("/projects/{project}/balance/entries.csv?from={from}&to={to}"),
        format!("/projects/{project}/payments.csv"),
    ] {
        let p = stranger.get(&path).await;
        assert_eq!(p.status, list.status, "{path}");
        assert_eq!(
            p.body, list.body,
            "{path}: the same page as the list's refusal"
        );
        assert!(!p.body.contains(&rate) && !p.body.contains("text/csv"));
    }
    // Without a session: to the sign-in.
    let mut anonymous = Visitor::new(c.url());
    let p = anonymous
        .get(&format!("/projects/{project}/balance/entries.csv"))
        .await;
    assert_eq!((p.status, p.location.as_deref()), (303, Some("/sign-in")));
    c.server.stop().await;
}

/// The tab's entries come 50 a page, newest first, with a link to the older ones that keeps
/// the period: no entry twice, none skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entries_of_a_period_page_fifty_at_a_time() {
    let (c, project) = demo_owner().await;
    for n in 1..=57 {
        let (status, body) = operator(
            &c,
            &format!("/operator/v1/projects/{project}/adjustments"),
            json!({"amount": "0.0001", "reason": format!("adjustment {n:02}")}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (mut owner, _) = crate::enrolled(&c, "owner@shop.example").await;
    let today = day(c.server.state.service.ports().clock.now());
    let first = owner
        .get(&format!(
            "/projects/{project}/balance?from=2000-01-01&to={today}"
        ))
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(by_id(&first.body, "balance"), "0.0057");
    let seqs = |body: &str| -> Vec<u64> {
        body.split("<tr id=\"entry-")
            .skip(1)
            .map(|rest| {
                rest.split('"')
                    .next()
                    .expect("a seq")
                    .parse()
                    .expect("a number")
            })
            .collect()
    };
    let next = between(
        &first.body,
        "<p><a href=\"",
        "\" rel=\"next\">Older entries",
    )
    .expect("a link to the older entries")
    .replace("&#38;", "&")
    .replace("&amp;", "&");
    assert!(next.contains("from=2000-01-01") && next.contains(&format!("to={today}")));
    let second = owner.get(&next).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert!(!second.body.contains("Older entries"), "the last page");
    let mut shown = seqs(&first.body);
    assert_eq!(shown.len(), 50);
    shown.extend(seqs(&second.body));
    assert_eq!(shown, (1..=57).rev().collect::<Vec<u64>>());
    // The statement is the whole period's on every page.
    assert_eq!(
        statement(&second).1[4],
        ("57".to_string(), "0.0057".to_string())
    );
    c.server.stop().await;
}

/// The Excel exports over the real server, byte for byte where Excel relies on them: the
/// Russian file starts with the UTF-8 byte-order mark, separates cells with `;`, writes
/// decimal commas, quotes a cell with `;` or a quote, keeps Cyrillic metadata as it was
/// sent, one column per metadata key; the export buttons offer the page language's Excel
/// first; the address without `format` still gives the plain file, an unknown format a `400`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_excel_exports_are_what_a_russian_excel_reads() {
    let (c, project) = demo_owner().await;
    let paid = create(
        &c,
        json!({"merchant_payment_id": "ru-1", "amount": "1234.56", "payment_method": "sbp",
               "metadata": {"city": "Москва; центр", "gift": "«ёлка» \"Ель\"", "z": "=1+2"}}),
    )
    .await;
    let (status, body) = operator(
        &c,
        &format!("/operator/v1/projects/{project}/adjustments"),
        json!({"amount": "-1.12", "reason": "сверка; \"акт\" №1"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (mut owner, _) = crate::enrolled(&c, "owner@shop.example").await;

    let file = owner
        .get(&format!("/projects/{project}/payments.csv?format=excel-ru"))
        .await;
    russian_payments_file(&file, &paid);

    let project_id = project.to_string();
    for (format, head, row) in [
        (
            "&format=excel-ru",
            "\u{FEFF}seq;id;created_at;kind;amount;",
            ";operator_adjustment;-1,1200;-1,1200;USDT;;;;;\"сверка; \"\"акт\"\" №1\"\n",
        ),
        // The English Excel file: the byte-order mark, commas and decimal points.
        (
            "&format=excel-en",
            "\u{FEFF}seq,id,created_at,",
            ",operator_adjustment,-1.1200,-1.1200,USDT,",
        ),
        // Without a format: the plain file, as before.
        (
            "",
            "seq,id,created_at,",
            ",operator_adjustment,-1.1200,-1.1200,USDT,",
        ),
    ] {
        entries_file(&mut owner, &project_id, format, head, row).await;
    }
    let bad = owner
        .get(&format!("/projects/{project}/payments.csv?format=xlsx"))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);

    excel_buttons(&mut owner, &project_id).await;
    c.server.stop().await;
}

/// A cabinet whose demo merchant has the user `owner@shop.example`; the demo project.
async fn demo_owner() -> (Cabinet, payments_core::ProjectId) {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    (c, project)
}

/// The checks of [`the_excel_exports_are_what_a_russian_excel_reads`]'s payments file in
/// `excel-ru`: its bytes, then its cells read back with `;`.
fn russian_payments_file(file: &Page, paid: &str) {
    assert_eq!(file.status, 200, "{}", file.body);
    assert_eq!(file.headers["content-type"], "text/csv; charset=utf-8");
    let bytes = file.body.as_bytes();
    assert_eq!(bytes[..3], [0xEF, 0xBB, 0xBF], "the byte-order mark");
    let header = "id;merchant_payment_id;status;flow;amount;initial_amount;currency;\
                  payment_method;course;rate;amount_usdt;amount_usdt_rate;created_at;updated_at;\
                  metadata.city;metadata.gift;metadata.z;metadata\n";
    assert!(file.body[3..].starts_with(header), "{}", file.body);
    assert!(
        file.body.contains(";1234,56;1234,56;RUB;sbp;")
            && file
                .body
                .contains(";\"Москва; центр\";\"«ёлка» \"\"Ель\"\"\";'=1+2;\n"),
        "{}",
        file.body
    );
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b';')
        .from_reader(&bytes[3..]);
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a row")).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!((&rows[0][0], &rows[0][4]), (paid, "1234,56"));
    assert_eq!(&rows[0][14], "Москва; центр");
    assert_eq!(&rows[0][15], "«ёлка» \"Ель\"");
    assert!(
        rows[0][10].contains(',') && !rows[0][10].contains('.'),
        "amount_usdt: {:?}",
        &rows[0][10]
    );
    let created = &rows[0][12];
    assert!(
        created.len() == 19 && created.as_bytes()[2] == b'.' && created.as_bytes()[5] == b'.',
        "DD.MM.YYYY HH:MM:SS: {created}"
    );
}

/// The Excel buttons of the payments and balance pages: the page language's first and
/// highlighted, in English and then with the language switch's cookie in Russian.
async fn excel_buttons(owner: &mut Visitor, project: &str) {
    let list = owner.get(&format!("/projects/{project}/payments")).await;
    comes_before(&list.body, "payments-excel-en", "payments-excel-ru");
    assert!(list.body.contains(&format!(
        "<a class=\"button primary\" id=\"payments-excel-en\" href=\"/projects/{project}/payments.csv?status=&#38;from=&#38;to=&#38;merchant_payment_id=&#38;format=excel-en\" download>Download for Excel (English)</a>"
    )), "{}", list.body);
    // The language switch's cookie beside the session's (the visitor keeps one cookie).
    let session = owner.cookie.clone().expect("a session");
    owner.cookie = Some(format!("{session}; cabinet-lang=ru"));
    let tab = owner.get(&format!("/projects/{project}/balance")).await;
    comes_before(&tab.body, "entries-excel-ru", "entries-excel-en");
    assert!(
        tab.body
            .contains("class=\"button primary\" id=\"entries-excel-ru\"")
            && tab.body.contains("Скачать для Excel (русский)"),
        "{}",
        tab.body
    );
}

/// The element with id `first` comes before the one with id `second` in `html`.
fn comes_before(html: &str, first: &str, second: &str) {
    let at = |id: &str| {
        html.find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no #{id} in {html}"))
    };
    assert!(at(first) < at(second), "#{first} before #{second}: {html}");
}

/// The entries export of everything with `format` (a query part, empty for none) starts with
/// `head` and has `row`.
async fn entries_file(owner: &mut Visitor, project: &str, format: &str, head: &str, row: &str) {
    let file = owner
        .get(&format!(
            "/projects/{project}/balance/entries.csv?from=2000-01-01{format}"
        ))
        .await;
    assert_eq!(file.status, 200, "{}", file.body);
    assert!(file.body.starts_with(head), "{format}: {}", file.body);
    assert!(file.body.contains(row), "{format}: {}", file.body);
}
