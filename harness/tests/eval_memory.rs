//! `passel eval`'s memory contract (issue #26): summarising, comparing and writing an output
//! stream its elements, allocating nothing sized by the tensor, and reading a `.npy` file
//! reads the bytes its header announces and no more. Counted with the counting allocator, so
//! the counts are exact.

use std::io::Read;
use std::sync::Mutex;

use passel_engine::ir::{DType, Tensor};
use passel_harness::bench::CountingAlloc;
use passel_harness::{eval, npy};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Tests in this file run one at a time, so one test's allocations do not count in another's.
static SERIAL: Mutex<()> = Mutex::new(());

/// The most live heap bytes `f` added at any point: the allocator's peak, reset first.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOC.live();
    ALLOC.reset_peak();
    let out = f();
    (out, ALLOC.peak().saturating_sub(before))
}

#[test]
fn summary_compare_and_npy_write_allocate_nothing_sized_by_the_tensor() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = 4 << 20; // 16 MiB of f32: its f64 copy would be 32 MiB.
    let values: Vec<f64> = (0..n).map(|i| (i % 1000) as f64 - 500.0).collect();
    let t = Tensor::from_f64s(&[n as u64], DType::F32, &values).unwrap();
    drop(values);
    let budget = 1 << 20;
    let (s, peak) = peak_during(|| eval::summary(&t));
    assert!(s.contains("min -500.000000  max 499.000000"), "{s}");
    assert!(peak < budget, "summary allocated {peak} bytes");
    let (c, peak) = peak_during(|| eval::compare(&t, &t, 1e-3, 1e-7));
    assert!(c.ok());
    assert!(peak < budget, "compare allocated {peak} bytes");
    let (res, peak) = peak_during(|| npy::write_to(&mut std::io::sink(), &t));
    res.unwrap();
    assert!(peak < budget, "writing the .npy allocated {peak} bytes");
}

#[test]
fn npy_reading_an_endless_reader_stops_after_the_announced_bytes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Tensor::from_f64s(&[3], DType::F32, &[1.0, 2.0, 3.0]).unwrap();
    let bytes = npy::encode(&t);
    // `/dev/zero` after a valid file: reading to the end would never finish.
    let mut endless = bytes.as_slice().chain(std::io::repeat(0));
    let err = npy::read_from(&mut endless, None).unwrap_err();
    assert!(matches!(err, npy::NpyFormatError::TrailingData { extra: None, need: 12 }), "{err:?}");
    assert_eq!(err.to_string(), "more bytes after the array's 12 bytes of data");
    // A header alone, then endless zeros: the data is read from the reader up to the size the
    // header announces, never more.
    let mut header = npy::encode(&Tensor::from_f64s(&[0], DType::F32, &[]).unwrap());
    let at = header.windows(4).position(|w| w == b"(0,)").expect("the shape") + 1;
    header[at] = b'2';
    let mut endless = header.as_slice().chain(std::io::repeat(0));
    let err = npy::read_from(&mut endless, None).unwrap_err();
    assert!(matches!(err, npy::NpyFormatError::TrailingData { extra: None, need: 8 }), "{err:?}");
    // The exact bytes read back.
    let back = npy::read_from(&mut bytes.as_slice(), Some(bytes.len() as u64)).unwrap();
    assert!(back.bit_eq(&t));
}
