//! The signature base the verifier rebuilds (parameters in received order, unknown
//! parameters, derived component values), and what the signer refuses to sign.

use super::*;

#[test]
fn signature_params_are_reserialised_canonically_in_received_order() {
    // Extra whitespace inside the inner list and after ";" is allowed by RFC 8941; the signed
    // `@signature-params` is the canonical serialisation, so this still verifies.
    let mut r = signed_with("/api/v1/payments", |o| {
        o.params = vec![
            SigParam::Keyid,
            SigParam::Alg,
            SigParam::Expires,
            SigParam::Created,
        ]
    });
    let input = r.get("Signature-Input");
    let spaced = input
        .replacen("sig1=(", "sig1=(  ", 1)
        .replace("\" \"", "\"   \"")
        .replace(";", "; ");
    assert_ne!(spaced, input);
    r.set("Signature-Input", &spaced);
    let prepared = r.prepare(&SignaturePolicy::strict(), T).unwrap();
    assert!(prepared.signature_base().ends_with(&format!(
        r#"x-request-nonce");keyid="{}";alg="ed25519";expires={};created={T}"#,
        keyid(&key().verifying_key()),
        T + 300
    )));
    assert!(prepared.verify(&key().verifying_key()).is_ok());
    // Reordering the parameters changes the base: the signer's order is what counts.
    let reordered = input.replacen(";alg=\"ed25519\"", "", 1) + ";alg=\"ed25519\"";
    r.set("Signature-Input", &reordered);
    let e = r.failure();
    assert_eq!(e, SignatureFailure::VerificationFailed);
}

#[test]
fn unknown_signature_parameters_are_kept_in_the_base() {
    let r = signed_with("/api/v1/payments", |o| {
        o.params.insert(
            0,
            SigParam::Other {
                name: "tag".to_owned(),
                value: "app-1".to_owned(),
            },
        );
        o.params.push(SigParam::Other {
            name: "x-custom".to_owned(),
            value: "v".to_owned(),
        });
    });
    let prepared = r.prepare(&SignaturePolicy::strict(), T).unwrap();
    assert!(prepared.signature_base().ends_with(&format!(
        r#");tag="app-1";created={T};expires={};keyid="{}";alg="ed25519";x-custom="v""#,
        T + 300,
        keyid(&key().verifying_key())
    )));
    assert!(prepared.verify(&key().verifying_key()).is_ok());
}

#[test]
fn derived_component_values() {
    let headers: [(&str, &[u8]); 2] = [("Host", b"x"), ("X-A", b"  a \t")];
    let parts = HttpRequestParts {
        method: "GET",
        scheme: "HTTPS",
        authority: "API.Example.com:443",
        path_and_query: "/p%20q/r?a=1&b=%2F",
        headers: &headers,
        body: b"",
    };
    assert_eq!(parts.path(), "/p%20q/r");
    assert_eq!(parts.query(), Some("a=1&b=%2F"));
    assert_eq!(parts.normalized_authority(), "api.example.com");
    assert_eq!(parts.field_value("x-a"), Ok(Some("a".to_owned())));
    assert_eq!(parts.field_value("x-b"), Ok(None));
    let components: Vec<_> = [
        "@method",
        "@target-uri",
        "@authority",
        "@scheme",
        "@request-target",
        "@path",
        "@query",
    ]
    .iter()
    .map(|n| Component::from_name(n).unwrap())
    .collect();
    assert_eq!(
        signature_base(&parts, &components, "()").unwrap(),
        "\"@method\": GET\n\"@target-uri\": https://api.example.com/p%20q/r?a=1&b=%2F\n\"@authority\": api.example.com\n\"@scheme\": https\n\"@request-target\": /p%20q/r?a=1&b=%2F\n\"@path\": /p%20q/r\n\"@query\": ?a=1&b=%2F\n\"@signature-params\": ()"
    );
    let http = HttpRequestParts {
        scheme: "http",
        authority: "h:80",
        path_and_query: "",
        ..parts
    };
    assert_eq!(http.normalized_authority(), "h");
    assert_eq!(
        (http.path(), http.request_target(), http.query()),
        ("/", "/", None)
    );
    let other_port = HttpRequestParts {
        authority: "h:8443",
        ..parts
    };
    assert_eq!(other_port.normalized_authority(), "h:8443");
    assert_eq!(
        HttpRequestParts {
            authority: "h:80",
            ..parts
        }
        .normalized_authority(),
        "h:80"
    );
}

#[test]
fn signer_refuses_what_it_cannot_sign() {
    let key = key();
    let headers: [(&str, &[u8]); 1] = [("Content-Digest", b"sha-256=:x:")];
    let parts = HttpRequestParts {
        method: "POST",
        scheme: "https",
        authority: "a",
        path_and_query: "/",
        headers: &headers,
        body: b"",
    };
    let options = SignOptions::new(KeyId::new("k"), T, T + 300);
    assert_eq!(
        sign_request(&parts, &key, &options, &Zero),
        Err(SignError::HeaderAlreadyPresent("Content-Digest"))
    );
    let parts = HttpRequestParts {
        headers: &[],
        ..parts
    };
    let e = sign_request(&parts, &key, &options, &Zero).unwrap_err();
    assert_eq!(
        e,
        SignError::Component(SignatureFailure::MissingHeader("x-request-id".to_owned()))
    );
    assert_eq!(
        e.to_string(),
        "covered header \"x-request-id\" is not in the request"
    );
    let mut bad = options.clone();
    bad.components = Some(vec!["@status".to_owned()]);
    assert_eq!(
        sign_request(&parts, &key, &bad, &Zero),
        Err(SignError::Component(
            SignatureFailure::UnsupportedDerivedComponent("@status".to_owned())
        ))
    );
    let mut bad = options.clone();
    bad.params.push(SigParam::Created);
    assert_eq!(
        sign_request(&parts, &key, &bad, &Zero),
        Err(SignError::InvalidParameter(
            "\"created\" given twice".to_owned()
        ))
    );
    let mut bad = options;
    bad.params.push(SigParam::Other {
        name: "Bad".to_owned(),
        value: "v".to_owned(),
    });
    assert!(matches!(
        sign_request(&parts, &key, &bad, &Zero),
        Err(SignError::InvalidParameter(_))
    ));
}
