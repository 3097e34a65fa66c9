//! The links the cabinet serves that other adapters hand out.

/// The payer page of `token` under the cabinet at `base` (`https://pay.example/pay/<token>`):
/// the link the merchant API gives a payment whose project has payer pages.
pub fn payer_page_url(base: &str, token: &payments_core::payer::PageToken) -> String {
    format!("{}/pay/{}", base.trim_end_matches('/'), token.as_str())
}
