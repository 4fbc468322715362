//! The scoped walk: one function's expression tree in evaluation order, with an explicit stack,
//! reporting what it meets to a [`WalkHooks`] visitor.
//!
//! This is the one walker behind every evaluation-order pass over a function: the verifier's
//! scope check, the interpreter, [`Function::free_vars`] (below), the visitor API
//! (`visit.rs`'s [`super::visit`], the Python package's visitor), InferType,
//! EliminateCommonSubexpr, ToANormalForm, ToGraphNormalForm's regions and LambdaLift's plan
//! are each "[`Walker`] + their hooks", with their own state only.
//!
//! Order: operands in the order of [`Function::for_each_operand`], without the binders (a
//! block's variables and a closure's parameters are not uses). For a node `id`:
//! - an atom (variable use, global, constant): [`WalkHooks::atom`];
//! - a compound node: [`WalkHooks::enter`] (which may skip it: then nothing else is reported
//!   for it), its operands, then [`WalkHooks::exit`];
//! - a block `{ let v1 = e1; …; r }` opens a scope at `enter` and closes it at `exit`: each
//!   value `ei` is walked, then [`WalkHooks::bind`]`(vi, ei)` (the variable is visible from
//!   here on), then `r`;
//! - a nested function opens a scope at `enter` (its parameters are bound there) and closes it
//!   at `exit`; its body is walked in between;
//! - `if (c) { t } else { e }`: `c`, then for each branch [`WalkHooks::enter_branch`] (which
//!   may skip the branch, as an evaluator does with the branch not taken), the branch, and
//!   [`WalkHooks::leave_branch`]; then `exit`.
//!
//! Stack: one frame per compound node being walked, so memory is proportional to nesting
//! depth and the call stack is never used for it. A compound node whose operands are all atoms
//! (the usual case in A-normal form) is walked without a frame, and so are the bindings and
//! operands of a node up to its first compound operand.
//!
//! Malformed input: the walker never panics. Every id it reports is a node of the arena; an
//! id outside the arena, an operand range or closure index out of range, or a binding whose
//! variable or value is outside the arena is reported as [`WalkHooks::malformed`] instead (the
//! node is then not walked further, the binding not reported). It does not look for cycles or
//! shared compound nodes: a walk over a function that is not well formed
//! ([`Function::is_well_formed`]: operands precede their users) must skip nodes it has seen in
//! [`WalkHooks::enter`], as the verifier and InferType do with their visit flags.
//!
//! Stopping and resuming: a hook returning `ControlFlow::Break(b)` stops the walk, and
//! [`Walker::run`] returns it. [`Walker::run`] called again resumes right after the event that
//! stopped (after a stopped `enter` or `enter_branch`, by walking the node or branch). The interpreter stops at a
//! function call, evaluates the callee with a walker of its own, and resumes the caller.

use std::ops::ControlFlow;

use super::expr::ExprKind;
use super::function::Function;
use super::ids::NodeId;

/// What to do with a compound node or a branch the walk is about to enter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Enter {
    /// Walk it.
    Descend,
    /// Do not walk it (for a node: no operand, no `exit` is reported).
    Skip,
}

/// A branch of an `if`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Branch {
    /// The branch taken when the condition holds.
    Then,
    /// The other one.
    Else,
}

/// What a walk reports, in evaluation order (see the module docs). Every hook has a default
/// that does nothing and walks everything.
#[allow(unused_variables)]
pub trait WalkHooks {
    /// What a hook returns to stop the walk ([`std::convert::Infallible`] for a walk that
    /// always runs to the end).
    type Break;

    /// An atom in operand position (or as the root): a variable use, a global or a constant.
    #[inline(always)]
    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Self::Break> {
        ControlFlow::Continue(())
    }

    /// A compound node, before its operands. A `Block` or `Func` opens its scope here.
    #[inline(always)]
    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Self::Break, Enter> {
        ControlFlow::Continue(Enter::Descend)
    }

    /// A compound node that was entered, after its operands. A `Block` or `Func` closes its
    /// scope here.
    #[inline(always)]
    fn exit(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Self::Break> {
        ControlFlow::Continue(())
    }

    /// `let var = value;` of a block, after `value` was walked (or skipped): `var` is in scope
    /// from here to the block's `exit`.
    #[inline(always)]
    fn bind(&mut self, var: NodeId, value: NodeId) -> ControlFlow<Self::Break> {
        ControlFlow::Continue(())
    }

    /// Before a branch of `if_` (after its condition, and for `Else` after the `Then` branch).
    #[inline(always)]
    fn enter_branch(&mut self, if_: NodeId, branch: Branch) -> ControlFlow<Self::Break, Enter> {
        ControlFlow::Continue(Enter::Descend)
    }

    /// After a branch that was entered.
    #[inline(always)]
    fn leave_branch(&mut self, if_: NodeId, branch: Branch) -> ControlFlow<Self::Break> {
        ControlFlow::Continue(())
    }

    /// A reference out of range: `at` is an id outside the arena, or a node whose operand
    /// range or closure index is out of range, or a block with a binding outside the arena.
    #[inline(always)]
    fn malformed(&mut self, at: NodeId) -> ControlFlow<Self::Break> {
        ControlFlow::Continue(())
    }
}

/// A node being walked and how far: the position in its sequence of steps (see
/// [`Walker::step`]), or [`START`] for a node not reached yet.
#[derive(Clone, Copy, Debug)]
struct Frame {
    id: NodeId,
    pos: u32,
}

/// Position of a frame whose node has not been visited yet (a root).
const START: u32 = u32::MAX;

/// The outcome of visiting one operand.
enum Visited<B> {
    /// Fully walked (an atom, a skipped node, or a node of atoms walked inline).
    Done,
    /// A compound node that was entered: its frame goes on the stack above its user's.
    Descend(Frame),
    /// A hook stopped the walk; the frame, if any, goes above the user's to resume.
    Stop(B, Option<Frame>),
}

/// The state of a walk: its stack, reusable across walks and functions (it keeps its
/// allocation).
#[derive(Default, Debug)]
pub struct Walker {
    stack: Vec<Frame>,
}

/// Pushes `user`'s frame at `pos` and acts on the outcome of visiting one of its operands:
/// `continue`s the walk loop after a descent, returns after a stop, falls through when done.
macro_rules! operand {
    ($self:ident, $visited:expr, $user:expr, $pos:expr) => {
        match $visited {
            Visited::Done => {}
            Visited::Descend(child) => {
                $self.stack.push(Frame { id: $user, pos: $pos });
                $self.stack.push(child);
                return ControlFlow::Continue(());
            }
            Visited::Stop(b, child) => {
                $self.stack.push(Frame { id: $user, pos: $pos });
                $self.stack.extend(child);
                return ControlFlow::Break(b);
            }
        }
    };
}

/// Returns from a step after a hook stopped the walk, with `user`'s frame at `pos` pushed to
/// resume from.
macro_rules! check {
    ($self:ident, $flow:expr, $user:expr, $pos:expr) => {
        match $flow {
            ControlFlow::Continue(c) => c,
            ControlFlow::Break(b) => {
                $self.stack.push(Frame { id: $user, pos: $pos });
                return ControlFlow::Break(b);
            }
        }
    };
}

impl Walker {
    /// An empty walker.
    pub fn new() -> Walker {
        Walker::default()
    }

    /// Walks the expression rooted at `root` (usually [`Function::body`]) to its end, or until
    /// a hook stops it. The function's parameters are not reported: a visitor that tracks
    /// scopes puts them in scope before the walk.
    pub fn walk<H: WalkHooks>(&mut self, func: &Function, root: NodeId, hooks: &mut H) -> ControlFlow<H::Break> {
        self.start(root);
        self.run(func, hooks)
    }

    /// Prepares a walk of the expression rooted at `root` without running it (any walk in
    /// progress is dropped).
    pub fn start(&mut self, root: NodeId) {
        self.stack.clear();
        self.stack.push(Frame { id: root, pos: START });
    }

    /// Whether the walk has ended.
    pub fn is_done(&self) -> bool {
        self.stack.is_empty()
    }

    /// Runs the walk started with [`Walker::start`], or resumes a stopped one, over `func`
    /// (the function it was started on) to its end or the next stop.
    pub fn run<H: WalkHooks>(&mut self, func: &Function, hooks: &mut H) -> ControlFlow<H::Break> {
        while let Some(frame) = self.stack.pop() {
            self.step(func, frame, hooks)?;
        }
        ControlFlow::Continue(())
    }

    /// Continues the walk of `frame`'s node from its position until it needs a frame for an
    /// operand, ends, or stops. Positions, per kind:
    /// - operator call, tuple, application, projection: `k` is the `k`-th operand (callee
    ///   first), then `exit`;
    /// - block with `n` bindings: `2i` the `i`-th value, `2i + 1` its `bind`, `2n` the result,
    ///   then `exit`;
    /// - `if`: 0 the condition; 1 / 2 / 3 enter / walk / leave `Then`; 4 / 5 / 6 the same for
    ///   `Else`; then `exit`;
    /// - nested function: 0 the body, then `exit`.
    #[inline]
    fn step<H: WalkHooks>(&mut self, func: &Function, frame: Frame, hooks: &mut H) -> ControlFlow<H::Break> {
        let Frame { id, mut pos } = frame;
        if pos == START {
            return match self.visit(func, id, hooks) {
                Visited::Done => ControlFlow::Continue(()),
                Visited::Descend(child) => {
                    self.stack.push(child);
                    ControlFlow::Continue(())
                }
                Visited::Stop(b, child) => {
                    self.stack.extend(child);
                    ControlFlow::Break(b)
                }
            };
        }
        // Frames are only made for nodes of the arena.
        let kind = func.nodes()[id.index()].kind;
        match kind {
            ExprKind::Block { bindings, result } => {
                let Some(pairs) = func.try_ids(bindings) else {
                    return hooks.malformed(id);
                };
                let n = pairs.len() / 2;
                let nodes = func.num_nodes();
                let mut value_done = pos % 2 == 1;
                for (i, pair) in pairs.chunks_exact(2).enumerate().skip(pos as usize / 2) {
                    let (var, value) = (pair[0], pair[1]);
                    let at = 2 * i as u32;
                    if !value_done {
                        operand!(self, self.visit(func, value, hooks), id, at + 1);
                    }
                    value_done = false;
                    if var.index() < nodes && value.index() < nodes {
                        check!(self, hooks.bind(var, value), id, at + 2);
                    } else {
                        check!(self, hooks.malformed(id), id, at + 2);
                    }
                }
                if pos as usize <= 2 * n {
                    operand!(self, self.visit(func, result, hooks), id, 2 * n as u32 + 1);
                }
            }
            ExprKind::If { cond, then_, else_ } => {
                while pos < 7 {
                    match pos {
                        0 => operand!(self, self.visit(func, cond, hooks), id, 1),
                        1 | 4 => {
                            let branch = if pos == 1 { Branch::Then } else { Branch::Else };
                            if check!(self, hooks.enter_branch(id, branch), id, pos + 1) == Enter::Skip {
                                pos += 3;
                                continue;
                            }
                        }
                        2 => operand!(self, self.visit(func, then_, hooks), id, 3),
                        5 => operand!(self, self.visit(func, else_, hooks), id, 6),
                        3 => check!(self, hooks.leave_branch(id, Branch::Then), id, 4),
                        _ => check!(self, hooks.leave_branch(id, Branch::Else), id, 7),
                    }
                    pos += 1;
                }
            }
            ExprKind::Func { idx } => {
                let Some(closure) = func.try_closure(idx) else {
                    return hooks.malformed(id);
                };
                if pos == 0 {
                    operand!(self, self.visit(func, closure.body, hooks), id, 1);
                }
            }
            _ => {
                let Some((first, rest)) = operands(func, &kind) else {
                    return hooks.malformed(id);
                };
                let len = rest.len() as u32 + first.is_some() as u32;
                while pos < len {
                    let o = match first {
                        Some(f) if pos == 0 => f,
                        Some(_) => rest[pos as usize - 1],
                        None => rest[pos as usize],
                    };
                    operand!(self, self.visit(func, o, hooks), id, pos + 1);
                    pos += 1;
                }
            }
        }
        hooks.exit(id, &kind)
    }

    /// Visits node `id` in operand position: an atom is reported; a compound node is entered
    /// and, when its operands are all atoms, walked to its end right here.
    #[inline(always)]
    fn visit<H: WalkHooks>(&mut self, func: &Function, id: NodeId, hooks: &mut H) -> Visited<H::Break> {
        let nodes = func.nodes();
        let Some(node) = nodes.get(id.index()) else {
            return match hooks.malformed(id) {
                ControlFlow::Continue(()) => Visited::Done,
                ControlFlow::Break(b) => Visited::Stop(b, None),
            };
        };
        let kind = node.kind;
        if kind.is_atom() {
            return match hooks.atom(id, &kind) {
                ControlFlow::Continue(()) => Visited::Done,
                ControlFlow::Break(b) => Visited::Stop(b, None),
            };
        }
        match hooks.enter(id, &kind) {
            ControlFlow::Continue(Enter::Descend) => {}
            ControlFlow::Continue(Enter::Skip) => return Visited::Done,
            ControlFlow::Break(b) => return Visited::Stop(b, Some(Frame { id, pos: 0 })),
        }
        // A call or tuple of atoms (the common case) is walked here, without a frame.
        let leaf = match kind {
            ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => func
                .try_ids(args)
                .filter(|ops| ops.iter().all(|o| nodes.get(o.index()).is_some_and(|n| n.kind.is_atom()))),
            _ => None,
        };
        let Some(ops) = leaf else {
            return Visited::Descend(Frame { id, pos: 0 });
        };
        for (k, &o) in ops.iter().enumerate() {
            // In range and atoms: checked above.
            let atom = nodes[o.index()].kind;
            if let ControlFlow::Break(b) = hooks.atom(o, &atom) {
                return Visited::Stop(b, Some(Frame { id, pos: k as u32 + 1 }));
            }
        }
        match hooks.exit(id, &kind) {
            ControlFlow::Continue(()) => Visited::Done,
            ControlFlow::Break(b) => Visited::Stop(b, None),
        }
    }
}

/// The operands of a call, application, tuple or projection: the callee or tuple, if any,
/// and the rest; `None` when the operand range is out of bounds.
#[inline(always)]
fn operands<'f>(func: &'f Function, kind: &ExprKind) -> Option<(Option<NodeId>, &'f [NodeId])> {
    match *kind {
        ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => Some((None, func.try_ids(args)?)),
        ExprKind::Apply { callee, args } => Some((Some(callee), func.try_ids(args)?)),
        ExprKind::Proj { tuple, .. } => Some((Some(tuple), &[])),
        _ => Some((None, &[])),
    }
}

impl Function {
    /// Variables referenced inside the subtree of `node` but bound outside it, sorted by id,
    /// each once. Binding variables of blocks and parameters of nested functions inside the
    /// subtree count as bound. (A closure's captures: the interpreter's closures and
    /// LambdaLift's lifted parameters.) A [`Walker`] client, so any nesting depth works and
    /// out-of-range references are skipped.
    pub fn free_vars(&self, node: NodeId) -> Vec<NodeId> {
        self.free_vars_with(node, |_| false, |v, refs| refs.push(v))
    }

    /// [`Function::free_vars`] of the subtree as a transformation would leave it: nested
    /// functions for which `gone` holds are left out, and a use of variable `v` references
    /// what `uses(v, refs)` pushes instead of `v` (LambdaLift: a variable bound to a lifted
    /// function becomes that function's free variables at each call).
    pub fn free_vars_with(
        &self,
        node: NodeId,
        gone: impl FnMut(NodeId) -> bool,
        uses: impl FnMut(NodeId, &mut Vec<NodeId>),
    ) -> Vec<NodeId> {
        let mut fv =
            FreeVars { func: self, referenced: Vec::new(), bound: rustc_hash::FxHashSet::default(), gone, uses };
        let ControlFlow::Continue(()) = Walker::new().walk(self, node, &mut fv);
        let FreeVars { mut referenced, bound, .. } = fv;
        referenced.retain(|v| !bound.contains(v));
        referenced.sort_unstable();
        referenced.dedup();
        referenced
    }
}

/// [`Function::free_vars_with`]'s hooks: variable uses, and what the subtree binds.
struct FreeVars<'f, G, U> {
    func: &'f Function,
    referenced: Vec<NodeId>,
    bound: rustc_hash::FxHashSet<NodeId>,
    gone: G,
    uses: U,
}

impl<G: FnMut(NodeId) -> bool, U: FnMut(NodeId, &mut Vec<NodeId>)> WalkHooks for FreeVars<'_, G, U> {
    type Break = std::convert::Infallible;

    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Self::Break> {
        if matches!(kind, ExprKind::Var { .. }) {
            (self.uses)(id, &mut self.referenced);
        }
        ControlFlow::Continue(())
    }

    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Self::Break, Enter> {
        if let ExprKind::Func { idx } = *kind {
            if (self.gone)(id) {
                return ControlFlow::Continue(Enter::Skip);
            }
            if let Some(c) = self.func.try_closure(idx) {
                self.bound.extend(self.func.try_ids(c.params).unwrap_or(&[]).iter().copied());
            }
        }
        ControlFlow::Continue(Enter::Descend)
    }

    fn bind(&mut self, var: NodeId, _: NodeId) -> ControlFlow<Self::Break> {
        self.bound.insert(var);
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use crate::ir::{Attrs, ClosureIdx, Constant, FunctionBuilder, IdRange};
    use crate::op;

    /// Records every event as text; stops at the `stop_at`-th event (counting from 0) when set.
    #[derive(Default)]
    struct Record {
        events: Vec<String>,
        stop_at: Option<usize>,
        skip: Vec<NodeId>,
        skip_else: bool,
    }

    impl Record {
        fn note(&mut self, e: String) -> ControlFlow<()> {
            self.events.push(e);
            if self.stop_at == Some(self.events.len() - 1) {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }

    impl WalkHooks for Record {
        type Break = ();
        fn atom(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<()> {
            self.note(format!("atom {id}"))
        }
        fn enter(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<(), Enter> {
            self.note(format!("enter {id}"))?;
            ControlFlow::Continue(if self.skip.contains(&id) { Enter::Skip } else { Enter::Descend })
        }
        fn exit(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<()> {
            self.note(format!("exit {id}"))
        }
        fn bind(&mut self, var: NodeId, value: NodeId) -> ControlFlow<()> {
            self.note(format!("bind {var} = {value}"))
        }
        fn enter_branch(&mut self, if_: NodeId, branch: Branch) -> ControlFlow<(), Enter> {
            self.note(format!("enter {branch:?} of {if_}"))?;
            let skip = self.skip_else && branch == Branch::Else;
            ControlFlow::Continue(if skip { Enter::Skip } else { Enter::Descend })
        }
        fn leave_branch(&mut self, if_: NodeId, branch: Branch) -> ControlFlow<()> {
            self.note(format!("leave {branch:?} of {if_}"))
        }
        fn malformed(&mut self, at: NodeId) -> ControlFlow<()> {
            self.note(format!("malformed {at}"))
        }
    }

    fn relu() -> crate::ir::OpId {
        op::lookup("relu").expect("relu is registered")
    }

    fn events(func: &Function, rec: Record) -> Vec<String> {
        let mut rec = rec;
        let _ = Walker::new().walk(func, func.body(), &mut rec);
        rec.events
    }

    /// `fn(%x, %c) { let %a = relu(%x); let %f = fn (%y) { relu(%y) }; let %r = if (%c) {
    /// %f(%a) } else { (%a, 1f).0 }; %r }`, with the ids of the nodes named in comments.
    fn sample() -> Function {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None); // %0
        let c = b.var("c", None); // %1
        let av = b.call(relu(), &[x], Attrs::new()); // %2
        let a = b.var("a", None); // %3
        let y = b.var("y", None); // %4
        let fy = b.call(relu(), &[y], Attrs::new()); // %5
        let fv = b.closure(&[y], fy, None, Attrs::new()); // %6
        let f = b.var("f", None); // %7
        let app = b.apply(f, &[a]); // %8
        let k = b.constant(Constant::scalar_f32(1.0)); // %9
        let tup = b.tuple(&[a, k]); // %10
        let proj = b.proj(tup, 0); // %11
        let ifv = b.if_(c, app, proj); // %12
        let r = b.var("r", None); // %13
        let body = b.block(&[(a, av), (f, fv), (r, ifv)], r); // %14
        b.finish(&[x, c], body, None, Attrs::new())
    }

    const SAMPLE_EVENTS: &[&str] = &[
        "enter %14",
        "enter %2",
        "atom %0",
        "exit %2",
        "bind %3 = %2",
        "enter %6",
        "enter %5",
        "atom %4",
        "exit %5",
        "exit %6",
        "bind %7 = %6",
        "enter %12",
        "atom %1",
        "enter Then of %12",
        "enter %8",
        "atom %7",
        "atom %3",
        "exit %8",
        "leave Then of %12",
        "enter Else of %12",
        "enter %11",
        "enter %10",
        "atom %3",
        "atom %9",
        "exit %10",
        "exit %11",
        "leave Else of %12",
        "exit %12",
        "bind %13 = %12",
        "atom %13",
        "exit %14",
    ];

    #[test]
    fn walker_reports_blocks_closures_and_branches_in_evaluation_order() {
        assert_eq!(events(&sample(), Record::default()), SAMPLE_EVENTS);
    }

    #[test]
    fn walker_skips_what_the_hooks_skip() {
        let rec = Record { skip: vec![NodeId(6), NodeId(10)], skip_else: false, ..Record::default() };
        let got = events(&sample(), rec);
        assert!(got.contains(&"enter %6".to_string()) && !got.contains(&"exit %6".to_string()));
        assert!(!got.contains(&"atom %4".to_string()));
        assert!(got.contains(&"enter %10".to_string()) && !got.contains(&"atom %9".to_string()));
        assert!(got.contains(&"exit %11".to_string()));
        let got = events(&sample(), Record { skip_else: true, ..Record::default() });
        let at = got.iter().position(|e| e == "enter Else of %12").expect("entered");
        assert_eq!(got[at + 1], "exit %12");
    }

    #[test]
    fn walker_resumes_after_every_stop_with_the_same_events() {
        let func = sample();
        for stop in 0..SAMPLE_EVENTS.len() {
            let mut rec = Record { stop_at: Some(stop), ..Record::default() };
            let mut w = Walker::new();
            assert_eq!(w.walk(&func, func.body(), &mut rec), ControlFlow::Break(()));
            rec.stop_at = None;
            assert_eq!(w.run(&func, &mut rec), ControlFlow::Continue(()));
            assert!(w.is_done());
            assert_eq!(rec.events, SAMPLE_EVENTS, "stopped at event {stop}");
        }
    }

    /// The walk meets the operands of every node in the order of `for_each_operand` (binders
    /// left out), each node once.
    #[test]
    fn walker_follows_for_each_operand_order() {
        let func = sample();
        let mut expected = Vec::new();
        let mut stack = vec![func.body()];
        while let Some(id) = stack.pop() {
            expected.push(id);
            let mut ops = Vec::new();
            match *func.kind(id) {
                ExprKind::Block { bindings, result } => {
                    ops.extend(func.bindings(bindings).map(|(_, value)| value));
                    ops.push(result);
                }
                ExprKind::Func { idx } => ops.push(func.closure(idx).body),
                _ => func.for_each_operand(id, |o| ops.push(o)),
            }
            stack.extend(ops.into_iter().rev());
        }
        let visited: Vec<NodeId> = events(&sample(), Record::default())
            .iter()
            .filter_map(|e| e.strip_prefix("atom %").or_else(|| e.strip_prefix("enter %")))
            .map(|n| NodeId(n.parse().expect("an id")))
            .collect();
        assert_eq!(visited, expected);
    }

    /// Counts events without allocating, to walk big inputs.
    #[derive(Default)]
    struct Count {
        atoms: usize,
        enters: usize,
        exits: usize,
        binds: usize,
        branches: usize,
    }

    impl WalkHooks for Count {
        type Break = Infallible;
        fn atom(&mut self, _: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
            self.atoms += 1;
            ControlFlow::Continue(())
        }
        fn enter(&mut self, _: NodeId, _: &ExprKind) -> ControlFlow<Infallible, Enter> {
            self.enters += 1;
            ControlFlow::Continue(Enter::Descend)
        }
        fn exit(&mut self, _: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
            self.exits += 1;
            ControlFlow::Continue(())
        }
        fn bind(&mut self, _: NodeId, _: NodeId) -> ControlFlow<Infallible> {
            self.binds += 1;
            ControlFlow::Continue(())
        }
        fn enter_branch(&mut self, _: NodeId, _: Branch) -> ControlFlow<Infallible, Enter> {
            self.branches += 1;
            ControlFlow::Continue(Enter::Descend)
        }
    }

    #[test]
    fn walker_handles_nesting_100k_deep_without_recursion() {
        const DEPTH: usize = 100_000;
        // Calls, blocks as binding values, `if` branches and closure bodies, each nested
        // DEPTH deep.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c = b.var("c", None);
        let mut cur = x;
        for i in 0..DEPTH {
            cur = match i % 4 {
                0 => b.call(relu(), &[cur], Attrs::new()),
                1 => {
                    let v = b.var("v", None);
                    b.block(&[(v, cur)], v)
                }
                2 => b.if_(c, cur, x),
                _ => b.closure(&[], cur, None, Attrs::new()),
            };
        }
        let func = b.finish(&[x, c], cur, None, Attrs::new());
        let mut count = Count::default();
        let mut w = Walker::new();
        assert_eq!(w.walk(&func, func.body(), &mut count), ControlFlow::Continue(()));
        assert_eq!((count.enters, count.exits), (DEPTH, DEPTH));
        assert_eq!(count.binds, DEPTH / 4);
        assert_eq!(count.branches, DEPTH / 4 * 2);
        // One atom at the bottom, plus an `if`'s condition and else branch at each `if`.
        assert_eq!(count.atoms, 1 + DEPTH / 4 * 2 + DEPTH / 4);
    }

    #[test]
    fn walker_reports_out_of_range_references_without_panicking() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None); // %0
        let late = b.push_unchecked(ExprKind::Proj { tuple: NodeId(50), index: 0 }, None); // %1
        let range = IdRange { start: 1000, len: 2 };
        let bad_args =
            b.push_unchecked(ExprKind::Call { op: relu(), attrs: crate::ir::AttrsIdx(0), args: range }, None); // %2
        let bad_closure = b.push_unchecked(ExprKind::Func { idx: ClosureIdx(9) }, None); // %3
        let bad_block = b.push_unchecked(ExprKind::Block { bindings: range, result: x }, None); // %4
        let pairs = b.push_ids(&[NodeId(77), x]);
        let bad_var = b.push_unchecked(ExprKind::Block { bindings: pairs, result: x }, None); // %5
        let fields = b.push_ids(&[late, bad_args, bad_closure, bad_block, bad_var, NodeId(60)]);
        let body = b.push_unchecked(ExprKind::Tuple { fields }, None); // %6
        let func = b.finish(&[x], body, None, Attrs::new());
        assert!(!func.is_well_formed());
        let got = events(&func, Record::default());
        for e in ["malformed %50", "malformed %2", "malformed %3", "malformed %4", "malformed %5", "malformed %60"] {
            assert!(got.contains(&e.to_string()), "{e} in {got:?}");
        }
        // A node whose operands could not be read is not exited; the root is.
        assert!(!got.contains(&"exit %2".to_string()) && got.last().map(String::as_str) == Some("exit %6"));
        // An out-of-range root.
        assert_eq!(events_from(&func, NodeId(999)), ["malformed %999"]);
    }

    fn events_from(func: &Function, root: NodeId) -> Vec<String> {
        let mut rec = Record::default();
        let _ = Walker::new().walk(func, root, &mut rec);
        rec.events
    }
}
