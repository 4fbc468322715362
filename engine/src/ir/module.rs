//! Modules: ordered maps from global names to graph functions and to loop-level PrimFuncs
//! (one namespace for both, as TVM's `IRModule` holds `BaseFunc`s).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::expr::ExprKind;
use super::function::Function;
use crate::tir::PrimFunc;

/// Errors from editing a module.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModuleError {
    /// A function of that name exists already.
    #[error("duplicate global function @{0}")]
    Duplicate(String),
    /// No function of that name.
    #[error("unknown global function @{0}")]
    Unknown(String),
    /// A name that would not print and parse back as itself after `@` (it must be non-empty
    /// `[A-Za-z0-9_]` text, with `.` only before a letter or `_`).
    #[error("invalid global function name {0:?}: expected [A-Za-z0-9_] text, '.' only before a letter or '_'")]
    InvalidName(String),
}

/// Refuses a global name that would not re-parse as itself (see [`ModuleError::InvalidName`]).
fn check_name(name: &str) -> Result<(), ModuleError> {
    if super::lexer::is_valid_name(name) {
        Ok(())
    } else {
        Err(ModuleError::InvalidName(name.to_string()))
    }
}

/// An ordered map from global names (without the `@`) to functions. Order is insertion order,
/// which is the order of the text the module was parsed from; printing follows it.
///
/// Cloning is O(1): the list and the name index are shared copy-on-write, so an edit of a
/// clone copies the list (and, when names change, the index) once.
///
/// PrimFuncs (the loop level) sit beside the graph functions in their own ordered list; a
/// name is a graph function or a PrimFunc, never both. Graph function passes see only the
/// graph functions ([`Module::iter`], [`Module::len`]); PrimFunc passes see only the
/// PrimFuncs ([`Module::prim_funcs`]).
#[derive(Clone, Debug, Default)]
pub struct Module {
    funcs: Arc<Vec<(Arc<str>, Arc<Function>)>>,
    index: Arc<FxHashMap<Arc<str>, usize>>,
    prims: Arc<Vec<(Arc<str>, Arc<PrimFunc>)>>,
    /// Name → position in `prims` (a lowered model holds PrimFuncs by the ten thousand).
    prim_index: Arc<FxHashMap<Arc<str>, usize>>,
}

impl Module {
    /// An empty module.
    pub fn new() -> Module {
        Module::default()
    }

    /// Adds a function at the end. A duplicate name is an error, and so is a name that would
    /// not print and parse back as itself ([`ModuleError::InvalidName`]): a module never holds
    /// a name that prints as something else.
    pub fn add(&mut self, name: &str, func: impl Into<Arc<Function>>) -> Result<(), ModuleError> {
        check_name(name)?;
        if self.index.contains_key(name) || self.prim_position(name).is_some() {
            return Err(ModuleError::Duplicate(name.to_string()));
        }
        self.push_new(name.into(), func.into());
        Ok(())
    }

    /// Adds a function at the end under a name the caller already holds as an `Arc<str>`,
    /// sharing it instead of copying the text (as [`Module::add`] does). A duplicate name is an
    /// error, and so is an invalid name (as for [`Module::add`]).
    pub fn add_shared(&mut self, name: &Arc<str>, func: impl Into<Arc<Function>>) -> Result<(), ModuleError> {
        check_name(name)?;
        if self.index.contains_key(&**name) || self.prim_position(name).is_some() {
            return Err(ModuleError::Duplicate(name.to_string()));
        }
        self.push_new(name.clone(), func.into());
        Ok(())
    }

    /// An empty module with room for `n` functions.
    pub fn with_capacity(n: usize) -> Module {
        let mut index = FxHashMap::default();
        index.reserve(n);
        Module {
            funcs: Arc::new(Vec::with_capacity(n)),
            index: Arc::new(index),
            prims: Arc::default(),
            prim_index: Arc::default(),
        }
    }

    fn push_new(&mut self, name: Arc<str>, func: Arc<Function>) {
        Arc::make_mut(&mut self.index).insert(name.clone(), self.funcs.len());
        Arc::make_mut(&mut self.funcs).push((name, func));
    }

    /// Replaces the function `name`, or adds it at the end if absent. An invalid name (see
    /// [`Module::add`]) is an error and leaves the module unchanged.
    pub fn insert(&mut self, name: &str, func: impl Into<Arc<Function>>) -> Result<(), ModuleError> {
        match self.index.get(name) {
            Some(&i) => Arc::make_mut(&mut self.funcs)[i].1 = func.into(),
            None => self.add(name, func)?,
        }
        Ok(())
    }

    /// Removes the function `name`, keeping the order of the rest.
    pub fn remove(&mut self, name: &str) -> Result<Arc<Function>, ModuleError> {
        let index = Arc::make_mut(&mut self.index);
        let i = index.remove(name).ok_or_else(|| ModuleError::Unknown(name.to_string()))?;
        let (_, f) = Arc::make_mut(&mut self.funcs).remove(i);
        for (_, idx) in index.iter_mut() {
            if *idx > i {
                *idx -= 1;
            }
        }
        Ok(f)
    }

    /// Renames `old` to `new` in place (calls to it are not rewritten). An invalid `new` (see
    /// [`Module::add`]) is an error.
    pub fn rename(&mut self, old: &str, new: &str) -> Result<(), ModuleError> {
        check_name(new)?;
        if self.index.contains_key(new) || self.prim_position(new).is_some() {
            return Err(ModuleError::Duplicate(new.to_string()));
        }
        if !self.index.contains_key(old) {
            return Err(ModuleError::Unknown(old.to_string()));
        }
        let index = Arc::make_mut(&mut self.index);
        let i = index.remove(old).ok_or_else(|| ModuleError::Unknown(old.to_string()))?;
        let name: Arc<str> = new.into();
        index.insert(name.clone(), i);
        Arc::make_mut(&mut self.funcs)[i].0 = name;
        Ok(())
    }

    /// The function `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Function>> {
        self.index.get(name).map(|&i| &self.funcs[i].1)
    }

    /// Position of `name` in module order.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether `name` is defined.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// `(name, function)` pairs in module order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Arc<Function>)> + '_ {
        self.funcs.iter().map(|(n, f)| (&**n, f))
    }

    /// The entries as a slice, in module order.
    pub fn entries(&self) -> &[(Arc<str>, Arc<Function>)] {
        &self.funcs
    }

    /// Replaces every function with `new[i]`, keeping names and order. Returns whether any
    /// function changed (by pointer). Used by function passes, which cannot add or remove.
    pub fn replace_all(&mut self, new: Vec<Arc<Function>>) -> bool {
        assert_eq!(new.len(), self.funcs.len(), "function pass must return one function per function");
        let same = self.funcs.iter().zip(&new).all(|((_, old), new)| Arc::ptr_eq(old, new));
        if same {
            return false;
        }
        for ((_, old), new) in Arc::make_mut(&mut self.funcs).iter_mut().zip(new) {
            *old = new;
        }
        true
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether the module has no functions.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// The functions named in `roots` and every function they reference (through a live
    /// `@global` node), transitively, in this module's order: the slice of the module a pass
    /// failing on one function needs (crash reproducers). Names not in the module are ignored.
    pub fn reachable_from(&self, roots: &[&str]) -> Module {
        let mut reached = vec![false; self.len()];
        let mut work: Vec<usize> = roots.iter().filter_map(|r| self.position(r)).collect();
        for &i in &work {
            reached[i] = true;
        }
        let mut live = Vec::new();
        while let Some(i) = work.pop() {
            let func = &self.funcs[i].1;
            func.live_mask_into(&mut live);
            for (j, node) in func.nodes().iter().enumerate() {
                if let ExprKind::Global { name } = node.kind {
                    match self.position(func.sym(name)) {
                        Some(k) if live[j] && !reached[k] => {
                            reached[k] = true;
                            work.push(k);
                        }
                        _ => {}
                    }
                }
            }
        }
        let mut out = Module::with_capacity(reached.iter().filter(|&&r| r).count());
        for ((name, func), _) in self.funcs.iter().zip(&reached).filter(|(_, &r)| r) {
            out.push_new(name.clone(), func.clone());
        }
        // PrimFuncs are leaves (they call nothing): keep those a kept function names, and
        // those named as roots.
        let mut named: rustc_hash::FxHashSet<&str> = roots.iter().copied().collect();
        for (_, func) in out.iter() {
            for node in func.nodes() {
                if let ExprKind::Global { name } = node.kind {
                    named.insert(func.sym(name));
                }
            }
        }
        let prims: Vec<_> = self.prims.iter().filter(|(n, _)| named.contains(&**n)).cloned().collect();
        out.set_prims(prims);
        out
    }

    // ---- PrimFuncs ----

    /// Adds a PrimFunc at the end of the PrimFunc list. The name must be valid and not name
    /// any function of either kind.
    pub fn add_prim(&mut self, name: &str, func: impl Into<Arc<PrimFunc>>) -> Result<(), ModuleError> {
        check_name(name)?;
        if self.index.contains_key(name) || self.prim_position(name).is_some() {
            return Err(ModuleError::Duplicate(name.to_string()));
        }
        let name: Arc<str> = name.into();
        Arc::make_mut(&mut self.prim_index).insert(name.clone(), self.prims.len());
        Arc::make_mut(&mut self.prims).push((name, func.into()));
        Ok(())
    }

    /// Replaces the PrimFunc `name`, or adds it at the end if no function has that name.
    pub fn insert_prim(&mut self, name: &str, func: impl Into<Arc<PrimFunc>>) -> Result<(), ModuleError> {
        match self.prim_position(name) {
            Some(i) => Arc::make_mut(&mut self.prims)[i].1 = func.into(),
            None => self.add_prim(name, func)?,
        }
        Ok(())
    }

    /// Removes the PrimFunc `name`, keeping the order of the rest (linear in the PrimFunc
    /// count: to remove many, use [`Module::retain_prims`]).
    pub fn remove_prim(&mut self, name: &str) -> Result<Arc<PrimFunc>, ModuleError> {
        let i = self.prim_position(name).ok_or_else(|| ModuleError::Unknown(name.to_string()))?;
        let mut prims = std::mem::take(Arc::make_mut(&mut self.prims));
        let (_, removed) = prims.remove(i);
        self.set_prims(prims);
        Ok(removed)
    }

    /// Keeps the PrimFuncs whose name `keep` accepts, in order.
    pub fn retain_prims(&mut self, mut keep: impl FnMut(&str) -> bool) {
        if self.prims.iter().all(|(n, _)| keep(n)) {
            return;
        }
        let prims = self.prims.iter().filter(|(n, _)| keep(n)).cloned().collect();
        self.set_prims(prims);
    }

    /// Sets the PrimFunc list (names unique and distinct from graph functions' names) and its
    /// index.
    fn set_prims(&mut self, prims: Vec<(Arc<str>, Arc<PrimFunc>)>) {
        self.prim_index = Arc::new(prims.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect());
        self.prims = Arc::new(prims);
    }

    /// The PrimFunc `name`.
    pub fn get_prim(&self, name: &str) -> Option<&Arc<PrimFunc>> {
        self.prim_position(name).map(|i| &self.prims[i].1)
    }

    /// Position of the PrimFunc `name` in the PrimFunc list.
    pub fn prim_position(&self, name: &str) -> Option<usize> {
        self.prim_index.get(name).copied()
    }

    /// `(name, PrimFunc)` pairs in order.
    pub fn prim_funcs(&self) -> impl ExactSizeIterator<Item = (&str, &Arc<PrimFunc>)> + '_ {
        self.prims.iter().map(|(n, f)| (&**n, f))
    }

    /// The PrimFunc entries as a slice, in order.
    pub fn prim_entries(&self) -> &[(Arc<str>, Arc<PrimFunc>)] {
        &self.prims
    }

    /// Number of PrimFuncs.
    pub fn num_prims(&self) -> usize {
        self.prims.len()
    }

    /// Replaces every PrimFunc with `new[i]`, keeping names and order. Returns whether any
    /// changed (by pointer). Used by PrimFunc passes, which cannot add or remove.
    pub fn replace_all_prims(&mut self, new: Vec<Arc<PrimFunc>>) -> bool {
        assert_eq!(new.len(), self.prims.len(), "PrimFunc pass must return one PrimFunc per PrimFunc");
        let same = self.prims.iter().zip(&new).all(|((_, old), new)| Arc::ptr_eq(old, new));
        if same {
            return false;
        }
        for ((_, old), new) in Arc::make_mut(&mut self.prims).iter_mut().zip(new) {
            *old = new;
        }
        true
    }

    /// Gives this module `other`'s PrimFuncs (for code that rebuilds the graph functions of a
    /// module into a new one).
    pub fn set_prims_from(&mut self, other: &Module) {
        self.prims = other.prims.clone();
        self.prim_index = other.prim_index.clone();
    }

    /// Whether both modules hold the same functions by pointer, in the same order.
    pub fn ptr_eq(&self, other: &Module) -> bool {
        let prims = Arc::ptr_eq(&self.prims, &other.prims)
            || self.prims.len() == other.prims.len()
                && self
                    .prims
                    .iter()
                    .zip(other.prims.iter())
                    .all(|((na, fa), (nb, fb))| na == nb && Arc::ptr_eq(fa, fb));
        prims
            && (Arc::ptr_eq(&self.funcs, &other.funcs)
                || self.funcs.len() == other.funcs.len()
                    && self
                        .funcs
                        .iter()
                        .zip(other.funcs.iter())
                        .all(|((na, fa), (nb, fb))| na == nb && Arc::ptr_eq(fa, fb)))
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::parse_module;

    #[test]
    fn reachable_from_keeps_the_roots_and_what_they_reference_in_module_order() {
        let m = parse_module(
            "def @leaf(%x: Tensor[(2,), f32]) { relu(%x) }
             def @dead_ref(%x: Tensor[(2,), f32]) { %x }
             def @held(%x: Tensor[(2,), f32]) { %x }
             def @mid(%x: Tensor[(2,), f32]) { let %f = @held; let %unused = @dead_ref; @leaf(%x) }
             def @main(%x: Tensor[(2,), f32]) { @mid(%x) }
             def @cycle(%x: Tensor[(2,), f32]) { @cycle(%x) }",
        )
        .expect("parses");
        let names = |roots: &[&str]| m.reachable_from(roots).iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
        // Unused bindings still print, so the globals they name are referenced: without them
        // the cut-down module would not verify.
        assert_eq!(names(&["mid"]), ["leaf", "dead_ref", "held", "mid"]);
        assert_eq!(names(&["main"]), ["leaf", "dead_ref", "held", "mid", "main"]);
        assert_eq!(names(&["leaf"]), ["leaf"]);
        assert_eq!(names(&["cycle", "nope"]), ["cycle"]);
        assert!(names(&[]).is_empty());
    }
}
