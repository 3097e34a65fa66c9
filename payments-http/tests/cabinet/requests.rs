//! The Requests tab over HTTP: the refusals a project's token met, each with the API's message
//! as the API wrote it, a signature made with the key of the merchant's other project named
//! by that project, and a long path cut on screen but kept whole for focus and title.

use payments_core::auth::keys::{generate_signing_key, public_key_to_pem};
use payments_core::service::Actor;
use payments_directory::{DirectoryAccess, ProjectPatch};
use payments_http::system::OsRandom;
use serde_json::json;

use crate::support::Cabinet;

/// A create by `client`: its answer's code, request id and message.
async fn create(client: &payments_client::MerchantClient, mpid: &str) -> (String, String, String) {
    let r = client
        .create_payment(
            &json!({"merchant_payment_id": mpid, "amount": "100", "payment_method": "sbp"}),
        )
        .await
        .expect("answered");
    (
        r.code().unwrap_or_default().to_string(),
        r.headers["x-request-id"]
            .to_str()
            .expect("ASCII")
            .to_string(),
        r.json["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// `text` as askama writes it into a page.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_tab_shows_refusals_with_the_apis_message_and_the_key_of_another_project() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user(
        "anna@shop.example",
        payments_cabinet::store::Role::Merchant(demo),
    )
    .await;
    let directory = c.server.state.service.directory();
    let actor = Actor("test".into());
    // A second project of the demo merchant, and a project of another merchant, each with a
    // key of its own.
    let sibling = directory
        .create_project(demo, "Second shop", Default::default(), &actor)
        .await
        .expect("a project");
    let (_, foreign) = c.other_merchant("Elsewhere").await;
    let sibling_key = generate_signing_key(&OsRandom);
    let foreign_key = generate_signing_key(&OsRandom);
    for (project, key) in [(sibling.id, &sibling_key), (foreign, &foreign_key)] {
        directory
            .register_key(project, &public_key_to_pem(&key.verifying_key()), &actor)
            .await
            .expect("a key");
    }
    let client = c.server.client();
    // 403 ip_not_allowed: 127.0.0.1 is not in 10.0.0.0/8.
    c.server
        .patch_project(ProjectPatch {
            ip_allow_list: Some(vec!["10.0.0.0/8".into()]),
            ..Default::default()
        })
        .await;
    let (code, ip_rid, ip_message) = create(&client, "tab-1").await;
    assert_eq!(code, "ip_not_allowed");
    c.server
        .patch_project(ProjectPatch {
            ip_allow_list: Some(Vec::new()),
            ..Default::default()
        })
        .await;
    // Signed with the keys of the other projects: unknown keyid to this one.
    let (code, sibling_rid, _) = create(&client.with_key(sibling_key), "tab-2").await;
    assert_eq!(code, "signature_invalid");
    let (code, foreign_rid, _) = create(&client.with_key(foreign_key), "tab-3").await;
    assert_eq!(code, "signature_invalid");
    // A read of a payment that is not there: a long path.
    let missing = "00000000-0000-4000-8000-00000000abcd";
    let r = client.get_payment(missing).await.expect("answered");
    let read_rid = r.headers["x-request-id"]
        .to_str()
        .expect("ASCII")
        .to_string();
    c.logged(&read_rid).await;

    let (mut v, _) = crate::enrolled(&c, "anna@shop.example").await;
    let page = v
        .get(&format!("/projects/{}/requests", c.server.project()))
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    let row_of = |rid: &str| {
        let at = body
            .find(rid)
            .unwrap_or_else(|| panic!("{rid} not shown: {body}"));
        let start = body[..at].rfind("<tr class=\"request\"").expect("its row");
        let end = body[at..]
            .find("<tr class=\"request\"")
            .map_or(body.len(), |e| at + e);
        body[start..end].to_string()
    };
    // The API's message under its code, wrapped in the cabinet's words, in the API's.
    let ip_row = row_of(&ip_rid);
    assert!(
        ip_row.contains("<code class=\"error-code\">ip_not_allowed</code>"),
        "{ip_row}"
    );
    assert!(!ip_message.is_empty());
    assert!(
        ip_row.contains(&format!(
            "The API answered: <q lang=\"en\">{}</q>",
            escaped(&ip_message)
        )),
        "{ip_message:?} not in {ip_row}"
    );
    // The key of the merchant's other project is named, with a link; another merchant's never.
    let sibling_row = row_of(&sibling_rid);
    assert!(sibling_row.contains("unknown keyid"), "{sibling_row}");
    assert!(
        sibling_row
            .contains("This keyid is the key of the project Second shop of the same merchant"),
        "{sibling_row}"
    );
    assert!(
        sibling_row.contains(&format!("href=\"/projects/{}\"", sibling.id)),
        "{sibling_row}"
    );
    let foreign_row = row_of(&foreign_rid);
    assert!(foreign_row.contains("unknown keyid"), "{foreign_row}");
    assert!(!foreign_row.contains("key-owner"), "{foreign_row}");
    assert!(
        !body.contains("Elsewhere"),
        "another merchant's project is never named"
    );
    // The long path: one line on screen, whole in its title and on focus.
    let read_row = row_of(&read_rid);
    let path = format!("GET /api/v1/payments/{missing}");
    assert!(
        read_row.contains(&format!(
            "<code class=\"request-path\" tabindex=\"0\" title=\"{path}\">{path}</code>"
        )),
        "{read_row}"
    );
    assert!(read_row.contains("payment_not_found"), "{read_row}");
    c.server.stop().await;
}
