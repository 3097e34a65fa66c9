//! QR codes as inline SVG (the authenticator's key, the payer page's link), and a key grouped
//! as authenticator apps show it.

use qrcode::render::svg;
use qrcode::QrCode;

use super::i18n::tr;

/// The QR code of `uri` as an SVG element (no XML declaration: it is inlined).
pub(crate) fn qr_svg(uri: &str) -> String {
    qr_svg_named(uri, tr("QR code for the authenticator app"))
        .expect("an otpauth URI fits a QR code")
}

/// The QR code of `data` as an SVG element with the accessible name `label` (escaped here);
/// `None` when `data` is too long for a QR code.
pub(crate) fn qr_svg_named(data: &str, label: &str) -> Option<String> {
    let code = QrCode::new(data.as_bytes()).ok()?;
    let image = code
        .render::<svg::Color<'_>>()
        .min_dimensions(200, 200)
        .quiet_zone(true)
        .dark_color(svg::Color("#000000"))
        .light_color(svg::Color("#ffffff"))
        .build();
    let start = image.find("<svg").unwrap_or(0);
    // An accessible name for the image.
    let label = label
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    Some(image[start..].replacen(
        "<svg",
        &format!("<svg role=\"img\" aria-label=\"{label}\""),
        1,
    ))
}

/// The key in groups of four characters, as authenticator apps show it.
pub(crate) fn grouped(key: &str) -> String {
    key.as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
