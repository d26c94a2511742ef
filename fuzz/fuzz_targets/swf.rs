#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cosched_fuzz::swf(data));
