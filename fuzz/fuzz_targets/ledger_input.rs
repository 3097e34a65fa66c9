#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| payments_fuzz::ledger_input(data));
