#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| caseload_fuzzing::apfs(data));
