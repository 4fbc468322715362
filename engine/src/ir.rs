//! The IR: types, tensors and constants, expression arenas, functions and modules.

mod attrs;
pub(crate) mod binary;
mod builder;
mod expr;
mod function;
mod ids;
mod lexer;
mod module;
mod parser;
pub(crate) mod printer;
pub mod rewrite;
mod structural;
mod tables;
mod tensor;
mod ty;
mod verifier;
mod visit;
mod walk;

pub use attrs::{fn_attr, AttrValue, Attrs, FloatLit};
pub use binary::{is_binary_module, read_module_binary, write_module_binary, BinaryError, PIRB_VERSION};
pub use builder::FunctionBuilder;
pub use expr::{ExprKind, Node, Span, TyIdx};
pub use function::{Closure, Function};
pub use ids::{AttrsIdx, ClosureIdx, ConstIdx, IdRange, NodeId, OpId, Sym};
pub use module::{Module, ModuleError};
pub use parser::{parse_module, ParseError, ParseErrors, MAX_ERRORS, MAX_NESTING, MAX_RANK};
pub use printer::{body_nesting, print_function, print_module, text_name, MAX_BODY_NESTING, MAX_INDENT};
pub use rewrite::{mutate, ExprMutator, RewriteCx};
pub use structural::{hash_function, module_structural_eq, module_structural_hash, structural_eq, structural_hash};
pub use tensor::{Constant, Fill, Tensor, TensorData, TensorError, MAX_MATERIALIZED_ELEMENTS};
pub use ty::{DType, FuncType, TensorType, Type, TypeKind};
pub use verifier::{verify_function, verify_module, VerifyError};
pub use visit::{fold, visit, ExprFunctor, ExprVisitor, Memo, Scope};
pub use walk::{Branch, Enter, WalkHooks, Walker};
