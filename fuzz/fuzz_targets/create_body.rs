#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| payments_fuzz::create_body(data));
