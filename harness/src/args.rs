//! Checks of command-line options against each other that clap's attributes cannot express:
//! the same input given twice, two outputs naming one file.

use std::path::PathBuf;

use crate::onnx::InputShapeArgs;

/// Fails when two of the output options name the same file (one write would destroy the
/// other's output).
pub fn check_distinct_outputs(outputs: &[(&str, &Option<PathBuf>)]) -> Result<(), String> {
    let given: Vec<(&str, &PathBuf)> = outputs.iter().filter_map(|(flag, p)| p.as_ref().map(|p| (*flag, p))).collect();
    for (i, (a, pa)) in given.iter().enumerate() {
        for (b, pb) in &given[i + 1..] {
            if crate::files::same_file(pa, pb) {
                return Err(format!("{a} and {b} both name {}: each output needs its own file", pb.display()));
            }
        }
    }
    Ok(())
}

/// Fails when `--input-shape` gives one input twice (the import would silently use one).
pub fn check_input_shapes(shapes: &InputShapeArgs) -> Result<(), String> {
    let opts = shapes.options().map_err(|e| e.to_string())?;
    for (i, (name, _)) in opts.input_shapes.iter().enumerate() {
        if opts.input_shapes[..i].iter().any(|(n, _)| n == name) {
            return Err(format!("--input-shape gives input `{name}` twice"));
        }
    }
    Ok(())
}
