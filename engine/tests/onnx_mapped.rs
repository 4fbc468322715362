//! Model files loaded through a lease-protected mapping (`frontend/onnx/mapped.rs`): a module
//! imported from a mapping stays intact while another process truncates and rewrites its
//! file, and a file somebody has open for writing is read instead of mapped.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use passel_engine::frontend::onnx::mapped::{map_file, NotMapped, MIN_MAP_BYTES};
use passel_engine::frontend::onnx::{load_onnx, load_regular_file, ImportOptions};
use passel_engine::interp::{eval_function, Value};
use passel_engine::ir::{print_module, Module, Tensor};

/// The tests run one at a time. A test that spawns a process forks this one, and the child
/// holds copies of every descriptor open at that moment until it calls `exec`: a file another
/// test has just written is then briefly open for writing, and the kernel rightly refuses its
/// lease (the loader would read the file instead; these tests want the mapping).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx").join(format!("{name}.onnx"))
}

/// `conv_relu` behind an unknown field of `MIN_MAP_BYTES` zeros (which decoders skip): large
/// enough to be mapped, with every weight past the first megabyte.
fn padded_conv_relu() -> Vec<u8> {
    let pad = MIN_MAP_BYTES as usize;
    // Field 1000, length-delimited (tag varint c2 3e), then the length as a varint.
    let mut bytes = vec![0xc2, 0x3e];
    let mut n = pad;
    while n >= 0x80 {
        bytes.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    bytes.push(n as u8);
    bytes.resize(bytes.len() + pad, 0);
    bytes.extend(std::fs::read(fixture("conv_relu")).unwrap());
    bytes
}

/// `@main` of `m` on a deterministic input of its parameter's type: the output tensors.
fn run(m: &Module) -> Vec<Tensor> {
    let f = m.get("main").unwrap();
    let ty = f.ty(f.params()[0]).unwrap().as_tensor().unwrap().clone();
    let n: u64 = ty.shape.iter().product();
    let values: Vec<f64> = (0..n).map(|i| ((i * 7919) % 97) as f64 / 97.0 - 0.5).collect();
    let input = Tensor::from_f64s(&ty.shape, ty.dtype, &values).unwrap();
    match &eval_function(m, "main", &[Value::Tensor(input)]).unwrap() {
        Value::Tensor(t) => vec![t.clone()],
        Value::Tuple(vs) => vs.iter().map(|v| v.as_tensor().unwrap().clone()).collect(),
        Value::Func(_) => panic!("a function result"),
    }
}

/// Whether the lease-protected mapping can be used for files in `dir` (it cannot on file
/// systems such as overlayfs or NFS): the tests of the mapping itself skip otherwise, saying so.
fn maps_here(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, vec![0u8; MIN_MAP_BYTES as usize]).unwrap();
    let file = std::fs::File::open(&probe).unwrap();
    match map_file(&file, MIN_MAP_BYTES) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: {} is not mapped here: {e}", dir.display());
            false
        }
    }
}

/// Check that a module imported from a mapped model file survives another process truncating
/// the file and writing a different (shorter) model into the same inode: no signal, the same
/// printed module and the same outputs as before. Without the lease, printing touches the
/// weights past the new end of the file and dies with SIGBUS.
#[test]
fn a_module_from_a_mapping_survives_its_file_truncated_and_rewritten() {
    let _serial = serial();
    let tmp = tempfile::Builder::new().prefix("passel-mapped").tempdir().unwrap();
    if !maps_here(tmp.path()) {
        return;
    }
    let model = tmp.path().join("m.onnx");
    std::fs::write(&model, padded_conv_relu()).unwrap();
    let bytes = load_regular_file(&model).unwrap();
    assert!(passel_engine::frontend::onnx::mapped::is_leased(&bytes), "the model file is mapped under a lease");
    drop(bytes);
    let module = load_onnx(&model, &ImportOptions::default()).unwrap();
    let (text, outputs) = (print_module(&module), run(&module));
    // Another process truncates the file, then writes a different model into it; its open
    // waits until the mapping has been copied and the lease released.
    let other = fixture("transformer_block");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(": > '{}' && cat '{}' > '{}'", model.display(), other.display(), model.display()))
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read(&model).unwrap(), std::fs::read(&other).unwrap());
    assert_eq!(print_module(&module), text);
    assert_eq!(run(&module), outputs);
}

/// The same from a thread of this process writing through its own descriptor: the truncating
/// open blocks in the kernel until the keeper thread has copied the mapping.
#[test]
fn a_mapping_survives_a_thread_truncating_its_file() {
    let _serial = serial();
    let tmp = tempfile::Builder::new().prefix("passel-mapped").tempdir().unwrap();
    if !maps_here(tmp.path()) {
        return;
    }
    let path = tmp.path().join("w.bin");
    let content: Vec<u8> = (0..3 * MIN_MAP_BYTES as usize).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &content).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let bytes = map_file(&file, content.len() as u64).unwrap();
    drop(file);
    let slice = bytes.slice(MIN_MAP_BYTES as usize..);
    let writer = std::thread::spawn({
        let path = path.clone();
        move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
            f.write_all(b"short").unwrap();
        }
    });
    writer.join().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"short");
    assert!(!passel_engine::frontend::onnx::mapped::is_leased(&bytes), "the keeper copied the mapping");
    assert_eq!(&bytes[..], &content[..]);
    assert_eq!(&slice[..], &content[MIN_MAP_BYTES as usize..]);
}

/// Check that a file somebody has open for writing is not mapped (the kernel refuses the
/// lease) and that loading it reads the file instead, with the same bytes.
#[test]
fn a_file_open_for_writing_is_read_not_mapped() {
    let _serial = serial();
    let tmp = tempfile::Builder::new().prefix("passel-mapped").tempdir().unwrap();
    if !maps_here(tmp.path()) {
        return;
    }
    let model = tmp.path().join("m.onnx");
    let content = padded_conv_relu();
    std::fs::write(&model, &content).unwrap();
    let writer = std::fs::OpenOptions::new().append(true).open(&model).unwrap();
    let file = std::fs::File::open(&model).unwrap();
    let err = map_file(&file, content.len() as u64).unwrap_err();
    assert!(matches!(err, NotMapped::OpenForWriting), "{err}");
    let bytes = load_regular_file(&model).unwrap();
    assert!(!passel_engine::frontend::onnx::mapped::is_leased(&bytes), "a read copy");
    assert_eq!(&bytes[..], &content[..]);
    let module = load_onnx(&model, &ImportOptions::default()).unwrap();
    drop(writer);
    assert!(print_module(&module).contains("conv2d("));
}
