/// Check that double negation and reshape of reshape simplify.
def @main(%x: Tensor[(2, 3), f32]) -> (Tensor[(2, 3), f32], Tensor[(3, 2), f32]) {
  let %n = negative(negative(%x));
  let %r = reshape(reshape(%x, newshape=[6]), newshape=[3, 2]);
  (%n, %r)
}
