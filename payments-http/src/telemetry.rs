//! Logging with `tracing`: human-readable or JSON lines, filtered by `PAYMENTS_LOG`/the
//! `log_level` setting. Handlers log ids and outcomes, never tokens, keys, secrets or bodies.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber (once; later calls are ignored).
pub fn init(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Masks a requisite for logs: the last four characters only.
pub fn mask_requisite(requisite: &str) -> String {
    let n = requisite.chars().count();
    let tail: String = requisite.chars().skip(n.saturating_sub(4)).collect();
    format!("{}{tail}", "*".repeat(n.saturating_sub(4)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn masks_all_but_the_last_four() {
        assert_eq!(
            super::mask_requisite("2200001234567895"),
            "************7895"
        );
        assert_eq!(super::mask_requisite("+79001234567"), "********4567");
        assert_eq!(super::mask_requisite("12"), "12");
    }
}
