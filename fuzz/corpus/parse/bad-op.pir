def @main(%x: Tensor[(4,), f32]) {
  let %a = ad(%x, %x)
  %a
}
