//! ONNX import: decodes an ONNX `ModelProto` (protobuf, via prost) into a passel [`Module`]
//! with one `@main` function (and one global function per loop that stays a loop).
//!
//! What it does, in phases:
//! 1. decode the protobuf from a shared byte buffer ([`bytes::Bytes`]) shallowly
//!    (`proto::shallow`): each node and initializer stays an encoded slice of that buffer, and
//!    only the node headers (inputs, outputs, name, op type, domain, as positions of the
//!    strings in the node's encoding) are decoded up front. A node's attributes and an initializer are decoded when converted and
//!    dropped right after, so the decoded protobuf never exists whole. `raw_data` and packed
//!    `float_data` stay slices of the buffer (the file mapping, when the caller maps the file),
//!    becoming [`Constant::Raw`](crate::ir::Constant::Raw) weights that are copied only when
//!    something reads their values;
//! 2. check the whole graph before converting anything: every operator type is supported
//!    (else ONE error lists each unsupported type with its count and first node), names are
//!    defined once and resolve, the graph is acyclic (nodes are converted in a topological
//!    order, so unsorted graphs import too);
//! 3. bind graph inputs to static types: a symbolic or missing dimension needs
//!    [`ImportOptions::input_shapes`];
//! 4. convert node by node (`onnx/ops.rs`) into passel operator calls bound to variables
//!    named after the ONNX values; a node's value is dropped after its last use. Nodes with
//!    more inputs than their operator's ONNX schema takes, and values of rank above
//!    [`MAX_RANK`] or with more elements than fit `u64`, are refused. A call whose arguments are all constants and whose tensors
//!    are small ([`ImportOptions::fold_limit`]) is evaluated at import by passel's own
//!    kernels, so shape subgraphs (Shape, Gather, Concat, Range, … feeding Reshape) become
//!    constants and leave no shape arithmetic in the module.
//!
//! Control flow (`If`, `Loop`, `Scan`) is converted by `onnx/control.rs`: subgraphs are
//! decoded like the model's graph, the outer names they read are implicit inputs of their node
//! (they order the nodes and keep values alive), and each becomes an `if`, an unrolled body or
//! a recursive global function (`@loop0`, …) as that file's header says.
//!
//! What it deliberately does not do: training-mode outputs, sequences, sparse tensors, dtypes passel has no type for (strings, bfloat16, float8, int4, …): each is a
//! clear error naming the node or tensor, never a different model. External-data tensors are
//! resolved through [`ExternalData`], which the caller gives; [`load_onnx`] (`onnx/load.rs`,
//! the loader the CLI and the Python package share) maps the model file under a read lease
//! (`onnx/mapped.rs`: a mapping that survives another process truncating the file) or reads
//! it, and resolves external data from the model's folder with [`FolderExternalData`],
//! refusing locations outside it.
//!
//! Opsets 9–21 of the default domain are handled with their per-version differences
//! (attributes that became inputs, Softmax's pre-13 2-D coercion, Reshape `allowzero`, …).
//! Later opsets import with the newest semantics known here; an attribute added by them is
//! reported as unhandled.

mod control;
mod emit;
mod error;
mod load;
pub mod mapped;
mod ops;
mod proto;
mod tensor;

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;

use crate::ir::{Constant, Function, Module, TensorType, MAX_RANK};
use tensor::DENSE_BELOW;

pub use error::{
    EmitError, ExternalDataError, ImportError, NodeError, TensorProtoError, Unrepresentable, UnsupportedOp,
};
pub use load::{
    file_kind, load_onnx, load_onnx_bytes, load_regular_file, not_regular, read_regular_file, FolderExternalData,
    LoadError,
};
pub use ops::{MICROSOFT_OPS, SUPPORTED_OPS};

use emit::{Emitter, Val};
use proto::onnx as pb;
use proto::shallow::{self, NodeBody, NodeHeader, NodeTensors, Nodes, PackedFloats};

/// Resolves the `location` of an external-data tensor to its bytes. [`FolderExternalData`]
/// reads files relative to the model's folder and refuses locations that leave it.
pub trait ExternalData: Send + Sync {
    /// The whole content of the file at `location` (relative to the model's folder), or why
    /// it cannot be read.
    fn load(&self, location: &str) -> Result<Bytes, ExternalDataError>;
}

/// Options of [`import_onnx_bytes`].
#[derive(Clone)]
pub struct ImportOptions {
    /// Static shapes for graph inputs, by input name (`--input-shape NAME=1,3,224,224`). Needed
    /// for inputs with symbolic or missing dimensions; a given shape must agree with the
    /// model's static dimensions.
    pub input_shapes: Vec<(String, Vec<u64>)>,
    /// Where external-data tensors come from; `None` makes any external tensor an error.
    pub external_data: Option<Arc<dyn ExternalData>>,
    /// Largest number of elements of any argument or result for a call to be evaluated at
    /// import (constant folding of shape subgraphs). Bigger constant calls stay in the module.
    pub fold_limit: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions { input_shapes: Vec::new(), external_data: None, fold_limit: 1 << 16 }
    }
}

impl fmt::Debug for ImportOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportOptions")
            .field("input_shapes", &self.input_shapes)
            .field("external_data", &self.external_data.is_some())
            .field("fold_limit", &self.fold_limit)
            .finish()
    }
}

/// Imports an ONNX model from its bytes. `bytes` is shared, not copied: initializers in
/// `raw_data` become constants that point into it.
pub fn import_onnx_bytes(bytes: Bytes, options: &ImportOptions) -> Result<Module, ImportError> {
    let model = shallow::Model::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    import_model(model, options)
}

/// Operators whose schema at opset 9 is already the one of an older opset: `(op, since)`.
/// A model of an opset below 9 imports when all its nodes are among these, at an opset no
/// older than their `since` (onnx 1.23.2's `get_schema(op, 9).since_version`): it means
/// then exactly what it would at opset 9.
const UNCHANGED_BEFORE_9: &[(&str, i64)] =
    &[("Add", 7), ("And", 7), ("Div", 7), ("Identity", 1), ("Mul", 7), ("Not", 1), ("Or", 7), ("Sub", 7), ("Xor", 7)];

/// The default-domain opset of a model importing `opsets`.
fn default_opset(opsets: &[pb::OperatorSetIdProto]) -> Result<i64, ImportError> {
    opsets
        .iter()
        .filter(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version())
        .max()
        .ok_or_else(|| ImportError::Model("the model imports no default-domain (ai.onnx) opset".into()))
}

/// `opset` when it is 9 or later; an older one only for a graph (subgraphs included) of
/// operators unchanged since (`UNCHANGED_BEFORE_9`), converted as at opset 9, and of `Scan` at
/// opset 8, whose batched Scan-8 form `control.rs` converts. Returns the opset to convert at
/// and whether `Scan` nodes take the Scan-8 form.
fn supported_opset(opset: i64, body: &Body) -> Result<(i64, bool), ImportError> {
    if opset >= 9 {
        return Ok((opset, false));
    }
    fn unchanged(body: &Body, opset: i64) -> bool {
        (0..body.nodes.len()).all(|i| {
            let node = body.nodes.get(i);
            matches!(node.domain(), "" | "ai.onnx")
                && (UNCHANGED_BEFORE_9.iter().any(|&(op, since)| op == node.op_type() && since <= opset)
                    || (node.op_type() == "Scan" && opset == 8))
        }) && body.subgraphs.values().flatten().all(|(_, sub)| unchanged(sub, opset))
    }
    if unchanged(body, opset) {
        Ok((9, opset == 8))
    } else {
        Err(ImportError::Model(format!(
            "opset {opset} is not supported (opsets 9 and later are, and older ones for graphs of {} only, and Scan at opset 8)",
            UNCHANGED_BEFORE_9.iter().map(|(op, _)| *op).collect::<Vec<_>>().join(", ")
        )))
    }
}

/// The label of node `idx` in diagnostics: its name, or `Op #idx` when unnamed.
fn node_label(node: &NodeHeader<'_>, idx: usize) -> String {
    match node.name() {
        "" => format!("{} #{idx}", node.op_type()),
        name => format!("`{name}` ({})", node.op_type()),
    }
}

fn qualified_op(node: &NodeHeader<'_>) -> String {
    match node.domain() {
        "" | "ai.onnx" => node.op_type().to_string(),
        d => format!("{d}::{}", node.op_type()),
    }
}

/// Phase 2a: one error listing every unsupported operator type, inside subgraphs too.
fn check_supported(body: &Body) -> Result<(), ImportError> {
    let mut unsupported: Vec<UnsupportedOp> = Vec::new();
    collect_unsupported(body, &mut unsupported);
    if unsupported.is_empty() {
        Ok(())
    } else {
        Err(ImportError::Unsupported(unsupported))
    }
}

fn collect_unsupported(body: &Body, unsupported: &mut Vec<UnsupportedOp>) {
    let nodes = &body.nodes;
    for idx in 0..nodes.len() {
        let node = nodes.get(idx);
        if let Some(subs) = body.subgraphs.get(&(idx as u32)) {
            for (_, sub) in subs {
                collect_unsupported(sub, unsupported);
            }
        }
        let supported = match node.domain() {
            "" | "ai.onnx" => SUPPORTED_OPS.contains(&node.op_type()),
            "com.microsoft" => MICROSOFT_OPS.contains(&node.op_type()),
            "ai.onnx.preview" => control::PREVIEW_OPS.contains(&node.op_type()),
            _ => false,
        };
        if supported {
            continue;
        }
        let op = qualified_op(&node);
        match unsupported.iter_mut().find(|u| u.op_type == op) {
            Some(u) => u.count += 1,
            None => unsupported.push(UnsupportedOp {
                op_type: op,
                count: 1,
                first_node: match node.name() {
                    "" => format!("{} #{idx}", node.op_type()),
                    name => name.to_string(),
                },
            }),
        }
    }
}

/// How deeply subgraphs (If / Loop / Scan bodies) may nest inside each other.
pub const MAX_GRAPH_NESTING: usize = 32;

/// A graph decoded for import: the model's graph or a subgraph of an `If`, `Loop` or `Scan`.
/// Nodes stay encoded (only their headers are decoded); the graph attributes of control-flow
/// nodes are decoded the same way, recursively.
pub(crate) struct Body {
    nodes: Nodes,
    initializer: Vec<Bytes>,
    sparse_initializer: bool,
    input: Vec<pb::ValueInfoProto>,
    output: Vec<pb::ValueInfoProto>,
    /// The graph attributes of each control-flow node, by node index.
    subgraphs: HashMap<u32, Vec<(String, Body)>>,
    /// For each control-flow node, the names its subgraphs read from enclosing scopes: inputs
    /// of the node that ONNX leaves implicit, which order the nodes and keep values alive.
    implicit: HashMap<u32, Vec<String>>,
    /// The names this graph reads from enclosing scopes, in order of first use (empty for the
    /// model's graph, whose unresolved names are errors).
    free: Vec<String>,
    /// Its nodes and those of its subgraphs, at every depth: what converting it once costs.
    total_nodes: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TensorName {
    #[prost(string, optional, tag = "8")]
    name: Option<String>,
}

impl Body {
    /// Decodes `graph`, `depth` levels inside the model's graph.
    fn decode(graph: shallow::Graph, depth: usize) -> Result<Body, ImportError> {
        let nodes = Nodes::decode(graph.node).map_err(|(idx, e)| ImportError::Decode(format!("node #{idx}: {e}")))?;
        let mut subgraphs = HashMap::new();
        let mut implicit = HashMap::new();
        let mut nested = 0u64;
        for idx in 0..nodes.len() {
            let header = nodes.get(idx);
            if !control::is_control(&header) {
                continue;
            }
            if depth >= MAX_GRAPH_NESTING {
                return Err(ImportError::Node {
                    node: node_label(&header, idx),
                    error: NodeError::Structure(format!("subgraphs nest more than {MAX_GRAPH_NESTING} levels deep")),
                });
            }
            let graphs = control::graph_attributes(nodes.encoded(idx), &node_label(&header, idx))?;
            let mut subs = Vec::with_capacity(graphs.len());
            let mut reads: Vec<String> = Vec::new();
            for (name, g) in graphs {
                let sub = Body::decode(g, depth + 1).map_err(|e| in_subgraph(&header, idx, &name, e))?;
                for f in &sub.free {
                    if !reads.contains(f) {
                        reads.push(f.clone());
                    }
                }
                subs.push((name, sub));
            }
            nested += subs.iter().map(|(_, b)| b.total_nodes).fold(0u64, u64::saturating_add);
            subgraphs.insert(idx as u32, subs);
            implicit.insert(idx as u32, reads);
        }
        let nodes_len = nodes.len();
        let mut body = Body {
            nodes,
            initializer: graph.initializer,
            sparse_initializer: !graph.sparse_initializer.is_empty(),
            input: graph.input,
            output: graph.output,
            total_nodes: (nodes_len as u64).saturating_add(nested),
            subgraphs,
            implicit,
            free: Vec::new(),
        };
        if depth > 0 {
            body.free = body.free_names()?;
        }
        Ok(body)
    }

    /// The names the graph uses but does not define.
    fn free_names(&self) -> Result<Vec<String>, ImportError> {
        let mut defined: HashSet<String> = self.input.iter().map(|vi| vi.name().to_string()).collect();
        for bytes in &self.initializer {
            let t = TensorName::decode(bytes.clone()).map_err(|e| ImportError::Decode(format!("initializer: {e}")))?;
            defined.insert(t.name.unwrap_or_default());
        }
        for idx in 0..self.nodes.len() {
            defined.extend(self.nodes.get(idx).outputs().map(str::to_string));
        }
        let mut free: Vec<String> = Vec::new();
        let note = |name: &str, free: &mut Vec<String>| {
            if !name.is_empty() && !defined.contains(name) && !free.iter().any(|f| f == name) {
                free.push(name.to_string());
            }
        };
        for idx in 0..self.nodes.len() {
            for input in self.nodes.get(idx).inputs() {
                note(input, &mut free);
            }
            for name in self.implicit.get(&(idx as u32)).into_iter().flatten() {
                note(name, &mut free);
            }
        }
        for out in &self.output {
            note(out.name(), &mut free);
        }
        Ok(free)
    }
}

/// `e`, an error inside graph attribute `attr` of node `idx`, as an error of that node.
fn in_subgraph(header: &NodeHeader<'_>, idx: usize, attr: &str, e: ImportError) -> ImportError {
    match e {
        ImportError::Decode(m) => ImportError::Decode(format!("node {}, `{attr}`: {m}", node_label(header, idx))),
        ImportError::Unsupported(u) => ImportError::Unsupported(u),
        e => ImportError::Node {
            node: node_label(header, idx),
            error: NodeError::Subgraph { attr: attr.to_string(), error: Box::new(e) },
        },
    }
}

/// Phase 2b: the nodes in a topological order (lowest index first among ready nodes, so a
/// sorted graph keeps its order), and for each node output slot ([`NodeHeader::output_slots`])
/// how many node inputs and graph outputs use it. Names must be defined once and every input
/// must resolve; `known` says whether a name is a graph input or initializer.
fn topological_order(body: &Body, known: impl Fn(&str) -> bool) -> Result<(Vec<u32>, Vec<u32>), ImportError> {
    let (nodes, graph_outputs) = (&body.nodes, &body.output[..]);
    // A node's inputs: its own and the outer names its subgraphs read.
    let inputs_of = |idx: usize| {
        let implicit = body.implicit.get(&(idx as u32)).map(|v| &v[..]).unwrap_or(&[]);
        nodes.get(idx).inputs().chain(implicit.iter().map(String::as_str))
    };
    let n = nodes.len();
    // Node indices and slots fit u32: each node takes at least two bytes of a protobuf
    // message, which is below 2 GiB.
    let mut producer: HashMap<&str, (u32, u32)> = HashMap::with_capacity(n);
    for idx in 0..n {
        let node = nodes.get(idx);
        for (slot, out) in node.output_slots().filter(|(_, o)| !o.is_empty()) {
            if known(out) {
                return Err(ImportError::Node {
                    node: node_label(&node, idx),
                    error: NodeError::Structure(format!("output `{out}` is also a graph input or initializer")),
                });
            }
            if let Some(&(prev, _)) = producer.get(out) {
                return Err(ImportError::Node {
                    node: node_label(&node, idx),
                    error: NodeError::Structure(format!(
                        "output `{out}` is already produced by node {}",
                        node_label(&nodes.get(prev as usize), prev as usize)
                    )),
                });
            }
            producer.insert(out, (idx as u32, slot as u32));
        }
    }
    // The users of each node as one flat list (`users[first[p]..first[p + 1]]`), in order.
    let mut indegree = vec![0u32; n];
    let mut first = vec![0u32; n + 1];
    let mut uses = vec![0u32; nodes.slots()];
    for (idx, degree) in indegree.iter_mut().enumerate() {
        let node = nodes.get(idx);
        for input in inputs_of(idx).filter(|i| !i.is_empty()) {
            match producer.get(input) {
                Some(&(p, slot)) => {
                    *degree += 1;
                    first[p as usize + 1] += 1;
                    uses[slot as usize] += 1;
                }
                None if known(input) => {}
                None => {
                    let msg = if node.inputs().any(|i| i == input) {
                        format!("input `{input}` is not a graph input, an initializer or the output of any node")
                    } else {
                        format!("its subgraphs read `{input}`, which no enclosing graph defines")
                    };
                    return Err(ImportError::Node { node: node_label(&node, idx), error: NodeError::Structure(msg) });
                }
            }
        }
    }
    for out in graph_outputs {
        if let Some(&(_, slot)) = producer.get(out.name()) {
            uses[slot as usize] += 1;
        }
    }
    for p in 0..n {
        first[p + 1] += first[p];
    }
    let mut users = vec![0u32; first[n] as usize];
    let mut fill = first.clone();
    for idx in 0..n {
        for input in inputs_of(idx).filter(|i| !i.is_empty()) {
            if let Some(&(p, _)) = producer.get(input) {
                users[fill[p as usize] as usize] = idx as u32;
                fill[p as usize] += 1;
            }
        }
    }
    drop((producer, fill));
    let mut ready: BinaryHeap<std::cmp::Reverse<u32>> =
        (0..n as u32).filter(|&i| indegree[i as usize] == 0).map(std::cmp::Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(idx)) = ready.pop() {
        order.push(idx);
        let idx = idx as usize;
        for &u in &users[first[idx] as usize..first[idx + 1] as usize] {
            indegree[u as usize] -= 1;
            if indegree[u as usize] == 0 {
                ready.push(std::cmp::Reverse(u));
            }
        }
    }
    if order.len() < n {
        let stuck = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
        return Err(ImportError::Node {
            node: node_label(&nodes.get(stuck), stuck),
            error: NodeError::Structure("is part of a cycle (its inputs depend on its own outputs)".into()),
        });
    }
    Ok((order, uses))
}

/// Phase 3: the static type of graph input `vi`.
fn input_type(vi: &pb::ValueInfoProto, options: &ImportOptions) -> Result<TensorType, ImportError> {
    let name = vi.name();
    let err = |msg: String| ImportError::Input { input: name.to_string(), msg };
    let tensor = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => t,
        Some(_) => return Err(err("only tensor inputs are supported (not sequences, maps or optionals)".into())),
        None => return Err(err("has no type".into())),
    };
    let dtype = tensor::dtype_of(tensor.elem_type()).map_err(|e| err(e.to_string()))?;
    let given = options.input_shapes.iter().find(|(n, _)| n == name).map(|(_, s)| s);
    let dims = tensor.shape.as_ref().map(|s| &s.dim[..]);
    let shape: Vec<u64> = match (dims, given) {
        (None, None) => {
            return Err(err(format!("has no shape; give one with --input-shape {name}=d0,d1,…")));
        }
        (None, Some(g)) => g.clone(),
        (Some(dims), given) => {
            if let Some(g) = given {
                if g.len() != dims.len() {
                    return Err(err(format!(
                        "--input-shape gives {} dimensions but the model declares {}",
                        g.len(),
                        dims.len()
                    )));
                }
            }
            let mut shape = Vec::with_capacity(dims.len());
            for (i, d) in dims.iter().enumerate() {
                use pb::tensor_shape_proto::dimension::Value as D;
                let model_dim = match &d.value {
                    Some(D::DimValue(v)) if *v >= 0 => Some(*v as u64),
                    // A negative value (Paddle exports write -1) marks a dynamic dimension, as
                    // onnxruntime reads it: it must be bound like a symbolic one.
                    _ => None,
                };
                let dim = match (model_dim, given) {
                    (Some(m), Some(g)) if g[i] != m => {
                        return Err(err(format!(
                            "--input-shape gives {} for dimension {i}, the model fixes it to {m}",
                            g[i]
                        )))
                    }
                    (Some(m), _) => m,
                    (None, Some(g)) => g[i],
                    (None, None) => {
                        let what = match &d.value {
                            Some(D::DimParam(p)) if !p.is_empty() => format!("dimension {i} is symbolic (`{p}`)"),
                            Some(D::DimValue(v)) => format!("dimension {i} is dynamic ({v})"),
                            _ => format!("dimension {i} is unknown"),
                        };
                        return Err(err(format!("{what}; give the shape with --input-shape {name}=d0,d1,…")));
                    }
                };
                shape.push(dim);
            }
            shape
        }
    };
    let ty = TensorType { shape: shape.into(), dtype };
    representable(&ty).map_err(|e| err(e.to_string()))?;
    Ok(ty)
}

/// Errors unless `ty` is a type passel's text format holds: rank at most [`MAX_RANK`] (the
/// parser's limit) and an element count that fits `u64`, so every imported module prints to
/// text that `check` accepts and every size computed from a type is exact.
fn representable(ty: &TensorType) -> Result<(), Unrepresentable> {
    if ty.shape.len() > MAX_RANK {
        return Err(Unrepresentable::Rank(ty.shape.len()));
    }
    if ty.num_elements().is_none() {
        return Err(Unrepresentable::Elements(ty.shape.to_vec()));
    }
    Ok(())
}

/// Decodes initializer `bytes` and converts it; returns its name and constant.
fn initializer(bytes: Bytes, options: &ImportOptions) -> Result<(String, Constant), ImportError> {
    let mut init =
        pb::TensorProto::decode(bytes.clone()).map_err(|e| ImportError::Decode(format!("initializer: {e}")))?;
    let name = std::mem::take(&mut init.name).unwrap_or_default();
    if name.is_empty() {
        return Err(ImportError::Graph("an initializer has no name".into()));
    }
    let packed = if (init.float_data.len() as u64) < DENSE_BELOW { None } else { PackedFloats::decode(bytes).ok() };
    let c = tensor::constant(init, packed, options.external_data.as_deref())
        .map_err(|error| ImportError::Tensor { name: name.clone(), error })?;
    Ok((name, c))
}

/// Decodes the attributes of node `bytes`, with their tensors' packed `float_data` when one
/// has any.
fn node_body(
    bytes: &Bytes,
    header: &NodeHeader<'_>,
    idx: usize,
) -> Result<(Vec<pb::AttributeProto>, Option<NodeTensors>), ImportError> {
    let body = NodeBody::decode(bytes.clone())
        .map_err(|e| ImportError::Decode(format!("node {}: {e}", node_label(header, idx))))?;
    // Smaller tensors become dense constants anyway.
    let floats = body.attribute.iter().any(|a| a.t.as_ref().is_some_and(|t| t.float_data.len() as u64 >= DENSE_BELOW));
    let packed = if floats { NodeTensors::decode(bytes.clone()).ok() } else { None };
    Ok((body.attribute, packed))
}

fn import_model(model: shallow::Model, options: &ImportOptions) -> Result<Module, ImportError> {
    let opset = default_opset(&model.opset_import)?;
    let graph = model.graph.ok_or_else(|| ImportError::Model("the model has no graph".into()))?;
    // Nodes stay encoded: only their headers are decoded for the checks and the order, and
    // each node in full when it is converted.
    let mut body = Body::decode(graph, 0)?;
    let (opset, scan_batched) = supported_opset(opset, &body)?;
    check_supported(&body)?;

    let mut em = Emitter::new(options.fold_limit);
    let mut env: HashMap<String, Val> = HashMap::new();
    add_initializers(std::mem::take(&mut body.initializer), body.sparse_initializer, &mut env, options)?;
    for given in &options.input_shapes {
        if !body.input.iter().any(|vi| vi.name() == given.0) {
            let names: Vec<&str> = body.input.iter().map(|vi| vi.name()).filter(|n| !env.contains_key(*n)).collect();
            return Err(ImportError::Input {
                input: given.0.clone(),
                msg: format!("--input-shape names no graph input (inputs: {})", names.join(", ")),
            });
        }
    }
    let mut params = Vec::new();
    let mut declared = HashSet::new();
    for vi in &body.input {
        let name = vi.name();
        if !declared.insert(name) {
            return Err(ImportError::Input { input: name.into(), msg: "is declared twice".into() });
        }
        // An initializer listed as an input (IR version < 4 style) is a constant.
        if env.contains_key(name) {
            continue;
        }
        if name.is_empty() {
            return Err(ImportError::Graph("a graph input has no name".into()));
        }
        let ty = input_type(vi, options)?;
        let var = em.param(name, ty.clone());
        params.push(var);
        env.insert(name.to_string(), Val::Node { id: var, ty });
    }
    if body.output.is_empty() {
        return Err(ImportError::Graph("the graph has no outputs".into()));
    }
    let mut importer = Importer { opset, scan_batched, options, functions: Vec::new(), loops: 0, unrolled: 0 };
    let results = importer.convert_body(&mut em, &body, env, &|_| None)?;
    let func = em.finish(&params, &results);
    let mut module = Module::new();
    module.add("main", func).map_err(|e| ImportError::Graph(e.to_string()))?;
    for (name, func) in importer.functions {
        module.add(&name, func).map_err(|e| ImportError::Graph(e.to_string()))?;
    }
    Ok(module)
}

/// Decodes `initializers` into `env`; `sparse` says the graph has sparse ones, which are refused.
fn add_initializers(
    initializers: impl IntoIterator<Item = Bytes>,
    sparse: bool,
    env: &mut HashMap<String, Val>,
    options: &ImportOptions,
) -> Result<(), ImportError> {
    if sparse {
        return Err(ImportError::Graph("sparse initializers are not supported".into()));
    }
    for bytes in initializers {
        let (name, c) = initializer(bytes, options)?;
        if env.contains_key(&name) {
            return Err(ImportError::Tensor { name, error: TensorProtoError::Duplicate });
        }
        env.insert(name, Val::Const(Arc::new(c)));
    }
    Ok(())
}

/// Converts graphs into the module: the model's graph into `@main`, subgraphs into blocks of
/// the function being built or, for loops that stay loops, into global functions of their own.
pub(crate) struct Importer<'o> {
    opset: i64,
    /// The model's opset is 8: `Scan` nodes take the Scan-8 form (`sequence_lens`, batch axis).
    scan_batched: bool,
    options: &'o ImportOptions,
    /// Global functions made for loops (`@loop0`, …), added to the module after `@main`.
    functions: Vec<(String, Function)>,
    /// How many loop functions have been started (their names are numbered in that order).
    loops: usize,
    /// Nodes converted by unrolling `Loop` and `Scan` bodies so far, over the whole model
    /// (bounded by `control::MAX_UNROLLED_NODES`).
    unrolled: u64,
}

impl Importer<'_> {
    /// Converts the nodes of `body` into bindings of the emitter's current block and returns
    /// the graph's outputs. `env` holds the graph's inputs and initializers; `outer` resolves
    /// the names of enclosing graphs.
    fn convert_body(
        &mut self,
        em: &mut Emitter,
        body: &Body,
        env: HashMap<String, Val>,
        outer: &dyn Fn(&str) -> Option<Val>,
    ) -> Result<Vec<Val>, ImportError> {
        let nodes = &body.nodes;
        // The graph's inputs, initializers and the enclosing graphs' values are the names
        // defined before any node.
        let (order, mut uses) = topological_order(body, |name| env.contains_key(name) || outer(name).is_some())?;
        // Node outputs that are still to be used, each with its count of remaining uses: a
        // value is dropped after its last use (or never stored when nothing uses it), so on a
        // chain the map stays small whatever the number of nodes.
        let mut live: HashMap<&str, (Val, u32)> = HashMap::new();
        let no_names: &[String] = &[];
        for idx in order {
            let idx = idx as usize;
            let header = nodes.get(idx);
            let label = || node_label(&header, idx);
            let lookup =
                |i: &str| live.get(i).map(|(v, _)| v.clone()).or_else(|| env.get(i).cloned()).or_else(|| outer(i));
            let inputs: Vec<Option<Val>> =
                header.inputs().map(|i| if i.is_empty() { None } else { lookup(i) }).collect();
            let outputs = match body.subgraphs.get(&(idx as u32)) {
                Some(subs) => control::convert(self, em, &header, nodes.encoded(idx), subs, inputs, &lookup).map_err(
                    |e| match e {
                        control::Error::Node(error) => ImportError::Node { node: label(), error },
                        control::Error::In(attr, e) => in_subgraph(&header, idx, &attr, *e),
                    },
                )?,
                None => {
                    let attrs = node_body(nodes.encoded(idx), &header, idx)?;
                    ops::convert(em, &header, attrs, self.opset, inputs, self.options.external_data.as_deref())
                        .map_err(|error| ImportError::Node { node: label(), error })?
                }
            };
            let implicit = body.implicit.get(&(idx as u32)).map(|v| &v[..]).unwrap_or(no_names);
            for input in header.inputs().chain(implicit.iter().map(String::as_str)) {
                if let Some((_, left)) = live.get_mut(input) {
                    *left -= 1;
                    if *left == 0 {
                        live.remove(input);
                    }
                }
            }
            let mut outputs = outputs.into_iter();
            for (slot, name) in header.output_slots() {
                let val = outputs.next().flatten();
                if let Some(val) = &val {
                    representable(&val.ty()).map_err(|error| ImportError::Node {
                        node: label(),
                        error: NodeError::Output { output: name.to_string(), error },
                    })?;
                }
                let left = std::mem::take(&mut uses[slot]);
                match val {
                    _ if name.is_empty() || left == 0 => {}
                    Some(val) => {
                        live.insert(name, (val, left));
                    }
                    // An output the converter did not produce is one passel cannot compute (e.g.
                    // a training-mode statistic); using it is an error.
                    None => {
                        let user = (0..nodes.len()).find(|&u| nodes.get(u).inputs().any(|i| i == name));
                        let user = user.map(|u| node_label(&nodes.get(u), u));
                        let error = NodeError::NotComputed { output: name.to_string(), user };
                        return Err(ImportError::Node { node: label(), error });
                    }
                }
            }
        }
        drop(uses);

        let mut results = Vec::with_capacity(body.output.len());
        for out in &body.output {
            let name = out.name();
            let val = live
                .get(name)
                .map(|(v, _)| v.clone())
                .or_else(|| env.get(name).cloned())
                .or_else(|| outer(name))
                .ok_or_else(|| ImportError::Graph(format!("output `{name}` is not produced by any node")))?;
            results.push(val);
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    //! `float_data` weights: packed runs stay in the model's buffer, unpacked ones decode to
    //! dense tensors, and both import to the same module.

    use prost::Message;

    use super::*;
    use crate::ir::print_module;

    const N: usize = 72;

    /// A `TensorProto` whose `float_data` is written unpacked (one tag per element), which
    /// the generated type never writes.
    #[derive(Clone, PartialEq, prost::Message)]
    struct UnpackedTensor {
        #[prost(int64, repeated, packed = "false", tag = "1")]
        dims: Vec<i64>,
        #[prost(int32, optional, tag = "2")]
        data_type: Option<i32>,
        #[prost(float, repeated, packed = "false", tag = "4")]
        float_data: Vec<f32>,
        #[prost(string, optional, tag = "8")]
        name: Option<String>,
    }

    /// `AttributeProto` with its tensor already encoded.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Attr {
        #[prost(string, optional, tag = "1")]
        name: Option<String>,
        #[prost(bytes = "vec", optional, tag = "5")]
        t: Option<Vec<u8>>,
        #[prost(int32, optional, tag = "20")]
        r#type: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct Node {
        #[prost(string, repeated, tag = "1")]
        input: Vec<String>,
        #[prost(string, repeated, tag = "2")]
        output: Vec<String>,
        #[prost(bytes = "vec", optional, tag = "3")]
        name: Option<Vec<u8>>,
        #[prost(string, optional, tag = "4")]
        op_type: Option<String>,
        #[prost(message, repeated, tag = "5")]
        attribute: Vec<Attr>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct Graph {
        #[prost(message, repeated, tag = "1")]
        node: Vec<Node>,
        #[prost(bytes = "vec", repeated, tag = "5")]
        initializer: Vec<Vec<u8>>,
        #[prost(message, repeated, tag = "11")]
        input: Vec<pb::ValueInfoProto>,
        #[prost(message, repeated, tag = "12")]
        output: Vec<pb::ValueInfoProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct Model {
        #[prost(message, repeated, tag = "8")]
        opset_import: Vec<pb::OperatorSetIdProto>,
        #[prost(message, optional, tag = "7")]
        graph: Option<Graph>,
    }

    fn tensor(name: &str, values: Vec<f32>, packed: bool) -> Vec<u8> {
        let (dims, data_type, name) =
            (vec![values.len() as i64], Some(pb::tensor_proto::DataType::Float as i32), Some(name.into()));
        if packed {
            pb::TensorProto { dims, data_type, float_data: values, name, ..Default::default() }.encode_to_vec()
        } else {
            UnpackedTensor { dims, data_type, float_data: values, name }.encode_to_vec()
        }
    }

    fn value_info(name: &str) -> pb::ValueInfoProto {
        use pb::tensor_shape_proto::{dimension::Value as D, Dimension};
        let shape =
            pb::TensorShapeProto { dim: vec![Dimension { value: Some(D::DimValue(N as i64)), ..Default::default() }] };
        let tensor =
            pb::type_proto::Tensor { elem_type: Some(pb::tensor_proto::DataType::Float as i32), shape: Some(shape) };
        pb::ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(pb::TypeProto {
                value: Some(pb::type_proto::Value::TensorType(tensor)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `y = x + w + b`, `w` a Constant node and `b` an initializer, both `float_data`.
    fn model(packed: bool) -> Bytes {
        model_with_name(packed, None)
    }

    /// [`model`] with the last node named `name`.
    fn model_with_name(packed: bool, name: Option<Vec<u8>>) -> Bytes {
        let w: Vec<f32> = (0..N).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..N).map(|i| 100.0 - i as f32).collect();
        let node = |op: &str, input: &[&str], output: &str, attribute: Vec<Attr>| Node {
            input: input.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            name: None,
            op_type: Some(op.into()),
            attribute,
        };
        let value = Attr {
            name: Some("value".into()),
            t: Some(tensor("", w, packed)),
            r#type: Some(pb::attribute_proto::AttributeType::Tensor as i32),
        };
        let mut last = node("Add", &["s", "b"], "y", vec![]);
        last.name = name;
        let graph = Graph {
            node: vec![node("Constant", &[], "w", vec![value]), node("Add", &["x", "w"], "s", vec![]), last],
            initializer: vec![tensor("b", b, packed)],
            input: vec![value_info("x")],
            output: vec![value_info("y")],
        };
        let opset = pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) };
        Bytes::from(Model { opset_import: vec![opset], graph: Some(graph) }.encode_to_vec())
    }

    /// The module's constants as (raw and inside `buffer`, values).
    fn constants(m: &Module, buffer: &Bytes) -> Vec<(bool, Vec<f64>)> {
        let range = buffer.as_ptr() as usize..buffer.as_ptr() as usize + buffer.len();
        let f = m.get("main").expect("@main");
        let mut out = Vec::new();
        for id in f.node_ids() {
            if let crate::ir::ExprKind::Const { idx } = f.kind(id) {
                let c = f.constant(*idx);
                let raw = matches!(&**c, Constant::Raw { data, .. } if range.contains(&(data.as_ptr() as usize)));
                out.push((raw, c.materialize().expect("materializes").to_f64s()));
            }
        }
        out.sort_by(|a, b| a.1[0].total_cmp(&b.1[0]));
        out
    }

    #[test]
    fn packed_float_data_stays_in_the_buffer_and_unpacked_decodes_alike() {
        let (packed, unpacked) = (model(true), model(false));
        assert_ne!(packed.len(), unpacked.len(), "the two encodings differ");
        let mp = import_onnx_bytes(packed.clone(), &ImportOptions::default()).expect("packed imports");
        let mu = import_onnx_bytes(unpacked.clone(), &ImportOptions::default()).expect("unpacked imports");
        assert_eq!(print_module(&mp), print_module(&mu));
        let w: Vec<f64> = (0..N).map(|i| i as f64 * 0.5).collect();
        let b: Vec<f64> = (0..N).map(|i| 100.0 - i as f64).collect();
        assert_eq!(constants(&mp, &packed), vec![(true, w.clone()), (true, b.clone())]);
        assert_eq!(constants(&mu, &unpacked), vec![(false, w), (false, b)]);
    }

    #[test]
    fn a_node_name_that_is_not_utf8_is_a_decode_error() {
        let ok = import_onnx_bytes(model_with_name(true, Some(b"add_1".to_vec())), &ImportOptions::default());
        assert!(ok.is_ok(), "{ok:?}");
        match import_onnx_bytes(model_with_name(true, Some(vec![b'a', 0xff, 0xfe])), &ImportOptions::default()) {
            Err(ImportError::Decode(msg)) => {
                assert!(msg.contains("node #2") && msg.contains("invalid string"), "{msg}")
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
}
