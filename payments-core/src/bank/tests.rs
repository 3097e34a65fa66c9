use std::collections::{BTreeMap, HashSet};

use super::*;
use crate::{ApiError, ErrorCode};

/// The 35 countries the spec's Bank section names.
const SPEC_COUNTRIES: [&str; 35] = [
    "RU", "AZ", "AR", "AM", "BD", "BY", "BO", "VE", "VN", "DE", "GE", "EG", "IN", "ID", "JO", "KZ",
    "KH", "KG", "CN", "KW", "MY", "MX", "MD", "MN", "AE", "PK", "PE", "PL", "SA", "TJ", "TH", "TR",
    "UZ", "KR", "JP",
];

fn cc(s: &str) -> CountryCode {
    CountryCode::parse(s).expect("test country codes are two letters")
}

fn catalog() -> BankCatalog {
    BankCatalog::embedded()
}

#[test]
fn country_code_debug_shows_the_letters() {
    assert_eq!(format!("{:?}", CountryCode::RU), "CountryCode(RU)");
    assert_eq!(format!("{:?}", cc("kz")), "CountryCode(KZ)");
    let catalog = catalog();
    let bank = catalog
        .resolve("Сбербанк", CountryCode::RU)
        .expect("in catalog");
    assert!(
        format!("{bank:?}").contains("country: CountryCode(RU)"),
        "{bank:?}"
    );
}

fn resolved(bank_code: &str, geo: &str) -> (String, String) {
    let c = catalog();
    let bank = c
        .resolve(bank_code, cc(geo))
        .unwrap_or_else(|e| panic!("{bank_code:?} from {geo}: {e}"));
    (bank.name().to_owned(), bank.country().to_string())
}

fn not_found(bank_code: &str, geo: &str) -> String {
    let err = catalog()
        .resolve(bank_code, cc(geo))
        .map_err(ApiError::from)
        .expect_err("the name must not resolve");
    assert_eq!(err.code, ErrorCode::BankNotFound);
    assert_eq!(err.payment_id, None);
    err.message
}

#[test]
fn embedded_catalog_is_valid_and_complete() {
    let raw: Vec<serde_json::Value> =
        serde_json::from_str(EMBEDDED_JSON).expect("banks.json is JSON");
    let c = BankCatalog::from_json(EMBEDDED_JSON).expect("banks.json is a valid catalog");
    assert_eq!(c.len(), raw.len());

    let mut pairs = HashSet::new();
    let mut per_country: BTreeMap<String, usize> = BTreeMap::new();
    for entry in &raw {
        let name = entry["name"].as_str().expect("name is a string");
        let country = entry["country"].as_str().expect("country is a string");
        assert!(
            country.len() == 2 && country.bytes().all(|b| b.is_ascii_uppercase()),
            "{country:?}"
        );
        assert!(!name.trim().is_empty());
        assert!(pairs.insert((country, name)), "duplicate {country} {name}");
        *per_country.entry(country.to_owned()).or_default() += 1;
    }

    let expected: BTreeMap<String, usize> = SPEC_COUNTRIES
        .iter()
        .map(|&c| (c.to_owned(), per_country.get(c).copied().unwrap_or(0)))
        .collect();
    assert_eq!(per_country, expected, "exactly the spec's 35 countries");
    for (country, n) in &per_country {
        let minimum = if country == "RU" { 40 } else { 8 };
        assert!(*n >= minimum, "{country} has {n} entries, wants {minimum}");
    }
    assert_eq!(c.countries().len(), 35);
}

#[test]
fn same_country_match_ignores_case() {
    assert_eq!(
        resolved("halyk bank", "KZ"),
        ("Halyk Bank".into(), "KZ".into())
    );
    assert_eq!(resolved("Т-БАНК", "RU"), ("Т-Банк".into(), "RU".into()));
    assert_eq!(resolved("mbank", "PL"), ("mBank".into(), "PL".into()));
    assert_eq!(resolved("MBANK", "KG"), ("MBank".into(), "KG".into()));
}

#[test]
fn cyrillic_names_fold_case() {
    assert_eq!(resolved("сбербанк", "RU"), ("Сбербанк".into(), "RU".into()));
    assert_eq!(resolved("СБЕРБАНК", "RU"), ("Сбербанк".into(), "RU".into()));
    assert_eq!(
        resolved("ozon банк", "RU"),
        ("Ozon Банк".into(), "RU".into())
    );
    assert_eq!(
        resolved("хаан БАНК", "MN"),
        ("Хаан банк".into(), "MN".into())
    );
}

#[test]
fn turkish_i_folds_both_ways() {
    assert_eq!(
        resolved("İŞ BANKASI", "TR"),
        ("İş Bankası".into(), "TR".into())
    );
    assert_eq!(
        resolved("iş bankası", "TR"),
        ("İş Bankası".into(), "TR".into())
    );
    assert_eq!(
        resolved("VAKIFBANK", "TR"),
        ("VakıfBank".into(), "TR".into())
    );
    assert_eq!(fold("Yapı Kredi"), fold("YAPI KREDI"));
}

#[test]
fn unique_name_resolves_cross_border() {
    assert_eq!(
        resolved("Kaspi Bank", "RU"),
        ("Kaspi Bank".into(), "KZ".into())
    );
    assert_eq!(
        resolved("kaspi bank", "DE"),
        ("Kaspi Bank".into(), "KZ".into())
    );
    assert_eq!(resolved("Сбербанк", "KZ"), ("Сбербанк".into(), "RU".into()));
}

#[test]
fn name_of_several_countries_is_resolved_by_geo_code() {
    assert_eq!(
        resolved("Halyk Bank", "KG"),
        ("Halyk Bank".into(), "KG".into())
    );
    assert_eq!(
        resolved("Halyk Bank", "TJ"),
        ("Halyk Bank".into(), "TJ".into())
    );
    assert_eq!(
        resolved("альфа-банк", "BY"),
        ("Альфа-Банк".into(), "BY".into())
    );
    assert_eq!(
        resolved("Альфа-Банк", "RU"),
        ("Альфа-Банк".into(), "RU".into())
    );
}

#[test]
fn name_of_several_other_countries_is_ambiguous() {
    assert_eq!(
        not_found("Halyk Bank", "RU"),
        "bank_code \"Halyk Bank\" is ambiguous: present in KG, KZ, TJ; none is geo_code RU"
    );
    assert_eq!(
        not_found("альфа-банк", "KZ"),
        "bank_code \"альфа-банк\" is ambiguous: present in BY, RU; none is geo_code KZ"
    );
    assert_eq!(
        not_found("MBANK", "RU"),
        "bank_code \"MBANK\" is ambiguous: present in KG, PL; none is geo_code RU"
    );
}

#[test]
fn unknown_name_is_not_found() {
    assert_eq!(
        not_found("Bank of Atlantis", "RU"),
        "bank_code \"Bank of Atlantis\" is not a bank of the catalog (see GET /api/v1/banks)"
    );
    // A BIC is not a bank_code.
    assert!(not_found("SABRRUMM", "RU").contains("is not a bank of the catalog"));
    // Folding does not make prefixes match, nor a Latin look-alike of a Cyrillic letter
    // (Latin "T" in "T-Банк"; the catalog's name begins with Cyrillic "Т").
    assert!(not_found("T-Банк", "RU").contains("is not a bank of the catalog"));
    assert!(not_found("Сбер", "RU").contains("is not a bank of the catalog"));
}

#[test]
fn surrounding_whitespace_is_trimmed() {
    assert_eq!(
        resolved("  Сбербанк\t", "RU"),
        ("Сбербанк".into(), "RU".into())
    );
    assert_eq!(
        resolved("\n kaspi bank ", "RU"),
        ("Kaspi Bank".into(), "KZ".into())
    );
    assert!(not_found("   ", "RU").contains("empty"));
}

#[test]
fn long_unknown_names_are_cut_in_the_message() {
    let long = "Ы".repeat(500);
    let message = not_found(&long, "RU");
    assert!(message.starts_with(&format!("bank_code \"{}\"...", "Ы".repeat(64))));
}

#[test]
fn recognise_prefers_the_country_then_a_unique_name() {
    let c = catalog();
    let bank = c.recognise("HALYK BANK ", cc("TJ")).expect("recognised");
    assert_eq!((bank.name(), bank.country()), ("Halyk Bank", cc("TJ")));
    let bank = c.recognise("т-банк", cc("RU")).expect("recognised");
    assert_eq!((bank.name(), bank.country()), ("Т-Банк", CountryCode::RU));
    let bank = c
        .recognise("Kaspi Bank", CountryCode::RU)
        .expect("recognised");
    assert_eq!((bank.name(), bank.country()), ("Kaspi Bank", cc("KZ")));
    assert_eq!(c.recognise("Halyk Bank", CountryCode::RU), None);
    assert_eq!(c.recognise("Sandbox Test Bank", CountryCode::RU), None);
    assert_eq!(c.recognise("", CountryCode::RU), None);
}

#[test]
fn listing_is_ordered_by_country_then_folded_name() {
    let c = catalog();
    let all = c.list(None);
    assert_eq!(all.len(), c.len());
    for pair in all.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            (a.country(), fold(a.name())) < (b.country(), fold(b.name())),
            "{a:?} before {b:?}"
        );
    }
    assert_eq!(all[0].country(), cc("AE"));
    assert_eq!(all[all.len() - 1].country(), cc("VN"));
}

#[test]
fn listing_order_does_not_depend_on_file_order() {
    let json = r#"[
        {"name": "zeta", "country": "RU"},
        {"name": "Beta", "country": "KZ"},
        {"name": "alpha", "country": "RU"},
        {"name": "Альфа", "country": "RU"},
        {"name": "Beta", "country": "AM"},
        {"name": "Gamma", "country": "RU"}
    ]"#;
    let c = BankCatalog::from_json(json).expect("valid");
    let listed: Vec<(String, &str)> = c
        .list(None)
        .iter()
        .map(|b| (b.country().to_string(), b.name()))
        .collect();
    let expected = [
        ("AM", "Beta"),
        ("KZ", "Beta"),
        ("RU", "alpha"),
        ("RU", "Gamma"),
        ("RU", "zeta"),
        ("RU", "Альфа"),
    ];
    let expected: Vec<(String, &str)> = expected.iter().map(|&(c, n)| (c.to_owned(), n)).collect();
    assert_eq!(listed, expected);
    assert_eq!(c.countries(), vec![cc("AM"), cc("KZ"), cc("RU")]);
}

#[test]
fn geo_filter_keeps_one_country() {
    let c = catalog();
    let kz = c.list(Some(cc("KZ")));
    assert_eq!(kz.len(), 15);
    assert!(kz.iter().all(|b| b.country() == cc("KZ")));
    assert!(kz.iter().any(|b| b.name() == "Kaspi Bank"));
    let kz_from_all: Vec<&Bank> = c
        .list(None)
        .into_iter()
        .filter(|b| b.country() == cc("KZ"))
        .collect();
    assert_eq!(kz, kz_from_all);
    assert!(c.list(Some(cc("US"))).is_empty());
    assert!(c.list(Some(cc("AA"))).is_empty());
    assert!(c.list(Some(cc("ZZ"))).is_empty());
}

#[test]
fn bank_serializes_as_the_spec_item() {
    let c = catalog();
    let bank = c.resolve("Сбербанк", CountryCode::RU).expect("in catalog");
    assert_eq!(
        serde_json::to_string(bank).expect("serializable"),
        r#"{"name":"Сбербанк","country":"RU"}"#
    );
}

#[test]
fn geo_query_accepts_two_latin_letters_in_either_case() {
    assert_eq!(parse_geo_query("RU").expect("valid"), CountryCode::RU);
    assert_eq!(parse_geo_query("kz").expect("valid"), cc("KZ"));
    assert_eq!(parse_geo_query("Tj").expect("valid").as_str(), "TJ");
    assert_eq!(parse_geo_query("US").expect("valid").as_str(), "US");
}

#[test]
fn geo_query_rejects_anything_else() {
    for raw in ["R", "RUS", "1A", "", "Ру", " RU", "R U", "R-"] {
        let err = ApiError::from(parse_geo_query(raw).expect_err(raw));
        assert_eq!(err.code, ErrorCode::InvalidGeoCode, "{raw:?}");
    }
    assert_eq!(
        parse_geo_query("RUS")
            .expect_err("three letters")
            .to_string(),
        "geo_code must be two Latin letters, got \"RUS\""
    );
}

#[test]
fn country_code_serde_round_trips_upper_case() {
    assert_eq!(
        serde_json::to_string(&CountryCode::RU).expect("serializable"),
        "\"RU\""
    );
    let parsed: CountryCode = serde_json::from_str("\"kz\"").expect("two letters");
    assert_eq!(parsed, cc("KZ"));
    assert!(serde_json::from_str::<CountryCode>("\"KAZ\"").is_err());
    assert!(serde_json::from_str::<CountryCode>("\"Ру\"").is_err());
}

#[test]
fn catalog_rejects_bad_country_codes() {
    for country in ["ru", "Ru", "RUS", "R", "", "1A", "Ру"] {
        let json = format!(r#"[{{"name": "Сбербанк", "country": "{country}"}}]"#);
        match BankCatalog::from_json(&json) {
            Err(CatalogError::InvalidCountry {
                index: 0,
                country: found,
            }) => {
                assert_eq!(found, country)
            }
            other => panic!("{country:?}: {other:?}"),
        }
    }
}

#[test]
fn catalog_rejects_empty_and_untrimmed_names() {
    let json = r#"[{"name": "A", "country": "RU"}, {"name": "  ", "country": "RU"}]"#;
    assert!(matches!(
        BankCatalog::from_json(json),
        Err(CatalogError::EmptyName { index: 1 })
    ));
    let json = r#"[{"name": " Сбербанк", "country": "RU"}]"#;
    assert!(matches!(
        BankCatalog::from_json(json),
        Err(CatalogError::UntrimmedName { index: 0, .. })
    ));
}

#[test]
fn catalog_rejects_names_of_one_country_that_fold_alike() {
    let json = r#"[
        {"name": "Сбербанк", "country": "RU"},
        {"name": "Kaspi Bank", "country": "KZ"},
        {"name": "СБЕРБАНК", "country": "RU"}
    ]"#;
    match BankCatalog::from_json(json) {
        Err(CatalogError::Duplicate {
            index,
            name,
            first_index,
            first_name,
            country,
        }) => {
            assert_eq!((index, first_index), (2, 0));
            assert_eq!(
                (name.as_str(), first_name.as_str()),
                ("СБЕРБАНК", "Сбербанк")
            );
            assert_eq!(country, CountryCode::RU);
        }
        other => panic!("{other:?}"),
    }
    // The same name in two countries is fine.
    let json = r#"[{"name": "HSBC", "country": "MX"}, {"name": "hsbc", "country": "IN"}]"#;
    assert_eq!(BankCatalog::from_json(json).expect("valid").len(), 2);
}

#[test]
fn catalog_rejects_malformed_json_and_unknown_fields() {
    assert!(matches!(
        BankCatalog::from_json(r#"{"name": "A", "country": "RU"}"#),
        Err(CatalogError::Json(_))
    ));
    assert!(matches!(
        BankCatalog::from_json(r#"[{"name": "A", "country": "RU", "bic": "X"}]"#),
        Err(CatalogError::Json(_))
    ));
    assert!(matches!(
        BankCatalog::from_json(r#"[{"name": "A"}]"#),
        Err(CatalogError::Json(_))
    ));
    assert!(BankCatalog::from_json("[]")
        .expect("empty is valid")
        .is_empty());
}
