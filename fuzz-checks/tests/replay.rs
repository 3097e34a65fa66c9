//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) and the seeds through the
//! property checks, on the stable toolchain: `cargo test` runs what the fuzzers found.
//!
//! `cargo test -p payments-fuzz --test replay -- --ignored write_seeds` (re)writes the seed files
//! `fuzz/corpus/<target>/seed-<name>`.

use std::collections::BTreeSet;
use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use payments_fuzz::seeds::seeds;
use payments_fuzz::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
}

fn run(check: payments_fuzz::Check, data: &[u8], what: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(data))) {
        eprintln!("property violated by {what}");
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn every_committed_corpus_file_passes_its_check() {
    let mut total = 0;
    for &(target, check) in TARGETS {
        for file in corpus_files(target) {
            let data = fs::read(&file).expect("a readable corpus file");
            run(check, &data, &file.display().to_string());
            total += 1;
        }
    }
    eprintln!("{total} corpus files replayed");
}

#[test]
fn every_seed_passes_its_check_and_is_committed() {
    for seed in seeds() {
        let (_, check) = TARGETS
            .iter()
            .find(|(name, _)| *name == seed.target)
            .expect("seeds name known targets");
        run(
            *check,
            &seed.data,
            &format!("seed {}/{}", seed.target, seed.name),
        );
        let file = fuzz_dir()
            .join("corpus")
            .join(seed.target)
            .join(format!("seed-{}", seed.name));
        let committed = fs::read(&file).unwrap_or_else(|e| {
            panic!(
                "{} is not committed ({e}); run the ignored test write_seeds",
                file.display()
            )
        });
        assert!(
            committed == seed.data,
            "{} differs from the seed; run the ignored test write_seeds",
            file.display()
        );
    }
}

#[test]
fn targets_corpora_and_fuzz_crate_agree() {
    let targets: BTreeSet<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    let corpora: BTreeSet<String> = fs::read_dir(fuzz_dir().join("corpus"))
        .expect("fuzz/corpus exists")
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        corpora,
        targets.iter().map(|t| (*t).to_owned()).collect(),
        "one corpus directory per target"
    );
    let manifest = fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for target in &targets {
        let source = fs::read_to_string(fuzz_dir().join(format!("fuzz_targets/{target}.rs")))
            .unwrap_or_else(|e| panic!("fuzz_targets/{target}.rs: {e}"));
        assert!(
            source.contains(&format!("payments_fuzz::{target}(")),
            "fuzz_targets/{target}.rs does not call its check"
        );
        assert!(
            manifest.contains(&format!("name = \"{target}\"")),
            "fuzz/Cargo.toml has no [[bin]] {target}"
        );
    }
    for seed in seeds() {
        assert!(targets.contains(seed.target), "{}", seed.target);
    }
}

#[test]
#[ignore = "writes the seed files into fuzz/corpus"]
fn write_seeds() {
    for seed in seeds() {
        let dir = fuzz_dir().join("corpus").join(seed.target);
        fs::create_dir_all(&dir).expect("the corpus directory can be created");
        fs::write(dir.join(format!("seed-{}", seed.name)), &seed.data)
            .expect("the seed can be written");
    }
}
