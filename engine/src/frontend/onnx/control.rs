//! ONNX control flow: `If`, `Loop` and `Scan` with their subgraphs, which may read values of
//! the enclosing graphs by name.
//!
//! - `If` on a condition known at import imports the taken branch only. Otherwise it becomes
//!   the IR's `if`, each branch a block whose values refer to enclosing values lexically. The
//!   branches must produce the same types (passel's types are static).
//! - `Scan`, and a `Loop` whose trip count is known at import and whose condition stays known
//!   while it is unrolled, are unrolled: the body is converted once per iteration, with the
//!   iteration number a constant and each scan input's slice taken with `take`; scan outputs
//!   are stacked with `reshape` + `concatenate`. The nodes converted by unrolling, over the whole
//!   model and nested loops included, are bounded by [`MAX_UNROLLED_NODES`].
//! - Any other `Loop` (a `while` on a runtime condition, a trip count known only at run time
//!   or too large to unroll) becomes a recursive global function `@loopN(%iter, %cond, [%max,]
//!   carried…, captured…)` whose body is `if (go) { body; @loopN(%iter + 1, cond_out, …) }
//!   else { carried }`: values of enclosing graphs that the body reads are passed as
//!   parameters (constants stay constants). The interpreter bounds nested calls
//!   (`interp::DEFAULT_MAX_CALL_DEPTH`), so such a loop runs at most that many iterations when
//!   evaluated. Scan outputs of such a loop would have a length known only at run time, which
//!   static types cannot express: that case is refused.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;

use super::emit::{Emitter, Val};
use super::proto::shallow::{self, NodeHeader};
use super::{add_initializers, Body, EmitError, ImportError, Importer, NodeError};
use crate::ir::{AttrValue, Attrs, Constant, DType, Tensor, TensorType, Type};

/// The operators with graph attributes, converted here rather than in `ops.rs`: control flow,
/// and `FlexAttention` (domain `ai.onnx.preview`, also accepted in the default domain) whose
/// optional `score_mod` / `prob_mod` graphs are inlined.
pub(super) const CONTROL_OPS: &[&str] = &["If", "Loop", "Scan", "FlexAttention"];

/// The operators of domain `ai.onnx.preview` the importer converts.
pub const PREVIEW_OPS: &[&str] = &["FlexAttention"];

/// The most nodes unrolling `Loop` and `Scan` bodies may convert in one model (body nodes,
/// subgraphs included, × iterations, summed over every unrolled loop, nested ones included). A
/// `Scan` past it is refused; a `Loop` past it stays a loop.
pub const MAX_UNROLLED_NODES: u64 = 1 << 16;

/// Charges `iterations` conversions of `body` to the model's unrolling budget; false (nothing
/// charged) when it would exceed [`MAX_UNROLLED_NODES`].
fn charge(im: &mut Importer<'_>, body: &Body, iterations: u64) -> bool {
    match iterations.checked_mul(body.total_nodes.max(1)).and_then(|n| n.checked_add(im.unrolled)) {
        Some(total) if total <= MAX_UNROLLED_NODES => {
            im.unrolled = total;
            true
        }
        _ => false,
    }
}

/// Whether `node` is converted here (default domain `If`, `Loop`, `Scan`, or a
/// `FlexAttention`).
pub(super) fn is_control(node: &NodeHeader<'_>) -> bool {
    match node.domain() {
        "" | "ai.onnx" => CONTROL_OPS.contains(&node.op_type()),
        "ai.onnx.preview" => PREVIEW_OPS.contains(&node.op_type()),
        _ => false,
    }
}

/// The attributes of a control-flow node, with graphs decoded shallowly.
#[derive(Clone, PartialEq, prost::Message)]
struct ControlAttrs {
    #[prost(message, repeated, tag = "5")]
    attribute: Vec<ControlAttr>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ControlAttr {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(float, optional, tag = "2")]
    f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    i: Option<i64>,
    #[prost(message, optional, tag = "6")]
    g: Option<shallow::Graph>,
    #[prost(int64, repeated, tag = "8")]
    ints: Vec<i64>,
    #[prost(message, repeated, tag = "11")]
    graphs: Vec<shallow::Graph>,
}

/// The graph-valued attributes of the node encoded in `bytes`, by attribute name.
/// `label` names the node in errors.
pub(super) fn graph_attributes(bytes: &Bytes, label: &str) -> Result<Vec<(String, shallow::Graph)>, ImportError> {
    let attrs = ControlAttrs::decode(bytes.clone()).map_err(|e| ImportError::Decode(format!("node {label}: {e}")))?;
    let mut out = Vec::new();
    for a in attrs.attribute {
        let name = a.name.unwrap_or_default();
        if !a.graphs.is_empty() {
            return Err(ImportError::Node {
                node: label.to_string(),
                error: NodeError::Invalid(format!(
                    "attribute `{name}` is a list of graphs, which no supported operator takes"
                )),
            });
        }
        if let Some(g) = a.g {
            out.push((name, g));
        }
    }
    Ok(out)
}

/// Why a control-flow node cannot be converted.
pub(super) enum Error {
    /// A problem with the node itself.
    Node(NodeError),
    /// A problem inside its graph attribute (named).
    In(String, Box<ImportError>),
}

impl From<NodeError> for Error {
    fn from(e: NodeError) -> Self {
        Error::Node(e)
    }
}

impl From<EmitError> for Error {
    fn from(e: EmitError) -> Self {
        Error::Node(e.into())
    }
}

impl From<String> for Error {
    fn from(msg: String) -> Self {
        Error::Node(NodeError::Invalid(msg))
    }
}

impl From<&str> for Error {
    fn from(msg: &str) -> Self {
        Error::Node(NodeError::Invalid(msg.to_string()))
    }
}

type R<T> = Result<T, Error>;

/// The node's non-graph attributes, checked against what its operator takes.
struct Attributes {
    ints: HashMap<String, Vec<i64>>,
    int: HashMap<String, i64>,
    float: HashMap<String, f64>,
}

impl Attributes {
    fn decode(bytes: &Bytes, op: &str) -> R<Attributes> {
        let attrs = ControlAttrs::decode(bytes.clone()).map_err(|e| NodeError::Invalid(e.to_string()))?;
        let (graphs, ints, int): (&[&str], &[&str], &[&str]) = match op {
            "If" => (&["then_branch", "else_branch"], &[], &[]),
            "Loop" => (&["body"], &[], &[]),
            "FlexAttention" => (&["score_mod", "prob_mod"], &[], &["softmax_precision"]),
            _ => (
                &["body"],
                &[
                    "scan_input_axes",
                    "scan_input_directions",
                    "scan_output_axes",
                    "scan_output_directions",
                    "directions",
                ],
                &["num_scan_inputs"],
            ),
        };
        let float: &[&str] = if op == "FlexAttention" { &["scale"] } else { &[] };
        let mut out = Attributes { ints: HashMap::new(), int: HashMap::new(), float: HashMap::new() };
        for a in attrs.attribute {
            let name = a.name.unwrap_or_default();
            if graphs.contains(&name.as_str()) {
                if a.g.is_none() {
                    return Err(format!("attribute `{name}` must be a graph").into());
                }
            } else if ints.contains(&name.as_str()) {
                out.ints.insert(name, a.ints);
            } else if int.contains(&name.as_str()) {
                let v = a.i.ok_or_else(|| format!("attribute `{name}` must be an int"))?;
                out.int.insert(name, v);
            } else if float.contains(&name.as_str()) {
                let v = a.f.ok_or_else(|| format!("attribute `{name}` must be a float"))?;
                out.float.insert(name, f64::from(v));
            } else {
                return Err(format!("attribute `{name}` is not handled by the importer").into());
            }
        }
        Ok(out)
    }
}

/// Converts control-flow node `node` (encoded in `bytes`, its graph attributes decoded in
/// `subs`) on `inputs`; `outer` resolves the names its subgraphs read from enclosing graphs.
pub(super) fn convert(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    node: &NodeHeader<'_>,
    bytes: &Bytes,
    subs: &[(String, Body)],
    inputs: Vec<Option<Val>>,
    outer: &dyn Fn(&str) -> Option<Val>,
) -> R<Vec<Option<Val>>> {
    let op = node.op_type();
    let attrs = Attributes::decode(bytes, op)?;
    let graph = |name: &str| {
        subs.iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b)
            .ok_or_else(|| Error::from(format!("has no `{name}` graph")))
    };
    let name = node.outputs().next().unwrap_or_default().to_string();
    let outs = match op {
        "If" => convert_if(im, em, (graph("then_branch")?, graph("else_branch")?), &inputs, outer, &name)?,
        "Loop" => convert_loop(im, em, graph("body")?, &inputs, outer, &name)?,
        "FlexAttention" => {
            let find = |key: &str| subs.iter().find(|(n, _)| n == key).map(|(_, b)| b);
            convert_flex_attention(im, em, (find("score_mod"), find("prob_mod")), &attrs, &inputs, outer, &name)?
        }
        _ => convert_scan(im, em, graph("body")?, &attrs, &inputs, outer, &name)?,
    };
    if outs.len() != node.n_outputs() {
        return Err(format!("has {} outputs, but its graphs produce {} values", node.n_outputs(), outs.len()).into());
    }
    Ok(outs.into_iter().map(Some).collect())
}

/// Converts subgraph `body` (attribute `attr`) into the emitter's current block with its
/// inputs bound to `args` in order.
fn inline_body(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    (attr, body): (&str, &Body),
    args: &[Val],
    outer: &dyn Fn(&str) -> Option<Val>,
) -> R<Vec<Val>> {
    if body.input.len() != args.len() {
        return Err(format!("its `{attr}` takes {} inputs, expected {}", body.input.len(), args.len()).into());
    }
    let mut env: HashMap<String, Val> = HashMap::new();
    for (vi, arg) in body.input.iter().zip(args) {
        if !vi.name().is_empty() {
            env.insert(vi.name().to_string(), arg.clone());
        }
    }
    // Cloned, not taken: an unrolled body is converted many times (`Bytes` clones share).
    add_initializers(body.initializer.iter().cloned(), body.sparse_initializer, &mut env, im.options)
        .map_err(|e| Error::In(attr.to_string(), Box::new(e)))?;
    im.convert_body(em, body, env, outer).map_err(|e| Error::In(attr.to_string(), Box::new(e)))
}

/// A scalar bool from `v` (a one-element bool tensor), `what` naming it in errors.
fn scalar_bool(em: &mut Emitter, v: &Val, what: &str, name: &str) -> R<Val> {
    let ty = v.ty();
    if ty.dtype != DType::Bool || ty.num_elements() != Some(1) {
        return Err(format!("{what} must be a bool tensor of one element, got {}", show(&ty)).into());
    }
    Ok(reshape(em, v, &[], name)?)
}

/// A scalar i64 from `v` (a one-element int64 tensor).
fn scalar_i64(em: &mut Emitter, v: &Val, what: &str, name: &str) -> R<Val> {
    let ty = v.ty();
    if ty.dtype != DType::I64 || ty.num_elements() != Some(1) {
        return Err(format!("{what} must be an int64 tensor of one element, got {}", show(&ty)).into());
    }
    Ok(reshape(em, v, &[], name)?)
}

fn reshape(em: &mut Emitter, v: &Val, shape: &[u64], name: &str) -> Result<Val, EmitError> {
    if v.shape() == shape {
        return Ok(v.clone());
    }
    let newshape = AttrValue::Ints(shape.iter().map(|&d| d as i64).collect::<Vec<_>>().into());
    em.call("reshape", &[v], Attrs::new().with("newshape", newshape), name)
}

/// The value of a constant scalar bool or i64 (`None` when not known at import).
fn const_scalar(v: &Val) -> R<Option<f64>> {
    let Some(c) = v.as_const() else { return Ok(None) };
    let t = c.materialize().map_err(|e| e.to_string())?;
    Ok(t.to_f64s().first().copied())
}

fn const_i64(v: i64) -> Val {
    Val::Const(Arc::new(Constant::Dense(Tensor::scalar(DType::I64, v as f64))))
}

fn const_bool(v: bool) -> Val {
    Val::Const(Arc::new(Constant::Dense(Tensor::scalar(DType::Bool, if v { 1.0 } else { 0.0 }))))
}

/// `ty` in text syntax.
fn show(ty: &TensorType) -> String {
    Type::from(ty.clone()).to_string()
}

fn types(vals: &[Val]) -> Vec<TensorType> {
    vals.iter().map(Val::ty).collect()
}

fn convert_if(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    (then_b, else_b): (&Body, &Body),
    inputs: &[Option<Val>],
    outer: &dyn Fn(&str) -> Option<Val>,
    name: &str,
) -> R<Vec<Val>> {
    let cond = inputs.first().cloned().flatten().ok_or_else(|| Error::from("input 0 (cond) is missing"))?;
    let cond = scalar_bool(em, &cond, "input 0 (cond)", &format!("{name}_cond"))?;
    if let Some(c) = const_scalar(&cond)? {
        let (attr, body) = if c != 0.0 { ("then_branch", then_b) } else { ("else_branch", else_b) };
        return inline_body(im, em, (attr, body), &[], outer);
    }
    let block = em.open_block();
    let then_outs = inline_body(im, em, ("then_branch", then_b), &[], outer)?;
    let then_ = em.close_block(block, &then_outs);
    let block = em.open_block();
    let else_outs = inline_body(im, em, ("else_branch", else_b), &[], outer)?;
    let else_ = em.close_block(block, &else_outs);
    let (tt, et) = (types(&then_outs), types(&else_outs));
    if tt != et {
        let show = |t: &[TensorType]| t.iter().map(show).collect::<Vec<_>>().join(", ");
        return Err(format!(
            "its branches produce different types (then: {}; else: {}); passel's types are static, so both branches of a runtime condition must agree",
            show(&tt),
            show(&et)
        )
        .into());
    }
    if tt.is_empty() {
        return Ok(Vec::new());
    }
    Ok(em.if_(&cond, (then_, else_), tt, name))
}

/// Stacks the per-iteration values `elems` along a new axis `axis` (negative counts from the
/// end of the result's rank), in reverse order when `reverse`.
fn stack(em: &mut Emitter, elems: &[Val], axis: i64, reverse: bool, name: &str) -> R<Val> {
    let first = elems.first().ok_or_else(|| Error::from("a scan output has no iterations to stack"))?;
    let ty = first.ty();
    let rank = ty.shape.len() as i64 + 1;
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&a) {
        return Err(format!("scan output axis {axis} is out of range for rank {rank}").into());
    }
    let mut shape = ty.shape.to_vec();
    shape.insert(a as usize, 1);
    let mut parts = Vec::with_capacity(elems.len());
    for e in elems {
        if e.ty() != ty {
            return Err(
                format!("a scan output changes type between iterations ({} and {})", show(&ty), show(&e.ty())).into()
            );
        }
        parts.push(reshape(em, e, &shape, &format!("{name}_elem"))?);
    }
    if reverse {
        parts.reverse();
    }
    if parts.len() == 1 {
        return Ok(parts.remove(0));
    }
    let refs: Vec<&Val> = parts.iter().collect();
    Ok(em.call("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(a)), name)?)
}

fn check_carried(before: &[TensorType], after: &[Val]) -> R<()> {
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        if *b != a.ty() {
            return Err(format!(
                "loop-carried value {i} changes type from {} to {} in the body; passel's types are static",
                show(b),
                show(&a.ty())
            )
            .into());
        }
    }
    Ok(())
}

fn convert_loop(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    body: &Body,
    inputs: &[Option<Val>],
    outer: &dyn Fn(&str) -> Option<Val>,
    name: &str,
) -> R<Vec<Val>> {
    let max = match inputs.first().cloned().flatten() {
        Some(m) => Some(scalar_i64(em, &m, "input 0 (M, the trip count)", &format!("{name}_max"))?),
        None => None,
    };
    let cond = match inputs.get(1).cloned().flatten() {
        Some(c) => Some(scalar_bool(em, &c, "input 1 (cond)", &format!("{name}_cond"))?),
        None => None,
    };
    let carried: Vec<Val> = inputs
        .iter()
        .skip(2)
        .enumerate()
        .map(|(i, v)| {
            v.clone().ok_or_else(|| Error::from(format!("input {} (a loop-carried value) is missing", i + 2)))
        })
        .collect::<R<_>>()?;
    let n = carried.len();
    if body.input.len() != n + 2 {
        return Err(format!(
            "its `body` takes {} inputs, expected {} (iteration, cond, {n} carried)",
            body.input.len(),
            n + 2
        )
        .into());
    }
    if body.output.len() < n + 1 {
        return Err(format!(
            "its `body` has {} outputs, expected at least {} (cond, {n} carried)",
            body.output.len(),
            n + 1
        )
        .into());
    }
    let scans = body.output.len() - n - 1;
    if max.is_none() && cond.is_none() {
        return Err(Error::from("has neither a trip count (M) nor a condition: it would never end"));
    }
    let trip = match &max {
        Some(m) => const_scalar(m)?.map(|m| m as i64),
        None => None,
    };
    let cond_known = match &cond {
        None => true,
        Some(c) => const_scalar(c)?.is_some(),
    };
    let unrollable = cond_known && trip.is_some_and(|t| charge(im, body, t.max(0) as u64));
    let carried_tys = types(&carried);
    if unrollable {
        let trip = trip.unwrap_or(0);
        let mut cond = cond;
        let mut vals = carried;
        let mut stacked: Vec<Vec<Val>> = vec![Vec::new(); scans];
        let mut k = 0;
        while k < trip {
            match &cond {
                None => {}
                Some(c) => match const_scalar(c)? {
                    Some(0.0) => break,
                    Some(_) => {}
                    // The condition became a runtime value: the remaining iterations run as a loop.
                    None => {
                        if scans > 0 {
                            return Err(Error::from(format!(
                                "its condition depends on run-time data after {k} iterations and it has {scans} scan outputs, whose length would then be known only at run time; passel's types are static"
                            )));
                        }
                        let from = (const_i64(k), c.clone());
                        vals = loop_call(im, em, body, (from, max.clone()), vals, outer, name)?;
                        return Ok(vals);
                    }
                },
            }
            let mut args = vec![const_i64(k), cond.clone().unwrap_or_else(|| const_bool(true))];
            args.extend(vals.iter().cloned());
            let outs = inline_body(im, em, ("body", body), &args, outer)?;
            if cond.is_some() {
                cond = Some(scalar_bool(em, &outs[0], "the body's condition output", &format!("{name}_cond"))?);
            }
            vals = outs[1..=n].to_vec();
            check_carried(&carried_tys, &vals)?;
            for (s, v) in stacked.iter_mut().zip(&outs[n + 1..]) {
                s.push(v.clone());
            }
            k += 1;
        }
        for (j, elems) in stacked.iter().enumerate() {
            if elems.is_empty() {
                return Err(format!(
                    "runs no iterations, so its scan output {j} has a shape the body never produced; passel's types are static"
                )
                .into());
            }
            let v = stack(em, elems, 0, false, &format!("{name}_scan{j}"))?;
            vals.push(v);
        }
        return Ok(vals);
    }
    if scans > 0 {
        return Err(Error::from(format!(
            "has {scans} scan outputs but its trip count is not known at import (or unrolling it would pass the model's {MAX_UNROLLED_NODES} unrolled nodes) or its condition is a run-time value: the outputs' length would be known only at run time; passel's types are static"
        )));
    }
    let cond = cond.unwrap_or_else(|| const_bool(true));
    loop_call(im, em, body, ((const_i64(0), cond), max), carried, outer, name)
}

/// Emits the loop of `body` as a recursive global function and a call of it from iteration
/// `iter` with condition `cond`, bound `max` and carried values `carried`; returns the
/// carried values after the loop.
fn loop_call(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    body: &Body,
    ((iter, cond), max): ((Val, Val), Option<Val>),
    carried: Vec<Val>,
    outer: &dyn Fn(&str) -> Option<Val>,
    name: &str,
) -> R<Vec<Val>> {
    let n = carried.len();
    if n == 0 {
        // Nothing is carried out of the loop and it has no scan outputs: it computes nothing.
        return Ok(Vec::new());
    }
    let callee = format!("loop{}", im.loops);
    im.loops += 1;
    let mut lem = Emitter::new(em.fold_limit());
    let scalar = |dtype| TensorType { shape: Vec::new().into(), dtype };
    let p_iter = lem.param("iter", scalar(DType::I64));
    let p_cond = lem.param("cond", scalar(DType::Bool));
    let p_max = max.as_ref().map(|_| lem.param("max", scalar(DType::I64)));
    let carried_tys = types(&carried);
    let p_carried: Vec<_> =
        carried_tys.iter().enumerate().map(|(i, t)| lem.param(&format!("v{i}"), t.clone())).collect();
    // Values of enclosing graphs the body reads: constants stay constants, the others become
    // parameters.
    let mut captured: HashMap<String, Val> = HashMap::new();
    let mut p_captured = Vec::new();
    let mut captured_args = Vec::new();
    for free in &body.free {
        let v = outer(free)
            .ok_or_else(|| Error::from(format!("its `body` reads `{free}`, which no enclosing graph defines")))?;
        match v {
            Val::Const(_) => {
                captured.insert(free.clone(), v);
            }
            Val::Node { ref ty, .. } => {
                let ty = ty.clone();
                let id = lem.param(free, ty.clone());
                p_captured.push(id);
                captured.insert(free.clone(), Val::Node { id, ty });
                captured_args.push(v);
            }
        }
    }
    let node = |id, ty| Val::Node { id, ty };
    let v_iter = node(p_iter, scalar(DType::I64));
    let v_cond = node(p_cond, scalar(DType::Bool));
    let v_max = p_max.map(|id| node(id, scalar(DType::I64)));
    let v_carried: Vec<Val> = p_carried.iter().zip(&carried_tys).map(|(&id, t)| node(id, t.clone())).collect();
    // go = cond && iter < max
    let go = match &v_max {
        None => v_cond.clone(),
        Some(m) => {
            let block = lem.open_block();
            let less = lem.call("less", &[&v_iter, m], Attrs::new(), "in_range")?;
            let then_ = lem.close_block(block, &[less]);
            let block = lem.open_block();
            let else_ = lem.close_block(block, &[const_bool(false)]);
            lem.if_(&v_cond, (then_, else_), vec![scalar(DType::Bool)], "go").remove(0)
        }
    };
    let outer_of_body = move |name: &str| captured.get(name).cloned();
    let block = lem.open_block();
    let mut args = vec![v_iter.clone(), v_cond.clone()];
    args.extend(v_carried.iter().cloned());
    let outs = inline_body(im, &mut lem, ("body", body), &args, &outer_of_body)?;
    check_carried(&carried_tys, &outs[1..=n])?;
    let next = lem.call("add", &[&v_iter, &const_i64(1)], Attrs::new(), "next")?;
    let next_cond = scalar_bool(&mut lem, &outs[0], "the body's condition output", "next_cond")?;
    let mut rec_args = vec![next, next_cond];
    rec_args.extend(v_max.iter().cloned());
    rec_args.extend(outs[1..=n].iter().cloned());
    rec_args.extend(p_captured.iter().zip(&captured_args).map(|(&id, a)| node(id, a.ty())));
    let again = lem.call_global(&callee, &rec_args, carried_tys.clone(), "again");
    let then_ = lem.close_block(block, &again);
    let block = lem.open_block();
    let else_ = lem.close_block(block, &v_carried);
    let result = lem.if_(&go, (then_, else_), carried_tys.clone(), "result");
    let mut params = vec![p_iter, p_cond];
    params.extend(p_max);
    params.extend(p_carried);
    params.extend(p_captured);
    let func = lem.finish(&params, &result);
    im.functions.push((callee.clone(), func));
    let mut call_args = vec![iter, cond];
    call_args.extend(max);
    call_args.extend(carried);
    call_args.extend(captured_args);
    Ok(em.call_global(&callee, &call_args, carried_tys, name))
}

fn convert_scan(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    body: &Body,
    attrs: &Attributes,
    inputs: &[Option<Val>],
    outer: &dyn Fn(&str) -> Option<Val>,
    name: &str,
) -> R<Vec<Val>> {
    let m = *attrs.int.get("num_scan_inputs").ok_or_else(|| Error::from("attribute `num_scan_inputs` is required"))?;
    // Scan-8 takes an optional `sequence_lens` first and a batch axis on every value.
    let batched = im.scan_batched;
    let (seq_lens, inputs) =
        if batched { (inputs.first().cloned().flatten(), inputs.get(1..).unwrap_or(&[])) } else { (None, inputs) };
    let inputs: Vec<Val> = inputs
        .iter()
        .enumerate()
        .map(|(i, v)| v.clone().ok_or_else(|| Error::from(format!("input {} is missing", i + usize::from(batched)))))
        .collect::<R<_>>()?;
    if m < 1 || m as usize > inputs.len() {
        return Err(
            format!("num_scan_inputs = {m} must be between 1 and the number of inputs ({})", inputs.len()).into()
        );
    }
    let m = m as usize;
    let n = inputs.len() - m;
    if body.output.len() < n {
        return Err(format!("its `body` has {} outputs, fewer than its {n} state values", body.output.len()).into());
    }
    let k = body.output.len() - n;
    let list = |key: &str, len: usize| -> R<Vec<i64>> {
        match attrs.ints.get(key) {
            None => Ok(vec![0; len]),
            Some(v) if v.len() == len => Ok(v.clone()),
            Some(v) => Err(format!("attribute `{key}` has {} entries, expected {len}", v.len()).into()),
        }
    };
    let v9_only = ["scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"];
    let (in_axes, in_dirs, out_axes, out_dirs) = if batched {
        if let Some(key) = v9_only.iter().find(|k| attrs.ints.contains_key(**k)) {
            return Err(format!("attribute `{key}` is not part of Scan-8 (it has `directions`)").into());
        }
        (vec![0; m], list("directions", m)?, vec![0; k], vec![0; k])
    } else {
        if attrs.ints.contains_key("directions") {
            return Err(Error::from(
                "attribute `directions` is Scan-8's; opsets 9 and later name it `scan_input_directions`",
            ));
        }
        (list(v9_only[0], m)?, list(v9_only[1], m)?, list(v9_only[2], k)?, list(v9_only[3], k)?)
    };
    if let Some(d) = in_dirs.iter().chain(&out_dirs).find(|&&d| d != 0 && d != 1) {
        return Err(format!("a scan direction is {d}; directions are 0 (forward) or 1 (reverse)").into());
    }
    let step = Steps { body, k, in_axes: &in_axes, in_dirs: &in_dirs, out_axes: &out_axes, out_dirs: &out_dirs };
    if !batched {
        return scan_steps(im, em, &step, &inputs, outer, name);
    }
    // Scan-8: every state and scan input has the batch axis 0 (scan inputs are
    // [batch, sequence, …]); each batch element is scanned on its own and the results stacked.
    let batch = inputs.first().and_then(|v| v.shape().first().copied()).unwrap_or(0);
    if let Some(bad) = inputs.iter().find(|v| v.shape().first() != Some(&batch)) {
        return Err(format!("Scan-8 inputs need a common batch axis 0 of {batch}, got {}", show(&bad.ty())).into());
    }
    if let Some(lens) = &seq_lens {
        let len = inputs[n].shape().get(1).copied().unwrap_or(0);
        let full = lens
            .as_const()
            .and_then(|c| c.materialize().ok())
            .and_then(|t| super::tensor::tensor_i64s(&t))
            .is_some_and(|l| l.len() as u64 == batch && l.iter().all(|&x| x as u64 == len));
        if !full {
            return Err(format!(
                "input 0 (sequence_lens) must be a constant of {batch} lengths equal to the sequence length {len}; shorter sequences are not supported"
            )
            .into());
        }
    }
    let mut per_batch: Vec<Vec<Val>> = vec![Vec::new(); n + k];
    for b in 0..batch {
        let idx = const_i64(b as i64);
        let attrs = Attrs::new().with("axis", AttrValue::Int(0));
        let args = inputs
            .iter()
            .enumerate()
            .map(|(j, x)| Ok(em.call("take", &[x, &idx], attrs.clone(), &format!("{name}_batch{j}"))?))
            .collect::<R<Vec<Val>>>()?;
        let outs = scan_steps(im, em, &step, &args, outer, name)?;
        for (acc, v) in per_batch.iter_mut().zip(outs) {
            acc.push(v);
        }
    }
    per_batch.iter().enumerate().map(|(j, elems)| stack(em, elems, 0, false, &format!("{name}_out{j}"))).collect()
}

/// What one unrolled scan does: its body, scan output count and per-input / per-output axes
/// and directions.
struct Steps<'b> {
    body: &'b Body,
    k: usize,
    in_axes: &'b [i64],
    in_dirs: &'b [i64],
    out_axes: &'b [i64],
    out_dirs: &'b [i64],
}

/// Unrolls a scan over `inputs` (its states, then its scan inputs) and returns the final
/// states, then the stacked scan outputs.
fn scan_steps(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    step: &Steps<'_>,
    inputs: &[Val],
    outer: &dyn Fn(&str) -> Option<Val>,
    name: &str,
) -> R<Vec<Val>> {
    let Steps { body, k, in_axes, in_dirs, out_axes, out_dirs } = *step;
    let n = inputs.len() - in_axes.len();
    let (states, scanned) = inputs.split_at(n);
    let mut len = None;
    let mut axes = Vec::with_capacity(scanned.len());
    for (j, (x, &axis)) in scanned.iter().zip(in_axes).enumerate() {
        let rank = x.rank() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&a) {
            return Err(format!("scan input {j}: axis {axis} is out of range for rank {rank}").into());
        }
        let l = x.shape()[a as usize];
        if *len.get_or_insert(l) != l {
            return Err(format!(
                "scan inputs have different lengths along their scan axes ({} and {l})",
                len.unwrap_or(0)
            )
            .into());
        }
        axes.push(a);
    }
    let len = len.unwrap_or(0);
    if !charge(im, body, len) {
        return Err(format!(
            "scans {len} steps over a body of {} nodes: with the loops unrolled before it, more than the {MAX_UNROLLED_NODES} nodes passel unrolls in one model",
            body.total_nodes
        )
        .into());
    }
    let state_tys = types(states);
    let mut vals = states.to_vec();
    let mut stacked: Vec<Vec<Val>> = vec![Vec::new(); k];
    for t in 0..len {
        let mut args = vals.clone();
        for (j, x) in scanned.iter().enumerate() {
            let at = if in_dirs[j] == 0 { t } else { len - 1 - t };
            let idx = const_i64(at as i64);
            let attrs = Attrs::new().with("axis", AttrValue::Int(axes[j]));
            args.push(em.call("take", &[x, &idx], attrs, &format!("{name}_in{j}"))?);
        }
        let outs = inline_body(im, em, ("body", body), &args, outer)?;
        vals = outs[..n].to_vec();
        check_carried(&state_tys, &vals)?;
        for (s, v) in stacked.iter_mut().zip(&outs[n..]) {
            s.push(v.clone());
        }
    }
    for (j, elems) in stacked.iter().enumerate() {
        if elems.is_empty() {
            return Err(format!("scans zero steps, so its scan output {j} has a shape the body never produced").into());
        }
        vals.push(stack(em, elems, out_axes[j], out_dirs[j] == 1, &format!("{name}_scan{j}"))?);
    }
    Ok(vals)
}

/// FlexAttention (`ai.onnx.preview`), as its function body computes it: `Q [B, Hq, L, E]`,
/// `K [B, Hkv, S, E]` and `V [B, Hkv, S, Ev]` (query head `h` uses key-value head
/// `h / (Hq / Hkv)`); scores `(Q·√scale)(K·√scale)ᵀ` in the input dtype, then in the softmax
/// precision (float32, or float64 for float64 inputs, or `softmax_precision`) through
/// `score_mod`, softmax over the keys, `prob_mod`, and the product with `V`, cast back.
fn convert_flex_attention(
    im: &mut Importer<'_>,
    em: &mut Emitter,
    (score_mod, prob_mod): (Option<&Body>, Option<&Body>),
    attrs: &Attributes,
    inputs: &[Option<Val>],
    outer: &dyn Fn(&str) -> Option<Val>,
    name: &str,
) -> R<Vec<Val>> {
    let [Some(q), Some(k), Some(v)] = inputs else {
        return Err(format!("takes the 3 inputs Q, K and V, got {}", inputs.len()).into());
    };
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let dtype = q.ty().dtype;
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
        return Err(format!("Q {qs:?}, K {ks:?} and V {vs:?} must have rank 4").into());
    }
    if k.ty().dtype != dtype || v.ty().dtype != dtype || !dtype.is_float() {
        return Err(format!(
            "Q, K and V must be of one float dtype, got {}, {} and {}",
            dtype,
            k.ty().dtype,
            v.ty().dtype
        )
        .into());
    }
    let (b, hq, l, e) = (qs[0], qs[1], qs[2], qs[3]);
    let (hkv, s) = (ks[1], ks[2]);
    if ks[0] != b || vs[0] != b || ks[3] != e || vs[1] != hkv || vs[2] != s || hkv == 0 || !hq.is_multiple_of(hkv) {
        return Err(format!(
            "K {ks:?} must be [{b}, Hkv, S, {e}] and V {vs:?} [{b}, Hkv, S, Ev], with Hkv dividing Q's {hq} heads"
        )
        .into());
    }
    let precision = match attrs.int.get("softmax_precision") {
        Some(&p) => {
            let d = super::tensor::dtype_of(p as i32).map_err(|e| format!("attribute `softmax_precision`: {e}"))?;
            if !d.is_float() {
                return Err(format!("softmax_precision must be a float type, got {d}").into());
            }
            d
        }
        None if dtype == DType::F64 => DType::F64,
        None => DType::F32,
    };
    let scale = attrs.float.get("scale").copied().unwrap_or(1.0 / (e as f64).sqrt());
    let call = |em: &mut Emitter, op: &str, args: &[&Val], attrs: Attrs, what: &str| {
        em.call(op, args, attrs, &format!("{name}_{what}")).map_err(Error::from)
    };
    let cast = |em: &mut Emitter, x: &Val, to: DType, what: &str| -> R<Val> {
        if x.ty().dtype == to {
            return Ok(x.clone());
        }
        call(em, "cast", &[x], Attrs::new().with("dtype", AttrValue::DType(to)), what)
    };
    // Key-value heads repeated for their query-head groups.
    let aligned = |em: &mut Emitter, x: &Val, what: &str| -> R<Val> {
        if hkv == hq {
            return Ok(x.clone());
        }
        let xs = x.shape();
        let x5 = reshape(em, x, &[b, hkv, 1, xs[2], xs[3]], &format!("{name}_{what}"))?;
        let to = AttrValue::Ints(vec![b as i64, hkv as i64, (hq / hkv) as i64, xs[2] as i64, xs[3] as i64].into());
        let e = call(em, "broadcast_to", &[&x5], Attrs::new().with("shape", to), what)?;
        Ok(reshape(em, &e, &[b, hq, xs[2], xs[3]], &format!("{name}_{what}"))?)
    };
    let k = aligned(em, k, "k")?;
    let v = aligned(em, v, "v")?;
    // √scale rounded to float32 first, then to the input dtype, as the function body does.
    let root = Val::Const(Arc::new(Constant::Dense(Tensor::scalar(dtype, f64::from((scale as f32).sqrt())))));
    let qs = call(em, "multiply", &[q, &root], Attrs::new(), "q_scaled")?;
    let ks = call(em, "multiply", &[&k, &root], Attrs::new(), "k_scaled")?;
    let kt = call(em, "transpose", &[&ks], Attrs::new().with("axes", AttrValue::Ints(vec![0, 1, 3, 2].into())), "kt")?;
    let score = call(em, "matmul", &[&qs, &kt], Attrs::new(), "score")?;
    let mut score = cast(em, &score, precision, "score")?;
    let want = TensorType { shape: vec![b, hq, l, s].into(), dtype: precision };
    let modify = |im: &mut Importer<'_>, em: &mut Emitter, (attr, body): (&str, &Body), x: Val| -> R<Val> {
        let outs = inline_body(im, em, (attr, body), &[x], outer)?;
        match &outs[..] {
            [y] if y.ty() == want => Ok(y.clone()),
            _ => Err(format!(
                "its `{attr}` must produce one {}, got {}",
                show(&want),
                outs.iter().map(|o| show(&o.ty())).collect::<Vec<_>>().join(", ")
            )
            .into()),
        }
    };
    if let Some(body) = score_mod {
        score = modify(im, em, ("score_mod", body), score)?;
    }
    let mut prob = call(em, "softmax", &[&score], Attrs::new().with("axis", AttrValue::Int(3)), "prob")?;
    if let Some(body) = prob_mod {
        prob = modify(im, em, ("prob_mod", body), prob)?;
    }
    let v = cast(em, &v, precision, "v")?;
    let y = call(em, "matmul", &[&prob, &v], Attrs::new(), "y")?;
    Ok(vec![cast(em, &y, dtype, "out")?])
}
