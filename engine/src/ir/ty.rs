//! Types: tensors (static shape + dtype), tuples and functions.

use std::fmt;
use std::sync::Arc;

/// Element type of a tensor.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// 64-bit signed integer.
    I64,
    /// 32-bit signed integer.
    I32,
    /// Boolean.
    Bool,
    /// 64-bit IEEE float.
    F64,
    /// 8-bit signed integer.
    I8,
    /// 16-bit signed integer.
    I16,
    /// 8-bit unsigned integer.
    U8,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
}

impl DType {
    /// All dtypes, in text-format order.
    pub const ALL: [DType; 12] = [
        DType::F32,
        DType::F16,
        DType::I64,
        DType::I32,
        DType::Bool,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The text spelling (`f32`, `f16`, `f64`, `i8` … `i64`, `u8` … `u64`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::Bool => "bool",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    /// Parses a text spelling; accepts TVM's long names (`float32`, `int64`) too.
    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s {
            "f32" | "float32" => DType::F32,
            "f16" | "float16" => DType::F16,
            "i64" | "int64" => DType::I64,
            "i32" | "int32" => DType::I32,
            "bool" => DType::Bool,
            "f64" | "float64" => DType::F64,
            "i8" | "int8" => DType::I8,
            "i16" | "int16" => DType::I16,
            "u8" | "uint8" => DType::U8,
            "u16" | "uint16" => DType::U16,
            "u32" | "uint32" => DType::U32,
            "u64" | "uint64" => DType::U64,
            _ => return None,
        })
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::F64)
    }

    /// Whether this is a signed integer type.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::I32 | DType::I16 | DType::I8)
    }

    /// Whether this is an unsigned integer type.
    pub fn is_uint(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// Whether this is an integer type, signed or unsigned.
    pub fn is_integer(self) -> bool {
        self.is_int() || self.is_uint()
    }

    /// The smallest and largest value of an integer type (`None` for floats and `bool`).
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            DType::I8 => (i8::MIN.into(), i8::MAX.into()),
            DType::I16 => (i16::MIN.into(), i16::MAX.into()),
            DType::I32 => (i32::MIN.into(), i32::MAX.into()),
            DType::I64 => (i64::MIN.into(), i64::MAX.into()),
            DType::U8 => (0, u8::MAX.into()),
            DType::U16 => (0, u16::MAX.into()),
            DType::U32 => (0, u32::MAX.into()),
            DType::U64 => (0, u64::MAX.into()),
            DType::F32 | DType::F16 | DType::F64 | DType::Bool => return None,
        })
    }

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::I16 | DType::U16 => 2,
            DType::I64 | DType::F64 | DType::U64 => 8,
            DType::Bool | DType::I8 | DType::U8 => 1,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor type: static shape and element type.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TensorType {
    /// Dimensions, outermost first. Empty for a scalar.
    pub shape: Box<[u64]>,
    /// Element type.
    pub dtype: DType,
}

impl TensorType {
    /// Number of elements, or `None` if it overflows `u64`.
    pub fn num_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }
}

/// A function type.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FuncType {
    /// Parameter types.
    pub params: Box<[Type]>,
    /// Result type.
    pub ret: Type,
}

/// A type. Cheap to clone (one reference count) and one pointer wide. Arena nodes do not hold
/// one: they hold an index into their function's type table (see `Function::ty`). Match on [`Type::kind`] (or through
/// `Deref`) to see which kind it is.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Type(Arc<TypeKind>);

/// What a [`Type`] is.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TypeKind {
    /// A tensor.
    Tensor(TensorType),
    /// A tuple of values.
    Tuple(Box<[Type]>),
    /// A function.
    Func(FuncType),
}

impl std::ops::Deref for Type {
    type Target = TypeKind;

    #[inline]
    fn deref(&self) -> &TypeKind {
        &self.0
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<TypeKind> for Type {
    fn from(kind: TypeKind) -> Type {
        Type(Arc::new(kind))
    }
}

impl From<TensorType> for Type {
    fn from(t: TensorType) -> Type {
        Type::from(TypeKind::Tensor(t))
    }
}

impl Type {
    /// A tensor type.
    pub fn tensor(shape: impl Into<Box<[u64]>>, dtype: DType) -> Type {
        Type::from(TensorType { shape: shape.into(), dtype })
    }

    /// A scalar tensor type.
    pub fn scalar(dtype: DType) -> Type {
        Type::tensor(Vec::new(), dtype)
    }

    /// A tuple type.
    pub fn tuple(fields: impl Into<Box<[Type]>>) -> Type {
        Type::from(TypeKind::Tuple(fields.into()))
    }

    /// A function type.
    pub fn func(params: impl Into<Box<[Type]>>, ret: Type) -> Type {
        Type::from(TypeKind::Func(FuncType { params: params.into(), ret }))
    }

    /// What kind of type this is.
    #[inline]
    pub fn kind(&self) -> &TypeKind {
        &self.0
    }

    /// Whether `self` and `other` are the same allocation (which implies equal).
    #[inline]
    pub fn ptr_eq(&self, other: &Type) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The address of the shared allocation, for interning by identity (see `ptr_eq`).
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The tensor type, if this is one.
    #[inline]
    pub fn as_tensor(&self) -> Option<&TensorType> {
        match &*self.0 {
            TypeKind::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The field types, if this is a tuple type.
    #[inline]
    pub fn as_tuple(&self) -> Option<&[Type]> {
        match &*self.0 {
            TypeKind::Tuple(fields) => Some(fields),
            _ => None,
        }
    }

    /// The function type, if this is one.
    #[inline]
    pub fn as_func(&self) -> Option<&FuncType> {
        match &*self.0 {
            TypeKind::Func(f) => Some(f),
            _ => None,
        }
    }
}

impl fmt::Display for Type {
    /// Text syntax: `Tensor[(4, 4), f32]`, `(T1, T2)`, `fn(T1, T2) -> T3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Types nest only as deep as the text that wrote them, which the parser bounds.
        match self.kind() {
            TypeKind::Tensor(t) => {
                f.write_str("Tensor[(")?;
                for (i, d) in t.shape.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{d}")?;
                }
                if t.shape.len() == 1 {
                    f.write_str(",")?;
                }
                write!(f, "), {}]", t.dtype)
            }
            TypeKind::Tuple(fields) => {
                f.write_str("(")?;
                for (i, t) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                if fields.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            TypeKind::Func(ft) => {
                f.write_str("fn(")?;
                for (i, t) in ft.params.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                write!(f, ") -> {}", ft.ret)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_display_is_text_syntax() {
        assert_eq!(Type::tensor(vec![4, 4], DType::F32).to_string(), "Tensor[(4, 4), f32]");
        assert_eq!(Type::tensor(vec![3], DType::I64).to_string(), "Tensor[(3,), i64]");
        assert_eq!(Type::scalar(DType::Bool).to_string(), "Tensor[(), bool]");
        let t = Type::tuple(vec![Type::scalar(DType::F32), Type::scalar(DType::I32)]);
        assert_eq!(t.to_string(), "(Tensor[(), f32], Tensor[(), i32])");
        let f = Type::func(vec![Type::scalar(DType::F32)], Type::scalar(DType::F16));
        assert_eq!(f.to_string(), "fn(Tensor[(), f32]) -> Tensor[(), f16]");
    }

    #[test]
    fn optional_type_is_one_pointer_wide() {
        // Type tables, closures and signatures hold `Option<Type>`s; keep them at 8 bytes.
        assert_eq!(std::mem::size_of::<Option<Type>>(), std::mem::size_of::<usize>());
    }
}
