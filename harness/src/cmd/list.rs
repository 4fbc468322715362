//! `passel passes` and `passel configs`: the registered passes and config keys.

use passel_engine::transform::{list_configs, list_passes};

/// The table of `passel passes`.
pub fn list_passes_text() -> String {
    let mut out = String::from("name                      kind        opt  runs as                   required\n");
    for p in list_passes() {
        out.push_str(&format!(
            "{:<25} {:<11} {:<4} {:<25} {}\n",
            p.name,
            format!("{:?}", p.kind).to_lowercase(),
            p.opt_level,
            p.runs_as.to_string(),
            p.required.join(",")
        ));
    }
    out.push_str(
        "\n`runs as`: fused passes run together on each function in one task; a barrier sees the whole\n\
         module between stages (see docs/parallel.md). `testing.*` passes are testing-only: they fail on\n\
         functions marked #[testing.fail=\"error\"|\"panic\"|\"diagnostic\"] (to try --reproducer).\n",
    );
    out
}

/// The table of `passel configs`.
pub fn list_configs_text() -> String {
    let mut out = String::new();
    for c in list_configs() {
        out.push_str(&format!("{:<32} {:<6} {}\n", c.key, c.ty.name(), c.doc_with_range()));
    }
    out
}
