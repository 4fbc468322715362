//! Interpreter tests on hand-built IR (the builder, since the text parser lives elsewhere).

use std::sync::Arc;

use super::*;
use crate::ir::{AttrValue, Attrs, Constant, DType, Fill, FunctionBuilder, TensorType, Type};

fn op(name: &str) -> OpId {
    crate::op::lookup(name).unwrap()
}

fn scalar_ty(dtype: DType) -> Type {
    Type::scalar(dtype)
}

fn f32s(shape: &[u64], vals: &[f64]) -> Tensor {
    Tensor::from_f64s(shape, DType::F32, vals).unwrap()
}

fn tensor_of(v: &Value) -> Vec<f64> {
    v.as_tensor().expect("a tensor").to_f64s()
}

fn module(funcs: Vec<(&str, Function)>) -> Module {
    let mut m = Module::new();
    for (name, f) in funcs {
        m.add(name, f).unwrap();
    }
    m
}

/// `fn(%x: Tensor[(2,), f32]) { let %y = add(%x, %x); let %t = (%y, %x); %t.0 }`
fn double() -> Function {
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(Type::tensor(vec![2], DType::F32)));
    let sum = b.call(op("add"), &[x, x], Attrs::new());
    let y = b.var("y", None);
    let tup = b.tuple(&[y, x]);
    let t = b.var("t", None);
    let proj = b.proj(t, 0);
    let body = b.block(&[(y, sum), (t, tup)], proj);
    b.finish(&[x], body, Some(Type::tensor(vec![2], DType::F32)), Attrs::new())
}

#[test]
fn evaluates_blocks_tuples_and_projections() {
    let m = module(vec![("double", double())]);
    let out = eval_function(&m, "double", &[f32s(&[2], &[1.0, 2.5]).into()]).unwrap();
    assert_eq!(tensor_of(&out), [2.0, 5.0]);
}

#[test]
fn checks_argument_count_and_types() {
    let m = module(vec![("double", double())]);
    let e = eval_function(&m, "double", &[]).unwrap_err();
    assert_eq!(e.to_string(), "in @double: @double takes 1 arguments, got 0");
    let e = eval_function(&m, "double", &[f32s(&[3], &[1.0, 2.0, 3.0]).into()]).unwrap_err();
    assert_eq!(e.to_string(), "in @double: argument 1 of @double: expected Tensor[(2,), f32], got Tensor[(3,), f32]");
    let tup = Value::Tuple(vec![Value::Tensor(f32s(&[2], &[1.0, 2.0]))].into());
    let e = eval_function(&m, "double", &[tup]).unwrap_err();
    assert_eq!(e.message, "argument 1 of @double: expected Tensor[(2,), f32], got a tuple of 1 values");
    let e = eval_function(&m, "nope", &[]).unwrap_err();
    assert_eq!(e.message, "unknown global @nope");
}

#[test]
fn calls_globals_closures_and_variables_bound_to_functions() {
    // @main(%x) { let %k = 10; let %f = fn(%a) { add(%a, %k) }; let %g = @double;
    //             (%f(%x), %g(%x)) }
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(Type::tensor(vec![2], DType::F32)));
    let ten = b.constant(Constant::Dense(f32s(&[], &[10.0])));
    let k = b.var("k", None);
    let a = b.var("a", None);
    let body = b.call(op("add"), &[a, k], Attrs::new());
    let clo = b.closure(&[a], body, None, Attrs::new());
    let f = b.var("f", None);
    let glob = b.global("double");
    let g = b.var("g", None);
    let call_f = b.apply(f, &[x]);
    let call_g = b.apply(g, &[x]);
    let tup = b.tuple(&[call_f, call_g]);
    let block = b.block(&[(k, ten), (f, clo), (g, glob)], tup);
    let main = b.finish(&[x], block, None, Attrs::new());
    let m = module(vec![("double", double()), ("main", main)]);
    let out = eval_function(&m, "main", &[f32s(&[2], &[1.0, 2.0]).into()]).unwrap();
    let Value::Tuple(fields) = &out else { panic!("expected a tuple") };
    assert_eq!(tensor_of(&fields[0]), [11.0, 12.0]);
    assert_eq!(tensor_of(&fields[1]), [2.0, 4.0]);
}

#[test]
fn closures_escape_with_their_environment() {
    // @adder(%k) { fn(%a) { add(%a, %k) } }; the returned closure is called later.
    let mut b = FunctionBuilder::new();
    let k = b.var("k", Some(scalar_ty(DType::F32)));
    let a = b.var("a", None);
    let body = b.call(op("add"), &[a, k], Attrs::new());
    let clo = b.closure(&[a], body, None, Attrs::new());
    let adder = b.finish(&[k], clo, None, Attrs::new());
    let m = module(vec![("adder", adder)]);
    let mut interp = Interpreter::new(&m);
    let made = interp.call("adder", &[f32s(&[], &[3.0]).into()]).unwrap();
    let Value::Func(f) = &made else { panic!("a function") };
    let out = interp.call_value(f, &[f32s(&[], &[4.0]).into()]).unwrap();
    assert_eq!(tensor_of(&out), [7.0]);
}

/// `@down(%n: i64) { if (greater(%n, 0)) { @down(subtract(%n, 1)) } else { %n } }`
fn countdown() -> Function {
    let mut b = FunctionBuilder::new();
    let n = b.var("n", Some(scalar_ty(DType::I64)));
    let zero = b.constant(Constant::Dense(Tensor::scalar(DType::I64, 0.0)));
    let one = b.constant(Constant::Dense(Tensor::scalar(DType::I64, 1.0)));
    let cond = b.call(op("greater"), &[n, zero], Attrs::new());
    let dec = b.call(op("subtract"), &[n, one], Attrs::new());
    let me = b.global("down");
    let rec = b.apply(me, &[dec]);
    let body = b.if_(cond, rec, n);
    b.finish(&[n], body, Some(scalar_ty(DType::I64)), Attrs::new())
}

#[test]
fn recursion_between_globals_is_bounded() {
    let m = module(vec![("down", countdown())]);
    let out = eval_function(&m, "down", &[Tensor::scalar(DType::I64, 500.0).into()]).unwrap();
    assert_eq!(tensor_of(&out), [0.0]);
    let e = eval_function(&m, "down", &[Tensor::scalar(DType::I64, 20_000.0).into()]).unwrap_err();
    assert_eq!(e.message, "call depth exceeded (limit 10000)");
    assert_eq!(e.function, "down");
    let shallow = Interpreter::new(&m).with_max_call_depth(10).call("down", &[Tensor::scalar(DType::I64, 50.0).into()]);
    assert_eq!(shallow.unwrap_err().message, "call depth exceeded (limit 10)");
}

#[test]
fn if_evaluates_only_the_taken_branch() {
    // if (cond) { 1.0 } else { zeros(shape=[1e9, 1e9]) }: the huge branch must not run.
    let mut b = FunctionBuilder::new();
    let c = b.var("c", Some(scalar_ty(DType::Bool)));
    let one = b.constant(Constant::scalar_f32(1.0));
    let attrs = Attrs::new().with("shape", AttrValue::Ints(vec![1_000_000_000, 1_000_000_000].into()));
    let huge = b.call(op("zeros"), &[], attrs);
    let body = b.if_(c, one, huge);
    let m = module(vec![("pick", b.finish(&[c], body, None, Attrs::new()))]);
    let t = Tensor::scalar(DType::Bool, 1.0);
    assert_eq!(tensor_of(&eval_function(&m, "pick", &[t.into()]).unwrap()), [1.0]);
    let e = eval_function(&m, "pick", &[Tensor::scalar(DType::Bool, 0.0).into()]).unwrap_err();
    assert!(e.message.contains("too many elements to materialize"), "{e}");
    assert_eq!(e.node, Some(NodeId(2)));
}

#[test]
fn huge_constant_fill_is_an_error() {
    let mut b = FunctionBuilder::new();
    let ty = TensorType { shape: vec![1 << 30, 1 << 30].into(), dtype: DType::F32 };
    let c = b.constant(Constant::Fill { ty, fill: Fill::Full(0.0) });
    let f = b.finish(&[], c, None, Attrs::new());
    let e = eval_closed(&f, c).unwrap_err();
    assert!(e.message.starts_with("tensor of shape [1073741824, 1073741824] has too many elements"), "{e}");
}

#[test]
fn operator_errors_name_function_and_node() {
    let mut b = FunctionBuilder::new();
    let x = b.var("x", None);
    let y = b.var("y", None);
    let s = b.call(op("add"), &[x, y], Attrs::new());
    let m = module(vec![("main", b.finish(&[x, y], s, None, Attrs::new()))]);
    let args = [f32s(&[2], &[0.0; 2]).into(), f32s(&[3], &[0.0; 3]).into()];
    let e = eval_function(&m, "main", &args).unwrap_err();
    assert_eq!(e.to_string(), "in @main at %2: add: shapes (2,) and (3,) do not broadcast");
    let tup = Value::Tuple(Arc::from(vec![]));
    let e = eval_function(&m, "main", &[tup.clone(), tup]).unwrap_err();
    assert_eq!(e.message, "argument 1 of `add` must be a tensor, got a tuple of 0 values");
}

#[test]
fn tuple_result_operators_give_tuples() {
    let mut b = FunctionBuilder::new();
    let c = b.constant(Constant::Dense(f32s(&[4], &[1.0, 2.0, 3.0, 4.0])));
    let attrs = Attrs::new().with("indices_or_sections", AttrValue::Int(2));
    let s = b.call(op("split"), &[c], attrs);
    let p = b.proj(s, 1);
    let f = b.finish(&[], p, None, Attrs::new());
    assert_eq!(tensor_of(&eval_closed(&f, p).unwrap()), [3.0, 4.0]);
    let e = eval_closed(&f, NodeId(0)).map(|v| tensor_of(&v)).unwrap();
    assert_eq!(e, [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn eval_closed_rejects_free_variables_and_globals() {
    let mut b = FunctionBuilder::new();
    let x = b.var("x", None);
    let r = b.call(op("relu"), &[x], Attrs::new());
    let g = b.global("main");
    let f = b.finish(&[x], r, None, Attrs::new());
    assert_eq!(eval_closed(&f, r).unwrap_err().message, "unbound variable %x");
    assert_eq!(eval_closed(&f, g).unwrap_err().message, "unknown global @main");
}

#[test]
fn eval_call_runs_one_operator() {
    let out = eval_call(op("multiply"), &Attrs::new(), &[f32s(&[2], &[2.0, 3.0]), f32s(&[], &[4.0])]).unwrap();
    assert_eq!(out[0].to_f64s(), [8.0, 12.0]);
    let e = eval_call(op("relu"), &Attrs::new(), &[]).unwrap_err();
    assert_eq!(e.message, "operator `relu` takes 1 arguments, got 0");
}

#[test]
fn stateful_operators_follow_the_seed() {
    let mut b = FunctionBuilder::new();
    let attrs = Attrs::new().with("shape", AttrValue::Ints(vec![4].into()));
    let r = b.call(op("random_uniform"), &[], attrs);
    let m = module(vec![("rand", b.finish(&[], r, None, Attrs::new()))]);
    let run = |seed| Interpreter::new(&m).with_seed(seed).call("rand", &[]).unwrap();
    assert!(assert_values_close(&run(1), &run(1), 0.0, 0.0).is_ok());
    assert!(assert_values_close(&run(1), &run(2), 0.0, 0.0).is_err());
    // Two calls on one interpreter draw different values.
    let mut interp = Interpreter::new(&m);
    let (a, b2) = (interp.call("rand", &[]).unwrap(), interp.call("rand", &[]).unwrap());
    assert!(assert_values_close(&a, &b2, 0.0, 0.0).is_err());
}

#[test]
fn if_condition_must_be_a_scalar() {
    let mut b = FunctionBuilder::new();
    let c = b.var("c", None);
    let body = b.if_(c, c, c);
    let m = module(vec![("f", b.finish(&[c], body, None, Attrs::new()))]);
    let e = eval_function(&m, "f", &[f32s(&[2], &[1.0, 0.0]).into()]).unwrap_err();
    assert_eq!(e.message, "condition must be a scalar tensor, got Tensor[(2,), f32]");
    // A nonzero number is true.
    let out = eval_function(&m, "f", &[f32s(&[], &[0.5]).into()]).unwrap();
    assert_eq!(tensor_of(&out), [0.5]);
}

#[test]
fn million_binding_chain() {
    // let %x1 = add(%x0, 1); … ; %x1000000
    const N: usize = 1_000_000;
    let mut b = FunctionBuilder::new();
    let x0 = b.var("x", Some(scalar_ty(DType::I64)));
    let one = b.constant(Constant::Dense(Tensor::scalar(DType::I64, 1.0)));
    let mut bindings = Vec::with_capacity(N);
    let mut prev = x0;
    for _ in 0..N {
        let call = b.call(op("add"), &[prev, one], Attrs::new());
        let v = b.var("x", None);
        bindings.push((v, call));
        prev = v;
    }
    let body = b.block(&bindings, prev);
    let m = module(vec![("chain", b.finish(&[x0], body, None, Attrs::new()))]);
    let out = eval_function(&m, "chain", &[Tensor::scalar(DType::I64, 5.0).into()]).unwrap();
    assert_eq!(tensor_of(&out), [(N + 5) as f64]);
}

#[test]
fn deeply_nested_expression() {
    // relu(relu(…relu(%x)…)) 100,000 deep, then negated once so the result is not trivially %x.
    const DEPTH: usize = 100_000;
    let mut b = FunctionBuilder::new();
    let x = b.var("x", None);
    let mut e = x;
    for _ in 0..DEPTH {
        e = b.call(op("relu"), &[e], Attrs::new());
    }
    let neg = b.call(op("negative"), &[e], Attrs::new());
    let m = module(vec![("deep", b.finish(&[x], neg, None, Attrs::new()))]);
    let out = eval_function(&m, "deep", &[f32s(&[2], &[-1.0, 2.0]).into()]).unwrap();
    assert_eq!(tensor_of(&out), [0.0, -2.0]);
}

#[test]
fn values_close_compares_with_tolerance() {
    let a = Value::Tuple(vec![f32s(&[2], &[1.0, f64::NAN]).into(), Value::Func(FuncValue::Global("f".into()))].into());
    let b =
        Value::Tuple(vec![f32s(&[2], &[1.0001, f64::NAN]).into(), Value::Func(FuncValue::Global("f".into()))].into());
    assert!(assert_values_close(&a, &b, 1e-3, 0.0).is_ok());
    assert_eq!(
        assert_values_close(&a, &b, 1e-6, 0.0).unwrap_err(),
        "field .0: element 0 differs: 1 vs 1.000100016593933"
    );
    let c: Value = f32s(&[1], &[1.0]).into();
    assert_eq!(assert_values_close(&a, &c, 0.0, 0.0).unwrap_err(), "value: a tuple of 2 values vs Tensor[(1,), f32]");
}

#[test]
fn random_args_follow_annotations() {
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(Type::tensor(vec![3, 2], DType::F16)));
    let t = b.var("t", Some(Type::tuple(vec![scalar_ty(DType::Bool), Type::tensor(vec![4], DType::I32)])));
    let f = b.finish(&[x, t], x, None, Attrs::new());
    let args = random_args(&f, 7).unwrap();
    assert_eq!(args.len(), 2);
    let xs = args[0].as_tensor().unwrap();
    assert_eq!((xs.shape(), xs.dtype()), (&[3usize, 2][..], DType::F16));
    assert!(xs.to_f64s().iter().all(|v| (-1.0..=1.0).contains(v)));
    let Value::Tuple(fields) = &args[1] else { panic!("a tuple") };
    assert!(tensor_of(&fields[1]).iter().all(|v| (-5.0..=5.0).contains(v)));
    assert!(assert_values_close(&args[0], &random_args(&f, 7).unwrap()[0], 0.0, 0.0).is_ok());
    let mut b = FunctionBuilder::new();
    let y = b.var("y", None);
    let g = b.finish(&[y], y, None, Attrs::new());
    assert_eq!(random_args(&g, 0).unwrap_err().message, "parameter has no type annotation");
}

#[test]
fn interp_reads_a_variable_that_is_the_whole_body_of_a_function_or_closure() {
    // Regression: `def @id(%x) { %x }` and `fn (%y) { %y }` failed with "unbound variable",
    // because no node reads a body that is a bare variable.
    let ty = Type::tensor(vec![2], DType::F32);
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(ty.clone()));
    let id = b.finish(&[x], x, Some(ty.clone()), Attrs::new());
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(ty.clone()));
    let y = b.var("y", Some(ty.clone()));
    let f = b.closure(&[y], y, Some(ty.clone()), Attrs::new());
    let call = b.apply(f, &[x]);
    let apply = b.finish(&[x], call, Some(ty), Attrs::new());
    let m = module(vec![("id", id), ("apply", apply)]);
    let arg = Value::Tensor(f32s(&[2], &[1.0, -2.0]));
    for name in ["id", "apply"] {
        let out = eval_function(&m, name, std::slice::from_ref(&arg)).unwrap();
        assert_eq!(tensor_of(&out), vec![1.0, -2.0], "@{name}");
    }
}

#[test]
fn dropping_a_million_deep_tuple_value_does_not_overflow_the_stack() {
    let mut v: Value = f32s(&[1], &[1.0]).into();
    for _ in 0..1_000_000 {
        v = Value::Tuple(vec![v, Value::Func(FuncValue::Global("g".into()))].into());
    }
    // Run on a small stack so that a recursive drop would fail for certain.
    std::thread::Builder::new().stack_size(256 * 1024).spawn(move || drop(v)).unwrap().join().unwrap();
}

#[test]
fn dropping_a_tuple_keeps_fields_shared_with_other_values() {
    let inner = Value::Tuple(vec![Value::Tuple(vec![f32s(&[2], &[1.0, 2.0]).into()].into())].into());
    let outer = Value::Tuple(vec![inner.clone(), f32s(&[1], &[3.0]).into()].into());
    drop(outer);
    let Value::Tuple(fields) = &inner else { panic!("a tuple") };
    let Value::Tuple(nested) = &fields[0] else { panic!("a nested tuple") };
    assert_eq!(tensor_of(&nested[0]), vec![1.0, 2.0]);
}
