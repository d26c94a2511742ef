#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cosched_fuzz::batch_script(data));
