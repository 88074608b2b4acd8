//! Arbitrary bytes as every request type, through the handlers' parsing and validation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| ctxd::fuzzing::decode_and_validate(bytes));
