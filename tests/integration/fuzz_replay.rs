//! Every input kept under `tests/fuzz-regressions/<target>/` (crashes the
//! fuzzers found and that were fixed, and hand-made hostile inputs) is fed
//! to its target (`caseload-fuzzing`) on stable: a panic fails the test,
//! so a fixed crash cannot come back unnoticed. Also checks that every
//! target has a cargo-fuzz binary in `fuzz/` and every directory here names
//! a target.

use std::path::Path;

#[test]
fn every_kept_fuzz_input_runs_through_its_target_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("tests/fuzz-regressions");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let name = entry.file_name().into_string().unwrap();
        let target = caseload_fuzzing::target(&name)
            .unwrap_or_else(|| panic!("tests/fuzz-regressions/{name}: no such fuzz target"));
        let mut inputs: Vec<_> = std::fs::read_dir(entry.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "README.md"))
            .collect();
        inputs.sort();
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{} panicked", input.display());
            replayed += 1;
        }
    }
    eprintln!("replayed {replayed} kept fuzz inputs");
    assert!(replayed > 0, "tests/fuzz-regressions holds inputs");
    for (name, _) in caseload_fuzzing::TARGETS {
        let bin = root.join(format!("fuzz/fuzz_targets/{name}.rs"));
        assert!(bin.is_file(), "{} is missing", bin.display());
    }
}
