//! What an embedding compiles: the adapter it mounts plus the SQLite store, and nothing of the
//! server (command line, settings layering, TLS listener, PostgreSQL, web cabinet).

use std::collections::BTreeSet;
use std::process::Command;

/// The most crates the adapter and the SQLite store may bring, themselves included (172 since
/// the SQLite store's disk reserve reads the file system's free space through rustix, with
/// its linux-raw-sys: safe system calls instead of `unsafe` ones of our own).
const MOST_CRATES: usize = 172;

/// `cargo tree -e normal` of `packages`, as `name version` lines, each crate once; the
/// feature `no-default` stands for `--no-default-features`.
fn normal_dependencies(packages: &[&str], features: &[&str]) -> BTreeSet<String> {
    let mut args = vec!["tree", "-e", "normal", "--prefix", "none", "--offline"];
    args.extend(["--format", "{p}"]);
    for p in packages {
        args.extend(["-p", p]);
    }
    for f in features {
        match *f {
            "no-default" => args.push("--no-default-features"),
            f => args.extend(["--features", f]),
        }
    }
    let out = Command::new(env!("CARGO"))
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .collect()
}

#[test]
fn the_adapter_and_the_sqlite_store_stay_small() {
    let crates = normal_dependencies(&["payments-http", "payments-store-sqlite"], &[]);
    assert!(
        crates.iter().any(|c| c.starts_with("axum "))
            && crates.iter().any(|c| c.starts_with("rusqlite ")),
        "the tree lists the real dependencies:\n{crates:#?}"
    );
    assert!(
        crates.len() <= MOST_CRATES,
        "{} crates, more than {MOST_CRATES}:\n{crates:#?}",
        crates.len()
    );
    for banned in [
        "payments-server ",
        "clap ",
        "figment ",
        "toml ",
        "axum-server ",
        "tracing-subscriber ",
        "tokio-postgres ",
        "deadpool-postgres ",
        "askama ",
        "argon2 ",
        "totp-rs ",
        "qrcode ",
        "mimalloc ",
        "signal-hook-registry ",
    ] {
        assert!(
            !crates.iter().any(|c| c.starts_with(banned)),
            "an embedding compiles {banned}"
        );
    }
}

#[test]
fn the_cabinet_feature_brings_the_cabinet_and_only_then() {
    let without = normal_dependencies(&["payments-http"], &[]);
    // `cabinet`, not `payments-http/cabinet`: that names the feature of the dependency
    // `payments-http` (the crate's own dev-dependency, for its tests' `testing` feature).
    let with = normal_dependencies(&["payments-http"], &["cabinet"]);
    for web in ["askama ", "argon2 ", "totp-rs "] {
        assert!(
            !without.iter().any(|c| c.starts_with(web)),
            "{web}without the feature"
        );
        assert!(
            with.iter().any(|c| c.starts_with(web)),
            "{web}missing with the feature"
        );
    }
}

#[test]
fn the_server_without_its_default_features_has_no_cabinet_and_no_postgresql() {
    let full = normal_dependencies(&["payments-server"], &[]);
    let bare = normal_dependencies(&["payments-server"], &["no-default"]);
    for part in [
        "askama ",
        "argon2 ",
        "totp-rs ",
        "qrcode ",
        "tokio-postgres ",
    ] {
        assert!(
            full.iter().any(|c| c.starts_with(part)),
            "{part}missing from the default server"
        );
        assert!(
            !bare.iter().any(|c| c.starts_with(part)),
            "{part}in the server without default features"
        );
    }
}
