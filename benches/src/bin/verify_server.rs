//! `verify_server`: the verify-only reference for the create figure.
//!
//! It builds the real server's state over the same data directory (same SQLite store, same
//! sandbox credentials, same settings) and serves ONE route, `POST /api/v1/payments`, that
//! runs exactly the merchant API's authentication (in-flight permit, body limit, token ->
//! project -> merchant -> allow-list -> rate limit -> digest and Ed25519 signature -> nonce
//! written through the store) and answers `201` without parsing the body, touching the payment
//! store or calling the provider. `loadgen --mode verify --url` drives it; create throughput
//! divided by its throughput is the share of the request budget that is not authentication.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use clap::Parser;
use payments_core::auth::Endpoint;
use payments_http::merchant::{admit, authenticate, read_body};
use payments_http::AppState;
use payments_server::config::{Durability, Settings};
use payments_server::server::Application;

#[derive(Debug, Parser)]
#[command(name = "verify_server", about = "Verify-only reference server")]
struct Args {
    /// The data directory of the server under test (its database and credentials).
    #[arg(long)]
    data_dir: PathBuf,
    /// Address to serve on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// `full` (default) or `normal`: the nonce write's durability, as on the server.
    #[arg(long, default_value = "full")]
    synchronous: String,
}

async fn create_verify_only(State(st): State<AppState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match read_body(body, parts.headers.get("content-length"), st.body_timeout).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::PAYLOAD_TOO_LARGE, e.message).into_response(),
    };
    let _permit = match admit(&st) {
        Ok(p) => p,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.message).into_response(),
    };
    let verified = match authenticate(&st, Endpoint::CreatePayment, &parts, &body, None).await {
        // The same nonce write as a create makes, alone.
        Ok(auth) => st.service.gate().accept(auth).await.map_err(Into::into),
        Err(e) => Err(e),
    };
    match verified {
        Ok(ctx) => (
            StatusCode::CREATED,
            [("content-type", "application/json")],
            format!(r#"{{"verified":true,"project_id":"{}"}}"#, ctx.project.id),
        )
            .into_response(),
        Err(e) => (StatusCode::UNAUTHORIZED, e.message).into_response(),
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let mut settings = Settings::defaults();
    settings.data_dir = args.data_dir;
    settings.listen.merchant = "127.0.0.1:0".parse().expect("an address");
    settings.listen.operator = "127.0.0.1:0".parse().expect("an address");
    settings.cabinet.listen = "127.0.0.1:0".parse().expect("an address");
    settings.store.synchronous = match args.synchronous.as_str() {
        "normal" => Durability::Normal,
        _ => Durability::Full,
    };
    let app = Application::build(settings)
        .await
        .expect("the server state builds");
    let state = app.state().clone();
    let router = Router::new()
        .route("/api/v1/payments", post(create_verify_only))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .expect("the listen address is free");
    println!("verify-only reference on http://{}", args.listen);
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .expect("serves");
}
