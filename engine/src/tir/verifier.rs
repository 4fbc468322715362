//! Well-formedness of a PrimFunc (see [`verify_prim_func`]).
