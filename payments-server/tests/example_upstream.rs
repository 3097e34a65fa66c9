//! The example upstream with the server as `payments-server serve --environment production`
//! builds it from a settings file (provider, rates and notifications over HTTP): a payment
//! from create to completed.

use payments_directory::DirectoryAccess;
use std::net::SocketAddr;

use payments_client::MerchantClient;
use payments_core::auth::keys::{generate_signing_key, public_key_to_pem, signing_key_to_pem};
use payments_core::auth::Scope;
use payments_core::callback::CallbackSecret;
use payments_core::service::Actor;
use payments_directory::ProjectPatch;
use payments_examples::upstream::{
    self, providers_settings, server_settings, ExampleUpstream, Mode,
};
use payments_http::system::OsRandom;
use payments_server::config::Settings;
use payments_server::server::Application;

const SECRET: &str = "whsec_ZXhhbXBsZS11cHN0cmVhbS1zZWNyZXQtZm9yLXRlc3Rz";

/// A production server built from a settings file with the upstream's `[upstream]` table
/// (`upstream` writes it for the upstream's base URL), one provisioned merchant project, and a
/// client of it. The upstream reports to the server's notification URL.
struct Running {
    client: MerchantClient,
    service: payments_core::service::PaymentService,
    operator_url: String,
    operator_token: String,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), payments_server::server::StartError>>,
    _dir: tempfile::TempDir,
}

async fn production(up: &ExampleUpstream, upstream: impl Fn(&str) -> String) -> Running {
    let base = upstream::start(up.clone(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();

    // The settings as `serve --environment production --config payments.toml` loads them.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("payments.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\noperator_listen = \"127.0.0.1:0\"\ncabinet_listen = \"127.0.0.1:0\"\n{}",
            dir.path().join("data").display(),
            upstream(&base)
        ),
    )
    .unwrap();
    let settings = Settings::load(
        Some(&config),
        serde_json::json!({"environment": "production"}),
    )
    .unwrap();
    let app = Application::build(settings)
        .await
        .expect("production starts with the upstream's ports");
    up.set_notify_url(&app.notifications_url().expect("notifications are on"));
    let base_url = app.base_url();
    let operator_url = app.operator_url();

    // A merchant, as an operator provisions one.
    let svc = app.state().service.clone();
    let actor = Actor("test".into());
    let m = svc
        .directory()
        .create_merchant("Shop", None, &actor)
        .await
        .unwrap();
    let p = svc
        .directory()
        .create_project(m.id, "Web", ProjectPatch::default(), &actor)
        .await
        .unwrap();
    let token = svc
        .directory()
        .issue_token(p.id, Scope::ALL.to_vec(), &actor)
        .await
        .unwrap();
    let operator_token = svc.directory().issue_operator_token().await.unwrap();
    let key = generate_signing_key(&OsRandom);
    svc.directory()
        .register_key(p.id, &public_key_to_pem(&key.verifying_key()), &actor)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async {
        let _ = stopped.await;
    }));
    let client =
        MerchantClient::new(&base_url, token.token.expose(), &signing_key_to_pem(&key)).unwrap();
    Running {
        client,
        service: svc,
        operator_url,
        operator_token,
        stop,
        server,
        _dir: dir,
    }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.server.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_production_server_completes_a_payment_with_the_example_upstream() {
    let up = ExampleUpstream::new(CallbackSecret::parse(SECRET).unwrap());
    let run = production(&up, |base| server_settings(base, SECRET, "127.0.0.1:0")).await;
    let client = &run.client;
    let body = serde_json::json!({"merchant_payment_id": "order-1", "amount": "1910.00", "payment_method": "card_transfer"});
    let created = client.create_payment(&body).await.unwrap();
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    assert_eq!(created.json["status"], "processing");
    assert!(created.json["requisite"]
        .as_str()
        .unwrap()
        .starts_with("220099"));
    // The upstream's course: 1910 RUB at 95.50 per USDT.
    assert_eq!(
        created.json["merchant_information"]["amount_usdt"],
        "20.0000"
    );
    let id = created.json["id"].as_str().unwrap().to_string();

    // The bank saw the transfer: the upstream reports it.
    let answer = up.report("bank-tx-1", &id, true, None).await.unwrap();
    assert_eq!(answer["applied"], true, "{answer}");
    let read = client.get_payment(&id).await.unwrap();
    assert_eq!(read.json["status"], "completed");
    // Its retry changes nothing.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = up.report("bank-tx-1", &id, true, None).await.unwrap();
    assert_eq!(again["applied"], false, "{again}");
    assert_eq!(up.issued(), 1);
    run.stop().await;
}

/// The example upstream playing two named providers, as its `--provider` flags do: `bank-a`
/// refuses every payment (`not_routable`), so the payment fails over to `bank-b`, whose
/// route the operator sees, and `bank-b`'s report (to its own notification URL) completes it.
/// Seen failing with the printed settings' provider URL pointing at `/requisites` (the
/// upstream's single provider: the route said `bank-a`).
/// The example upstream playing `bank-a` (refuses every payment: `not_routable`) and `bank-b`
/// (issues), and a production server routing to them in that order.
async fn bank_a_refuses_bank_b_issues() -> (ExampleUpstream, Running) {
    let up = ExampleUpstream::new(CallbackSecret::parse(SECRET).unwrap());
    up.play("bank-a", Mode::NotRoutable);
    up.play("bank-b", Mode::Issue);
    let run = production(&up, |base| {
        providers_settings(base, SECRET, "127.0.0.1:0", &["bank-a", "bank-b"])
    })
    .await;
    (up, run)
}

#[tokio::test]
async fn the_example_upstream_plays_several_providers_and_a_payment_fails_over() {
    let (up, run) = bank_a_refuses_bank_b_issues().await;
    let body = serde_json::json!({"merchant_payment_id": "routed-1", "amount": "1910.00", "payment_method": "sbp"});
    let created = run.client.create_payment(&body).await.unwrap();
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    assert_eq!(created.json["status"], "processing");
    let id = created.json["id"].as_str().unwrap().to_string();
    let seen: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/operator/v1/payments/{id}", run.operator_url))
        .bearer_auth(&run.operator_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["route"]["provider"], "bank-b", "{seen}");
    assert!(
        seen["route"]["reason"]
            .as_str()
            .unwrap()
            .contains("failover after bank-a"),
        "{seen}"
    );
    let answer = up
        .report_as(Some("bank-b"), "b-tx-1", &id, true, None)
        .await
        .unwrap();
    assert_eq!(answer["applied"], true, "{answer}");
    let read = run.client.get_payment(&id).await.unwrap();
    assert_eq!(read.json["status"], "completed");
    run.stop().await;
}

/// Reports the transfer of a new payment failed (it is `canceled`), opens the payer's appeal
/// about it (the service sends it to the provider on record at once) and answers it found as
/// the upstream took it; answers the payment's final JSON. `as_provider`: the provider the
/// appeal must reach, whose appeal path and answer path are used.
async fn appeal_found(
    run: &Running,
    up: &ExampleUpstream,
    mpid: &str,
    as_provider: Option<&str>,
) -> serde_json::Value {
    let body = serde_json::json!({"merchant_payment_id": mpid, "amount": "1910.00", "payment_method": "sbp"});
    let created = run.client.create_payment(&body).await.unwrap();
    let id = created.json["id"].as_str().unwrap().to_string();
    let failed = up
        .report_as(as_provider, &format!("{mpid}-fail"), &id, false, None)
        .await
        .unwrap();
    assert_eq!(failed["status"], "canceled", "{failed}");
    let payment = run.service.store().payment(id.parse().unwrap()).await;
    let request = payments_core::service::AppealRequest {
        idempotency_key: None,
        reason: payments_core::appeal::AppealReason::PaidButCanceled,
        claimed_amount: None,
        paid_at: None,
        payer_bank: None,
        receipts: Vec::new(),
    };
    let (appeal, _) = run
        .service
        .appeals()
        .open_appeal_for(
            &payment.unwrap().unwrap(),
            payments_core::appeal::AppealSource::Payer,
            request,
        )
        .await
        .unwrap();
    assert_eq!(
        appeal.state.as_str(),
        "under_review",
        "the upstream took it"
    );
    let taken = up.appeals();
    let last = taken.last().expect("the upstream has the appeal");
    assert_eq!(last.appeal_id, appeal.id.to_string());
    assert_eq!(
        (last.payment_id.as_str(), last.provider.as_deref()),
        (id.as_str(), as_provider)
    );
    assert_eq!(last.idempotency_key, last.appeal_id);
    let (appeal_id, notification_id) = (appeal.id.to_string(), format!("{mpid}-ap"));
    let found = || {
        up.answer_appeal_as(
            as_provider,
            &notification_id,
            &appeal_id,
            Some("1900.00"),
            None,
        )
    };
    let answer = found().await.unwrap();
    assert_eq!(
        (&answer["applied"], &answer["state"]),
        (&true.into(), &"accepted".into()),
        "{answer}"
    );
    // Its retry (signed anew) changes nothing.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = found().await.unwrap();
    assert_eq!(again["applied"], false, "{again}");
    run.client.get_payment(&id).await.unwrap().json
}

/// The example upstream takes the appeal the service sends it (`POST /appeals`, signed) and
/// answers it found: the payment is completed with the amount found.
#[tokio::test]
async fn the_example_upstream_takes_an_appeal_and_answers_it_found() {
    let up = ExampleUpstream::new(CallbackSecret::parse(SECRET).unwrap());
    let run = production(&up, |base| server_settings(base, SECRET, "127.0.0.1:0")).await;
    let read = appeal_found(&run, &up, "appealed-1", None).await;
    assert_eq!(read["status"], "completed", "{read}");
    assert_eq!(read["amount"].to_string(), "1900.00");
    run.stop().await;
}

/// With several providers, the appeal goes to the provider on record (`bank-b`, after the
/// failover), to its own appeals path, and its answer to `/upstream/v1/appeals/bank-b`.
#[tokio::test]
async fn an_appeal_goes_to_the_provider_on_record_and_is_answered_as_it() {
    let (up, run) = bank_a_refuses_bank_b_issues().await;
    let read = appeal_found(&run, &up, "appealed-2", Some("bank-b")).await;
    assert_eq!(read["status"], "completed", "{read}");
    assert_eq!(up.appeals().len(), 1, "sent once, to bank-b only");
    run.stop().await;
}
