//! What the payer is shown, by the spec's payer display rules: the requisite only while the
//! payment is `processing` and has one; exactly `amount`; `holder_name`; the deadline
//! (`created_at` plus the project lifetime, which the service returns as `expires_at`); card
//! numbers in groups of four, with the digits alone for copying.

use serde_json::Value;

/// A JSON number or string as its exact text (numbers keep their decimals; the workspace
/// builds `serde_json` with `arbitrary_precision`, so nothing goes through a float).
pub fn exact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A card number in groups of four digits: `2200 1234 5678 9012`.
pub fn card_in_groups(digits: &str) -> String {
    let digits: Vec<char> = digits.chars().filter(char::is_ascii_digit).collect();
    digits
        .chunks(4)
        .map(|group| group.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The payer's instructions for a payment resource, or `None` when the rules say show nothing
/// (not `processing`, or no requisite yet).
pub fn payer_instructions(payment: &Value) -> Option<String> {
    if payment.get("status")?.as_str()? != "processing" {
        return None;
    }
    let requisite = payment.get("requisite")?.as_str()?;
    let field = |name: &str| payment.get(name).map(exact).unwrap_or_default();
    let to = match payment.get("payment_method").and_then(Value::as_str) {
        Some("card_transfer") => format!(
            "to card    {}   (copy: {requisite})",
            card_in_groups(requisite)
        ),
        _ => format!("to phone   {requisite} (SBP)"),
    };
    let mut lines = vec![
        format!("Pay exactly {} {}", field("amount"), field("currency")),
        to,
        format!("recipient  {}", field("holder_name")),
    ];
    let bank = field("requisite_bank");
    if !bank.is_empty() {
        lines.push(format!("bank       {bank}"));
    }
    lines.push(format!("before     {}", field("expires_at")));
    Some(lines.join("\n"))
}

/// The settlement (`merchant_information`) in one line, or `None` before requisites.
pub fn settlement(payment: &Value) -> Option<String> {
    let mi = payment.get("merchant_information")?;
    if mi.is_null() {
        return None;
    }
    let f = |name: &str| mi.get(name).map(exact).unwrap_or_default();
    Some(format!(
        "{} USDT credited ({} USDT before the {}% fee, at {} {} per USDT)",
        f("amount_usdt_rate"),
        f("amount_usdt"),
        f("rate"),
        f("course"),
        payment.get("currency").map(exact).unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cards_are_grouped_by_four() {
        assert_eq!(card_in_groups("2200123456789012"), "2200 1234 5678 9012");
        assert_eq!(card_in_groups("220012345678901"), "2200 1234 5678 901");
        assert_eq!(
            card_in_groups("2200123456789012345"),
            "2200 1234 5678 9012 345"
        );
    }

    #[test]
    fn requisites_only_while_processing() {
        let mut p: Value = serde_json::from_str(
            r#"{"status":"processing","payment_method":"card_transfer","requisite":"2200123456789012",
               "amount":3400.50,"currency":"RUB","holder_name":"IVAN P.","requisite_bank":null,
               "expires_at":"2026-10-01T12:15:00.000Z"}"#,
        )
        .unwrap();
        let shown = payer_instructions(&p).unwrap();
        assert_eq!(
            shown,
            "Pay exactly 3400.50 RUB\nto card    2200 1234 5678 9012   (copy: 2200123456789012)\nrecipient  IVAN P.\nbefore     2026-10-01T12:15:00.000Z"
        );
        p["status"] = json!("completed");
        assert_eq!(payer_instructions(&p), None);
        p["status"] = json!("processing");
        p["requisite"] = Value::Null;
        assert_eq!(payer_instructions(&p), None);
    }

    #[test]
    fn settlement_line_uses_the_exact_figures() {
        let p: Value = serde_json::from_str(
            r#"{"currency":"RUB","merchant_information":{"course":100.00,"rate":11.00,
               "amount_usdt":"34.0000","amount_rate":"3026.0000","amount_usdt_rate":"30.2600"}}"#,
        )
        .unwrap();
        assert_eq!(
            settlement(&p).unwrap(),
            "30.2600 USDT credited (34.0000 USDT before the 11.00% fee, at 100.00 RUB per USDT)"
        );
        assert_eq!(settlement(&json!({"merchant_information": null})), None);
    }
}
