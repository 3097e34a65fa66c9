//! The payer page's return URL from the CLI (`project set`): an `http://` one refused with the
//! core's reason and nothing changed, an `https://` one saved and shown, then removed.

use payments_server::testing::TestServer;
use serde_json::Value;

use crate::support::{cli, cli_json};

#[tokio::test]
async fn the_payer_pages_return_url_is_set_refused_and_cleared_from_the_cli() {
    let s = TestServer::sandbox().await;
    let dir = s.dir.path().to_path_buf();
    let project = s.project().to_string();
    let (ok, _, err) = cli(
        &dir,
        &[
            "project",
            "set",
            &project,
            "--return-url",
            "http://shop.example/",
        ],
    );
    assert!(!ok, "refused");
    assert!(
        err.contains("return_url") && err.contains("https://"),
        "{err}"
    );
    let set = cli_json(
        &dir,
        &[
            "project",
            "set",
            &project,
            "--payer-page",
            "on",
            "--return-url",
            "https://shop.example/back",
        ],
    );
    assert_eq!(set["return_url"], "https://shop.example/back", "{set}");
    assert_eq!(set["payer_page"], true, "{set}");
    let cleared = cli_json(&dir, &["project", "set", &project, "--clear-return-url"]);
    assert_eq!(cleared["return_url"], Value::Null, "{cleared}");
    assert_eq!(cleared["payer_page"], true, "the rest is left as it was");
}
